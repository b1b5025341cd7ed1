//! What the status page shows, asked of the read model once and used twice: rendered into
//! the page (`status_page`) and answered as JSON by `GET /api/v1/status`, which the page's
//! script polls to update its numbers, charts and timeline in place.

use std::fmt::Write;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::charts::{self, Metric, esc};
use super::{AppState, HttpError, gate};
use crate::locks::incidents::Incident;
use crate::locks::recent::wall_ms;
use crate::vocab::UNKNOWN_NAMESPACE;

/// The page's numbers, charts and timeline.
#[derive(Serialize)]
pub(super) struct Status {
    pub(super) generated_ms: i64,
    pub(super) targets: Vec<TargetView>,
    /// Newest first, all targets and the intake together.
    pub(super) incidents: Vec<IncidentView>,
    /// The timeline as the page shows it.
    pub(super) timeline_html: String,
}

#[derive(Serialize)]
pub(super) struct TargetView {
    pub(super) name: String,
    /// `events` or `scan`.
    pub(super) mode: &'static str,
    /// Whether keyspace notifications are shown to arrive; `None` when they are off.
    pub(super) notifications: Option<NotificationsView>,
    pub(super) namespaces: Vec<NamespaceView>,
}

/// The verification of a target's notifications (`lockwatch_notifications_verification`).
#[derive(Serialize)]
pub(super) struct NotificationsView {
    pub(super) state: &'static str,
    pub(super) method: &'static str,
    /// Why, or how, in words.
    pub(super) words: Option<String>,
}

#[derive(Serialize)]
pub(super) struct NamespaceView {
    pub(super) name: String,
    pub(super) held: i64,
    pub(super) overdue: i64,
    pub(super) without_ttl: i64,
    pub(super) too_long: i64,
    pub(super) longest_hold_s: f64,
    pub(super) unreadable: i64,
    /// Expiry takeovers counted since start; `None` when notifications are off.
    pub(super) takeovers: Option<u64>,
    /// The four charts of the last hour (held, overdue, failures, takeovers).
    pub(super) charts_html: String,
}

#[derive(Serialize)]
pub(super) struct IncidentView {
    pub(super) at_ms: i64,
    pub(super) at: String,
    /// `None` for a burst of failures from logs and pushes (not a target's).
    pub(super) target: Option<String>,
    pub(super) namespace: String,
    pub(super) kind: &'static str,
    pub(super) words: &'static str,
    pub(super) count: u32,
    pub(super) key: Option<String>,
    /// The key's page, relative to the status page.
    pub(super) link: Option<String>,
}

/// Percent-encode for a query value.
pub(super) fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A key's page, relative to the status page.
pub(super) fn key_link(ns: &str, key: &str) -> String {
    format!("locks/{}?key={}", query_value(ns), query_value(key))
}

