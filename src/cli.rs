//! The command line: clap definitions, each flag with its `LOCKWATCH_*` fallback.
//!
//! Parsing only; `main` dispatches. `LOCKWATCH_REDIS_PASSWORD` is read from the
//! environment and never taken as a flag, so a secret never has to be on the command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::{Overrides, Secret};

/// `lockwatch --version`: the package version and the git commit it was built from
/// (`build.rs`; `unknown` outside a git checkout).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("LOCKWATCH_GIT_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "lockwatch",
    version = VERSION,
    about = "Exporter and runbook tool for distributed locks kept in Redis"
)]
pub struct Cli {
    /// Log output: human-readable text or one JSON object per line.
    #[arg(long, env = "LOCKWATCH_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// Log filter, e.g. `info` or `lockwatch=debug`.
    #[arg(long, env = "LOCKWATCH_LOG_LEVEL", default_value = "info", global = true)]
    pub log_level: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the exporter: sampler and HTTP server.
    Serve(ServeArgs),
    /// Validate a config file; with --connect, also check each target.
    CheckConfig(CheckConfigArgs),
    /// Inspect a lock key (type, owner, TTL, fence, recent lifecycle) or a namespace's locks.
    Inspect(InspectArgs),
    /// Print, per log line, the lock event it maps to or why it was ignored.
    Classify(ClassifyArgs),
    /// Render the alert and recording rules with this config's thresholds.
    Rules(RulesArgs),
    /// Guided staging rehearsal of the stale-holder incident (TTL expiry, stale release,
    /// renew failure, stale fenced write) with a real paused worker.
    Drill(Box<DrillArgs>),
    /// Per namespace: hold durations, renewal intervals, TTL headroom, stalls and takeovers
    /// seen, and the ttl, renew_every and renew_grace that would have survived them.
    Advise(AdviseArgs),
    /// Which keys of a live Redis look like locks: a budgeted SCAN sample, patterns with
    /// their TTLs and value shapes, and a ready `[[namespace]]` config. Read-only.
    Discover(DiscoverArgs),
    /// Worker A of a drill (started by `lockwatch drill`).
    #[command(hide = true)]
    DrillWorker(DrillWorkerArgs),
    /// The watchdog of a freeze drill (started by `lockwatch drill --freeze`).
    #[command(hide = true)]
    DrillWatchdog(DrillWatchdogArgs),
    /// Self-contained demo: a private redis-server, simulated workers, the exporter.
    Demo(DemoArgs),
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Config file (TOML); required by every command but `drill --thaw`.
    #[arg(short = 'c', long, env = "LOCKWATCH_CONFIG")]
    pub config: Option<PathBuf>,
    /// Redis URL replacing the url of the config's only target.
    #[arg(long, env = "LOCKWATCH_REDIS_URL")]
    pub redis_url: Option<String>,
    /// File holding the Redis password, for targets without a password_file of their own.
    #[arg(long, env = "LOCKWATCH_REDIS_PASSWORD_FILE")]
    pub redis_password_file: Option<PathBuf>,
}

