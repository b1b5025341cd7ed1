//! `GET /api/v1/locks`: the locks the sampler tracks, as JSON.
//!
//! Owner tokens are capabilities (whoever knows one can release the lock with the
//! compare-and-delete script), so they are redacted unless `server.show_owners` is on;
//! a keyed hash of the owner is always given so that owners can be compared.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::{AppState, HttpError};
use crate::sampler::ttl;

const DEFAULT_LIMIT: usize = 1000;
const MAX_LIMIT: usize = 100_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocksQuery {
    namespace: Option<String>,
    target: Option<String>,
    limit: Option<usize>,
}

#[derive(Serialize)]
pub struct LocksResponse {
    /// Locks matching the query before `limit` was applied.
    total: usize,
    truncated: bool,
    locks: Vec<LockView>,
}

#[derive(Serialize)]
pub struct LockView {
    target: String,
    namespace: String,
    key: String,
    owner: String,
    owner_hash: String,
    pttl_ms: i64,
    age_s: f64,
    fence: Option<i64>,
    overdue: bool,
}

/// Held locks, those closest to expiry first (stalled holders lead the list).
pub async fn locks(
    State(s): State<AppState>,
    query: Result<Query<LocksQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<LocksResponse>, HttpError> {
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
    let show_owners = s.config.server.show_owners;
    let mut out = Vec::new();
    for target in s
        .targets
        .iter()
        .filter(|t| q.target.as_ref().is_none_or(|name| &t.name == name))
    {
        let now_ms = target.now_ms();
        for ns_state in target
            .namespaces
            .iter()
            .filter(|n| q.namespace.as_ref().is_none_or(|name| &n.config.name == name))
        {
            let ns = &ns_state.config;
            let fence_of = ns.fence_map();
            let table = ns_state.table();
            for (key, e) in table.locks() {
                out.push(LockView {
                    target: target.name.clone(),
                    namespace: ns.name.clone(),
                    key: String::from_utf8_lossy(key).into_owned(),
                    owner: match (table.token(key), show_owners) {
                        (Some(t), true) => String::from_utf8_lossy(t).into_owned(),
                        _ => "<redacted>".to_string(),
                    },
                    owner_hash: format!("{:016x}", e.owner),
                    pttl_ms: i64::from(e.pttl_ms),
                    age_s: now_ms.saturating_sub(e.since_ms).max(0) as f64 / 1000.0,
                    fence: fence_of.key_for(key).and_then(|f| table.fence(&f)),
                    overdue: ttl::renewal_overdue(i64::from(e.pttl_ms), ns.overdue_below()),
                });
            }
        }
    }
    // No expiry sorts last; among expiring locks, the least time left first.
    out.sort_by_key(|l| if l.pttl_ms < 0 { i64::MAX } else { l.pttl_ms });
    let total = out.len();
    out.truncate(limit);
    Ok(Json(LocksResponse {
        total,
        truncated: total > limit,
        locks: out,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    key: Option<String>,
    target: Option<String>,
}

#[derive(Serialize)]
pub struct HistoryResponse {
    key: String,
    namespace: String,
    /// Oldest first, all watched targets together.
    transitions: Vec<TransitionView>,
    /// Targets whose lifecycle is not watched (notifications off), if any were asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unwatched_targets: Vec<String>,
}

#[derive(Serialize)]
pub struct TransitionView {
    target: String,
    at: String,
    at_ms: i64,
    kind: &'static str,
    owner_hash: Option<String>,
    takeover: bool,
}

/// The recent lifecycle of one key, from each target's bounded history.
pub async fn history(
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
