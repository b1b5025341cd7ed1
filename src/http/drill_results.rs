//! `POST /api/v1/drills`: a drill records its result. Checked as the other pushes are
//! (token, content type, room, size, time), then handed whole to
//! `drills::results::Results::record` on the blocking pool (it saves a file): 201 with where
//! the report is, 200 for a run already kept, or the refusal's status with the sentence
//! naming the problem. `GET /drills/NAME`: the latest run's report, drawn from its document
//! (`?target=` and `?namespace=` tell apart drills of one name; `?format=json` gives the
//! drill's JSON report).

use std::collections::HashMap;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use super::drill_view::link;
use super::freezes::{answer, read};
use super::{AppState, HttpError};
use crate::drills::results::{MAX_BODY, RecordError, Taken};

pub(crate) async fn record(State(s): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let body = match read(&s, &headers, body, MAX_BODY, "one drill record").await {
        Ok(body) => body,
        Err(answer) => return answer,
    };
    let drills = s.drills.clone();
    let now = u64::try_from(crate::locks::recent::wall_ms()).unwrap_or(0);
    let done = tokio::task::spawn_blocking(move || drills.results.record(&body, now)).await;
    let (status, message) = match done {
        Ok(Ok((taken, (target, namespace, name)))) => {
            let report = format!("/{}", link(&name, &target, &namespace));
            let status = match taken {
                Taken::Kept => StatusCode::CREATED,
                Taken::Again => StatusCode::OK,
            };
            let body = serde_json::json!({"kept": taken == Taken::Kept, "report": report});
            return (status, [(header::LOCATION, report)], Json(body)).into_response();
        }
        Ok(Err(RecordError::Refused(r))) => answer(&r),
        Ok(Err(e @ RecordError::Unsaved(_))) => {
            let answer = HttpError(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response();
            return ([(header::RETRY_AFTER, "5")], answer).into_response();
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("recording failed: {e}")),
    };
    HttpError(status, message).into_response()
}

/// `GET /drills/NAME`: the report of the latest run, as its document draws it. The page
/// holds no script; a policy forbids any all the same, and anything loaded from anywhere.
pub(crate) async fn page(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let found = s.drills.results.named(
        &name,
        q.get("target").map(String::as_str),
        q.get("namespace").map(String::as_str),
    );
    let kept = match found.as_slice() {
        [one] => one,
        [] => {
            let known: Vec<String> = s.drills.results.list().iter().map(|k| k.latest.name.clone()).collect();
            let message = format!(
                "no drill `{name}` has recorded a result here{}",
                match known.is_empty() {
                    true => String::new(),
                    false => format!(" (recorded: {})", known.join(", ")),
                }
            );
            return HttpError(StatusCode::NOT_FOUND, message).into_response();
        }
        several => {
            let links: Vec<String> = several
                .iter()
                .map(|k| format!("/{}", link(&k.latest.name, &k.latest.target, &k.latest.namespace)))
                .collect();
            let message = format!(
                "{} drills are named `{name}`: add ?target=…&namespace=…, one of {}",
                several.len(),
                links.join(", ")
            );
            return HttpError(StatusCode::MULTIPLE_CHOICES, message).into_response();
        }
    };
    if q.get("format").map(String::as_str) == Some("json") {
        let json = kept.latest.report.get().to_string();
        return ([(header::CONTENT_TYPE, "application/json")], json).into_response();
    }
    // Drawn on the blocking pool: a long timeline is some milliseconds of work.
    let kept = kept.clone();
    let Ok(html) = tokio::task::spawn_blocking(move || kept.latest.document.html()).await else {
        return HttpError(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the report could not be drawn".into(),
        )
        .into_response();
    };
    (
        [(
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'",
        )],
        Html(html),
    )
        .into_response()
}