impl ConfigArgs {
    pub fn overrides(&self, listen: Option<String>) -> Overrides {
        Overrides {
            listen,
            redis_url: self.redis_url.clone(),
            redis_password: std::env::var("LOCKWATCH_REDIS_PASSWORD")
                .ok()
                .filter(|p| !p.is_empty())
                .map(Secret::new),
            redis_password_file: self.redis_password_file.clone(),
            web_config_file: None,
        }
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Address for /metrics and the API, e.g. `0.0.0.0:9747` or `:9747`.
    #[arg(long, env = "LOCKWATCH_LISTEN")]
    pub listen: Option<String>,
    /// Web config file (Prometheus exporter-toolkit format): TLS and basic auth for every
    /// path but /healthz. Replaces `[server] web_config_file`.
    #[arg(long = "web.config.file", env = "LOCKWATCH_WEB_CONFIG_FILE")]
    pub web_config_file: Option<PathBuf>,
    /// Reload the config on `POST /-/reload` (as Prometheus); without it that path answers
    /// 403. SIGHUP reloads either way.
    #[arg(long = "web.enable-lifecycle", env = "LOCKWATCH_WEB_ENABLE_LIFECYCLE")]
    pub enable_lifecycle: bool,
}

#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Also connect to each target: reachability, keyspace notifications, permissions.
    #[arg(long, env = "LOCKWATCH_CONNECT")]
    pub connect: bool,
    /// The web config `serve` is given, checked too (replaces `[server] web_config_file`).
    #[arg(long = "web.config.file", env = "LOCKWATCH_WEB_CONFIG_FILE")]
    pub web_config_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The lock key to inspect.
    pub key: Option<String>,
    /// List this namespace's held locks (with a KEY: check the key belongs to it).
    #[arg(long, env = "LOCKWATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Which target, when the config has several.
    #[arg(long, env = "LOCKWATCH_TARGET")]
    pub target: Option<String>,
    /// Print owner tokens instead of redacting them (they can release the lock).
    #[arg(long, env = "LOCKWATCH_SHOW_OWNER")]
    pub show_owner: bool,
    /// A running exporter, for the key's recent lifecycle [default: the config's listen address].
    #[arg(long, env = "LOCKWATCH_EXPORTER")]
    pub exporter: Option<String>,
    /// Output format.
    #[arg(long, env = "LOCKWATCH_FORMAT", value_enum, default_value_t = crate::inspect::Format::Text)]
    pub format: crate::inspect::Format,
    /// Locks listed for a namespace, closest to expiry first.
    #[arg(long, env = "LOCKWATCH_LIMIT", default_value_t = 50)]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct ClassifyArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Log file to classify; `-` (the default) reads stdin.
    #[arg(default_value = "-")]
    pub file: PathBuf,
    /// How to read lines (`auto` decides per line).
    #[arg(
        long = "input-format",
        visible_alias = "as",
        env = "LOCKWATCH_INPUT_FORMAT",
        value_enum,
        default_value_t = crate::config::LogFormat::Auto
    )]
    pub input_format: crate::config::LogFormat,
    /// Whether a traceback's or stack trace's lines join the line that starts their record
    /// (as `multiline` of a `[[logs]]` source).
    #[arg(long, env = "LOCKWATCH_MULTILINE", value_enum, default_value_t = crate::config::Multiline::Auto)]
    pub multiline: crate::config::Multiline,
    /// Print only the count of each kind of lock event (and the line totals), not each line.
    #[arg(long)]
    pub summary: bool,
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Write lockwatch-recording.rules.yml and lockwatch-alerts.rules.yml here instead of
    /// printing both groups as one file (with --format prometheus-operator, the one manifest).
    #[arg(long, env = "LOCKWATCH_RULES_OUT")]
    pub out: Option<PathBuf>,
    /// `prometheus`: rule files for `rule_files:`; `prometheus-operator`: one PrometheusRule
    /// resource (with --out: lockwatch-prometheusrule.yaml).
    #[arg(long, env = "LOCKWATCH_RULES_FORMAT", value_enum, default_value_t = crate::rules::Format::Prometheus)]
    pub format: crate::rules::Format,
}

