//! `POST /-/reload` (and `PUT`), Prometheus's lifecycle API: asks `serve` to reload the
//! config and answers once it is done — 200, or 400 with the error naming file, line and
//! key. Without `--web.enable-lifecycle` it answers 403 and says so; reloading is `serve`'s.

use axum::extract::State;
use axum::http::StatusCode;
use tokio::sync::{mpsc, oneshot};

use super::{AppState, HttpError};

/// Where a reload's outcome is told: `Err` holds the error, one sentence.
pub(crate) type Answer = oneshot::Sender<Result<(), String>>;

/// Asks for reloads; `serve` holds the receiving end.
#[derive(Clone)]
pub(crate) struct Reloads(mpsc::Sender<Answer>);

impl Reloads {
    /// A way to ask for reloads, and where the asks arrive.
    pub(crate) fn channel() -> (Reloads, mpsc::Receiver<Answer>) {
        let (tx, rx) = mpsc::channel(8);
        (Reloads(tx), rx)
    }
}

pub(super) async fn reload(State(s): State<AppState>) -> Result<&'static str, HttpError> {
    let Some(reloads) = &s.reload else {
        return Err(HttpError(
            StatusCode::FORBIDDEN,
            "Lifecycle API is not enabled: start lockwatch with --web.enable-lifecycle to reload with POST /-/reload (SIGHUP reloads either way)".into(),
        ));
    };
    let gone = || HttpError(StatusCode::SERVICE_UNAVAILABLE, "lockwatch is shutting down".into());
    let (tx, rx) = oneshot::channel();
    reloads.0.send(tx).await.map_err(|_| gone())?;
    match rx.await.map_err(|_| gone())? {
        Ok(()) => Ok("config reloaded\n"),
        Err(e) => Err(HttpError(
            StatusCode::BAD_REQUEST,
            format!("reload failed, the running config stays: {e}"),
        )),
    }
}
