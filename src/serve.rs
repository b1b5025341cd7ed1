//! `lockwatch serve`: wires the sampler and lifecycle watcher of each target, the log
//! sources and the event push to the HTTP server, and runs them until shutdown.
//!
//! `run` takes an already-bound listener and a cancellation token, so tests (and the demo)
//! start the real exporter on port 0 and stop it when they are done.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::config::Notifications;
use crate::http::push::PushIntake;
use crate::http::{self, AppState};
use crate::intake::tail::Tailer;
use crate::intake::{Classifier, ClassifierError, Counters, IntakeMetrics};
use crate::lifecycle::metrics::WatcherMetrics;
use crate::lifecycle::{self, WatchError, Watcher};
use crate::locks::TargetLocks;
use crate::metrics::Registry;
use crate::sampler::{Sampler, SamplerError, SamplerMetrics};
use crate::topology::{Follower, TopologyMetrics};

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

/// Run the exporter on `listener` until `shutdown` is cancelled; then stop taking requests,
/// let in-flight ones finish, and stop the samplers.
pub async fn run(listener: TcpListener, config: Config, shutdown: CancellationToken) -> Result<(), ServeError> {
    for target in &config.targets {
        lifecycle::preflight(target, &config.namespaces).await?;
    }
    let registry = Registry::new()?;
    let sampler_metrics = SamplerMetrics::register(&registry, &config)?;
    let watcher_metrics = WatcherMetrics::register(&registry, &config)?;
    let intake_metrics = IntakeMetrics::register(&registry, &config)?;
    let topology_metrics = TopologyMetrics::register(&registry, &config)?;
    let targets: Arc<[Arc<TargetLocks>]> = config
        .targets
        .iter()
        .map(|t| Arc::new(TargetLocks::new(t, &config.namespaces, config.server.show_owners)))
        .collect();
    let mut samplers = Vec::with_capacity(config.targets.len());
    let mut watchers = Vec::new();
    let mut followers = Vec::with_capacity(config.targets.len());
    for (target, locks) in config.targets.iter().zip(targets.iter()) {
        let (follower, nodes) = Follower::new(target, &topology_metrics).map_err(SamplerError::from)?;
        followers.push(follower);
        samplers.push(Sampler::new(
            target,
            locks.clone(),
            sampler_metrics.clone(),
            nodes.clone(),
        )?);
        if target.notifications != Notifications::Off {
            watchers.push(Watcher::new(
                target,
                &config.namespaces,
                locks.clone(),
                &watcher_metrics,
                nodes,
            )?);
        }
    }
    let lifecycles: Arc<[_]> = watchers.iter().map(Watcher::state).collect();
    if let Some(dir) = &config.state_dir {
        std::fs::create_dir_all(dir).map_err(|source| ServeError::StateDir {
            dir: dir.display().to_string(),
            source,
        })?;
    }
    let classifier = Arc::new(Classifier::new(&config)?);
    let namespaces: Vec<String> = config.namespaces.iter().map(|n| n.name.clone()).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for source in &config.logs {
        if source.path == "-" {
            let counters = Counters::new(&intake_metrics, &namespaces, &source.name);
            let stdin = std::io::BufReader::new(std::io::stdin());
            crate::intake::stdin::spawn(source, stdin, classifier.clone(), counters).map_err(ServeError::Stdin)?;
        } else {
            let tailer = Tailer::new(
                source,
                classifier.clone(),
                &intake_metrics,
                &namespaces,
                config.state_dir.as_deref(),
            );
            let shutdown = shutdown.clone();
            tasks.spawn(async move {
                tailer.run(shutdown).await;
            });
        }
    }
    for (sampler, target) in samplers.into_iter().zip(&config.targets) {
        tracing::info!(target_name = %target.name, url = %target.display_url,
            interval = %crate::duration::format(target.sample_interval), namespaces = config.namespaces.len(), "sampling");
        tasks.spawn(sampler.run(shutdown.clone()));
    }
    for watcher in watchers {
        tasks.spawn(watcher.run(shutdown.clone()));
    }
    for follower in followers {
        tasks.spawn(follower.run(shutdown.clone()));
    }
    let addr = listener.local_addr()?;
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
    let push = Arc::new(PushIntake::new(
        classifier,
        &intake_metrics,
        &namespaces,
        config.server.push_token.clone(),
    ));
    let state = AppState {
        config: Arc::new(config),
        registry,
        targets,
        lifecycles,
        intake: intake_metrics,
        push,
        views: Default::default(),
    };
    let result = http::serve(listener, state, shutdown.clone()).await;
    shutdown.cancel();
    while tasks.join_next().await.is_some() {}
    tracing::info!("stopped");
    Ok(result?)
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
