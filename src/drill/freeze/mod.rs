//! `lockwatch drill --freeze`: the drill on the team's own worker. Its watchdog (`keeper`,
//! out of the drill's session and cgroups by `escape`) freezes a real process (`ptrace`,
//! `stop`), cgroup or whatever a pair of commands stops (`target`, `freezer`) past the
//! namespace's TTL and thaws it whatever happens to the drill (`watchdog`, `span`; `guard`
//! once the drill holds it alone; `leftover` for `--thaw`), telling the exporter (`notice`).
//! The drill watches what the woken worker does (`observe` through the exporter, `witness` by
//! `MONITOR`, `sockets`, `identity` and `found` from `/proc`), tells which locks were its
//! (`held`) and judges each by what its work did (`verdict`, `finding`), with a report
//! (`report`, `html`).

mod deletion;
mod escape;
mod finding;
mod found;
mod freezer;
#[cfg(test)]
pub(crate) mod golden_tests;
mod guard;
mod held;
mod identity;
mod keeper;
pub mod leftover;
pub mod notice;
mod observe;
mod on_key;
mod ptrace;
mod reader;
mod record;
pub mod report;
mod run;
mod seen;
mod sockets;
mod span;
mod stop;
pub mod target;
mod verdict;
mod watchdog;
mod witness;

use std::path::PathBuf;
use std::time::Duration;

pub use self::keeper::{WatchdogArgs, main as watchdog_main};
pub use self::report::FreezeReport;
pub use self::run::run;
pub use self::target::Frozen;
pub use self::verdict::Verdict;
use crate::config::{Config, NamespaceConfig, TargetConfig};

/// The longest freeze or observation the drill takes.
const MAX_SPAN: Duration = Duration::from_secs(3600);

/// How to run a freeze drill.
#[derive(Debug, Clone)]
pub struct Options {
    pub namespace: String,
    pub target: Option<String>,
    pub frozen: Frozen,
    /// `--for`: how long the freeze lasts; `None`: from the namespace's ttl.
    pub hold: Option<Duration>,
    /// `--observe`: how long after the thaw; `None`: from the namespace's renewal period.
    pub observe: Option<Duration>,
    pub exporter: String,
    pub prometheus: Option<String>,
    pub allow_production: bool,
    /// Run the `MONITOR` witness.
    pub monitor: bool,
    /// The file holding the exporter's push token, for telling it of the freeze.
    pub push_token_file: Option<PathBuf>,
    /// The `lockwatch` executable the watchdog runs from; `None`: this one.
    pub program: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum FreezeError {
    /// Exit 2: refused before anything was touched.
    #[error("{0}")]
    Usage(String),
    /// Exit 1: the drill could not be carried out (the worker is thawed).
    #[error("{0}")]
    Failed(String),
    /// Exit 3: the drill could not be carried out, and the thaw failed.
    #[error("{0}")]
    LeftFrozen(String),
}

/// A freeze drill, settled before anything is touched.
#[derive(Debug)]
pub struct Plan<'a> {
    pub target: &'a TargetConfig,
    pub ns: &'a NamespaceConfig,
    pub opts: Options,
    pub hold: Duration,
    pub observe: Duration,
    /// How long the witness watches before the freeze (to see which locks the worker renews).
    pub lead: Duration,
}

impl Plan<'_> {
    /// What the question before freezing names.
    pub fn question(&self) -> String {
        format!(
            "freeze {} for {} (target {}, namespace {}), then watch it {} after the thaw?",
            self.opts.frozen.describe(),
            crate::duration::format(self.hold),
            self.target.name,
            self.ns.name,
            crate::duration::format(self.observe)
        )
    }
}

