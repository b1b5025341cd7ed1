//! What the exporter is told while a drill holds something frozen: `POST
//! /api/v1/drills/freezes` when the freeze lands and when it is thawed (or the thaw failed),
//! by whichever of the drill and its watchdog did it. Credentials in the `--exporter` URL
//! (`http://user:pass@host:port`) are sent as basic auth; where the exporter's push
//! endpoints want a bearer token instead, `--push-token-file` names the file holding it
//! (read when sending, so the token never shows in a command line).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::drill::exporter::Endpoint;

/// The freeze as the exporter is told of it; passed to the watchdog as JSON.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Notice {
    pub exporter: String,
    pub id: String,
    pub target: String,
    pub namespace: String,
    pub frozen: String,
    pub what: String,
    pub for_ms: u64,
    pub thaw_by_hand: String,
    /// The file holding the exporter's push token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<std::path::PathBuf>,
}

#[derive(Serialize)]
struct Body<'a> {
    id: &'a str,
    target: &'a str,
    namespace: &'a str,
    state: &'a str,
    frozen: &'a str,
    what: &'a str,
    since_ms: i64,
    for_ms: u64,
    at_ms: i64,
    by: &'a str,
    thaw_by_hand: &'a str,
}

/// The exporter's answer when it is not a success, or why it could not be asked.
#[derive(Debug, thiserror::Error)]
#[error("the exporter was not told the freeze is {state}: {why}")]
pub struct NoticeError {
    state: String,
    why: String,
}

/// One live freeze as `/api/v1/status` lists it.
#[derive(Deserialize)]
struct Listed {
    id: String,
    target: String,
    namespace: String,
    frozen: String,
    #[serde(default)]
    since_ms: i64,
}

#[derive(Deserialize)]
struct Status {
    #[serde(default)]
    drill_freezes: Vec<Listed>,
}

/// After `lockwatch drill --thaw SPEC`: each freeze of `spec` the exporter still lists is told
/// thawed; how many.
pub async fn thawed_by_hand(
    exporter: &str,
    spec: &str,
    token_file: Option<std::path::PathBuf>,
) -> Result<usize, NoticeError> {
    let fail = |why: String| NoticeError {
        state: "thawed".into(),
        why,
    };
    let at = Endpoint::new(exporter, "/api/v1/status", Duration::from_secs(3)).map_err(fail)?;
    let status: Status = at
        .basic_auth(at.http.get(at.url.clone()))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| fail(e.to_string()))?
        .json()
        .await
        .map_err(|e| fail(e.to_string()))?;
    let now = crate::locks::recent::wall_ms();
    let mut told = 0;
    for f in status.drill_freezes.into_iter().filter(|f| f.frozen == spec) {
        let n = Notice {
            exporter: exporter.into(),
            id: f.id,
            target: f.target,
            namespace: f.namespace,
            frozen: f.frozen,
            what: String::new(),
            for_ms: 0,
            thaw_by_hand: String::new(),
            token_file: token_file.clone(),
        };
        n.tell("thawed", f.since_ms, now, "drill").await?;
        told += 1;
    }
    Ok(told)
}

/// A sender's text as the exporter takes it: control characters (a command line's newlines)
/// made spaces, cut to `max` characters.
fn clean(s: &str, max: usize) -> String {
    let mut out: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if out.chars().count() > max {
        out = out.chars().take(max - 1).collect::<String>() + "…";
    }
    out
}

impl Notice {
    /// Tell the exporter the freeze (landed at `since_ms`) is `state` (`frozen`, `thawed`,
    /// `thaw_failed`) as of `at_ms`, done `by` the drill or the watchdog.
    pub async fn tell(&self, state: &str, since_ms: i64, at_ms: i64, by: &str) -> Result<(), NoticeError> {
        let fail = |why: String| NoticeError {
            state: state.into(),
            why,
        };
        let at =
            Endpoint::new(&self.exporter, crate::vocab::DRILL_FREEZES_PATH, Duration::from_secs(3)).map_err(fail)?;
        let (frozen, what, by_hand) = (
            clean(&self.frozen, 1024),
            clean(&self.what, 512),
            clean(&self.thaw_by_hand, 1024),
        );
        let body = Body {
            id: &self.id,
            target: &self.target,
            namespace: &self.namespace,
            state,
            frozen: &frozen,
            what: &what,
            since_ms,
            for_ms: self.for_ms,
            at_ms,
            by,
            thaw_by_hand: &by_hand,
        };
        let token = self
            .token_file
            .as_deref()
            .map(crate::drill::exporter::token)
            .transpose()
            .map_err(fail)?;
        at.post(&body, token.as_deref()).await.map(|_| ()).map_err(fail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_is_sent_on_one_line_within_the_limit() {
        assert_eq!(clean("python3 -c 'a\nb'\t", 100), "python3 -c 'a b' ");
        let long = "x".repeat(600);
        let cut = clean(&long, 512);
        assert_eq!(cut.chars().count(), 512);
        assert!(cut.ends_with('…'));
    }
}
