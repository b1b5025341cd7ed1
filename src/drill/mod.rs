//! `lockwatch drill`: the guided staging rehearsal of the stale-holder incident — worker A
//! (a real child process) holds a lock and freezes past the TTL, or its renewal is held in
//! the network past it (`--scenario`); its stale renew, release and fenced write must be
//! refused. This file owns the entry point [`run`], its options and errors; `plan`,
//! `scenario` + `delays` + `cycle` + `late`, `proxy`, `probes` (judged by `expect`: the
//! run's own key, so a live namespace's other traffic is no deviation), `narrator` and
//! `rollback` are the parts; `report` (and `marks`) the record, `record` its document.
//! `freeze` is the other mode: the team's own worker frozen past its TTL, and the verdict.

pub mod freeze;
pub mod narrator;
pub mod report;
pub mod result;

mod cleanup;
mod cycle;
mod delays;
mod expect;
pub(crate) mod exporter;
mod late;
mod lease;
mod marks;
pub(crate) mod plan;
mod preflight;
pub(crate) mod probes;
mod proxy;
mod record;
mod rollback;
mod scenario;
mod session;
mod worker;

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use self::cleanup::{Cleanup, cleanup};
pub use self::narrator::Narrator;
use self::narrator::Said;
pub use self::plan::Keys;
use self::plan::Plan;
pub use self::report::Report;
pub use self::scenario::Scenario;
use self::session::Session;
use crate::config::Config;

/// How to run the drill. How it is told (interactive, a terminal) is the narrator's.
#[derive(Debug, Clone)]
pub struct Options {
    /// The config file, for worker A, which loads it itself.
    pub config_path: PathBuf,
    pub namespace: String,
    pub scenario: Scenario,
    pub target: Option<String>,
    pub exporter: Option<String>,
    pub prometheus: Option<String>,
    pub release_script: Option<PathBuf>,
    pub renew_script: Option<PathBuf>,
    pub sustain: Option<Duration>,
    /// Cycles per minute in sustained mode.
    pub rate: u32,
    pub allow_production: bool,
    /// The `lockwatch` executable that runs worker A (`drill-worker`); `None`: this one.
    /// Set it where this process is not `lockwatch` (an integration test).
    pub worker_program: Option<PathBuf>,
}

impl Options {
    /// A run of the `drill` namespace's stale-holder scenario for the config at `config_path`,
    /// without exporter, Prometheus, own scripts or sustained cycles; the fields say the rest.
    pub fn new(config_path: impl Into<PathBuf>) -> Self {
        Options {
            config_path: config_path.into(),
            namespace: "drill".into(),
            scenario: Scenario::StaleHolder,
            target: None,
            exporter: None,
            prometheus: None,
            release_script: None,
            renew_script: None,
            sustain: None,
            rate: 6,
            allow_production: false,
            worker_program: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    /// Exit 2: the drill cannot run as asked.
    #[error("{0}")]
    Usage(String),
    #[error("target {target} is not reachable: {source}")]
    Unreachable { target: String, source: redis::RedisError },
    #[error("cannot read {path}: {source}")]
    Script { path: String, source: std::io::Error },
    #[error("cannot start the network proxy: {0}")]
    Proxy(std::io::Error),
}

/// Run the drill, telling `narrator` as it goes. Cancelling `cancel` (on Ctrl-C) stops the
/// scenario where it is; the rollback runs whatever happened, and the report then says
/// interrupted. `Err` only when the drill cannot start (usage, unreachable, a script).
pub async fn run(
    config: &Config,
    opts: &Options,
    narrator: &mut dyn Narrator,
    cancel: CancellationToken,
) -> Result<Report, DrillError> {
    let mut plan = Plan::new(config, opts)?;
    let unreachable = |source| DrillError::Unreachable {
        target: plan.target.name.clone(),
        source,
    };
    let link = crate::access::connect::link_for_key(plan.target, plan.keys(1).lock.as_bytes())
        .await
        .map_err(unreachable)?;
    let conn = link
        .once()
        .await
        .map_err(|e| crate::access::tls::explained(plan.target, e))
        .map_err(unreachable)?;
    plan.node = link.node();
    // A proxy in the way before anything else runs, so worker A starts behind it.
    let proxy = if opts.scenario.proxied() {
        Some(proxy::for_plan(&plan).await?)
    } else {
        None
    };
    let mut s = Session::new(plan, opts, conn);
    s.proxy = proxy;
    s.preflight(narrator).await;
    let outcome = tokio::select! {
        biased;
        () = cancel.cancelled() => {
            narrator.say(Said::Interrupted);
            s.report.interrupted = true;
            Ok(())
        }
        r = session::scenario(&mut s, narrator) => r,
    };
    // Interrupted or broken mid-cycle: what was open (A frozen, a request held) ends here.
    s.stop_recording();
    if let Err(e) = outcome {
        s.broken(&e);
    }
    rollback::rollback(&mut s, narrator).await;
    s.report.finish();
    Ok(s.report)
}

/// `lockwatch drill-worker`: the child side, until stdin closes. `via` (`host:port`): reach
/// Redis through the drill's network proxy there. It dies with the drill (`parent`),
/// whatever ends it (SIGKILL included).
pub async fn worker_main(
    config: &Config,
    target: &str,
    namespace: String,
    exporter: Option<String>,
    key: Option<String>,
    via: Option<String>,
    parent: Option<i32>,
) -> std::io::Result<()> {
    worker::die_with_parent(parent)?;
    let t = config
        .targets
        .iter()
        .find(|t| t.name == target)
        .ok_or_else(|| std::io::Error::other(format!("no target {target}")))?;
    let conn = match (&key, &via) {
        (_, Some(via)) => proxy::connect_via(config, t, &namespace, key.as_deref(), via).await,
        (Some(k), None) => crate::access::connect::for_key(t, k.as_bytes()).await,
        (None, None) => crate::access::connect::once(t).await,
    }
    .map_err(std::io::Error::other)?;
    let token = config.server.push_token.as_ref().map(|t| t.expose().to_string());
    worker::serve(conn, namespace, exporter, token).await
}