#[derive(Debug, Args)]
pub struct DrillArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The configured namespace whose pattern, fence_pattern and ttl the drill uses.
    #[arg(long, env = "LOCKWATCH_DRILL_NAMESPACE", default_value = "drill")]
    pub namespace: String,
    /// What to rehearse: worker A frozen past the TTL (stale-holder), its renewal held in
    /// the network past the TTL (network-delay), or both at once (pause-and-delay).
    #[arg(long, env = "LOCKWATCH_DRILL_SCENARIO", value_enum, default_value_t = crate::drill::Scenario::StaleHolder)]
    pub scenario: crate::drill::Scenario,
    /// Which target, when the config has several.
    #[arg(long, env = "LOCKWATCH_TARGET")]
    pub target: Option<String>,
    /// A running lockwatch exporter: its counters must move by the expected amounts.
    #[arg(long, env = "LOCKWATCH_EXPORTER")]
    pub exporter: Option<String>,
    /// Prometheus: report the state of the lock alerts.
    #[arg(long, env = "LOCKWATCH_PROMETHEUS")]
    pub prometheus: Option<String>,
    /// Explain each step and wait for Enter before running it.
    #[arg(long, conflicts_with = "yes")]
    pub interactive: bool,
    /// Run straight through without asking.
    #[arg(long)]
    pub yes: bool,
    /// Output format of the report on stdout (html: one self-contained page).
    #[arg(long, value_enum, default_value_t = DrillFormat::Text)]
    pub format: DrillFormat,
    /// Also write the report to this file: HTML for a name ending in .html or .htm (one
    /// self-contained page with the timeline), text for .txt, else markdown (a drill record).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The application's release script (KEYS[1] lock, ARGV[1] token; 1 = released).
    #[arg(long)]
    pub release_script: Option<PathBuf>,
    /// The application's renew script (KEYS[1] lock, ARGV[1] token, ARGV[2] ttl ms; 1 = renewed).
    #[arg(long)]
    pub renew_script: Option<PathBuf>,
    /// Repeat the scenario's cycles this long (e.g. 15m), to rehearse the sustained-ratio alert.
    #[arg(long, requires = "rate")]
    pub sustain: Option<String>,
    /// Cycles per minute in --sustain mode.
    #[arg(long, requires = "sustain")]
    pub rate: Option<u32>,
    /// Run against a target marked environment = "production".
    #[arg(long)]
    pub allow_production: bool,
    /// Remove what interrupted runs left in the drill namespace (their locks, fencing
    /// counters and resources), say what was removed, and exit. Not while a drill runs there.
    #[arg(long, conflicts_with_all = ["interactive", "sustain", "exporter", "prometheus", "release_script", "renew_script", "report"])]
    pub cleanup: bool,
    /// With --cleanup: only the keys of this run (the id the drill printed first).
    #[arg(long, requires = "cleanup")]
    pub run: Option<String>,
    /// Thaw what a freeze drill left frozen (its exit 3 names it) and confirm: `pid:N` (a
    /// stuck watchdog holding it is killed, then SIGCONT) or `cgroup:PATH`; with --exporter,
    /// the exporter is told (its `LockDrillLeftFrozen` ends). Exit 0 thawed, 3 not.
    #[arg(long, value_name = "TARGET", conflicts_with_all = ["freezing", "interactive", "sustain", "cleanup"])]
    pub thaw: Option<String>,
    /// Drill your own worker instead of lockwatch's: freeze it past its locks' TTL and judge
    /// what it does when it wakes. `pid:N` (every thread held in a ptrace stop, which the
    /// kernel ends if the drill's watchdog dies; SIGSTOP where ptrace is refused) or
    /// `cgroup:PATH` (the cgroup v2 or v1 freezer, as `docker pause` and `systemctl freeze`:
    /// a container or unit as a whole; PATH absolute or under /sys/fs/cgroup). Needs --exporter.
    #[arg(long, value_name = "TARGET", group = "freezing", requires = "exporter",
          conflicts_with_all = ["interactive", "sustain", "release_script", "renew_script", "cleanup"])]
    pub freeze: Option<String>,
    /// Instead of --freeze: a command that freezes the worker (run with `sh -c`, must exit 0),
    /// for anything else (`docker pause ID`, `kubectl exec … kill -STOP 1`, a remote host).
    #[arg(long, value_name = "CMD", group = "freezing", requires_all = ["thaw_cmd", "exporter"],
          conflicts_with_all = ["interactive", "sustain", "release_script", "renew_script", "cleanup"])]
    pub freeze_cmd: Option<String>,
    /// With --freeze-cmd: the command that thaws it (must exit 0).
    #[arg(long, value_name = "CMD", requires = "freeze_cmd")]
    pub thaw_cmd: Option<String>,
    /// With --freeze: how long the freeze lasts (default: twice the namespace's ttl plus 1s).
    #[arg(long = "for", value_name = "DURATION", requires = "freezing")]
    pub hold: Option<String>,
    /// With --freeze: how long to watch the woken worker (default: two renewal periods, at
    /// least the ttl, plus 2s); at least a job's length to measure all its exposure.
    #[arg(long, value_name = "DURATION", requires = "freezing")]
    pub observe: Option<String>,
    /// The file holding the exporter's push token (its `push_token_file`), for recording the
    /// result and telling it of a freeze; without it, credentials in the --exporter URL.
    #[arg(long, value_name = "FILE", env = "LOCKWATCH_PUSH_TOKEN_FILE")]
    pub push_token_file: Option<PathBuf>,
    /// The drill's name where --exporter records its result (`lockwatch_drill_*{drill=NAME}`,
    /// `/drills/NAME`): 1-64 of A-Z a-z 0-9 _ - . : [default: the namespace].
    #[arg(long, value_name = "NAME", env = "LOCKWATCH_DRILL_NAME", conflicts_with_all = ["cleanup", "thaw"])]
    pub name: Option<String>,
    /// Do not record the result at --exporter (by default a drill given --exporter records it).
    #[arg(long, requires = "exporter", conflicts_with = "name")]
    pub no_record: bool,
    /// With --freeze: no MONITOR witness (deletions are then told by the refusals after them,
    /// and no lock is judged stopped).
    #[arg(long, requires = "freezing")]
    pub no_monitor: bool,
}

