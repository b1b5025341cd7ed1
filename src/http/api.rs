//! `GET /api/v1/locks` (the held locks, from the lock tables' view) and
//! `GET /api/v1/locks/history` (a key's recent lifecycle, from the watchers), as JSON.
//!
//! Owner tokens are capabilities (whoever knows one can release the lock with the
//! compare-and-delete script), so they are redacted unless `server.show_owners` is on;
//! a keyed hash of the owner is always given so that owners can be compared.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::{AppState, HttpError};
use crate::locks::view;

const DEFAULT_LIMIT: usize = 1000;
const MAX_LIMIT: usize = 100_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LocksQuery {
    namespace: Option<String>,
    target: Option<String>,
    limit: Option<usize>,
}

/// Held locks, those closest to expiry first (stalled holders lead the list).
pub(crate) async fn locks(
    State(s): State<AppState>,
    query: Result<Query<LocksQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<view::LockList>, HttpError> {
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
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT);
    Ok(Json(view::held_locks(
        &s.targets,
        view::Filter {
            target: q.target.as_deref(),
            namespace: q.namespace.as_deref(),
            show_owners: s.config.server.show_owners,
            limit,
        },
    )))
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
    /// Targets whose lifecycle is not watched (notifications off), if any were asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unwatched_targets: Vec<String>,
}

#[derive(Serialize)]
pub(crate) struct TransitionView {
    target: String,
    at: String,
    at_ms: i64,
    kind: &'static str,
    owner_hash: Option<String>,
    takeover: bool,
}

/// The recent lifecycle of one key, from each target's bounded history.
pub(crate) async fn history(
    State(s): State<AppState>,
    query: Result<Query<HistoryQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<HistoryResponse>, HttpError> {
    let Query(q) = query.map_err(|e| HttpError(StatusCode::BAD_REQUEST, format!("bad query: {}", e.body_text())))?;
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
    let mut transitions = Vec::new();
    for lc in s.lifecycles.iter().filter(|l| wanted(&l.target)) {
        for r in lc.history().of(key.as_bytes()) {
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(r.at_ms).unwrap_or(0));
            transitions.push(TransitionView {
                target: lc.target.clone(),
                at: humantime::format_rfc3339_millis(at).to_string(),
                at_ms: r.at_ms,
                kind: r.kind.as_str(),
                owner_hash: r.owner().map(|o| format!("{o:016x}")),
                takeover: r.takeover,
            });
        }
    }
    transitions.sort_by_key(|t| t.at_ms);
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
        unwatched_targets,
    }))
}
