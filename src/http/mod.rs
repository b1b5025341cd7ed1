//! The HTTP surface: `/metrics`, `/healthz`, `/readyz`, the status page `/`, the JSON API
//! the event push, the log shippers' and the drills' endpoints, over HTTP or HTTPS, behind
//! basic auth when the web config asks.
//!
//! Handlers only read what the collectors published; none of them talks to Redis, so any
//! scrape rate costs Redis nothing. `router` is built from shared state so tests can call
//! it without a socket; `server` serves it with every connection bounded.

mod api;
mod auth;
mod charts;
mod drill_results;
mod drill_view;
mod freeze_view;
mod freezes;
mod gate;
mod key_page;
mod logs;
pub(crate) mod push;
pub(crate) mod reload;
mod server;
mod slots;
mod status_page;
mod status_view;
mod summary;
mod trace_link;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::intake::IntakeMetrics;
use crate::lifecycle::LifecycleState;
use crate::locks::TargetLocks;
use crate::metrics::{Format, Registry};
use crate::topology::Nodes;

/// What the handlers read.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) config: Arc<Config>,
    pub(crate) registry: Registry,
    /// Each target's lock tables and sampling status.
    pub(crate) targets: Arc<[Arc<TargetLocks>]>,
    /// Lifecycle watchers, of the targets whose notifications are not off.
    pub(crate) lifecycles: Arc<[Arc<LifecycleState>]>,
    /// Each target's nodes by target name: which servers they are, for the status page.
    pub(crate) nodes: Arc<[(String, Nodes)]>,
    /// The intake's counts, for the status page.
    pub(crate) intake: IntakeMetrics,
    /// `POST /api/v1/events`.
    pub(crate) push: Arc<push::PushIntake>,
    /// What drills report: live freezes (`POST /api/v1/drills/freezes`) and results (`POST
    /// /api/v1/drills`, `/drills/NAME`), both on the status page.
    pub(crate) drills: Arc<crate::drills::Drills>,
    /// Bounds the answers that walk the lock tables (API, status page).
    pub(crate) views: gate::Gate,
    /// `POST /-/reload`, with `--web.enable-lifecycle` (403 without).
    pub(crate) reload: Option<reload::Reloads>,
}

/// An error a handler answers with: a status and one sentence naming the problem.
#[derive(Debug)]
pub(crate) struct HttpError(pub StatusCode, pub String);

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        (
            self.0,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{}\n", self.1),
        )
            .into_response()
    }
}

pub(crate) fn router(state: AppState) -> Router {
    let auth = state
        .config
        .server
        .web
        .as_ref()
        .map(|web| Arc::new(auth::WebAuth::new(web, state.config.server.push_token.is_some())));
    let router = Router::new()
        .route("/", get(status_page::page))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/api/v1/locks", get(api::locks))
        .route("/api/v1/locks/history", get(api::history))
        .route("/api/v1/status", get(status_view::api))
        .route("/locks/{namespace}", get(key_page::page))
        .route("/api/v1/events", post(push::events))
        .route("/v1/logs", post(logs::otlp))
        .route("/loki/api/v1/push", post(logs::loki))
        .route("/api/v1/logs", post(logs::plain))
        .route(crate::vocab::DRILL_FREEZES_PATH, post(freezes::record))
        .route(crate::vocab::DRILLS_PATH, post(drill_results::record))
        .route("/drills/{name}", get(drill_results::page))
        .route("/-/reload", post(reload::reload).put(reload::reload))
        .fallback(not_found)
        .with_state(state);
    match auth {
        Some(auth) => router.layer(axum::middleware::from_fn_with_state(auth, auth::check)),
        None => router,
    }
}

pub(crate) use server::Live;

/// What answers for `state`: its router, and its web config's TLS settings.
pub(crate) fn live(state: AppState) -> Live {
    let tls = state.config.server.web.as_ref().and_then(|w| w.tls.clone());
    Live::new(router(state), tls)
}

/// Serve the latest of `live` on `listener` until `shutdown`: HTTPS when its web config has
/// `tls_server_config`, else plain HTTP, every connection held to `limits` (`server`).
/// Requests in progress finish on shutdown.
pub(crate) async fn serve(
    listener: TcpListener,
    live: watch::Receiver<Live>,
    registry: &Registry,
    limits: crate::config::HttpLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let metrics = server::ServerMetrics::register(registry).map_err(std::io::Error::other)?;
    server::serve(listener, live, limits, metrics, shutdown).await
}

/// The 0.0.4 text format, or OpenMetrics with exemplars when `Accept` asks for it
/// (`metrics::Format::negotiate`, as Prometheus's own client libraries choose).
async fn metrics(State(s): State<AppState>, headers: HeaderMap) -> Result<Response, HttpError> {
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let format = Format::negotiate(&accept.join(","));
    let body = s.registry.encode_as(format).map_err(|e| {
        HttpError(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics failed: {e}"),
        )
    })?;
    Ok((
        [(header::CONTENT_TYPE, format.content_type()), (header::VARY, "Accept")],
        body,
    )
        .into_response())
}

/// Ready once every target finished one pass, successful or not: a Redis outage shows as
/// `lockwatch_up 0`, and must not take the exporter out of service discovery.
async fn readyz(State(s): State<AppState>) -> Result<&'static str, HttpError> {
    let waiting: Vec<&str> = s
        .targets
        .iter()
        .filter(|t| t.status().passes == 0)
        .map(|t| t.name.as_str())
        .collect();
    if waiting.is_empty() {
        Ok("ready\n")
    } else {
        Err(HttpError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: waiting for the first sample pass of target {}",
                waiting.join(", ")
            ),
        ))
    }
}

async fn not_found(uri: axum::http::Uri) -> HttpError {
    HttpError(
        StatusCode::NOT_FOUND,
        format!(
            "no such path {}: try /, /metrics, /healthz, /readyz, /api/v1/locks, /api/v1/locks/history?key=K, /api/v1/status, /locks/<namespace>?key=K, /drills/<name>, POST /api/v1/events, POST /api/v1/drills or POST /api/v1/drills/freezes",
            uri.path()
        ),
    )
}