/// The freeze drill's watchdog (started by `lockwatch drill --freeze`).
#[derive(Debug, Args)]
pub struct DrillWatchdogArgs {
    /// `pid:N` or `cgroup:PATH`.
    #[arg(long)]
    pub thaw: Option<String>,
    #[arg(long, requires = "thaw_cmd")]
    pub freeze_cmd: Option<String>,
    #[arg(long)]
    pub thaw_cmd: Option<String>,
    /// How long the freeze lasts, in milliseconds.
    #[arg(long)]
    pub hold_ms: u64,
    /// What to tell the exporter (JSON).
    #[arg(long)]
    pub notice: Option<String>,
}

#[derive(Debug, Args)]
pub struct AdviseArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Prometheus scraping lockwatch: what happened over --window.
    #[arg(
        long,
        env = "LOCKWATCH_PROMETHEUS",
        conflicts_with = "exporter",
        required_unless_present = "exporter"
    )]
    pub prometheus: Option<String>,
    /// A running lockwatch exporter instead: what happened since it started.
    #[arg(long, env = "LOCKWATCH_EXPORTER")]
    pub exporter: Option<String>,
    /// How far back to look in Prometheus (e.g. 7d, 24h).
    #[arg(long, env = "LOCKWATCH_WINDOW", default_value = "7d")]
    pub window: String,
    /// Only this namespace.
    #[arg(long, env = "LOCKWATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Output: text, the config snippet alone (toml), or json.
    #[arg(long, env = "LOCKWATCH_FORMAT", value_enum, default_value_t = AdviseFormat::Text)]
    pub format: AdviseFormat,
}

#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// The Redis to walk (`redis://` or `rediss://`; the password may come from
    /// LOCKWATCH_REDIS_PASSWORD). For a cluster, Sentinel or a private CA use -c and --target.
    #[arg(
        long,
        env = "LOCKWATCH_DISCOVER_URL",
        required_unless_present = "config",
        conflicts_with = "config"
    )]
    pub url: Option<String>,
    /// A config file whose target to walk (its TLS, cluster or Sentinel settings).
    #[arg(short = 'c', long, env = "LOCKWATCH_CONFIG")]
    pub config: Option<PathBuf>,
    /// Which target of the config, when it has several.
    #[arg(long, env = "LOCKWATCH_TARGET", requires = "config")]
    pub target: Option<String>,
    /// Keys per second walked, at most.
    #[arg(long, env = "LOCKWATCH_DISCOVER_RATE", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: u64,
    /// Keys walked in all, at most (shared among a cluster's primaries).
    #[arg(long, env = "LOCKWATCH_DISCOVER_MAX_KEYS", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_keys: u64,
    /// Output: text, the config alone (toml), or json.
    #[arg(long, env = "LOCKWATCH_FORMAT", value_enum, default_value_t = crate::discover::Format::Text)]
    pub format: crate::discover::Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AdviseFormat {
    Text,
    Toml,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DrillFormat {
    Text,
    Json,
    Markdown,
    Html,
}

#[derive(Debug, Args)]
pub struct DrillWorkerArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[arg(long)]
    pub target: String,
    #[arg(long)]
    pub namespace: String,
    #[arg(long)]
    pub exporter: Option<String>,
    /// A key of the run: on a cluster, the worker connects to the node serving its slot.
    #[arg(long)]
    pub key: Option<String>,
    /// Reach Redis through the drill's network proxy at this `host:port`.
    #[arg(long)]
    pub via: Option<String>,
    /// The drill's pid: the worker exits at once when that is not its parent (any more).
    #[arg(long)]
    pub parent: Option<i32>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Address for the demo exporter.
    #[arg(long, env = "LOCKWATCH_LISTEN", default_value = "127.0.0.1:9747")]
    pub listen: String,
    /// Path of redis-server, when it is not on PATH.
    #[arg(long, env = "LOCKWATCH_REDIS_SERVER")]
    pub redis_server: Option<PathBuf>,
}
