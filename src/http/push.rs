//! `POST /api/v1/events`: lock events pushed by applications (NDJSON event objects) or raw
//! log lines (`text/plain`), counted under `source="push"`; and what every push endpoint
//! shares (`logs` serves the shippers'): the token, the room, the size and time limits.
//!
//! Checks, in order: the bearer token when `push_token_file` is set (401), the content
//! type (415), room among the pushes in progress (503 past `MAX_PUSHES`), the size (413,
//! read no further than `MAX_BODY`) and the time (503 with `Retry-After` past
//! `body_timeout`), then the body
//! (400 naming the first bad line; nothing of a rejected batch is counted).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::Semaphore;

use super::{AppState, HttpError};
use crate::config::Secret;
use crate::intake::push::{self as parse, MAX_BODY};
use crate::intake::{Classifier, Counters, IntakeMetrics};
use crate::vocab::{PUSH_SOURCE, Refused};

/// Pushes whose bodies are read at once; more are refused (503) rather than held open.
pub(crate) const MAX_PUSHES: usize = 32;

/// What the push endpoints need.
pub(crate) struct PushIntake {
    pub(super) classifier: Arc<Classifier>,
    /// `source="push"`.
    counters: Counters,
    /// The shippers' endpoints' counters (`logs`).
    pub(super) sources: super::logs::SourceCounters,
    token: Option<Secret>,
    /// Room for [`MAX_PUSHES`] bodies being read, on every push endpoint.
    pub(super) reading: Semaphore,
}

impl PushIntake {
    pub(crate) fn new(
        classifier: Arc<Classifier>,
        metrics: &IntakeMetrics,
        namespaces: &[String],
        token: Option<Secret>,
    ) -> Self {
        PushIntake {
            classifier,
            counters: Counters::new(metrics, namespaces, PUSH_SOURCE),
            sources: super::logs::SourceCounters::new(metrics, namespaces),
            token,
            reading: Semaphore::new(MAX_PUSHES),
        }
    }

    /// The 401 of a request without the push token (when one is set).
    pub(super) fn refused(&self, headers: &HeaderMap) -> Option<Response> {
        match &self.token {
            Some(token) if !authorized(headers, token) => Some(
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer")],
                    "missing or wrong bearer token: send Authorization: Bearer <the token in push_token_file>\n",
                )
                    .into_response(),
            ),
            _ => None,
        }
    }
}

/// The 503 of a push past [`MAX_PUSHES`]: retried by every shipper after `Retry-After`.
pub(super) fn busy() -> HttpError {
    HttpError(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("{MAX_PUSHES} pushes are being read already; retry in a moment"),
    )
}

/// The body within `limit` bytes and `server.body_timeout` (413; 408, which `account`
/// answers as a 503 with `Retry-After`).
pub(super) async fn read_body(
    s: &AppState,
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Vec<u8>, HttpError> {
    let timeout = s.config.server.limits.body_timeout;
    tokio::time::timeout(timeout, read_limited(headers, body, limit))
        .await
        .map_err(|_| {
            HttpError(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body did not arrive within server.body_timeout ({}); nothing was counted",
                    crate::duration::format(timeout)
                ),
            )
        })?
}

enum Kind {
    Events,
    Text,
}

pub(crate) async fn events(State(s): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let answer = take_events(&s, headers, body)
        .await
        .unwrap_or_else(IntoResponse::into_response);
    account(&s, PUSH_SOURCE, answer)
}

/// Count a refused push (`lockwatch_log_pushes_refused_total`) by its answer's status. A
/// body that did not arrive within `body_timeout` is answered `503` with `Retry-After`,
/// which every shipper sends again (the OTLP specification has exporters retry 429, 502,
/// 503 and 504 only, not a `408`): nothing of it was counted.
pub(super) fn account(s: &AppState, source: &'static str, answer: Response) -> Response {
    let (answer, reason) = settle(answer);
    if let Some(reason) = reason {
        s.intake.refused(source, reason);
    }
    answer
}