pub(super) fn rfc3339(at_ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(at_ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

/// Ask the read model for everything the page shows.
pub(super) fn status(s: &AppState) -> Status {
    let now = wall_ms();
    let failures = s.intake.recent();
    let mut incidents = Vec::new();
    let targets = s
        .targets
        .iter()
        .map(|t| {
            let lifecycle = s.lifecycles.iter().find(|l| l.target == t.name);
            for i in t.incidents() {
                let ns = t
                    .namespaces
                    .get(i.namespace)
                    .map(|n| n.config.name.as_str())
                    .unwrap_or("?");
                incidents.push(incident_view(&i, Some(&t.name), ns));
            }
            let namespaces = t
                .namespaces
                .iter()
                .enumerate()
                .map(|(i, ns)| {
                    let census = t.census(ns);
                    let hour = t.last_hour(i, now);
                    let failed = failures.last_hour(i, now);
                    let charts_html = Metric::ALL
                        .iter()
                        .map(|m| match m {
                            Metric::Failures => charts::chart(*m, &failed),
                            _ => charts::chart(*m, &hour),
                        })
                        .collect();
                    NamespaceView {
                        name: ns.config.name.clone(),
                        held: census.held,
                        overdue: census.overdue,
                        without_ttl: census.without_ttl,
                        too_long: census.too_long,
                        longest_hold_s: census.max_age_ms as f64 / 1000.0,
                        unreadable: census.wrong_type + census.bad_value,
                        takeovers: lifecycle.map(|l| l.takeovers(&ns.config.name)),
                        charts_html,
                    }
                })
                .collect();
            TargetView {
                name: t.name.clone(),
                mode: match t.subscription() {
                    Some(_) => "events",
                    None => "scan",
                },
                notifications: lifecycle.map(|l| {
                    let v = l.verification();
                    NotificationsView {
                        state: v.state.as_str(),
                        method: v.method.as_str(),
                        words: v.words,
                    }
                }),
                namespaces,
            }
        })
        .collect();
    let names: Vec<&str> = s.config.namespaces.iter().map(|n| n.name.as_str()).collect();
    for i in failures.incidents() {
        let ns = names.get(i.namespace).copied().unwrap_or(UNKNOWN_NAMESPACE);
        incidents.push(incident_view(&i, None, ns));
    }
    incidents.sort_by_key(|i| std::cmp::Reverse(i.at_ms));
    let timeline_html = timeline(&incidents);
    Status {
        generated_ms: now,
        targets,
        incidents,
        timeline_html,
    }
}

fn incident_view(i: &Incident, target: Option<&str>, ns: &str) -> IncidentView {
    let key = i.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned());
    IncidentView {
        at_ms: i.at_ms,
        at: rfc3339(i.at_ms),
        target: target.map(str::to_string),
        namespace: ns.to_string(),
        kind: i.kind.as_str(),
        words: i.kind.words(),
        count: i.count,
        link: key.as_deref().filter(|_| !i.cut).map(|k| key_link(ns, k)),
        key,
    }
}

/// The timeline: one line per incident, newest first.
fn timeline(incidents: &[IncidentView]) -> String {
    if incidents.is_empty() {
        return r#"<p class="quiet">no incidents since lockwatch started</p>"#.to_string();
    }
    let mut h = String::from(r#"<ol class="timeline">"#);
    for i in incidents {
        let time = i.at.get(11..19).unwrap_or(&i.at);
        let _ = write!(
            h,
            r#"<li class="incident {kind}" data-kind="{kind}" data-ns="{ns}"><time datetime="{at}">{time}</time> <span class="what">{words}</span> <span class="where">{target}{ns}</span>"#,
            kind = i.kind,
            words = i.words,
            ns = esc(&i.namespace),
            at = esc(&i.at),
            target = i
                .target
                .as_deref()
                .map(|t| format!("{} / ", esc(t)))
                .unwrap_or_default(),
        );
        if i.count > 1 {
            let _ = write!(h, r#" <span class="count">×{}</span>"#, i.count);
        }
        match (&i.key, &i.link) {
            (Some(k), Some(link)) => {
                let _ = write!(h, r#" <a class="key" href="{}">{}</a>"#, esc(link), esc(k));
            }
            (Some(k), None) => {
                let _ = write!(h, r#" <code class="key">{}…</code>"#, esc(k));
            }
            _ => {}
        }
        h.push_str("</li>");
    }
    h.push_str("</ol>");
    h
}

/// `GET /api/v1/status`: the page's numbers, charts and timeline as JSON, behind the gate.
pub(crate) async fn api(State(s): State<AppState>) -> Response {
    let Ok(_pass) = s.views.enter().await else {
        return gate::Busy.into_response();
    };
    match tokio::task::spawn_blocking(move || status(&s)).await {
        Ok(st) => Json(st).into_response(),
        Err(e) => HttpError(StatusCode::INTERNAL_SERVER_ERROR, format!("status failed: {e}")).into_response(),
    }
}
