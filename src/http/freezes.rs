//! `POST /api/v1/drills/freezes`: a drill, or its watchdog, says a freeze landed, was thawed,
//! or could not be thawed. Checked as the other pushes are (token, content type, room, size,
//! time; `push`), then handed whole to `freezes::Freezes::record` on the blocking pool (it
//! saves a file): 204, or the refusal's status with the sentence naming the problem.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::push::{busy, content_type, read_body, settle};
use super::{AppState, HttpError};
use crate::drills::freezes::{MAX_BODY, RecordError};
use crate::vocab::{DrillRefused, Refused};

pub(crate) async fn record(State(s): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let body = match read(&s, &headers, body, MAX_BODY, "one freeze record").await {
        Ok(body) => body,
        Err(answer) => return answer,
    };
    let drills = s.drills.clone();
    let done = tokio::task::spawn_blocking(move || drills.freezes.record(&body)).await;
    let (status, message) = match done {
        Ok(Ok(())) => return StatusCode::NO_CONTENT.into_response(),
        Ok(Err(RecordError::Refused(r))) => answer(&r),
        Ok(Err(e @ RecordError::Unsaved(_))) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("recording failed: {e}")),
    };
    HttpError(status, message).into_response()
}

/// The body (JSON, `what`, at most `limit` bytes), after the checks every push endpoint
/// makes; a refusal counted as the drills' and answered.
pub(super) async fn read(
    s: &AppState,
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    what: &str,
) -> Result<Vec<u8>, Response> {
    checked(s, headers, body, limit, what).await.map_err(|answer| {
        let (answer, reason) = settle(answer);
        if let Some(reason) = reason {
            s.drills.refused(refused(reason), "refused before it was read");
        }
        answer
    })
}

async fn checked(s: &AppState, headers: &HeaderMap, body: Body, limit: usize, what: &str) -> Result<Vec<u8>, Response> {
    if let Some(refused) = s.push.refused(headers) {
        return Err(refused);
    }
    let media = content_type(headers);
    if media.as_deref() != Some("application/json") {
        return Err(HttpError(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Type `{}` is not taken: send application/json, {what}",
                media.unwrap_or_default()
            ),
        )
        .into_response());
    }
    let Ok(_reading) = s.push.reading.try_acquire() else {
        return Err(([(header::RETRY_AFTER, "1")], busy()).into_response());
    };
    read_body(s, headers, body, limit)
        .await
        .map_err(IntoResponse::into_response)
}

/// A store's refusal as answered: 404 for a name the config lacks, 429 for no room, else 400.
pub(super) fn answer(r: &crate::drills::Refused) -> (StatusCode, String) {
    let status = match r.reason {
        DrillRefused::UnknownTarget | DrillRefused::UnknownNamespace => StatusCode::NOT_FOUND,
        DrillRefused::TooMany => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::BAD_REQUEST,
    };
    (status, format!("{}; nothing of this record was kept", r.message))
}

/// A push's refusal in the words of drill records.
fn refused(reason: Refused) -> DrillRefused {
    match reason {
        Refused::Unauthorized => DrillRefused::Unauthorized,
        Refused::Unsupported => DrillRefused::Unsupported,
        Refused::TooLarge => DrillRefused::TooLarge,
        Refused::Undecodable => DrillRefused::Invalid,
        Refused::Busy => DrillRefused::Busy,
        Refused::Timeout => DrillRefused::Timeout,
    }
}