/// A push's answer as sent, and why it was refused, by its status: a `408` (the body not
/// arrived within `body_timeout`) becomes the `503` with `Retry-After` that senders retry.
pub(super) fn settle(mut answer: Response) -> (Response, Option<Refused>) {
    let reason = match answer.status() {
        StatusCode::REQUEST_TIMEOUT => {
            *answer.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            answer
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            Some(Refused::Timeout)
        }
        StatusCode::UNAUTHORIZED => Some(Refused::Unauthorized),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => Some(Refused::Unsupported),
        StatusCode::PAYLOAD_TOO_LARGE => Some(Refused::TooLarge),
        StatusCode::BAD_REQUEST => Some(Refused::Undecodable),
        StatusCode::SERVICE_UNAVAILABLE => Some(Refused::Busy),
        _ => None,
    };
    (answer, reason)
}

async fn take_events(s: &AppState, headers: HeaderMap, body: Body) -> Result<Response, HttpError> {
    let push = &s.push;
    if let Some(refused) = push.refused(&headers) {
        return Ok(refused);
    }
    let kind = content_kind(&headers)?;
    let Ok(_reading) = push.reading.try_acquire() else {
        return Ok(([(header::RETRY_AFTER, "1")], busy()).into_response());
    };
    let body = read_body(s, &headers, body, MAX_BODY).await?;
    let reply = match kind {
        Kind::Events => {
            let mut batch = parse::events(&body, &push.classifier).map_err(|e| {
                HttpError(
                    StatusCode::BAD_REQUEST,
                    format!("{e}; nothing in this body was counted"),
                )
            })?;
            let accepted = batch.tally.total();
            push.counters.flush(&mut batch.tally);
            json!({ "accepted": accepted, "unknown_namespace": batch.unknown_namespace })
        }
        Kind::Text => {
            let mut tally = parse::text(&body, &push.classifier);
            let [matched, ignored, malformed] = tally.lines;
            push.counters.flush(&mut tally);
            json!({ "lines": matched + ignored + malformed, "matched": matched, "ignored": ignored, "malformed": malformed })
        }
    };
    Ok(Json(reply).into_response())
}

/// `Authorization: Bearer <token>`, the scheme in any case (RFC 9110: schemes are
/// case-insensitive), the token compared exactly.
fn authorized(headers: &HeaderMap, token: &Secret) -> bool {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim_start().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map_or("", |(_, t)| t);
    constant_time_eq(given.trim().as_bytes(), token.expose().as_bytes())
}

/// Compares without stopping at the first difference, so timing does not reveal a prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn content_kind(headers: &HeaderMap) -> Result<Kind, HttpError> {
    let unsupported = |what: String| {
        HttpError(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("{what}: send application/x-ndjson (one event object per line) or text/plain (log lines)"),
        )
    };
    let Some(essence) = content_type(headers) else {
        return Err(unsupported("no Content-Type".into()));
    };
    match essence.as_str() {
        "application/x-ndjson" | "application/ndjson" | "application/jsonl" | "application/json" => Ok(Kind::Events),
        "text/plain" => Ok(Kind::Text),
        other => Err(unsupported(format!("Content-Type `{other}` is not taken"))),
    }
}

/// The request's media type, lowercase, without parameters (`application/json`).
pub(super) fn content_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?;
    let essence = value.to_str().unwrap_or("").split(';').next().unwrap_or("");
    Some(essence.trim().to_ascii_lowercase())
}

/// The body, refused with 413 as soon as it is known to exceed `limit`.
async fn read_limited(headers: &HeaderMap, body: Body, limit: usize) -> Result<Vec<u8>, HttpError> {
    let too_large = || {
        HttpError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body over {} KiB: split it into smaller batches", limit / 1024),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut out = Vec::with_capacity(declared.unwrap_or(0).min(limit as u64) as usize);
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| HttpError(StatusCode::BAD_REQUEST, format!("cannot read the request body: {e}")))?;
        if out.len() + chunk.len() > limit {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_matched_in_any_case() {
        let token = Secret::new("s3cret");
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            authorized(&h, &token)
        };
        for ok in ["Bearer s3cret", "bearer s3cret", "BEARER  s3cret "] {
            assert!(with(ok), "{ok}");
        }
        for refused in ["Bearer S3cret", "Basic s3cret", "Bearers3cret", "s3cret", "Bearer"] {
            assert!(!with(refused), "{refused}");
        }
        assert!(!authorized(&HeaderMap::new(), &token));
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"secret"));
    }
}