/// The target and namespace, the production guard, the durations, and an exporter that
/// can see what the drill needs; any refusal is a [`FreezeError::Usage`].
pub async fn plan<'a>(config: &'a Config, opts: Options) -> Result<Plan<'a>, FreezeError> {
    let target = super::plan::pick_target(
        config,
        opts.target.as_deref(),
        opts.allow_production,
        "the freeze drill stops a real worker and lets its locks expire",
    )
    .map_err(FreezeError::Usage)?;
    let ns = config
        .namespace(&opts.namespace)
        .ok_or_else(|| FreezeError::Usage(format!("no namespace `{}` in the config", opts.namespace)))?;
    let hold = opts.hold.unwrap_or_else(|| default_hold(ns.ttl));
    let observe = opts.observe.unwrap_or_else(|| default_observe(ns));
    for (flag, d) in [("--for", hold), ("--observe", observe)] {
        if d.is_zero() || d > MAX_SPAN {
            return Err(FreezeError::Usage(format!(
                "{flag} {}: between 1s and 1h",
                crate::duration::format(d)
            )));
        }
    }
    if let Some(port) = local_port(&opts.exporter)
        && sockets::listens_on(&opts.frozen.pids(), port)
    {
        return Err(FreezeError::Usage(format!(
            "refusing to freeze {}: it serves the exporter at {} that the drill reads (run the drill against a worker, with lockwatch serve in another process)",
            opts.frozen.spec(),
            opts.exporter
        )));
    }
    let exporter = observe::Exporter::new(&opts.exporter, &target.name, &ns.name);
    if let Some(why) = exporter.unfit().await {
        return Err(FreezeError::Usage(format!("refusing to freeze: {why}")));
    }
    let lead = match opts.monitor {
        true => lead(ns),
        false => Duration::ZERO,
    };
    Ok(Plan {
        target,
        ns,
        opts,
        hold,
        observe,
        lead,
    })
}

/// The port of an exporter URL on this host (`localhost`, `127.*`, `::1`), if so.
fn local_port(url: &str) -> Option<u16> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let local = host == "localhost" || host.starts_with("127.") || host == "::1" || host == "0.0.0.0";
    local.then(|| port.parse().ok()).flatten()
}

/// Before the freeze, the witness watches one renewal period (`renew_every`, else a third
/// of the TTL), between 1 s and 10 s: long enough to see the worker renew its locks.
fn lead(ns: &NamespaceConfig) -> Duration {
    ns.renew_every
        .unwrap_or(ns.ttl / 3)
        .clamp(Duration::from_secs(1), Duration::from_secs(10))
}

/// Long enough for the TTL to run out and another holder to take over: twice the TTL
/// plus a second, at least 3 s.
pub fn default_hold(ttl: Duration) -> Duration {
    (ttl * 2 + Duration::from_secs(1)).max(Duration::from_secs(3))
}

/// Enough for the woken worker's next renewal and a release: two renewal periods
/// (`renew_every`, else a third of the TTL), at least the TTL and 3 s, plus 2 s for its
/// log lines to reach lockwatch.
pub fn default_observe(ns: &NamespaceConfig) -> Duration {
    let period = ns.renew_every.unwrap_or(ns.ttl / 3);
    (period * 2).max(ns.ttl).max(Duration::from_secs(3)) + Duration::from_secs(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_exporters_are_known_by_their_port() {
        assert_eq!(local_port("http://127.0.0.1:9747"), Some(9747));
        assert_eq!(local_port("http://localhost:9747/"), Some(9747));
        assert_eq!(local_port("https://[::1]:443/x"), Some(443));
        assert_eq!(local_port("http://lockwatch:9747"), None);
        assert_eq!(local_port("http://127.0.0.1"), None);
    }

    #[test]
    fn defaults_follow_the_namespace() {
        assert_eq!(default_hold(Duration::from_secs(3)), Duration::from_secs(7));
        assert_eq!(default_hold(Duration::from_millis(500)), Duration::from_secs(3));
        let text = "[[target]]\nname = \"s\"\nurl = \"redis://127.0.0.1:1\"\n[[namespace]]\nname = \"payout\"\npattern = \"lock:*\"\nttl = \"30s\"\nrenew_every = \"5s\"\n";
        let c = Config::from_toml(text, "t.toml", std::path::Path::new("."), &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let ns = c.namespace("payout").unwrap_or_else(|| panic!("no namespace"));
        assert_eq!(default_observe(ns), Duration::from_secs(32));
        assert_eq!(default_hold(ns.ttl), Duration::from_secs(61));
    }
}
