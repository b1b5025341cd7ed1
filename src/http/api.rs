//! `GET /api/v1/locks` (the held locks, from the lock tables' view) and
//! `GET /api/v1/locks/history` (a key's recent lifecycle, from the watchers, and the lock
//! events that named it, from the intake's ring), as JSON.
//!
//! Owner tokens are capabilities (whoever knows one can release the lock with the
//! compare-and-delete script), so they are redacted unless `server.show_owners` is on;
//! a keyed hash of the owner is always given so that owners can be compared.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::{AppState, HttpError, gate};
use crate::locks::view;
use crate::vocab::EventClass;

const DEFAULT_LIMIT: usize = 1000;
/// The most locks one answer lists: its memory is bounded by this, not by the tables.
pub(crate) const MAX_LIMIT: usize = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LocksQuery {
    namespace: Option<String>,
    target: Option<String>,
    limit: Option<usize>,
}

/// Held locks, those closest to expiry first (stalled holders lead the list): the first
/// `limit` chosen on the blocking pool (a walk of the tables), at most `gate::RUNNING` at once.
pub(crate) async fn locks(
    State(s): State<AppState>,
    query: Result<Query<LocksQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, HttpError> {
    let Query(q) = query.map_err(|e| HttpError(StatusCode::BAD_REQUEST, format!("bad query: {}", e.body_text())))?;
    if let Some(ns) = &q.namespace
        && s.config.namespace(ns).is_none()
    {
        let known: Vec<&str> = s.config.namespaces.iter().map(|n| n.name.as_str()).collect();
        return Err(HttpError(
            StatusCode::BAD_REQUEST,
            format!("unknown namespace `{ns}`; configured: {}", known.join(", ")),
        ));
    }
    if let Some(t) = &q.target
        && !s.targets.iter().any(|x| &x.name == t)
    {
        return Err(HttpError(StatusCode::BAD_REQUEST, format!("unknown target `{t}`")));
    }
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if limit > MAX_LIMIT {
        return Err(HttpError(
            StatusCode::BAD_REQUEST,
            format!(
                "limit {limit} is over the maximum of {MAX_LIMIT}: narrow by namespace or target, or ask for fewer"
            ),
        ));
    }
    let Ok(_pass) = s.views.enter().await else {
        return Ok(gate::Busy.into_response());
    };
    let (targets, show_owners) = (s.targets.clone(), s.config.server.show_owners);
    let list = tokio::task::spawn_blocking(move || {
        view::held_locks(
            &targets,
            view::Filter {
                target: q.target.as_deref(),
                namespace: q.namespace.as_deref(),
                show_owners,
                limit,
            },
        )
    })
    .await
    .map_err(|e| HttpError(StatusCode::INTERNAL_SERVER_ERROR, format!("listing failed: {e}")))?;
    Ok(Json(list).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HistoryQuery {
    key: Option<String>,
    target: Option<String>,
}

#[derive(Serialize)]
pub(crate) struct HistoryResponse {
    key: String,
    namespace: String,
    /// Oldest first, all watched targets together.
    transitions: Vec<TransitionView>,
    /// Lock events from logs and pushes that named exactly this key, oldest first (of
    /// every target: logs do not say which).
    events: Vec<EventView>,
    /// Targets whose lifecycle is not watched (notifications off), if any were asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unwatched_targets: Vec<String>,
}

#[derive(Serialize)]
pub(crate) struct TransitionView {
    pub(super) target: String,
    pub(super) at: String,
    pub(super) at_ms: i64,
    pub(super) kind: &'static str,
    pub(super) owner_hash: Option<String>,
    pub(super) takeover: bool,
}

#[derive(Serialize)]
pub(crate) struct EventView {
    pub(super) at: String,
    pub(super) at_ms: i64,
    pub(super) op: &'static str,
    pub(super) outcome: &'static str,
    /// `ok`, `contention` (an acquisition busy or timed out) or `failure`.
    #[serde(serialize_with = "class_str")]
    pub(super) class: EventClass,
    /// The `source` label value that counted it: a `[[logs]]` name, `push`, `otlp`, …
    pub(super) source: String,
    /// The trace the event was written in, when it came with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) trace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) span_id: Option<String>,
    /// Who wrote it, as far as its record and source tell: the file it was read from (and
    /// its `device:inode`), the process id, host and `service.instance.id` it carried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) file_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) instance: Option<String>,
}

fn class_str<S: serde::Serializer>(c: &EventClass, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.as_str())
}

/// RFC 3339 with milliseconds, UTC.
fn rfc3339(at_ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(at_ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

/// The lock events kept that named `key`, oldest first.
pub(super) fn events(s: &AppState, key: &str) -> Vec<EventView> {
    s.intake
        .keyed()
        .of(key)
        .into_iter()
        .map(|e| EventView {
            at: rfc3339(e.at_ms),
            at_ms: e.at_ms,
            op: e.op.as_str(),
            outcome: e.outcome.as_str(),
            class: EventClass::of(e.op, e.outcome),
            source: e.source.to_string(),
            span_id: e.trace.as_ref().and_then(|t| t.span_id.clone()),
            trace_id: e.trace.map(|t| t.trace_id),
            file: e.origin.file.as_ref().map(|f| f.path.to_string()),
            file_id: e.origin.file.as_ref().map(|f| format!("{}:{}", f.dev, f.ino)),
            pid: e.origin.pid,
            host: e.origin.host.map(String::from),
            instance: e.origin.instance.map(String::from),
        })
        .collect()
}

/// `key`'s transitions in the history of every watched target `wanted` accepts, oldest first.
pub(super) fn transitions(s: &AppState, key: &[u8], wanted: impl Fn(&str) -> bool) -> Vec<TransitionView> {
    let mut transitions = Vec::new();
    for lc in s.lifecycles.iter().filter(|l| wanted(&l.target)) {
        for r in lc.history().of(key) {
            transitions.push(TransitionView {
                target: lc.target.clone(),
                at: rfc3339(r.at_ms),
                at_ms: r.at_ms,
                kind: r.kind.as_str(),
                owner_hash: r.owner().map(|o| format!("{o:016x}")),
                takeover: r.takeover,
            });
        }
    }
    transitions.sort_by_key(|t| t.at_ms);
    transitions
}

/// The recent lifecycle of one key, from each target's bounded history.
pub(crate) async fn history(
    State(s): State<AppState>,
    query: Result<Query<HistoryQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, HttpError> {
    let Query(q) = query.map_err(|e| HttpError(StatusCode::BAD_REQUEST, format!("bad query: {}", e.body_text())))?;
    let Ok(_pass) = s.views.enter().await else {
        return Ok(gate::Busy.into_response());
    };
    let key = q.key.filter(|k| !k.is_empty()).ok_or_else(|| {
        HttpError(
            StatusCode::BAD_REQUEST,
            "missing `key`: /api/v1/locks/history?key=K".into(),
        )
    })?;
    let ns = s
        .config
        .namespaces
        .iter()
        .find(|n| n.pattern.matches(key.as_bytes()))
        .ok_or_else(|| {
            HttpError(
                StatusCode::BAD_REQUEST,
                format!("key `{key}` matches no namespace pattern, so lockwatch does not watch it"),
            )
        })?;
    if let Some(t) = &q.target
        && !s.config.targets.iter().any(|x| &x.name == t)
    {
        return Err(HttpError(StatusCode::BAD_REQUEST, format!("unknown target `{t}`")));
    }
    let wanted = |name: &str| q.target.as_deref().is_none_or(|t| t == name);
    let transitions = transitions(&s, key.as_bytes(), wanted);
    let events = events(&s, &key);
    let unwatched_targets = s
        .config
        .targets
        .iter()
        .filter(|t| wanted(&t.name) && !s.lifecycles.iter().any(|l| l.target == t.name))
        .map(|t| t.name.clone())
        .collect();
    Ok(Json(HistoryResponse {
        key,
        namespace: ns.name.clone(),
        transitions,
        events,
        unwatched_targets,
    })
    .into_response())
}
