//! `lockwatch serve`: wires the sampler and lifecycle watcher of each target, the log
//! sources, the event push and the drills' freezes to the HTTP server, and runs them until
//! shutdown, reloading the config on SIGHUP and `POST /-/reload` (`reload`; what runs per
//! target and source: `parts`).
//!
//! `run` takes an already-bound listener and a cancellation token, so tests (and the demo)
//! start the real exporter on port 0 and stop it when they are done.

mod parts;
mod reload;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::drills::Drills;
use crate::http::push::PushIntake;
use crate::http::reload::{Answer, Reloads};
use crate::http::{self, AppState};
use crate::intake::ClassifierError;
use crate::lifecycle::WatchError;
use crate::metrics::Registry;
use crate::sampler::SamplerError;
use parts::{Families, Parts};
pub use reload::ConfigSource;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot set up metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error(transparent)]
    Sampler(#[from] SamplerError),
    #[error(transparent)]
    Watch(#[from] WatchError),
    #[error(transparent)]
    Classifier(#[from] ClassifierError),
    #[error("cannot use state.dir {dir}: {source}")]
    StateDir { dir: String, source: std::io::Error },
    #[error("cannot read stdin: {0}")]
    Stdin(std::io::Error),
    #[error("HTTP server failed: {0}")]
    Http(#[from] std::io::Error),
}

/// How a run may reload its config.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The file SIGHUP and `POST /-/reload` read again; without it a reload is refused.
    pub reload_from: Option<ConfigSource>,
    /// `--web.enable-lifecycle`: `POST /-/reload` reloads (else it answers 403).
    pub enable_lifecycle: bool,
}

/// Run the exporter on `listener` until `shutdown` is cancelled; then stop taking requests,
/// let in-flight ones finish, and stop the samplers.
pub async fn run(listener: TcpListener, config: Config, shutdown: CancellationToken) -> Result<(), ServeError> {
    run_with(listener, config, Options::default(), shutdown).await
}

/// [`run`], reloading the config as `options` say.
pub async fn run_with(
    listener: TcpListener,
    config: Config,
    options: Options,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    run_in(listener, config, options, Registry::new()?, shutdown).await
}

/// [`run_with`], the families registered in `registry`: a caller keeping a clone reaches
/// what the run exports (its exemplar store, for one).
pub async fn run_in(
    listener: TcpListener,
    config: Config,
    options: Options,
    registry: Registry,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let families = Families::register(&config, registry)?;
    let registry = families.registry.clone();
    let reload_metrics = reload::ReloadMetrics::register(&registry)?;
    let mut parts = Parts::start(&config, families.clone(), shutdown.clone()).await?;
    // After the parts: `[state] dir` exists.
    let drills = Arc::new(Drills::start(&config, &registry)?);
    let addr = listener.local_addr()?;
    log_serving(addr, &config);
    let (reloads, mut asks): (_, mpsc::Receiver<Answer>) = match options.enable_lifecycle {
        true => {
            let (r, a) = Reloads::channel();
            (Some(r), a)
        }
        false => (None, mpsc::channel(1).1),
    };
    let state = |config: &Config, parts: &Parts| {
        let namespaces: Vec<String> = config.namespaces.iter().map(|n| n.name.clone()).collect();
        let push = Arc::new(PushIntake::new(
            parts.classifier(),
            &families.intake,
            &namespaces,
            config.server.push_token.clone(),
        ));
        AppState {
            config: Arc::new(config.clone()),
            registry: registry.clone(),
            targets: parts.targets(),
            lifecycles: parts.lifecycles(),
            nodes: parts.nodes(),
            intake: families.intake.clone(),
            push,
            drills: drills.clone(),
            views: Default::default(),
            reload: reloads.clone(),
        }
    };
    let (live, live_rx) = watch::channel(http::live(state(&config, &parts)));
    let server = http::serve(listener, live_rx, &registry, config.server.limits, shutdown.clone());
    tokio::pin!(server);
    let mut hangups = hangups();
    let mut current = config;
    let result = loop {
        let answer = tokio::select! {
            r = &mut server => break r,
            Some(()) = hangups.recv() => None,
            Some(answer) = asks.recv() => Some(answer),
        };
        let why = if answer.is_some() { "POST /-/reload" } else { "SIGHUP" };
        let done = reload::reload(
            why,
            options.reload_from.as_ref(),
            &mut current,
            &mut parts,
            &reload_metrics,
        )
        .await;
        if let Ok(changes) = &done {
            drills.reconfigure(&current);
            warn_unverified(&current);
            // The old state (and the tables of removed targets) goes first: nothing can
            // publish a removed target's series again once they are dropped.
            live.send_replace(http::live(state(&current, &parts)));
            for (label, value) in &changes.gone {
                registry.drop_series(label, value);
            }
        }
        if let Some(answer) = answer {
            let _ = answer.send(done.map(|_| ()));
        }
    };
    drop(live);
    parts.stop().await;
    tracing::info!("stopped");
    Ok(result?)
}

fn log_serving(addr: std::net::SocketAddr, config: &Config) {
    match &config.server.web {
        Some(web) => {
            tracing::info!(%addr, web_config = %web.path.display(), tls = web.tls.is_some(),
                client_auth = %web.client_auth, basic_auth_users = web.users.len(), "serving /metrics");
            if web.tls.is_none() && !web.users.is_empty() {
                tracing::warn!(web_config = %web.path.display(),
                    "basic auth without tls_server_config: passwords cross the network in clear text");
            }
        }
        None => tracing::info!(%addr, "serving /metrics"),
    }
    warn_unverified(config);
}

/// A warning for each target whose server certificates go unverified: at start and after
/// each reload, so the log says it while it is so.
fn warn_unverified(config: &Config) {
    for t in config.targets.iter().filter(|t| t.tls.insecure) {
        tracing::warn!(target_name = %t.name,
            "tls_insecure_skip_verify = true: the server's certificate is not verified on any connection of this target (lockwatch_target_tls_unverified 1); anyone on the path can pose as the server");
    }
}

/// Each SIGHUP, as a message (none where there are no signals, or none can be had).
fn hangups() -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel(1);
    #[cfg(unix)]
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(mut hup) => {
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    // One reload waiting is enough: more SIGHUPs meanwhile read the same file.
                    let _ = tx.try_send(());
                    if tx.is_closed() {
                        return;
                    }
                }
            });
        }
        Err(e) => tracing::warn!(error = %e, "cannot listen for SIGHUP; POST /-/reload still reloads"),
    }
    #[cfg(not(unix))]
    drop(tx);
    rx
}

/// A token cancelled on SIGTERM or Ctrl-C.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGTERM; Ctrl-C still stops lockwatch");
                    let _ = ctrl_c.await;
                    t.cancel();
                    return;
                }
            };
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutting down");
        t.cancel();
    });
    token
}
