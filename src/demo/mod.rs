//! `lockwatch demo`: everything on one machine with nothing configured — a private
//! `redis-server` child, simulated workers in three namespaces, and the exporter.
//!
//! The demo's config is ordinary TOML (written next to the child's data, and printed), so
//! what the demo shows is what the same config does in production.

mod workers;

use std::path::Path;
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio_util::sync::CancellationToken;

use crate::access::child::{ChildError, RedisChild};
use crate::config::{Config, ConfigError, Overrides};
use workers::{AppLog, Profile};

#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    #[error(transparent)]
    Redis(#[from] ChildError),
    #[error("demo config: {0}")]
    Config(#[from] ConfigError),
    #[error("cannot listen on {addr}: {source} (pass --listen 127.0.0.1:0 for any free port)")]
    Listen { addr: String, source: std::io::Error },
    #[error("demo: {0}")]
    Io(#[from] std::io::Error),
    #[error("demo: cannot talk to the private redis-server: {0}")]
    Client(#[from] redis::RedisError),
    #[error(transparent)]
    Serve(#[from] crate::serve::ServeError),
}

/// The demo's config; `{url}` and `{listen}` are filled in.
const DEMO_CONFIG: &str = r#"# lockwatch demo config: three namespaces of simulated workers.
[server]
listen = "{listen}"

[[target]]
name = "demo"
environment = "demo"
url = "{url}"
sample_interval = "1s"
sample_budget = "900ms"
notifications = "auto"

[[namespace]]
name = "workflow"                      # long runs, renewed every TTL/3, with fencing tokens
pattern = "demo:wf:run:lock:*"
ttl = "6s"
renew_every = "2s"
max_hold = "20s"
fence_pattern = "demo:wf:run:fence:*"
log_phrases = ["run lock"]

[[namespace]]
name = "approval"                      # short locks, never renewed
pattern = "demo:approval:lock:*"
ttl = "3s"
log_phrases = ["approval lock"]

[[namespace]]
name = "reconciler"                    # a leader lock renewed every 3s, and one orphan with no TTL
pattern = "demo:reconciler:lock:*"
ttl = "9s"
renew_every = "3s"
max_hold = "60s"
log_phrases = ["reconciler lock"]

[[logs]]
name = "workers"                       # the simulated workers' log (logfmt), beside this file
path = "app.log"
start_at = "beginning"
"#;

/// Where the demo listens and which `redis-server` it starts.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// Address for the demo exporter.
    pub(crate) listen: String,
    /// Path of redis-server, when it is not on PATH.
    pub(crate) redis_server: Option<std::path::PathBuf>,
}

pub(crate) async fn run(args: &Options, shutdown: CancellationToken) -> Result<(), DemoError> {
    let redis = RedisChild::start(args.redis_server.as_deref(), &["--notify-keyspace-events", "KEA"])?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|source| DemoError::Listen {
            addr: args.listen.clone(),
            source,
        })?;
    let addr = listener.local_addr()?;
    let text = DEMO_CONFIG
        .replace("{url}", &redis.url())
        .replace("{listen}", &addr.to_string());
    let config_path = redis.dir().join("lockwatch.toml");
    std::fs::write(&config_path, &text)?;
    let config = Config::from_toml(
        &text,
        &config_path.display().to_string(),
        redis.dir(),
        &Overrides::default(),
    )?;

    let client = redis::Client::open(redis.url())?;
    let conn = ConnectionManager::new(client).await?;
    // A lock whose holder used SET without PX and died: nothing will ever free it.
    redis::cmd("SET")
        .arg("demo:reconciler:lock:orphan")
        .arg("reconciler-crashed-7f3a")
        .query_async::<()>(&mut conn.clone())
        .await?;

    let log_path = redis.dir().join("app.log");
    let log = AppLog::create(&log_path)?;
    let stop = shutdown.child_token();
    let mut tasks = tokio::task::JoinSet::new();
    for (profile, count) in profiles() {
        for i in 0..count {
            let name = format!("{}-{i}", profile.label);
            tasks.spawn(workers::run(
                name,
                profile.clone(),
                conn.clone(),
                log.clone(),
                stop.clone(),
            ));
        }
    }
    print_banner(&redis, addr, &config_path, &log_path);
    let served = crate::serve::run(listener, config, shutdown.clone()).await;
    stop.cancel();
    while tasks.join_next().await.is_some() {}
    drop(redis); // kills the child and removes its directory
    eprintln!("demo stopped; redis-server killed and its directory removed");
    Ok(served?)
}

fn profiles() -> Vec<(Profile, usize)> {
    vec![
        (
            Profile {
                label: "wf",
                prefix: "demo:wf:run:lock:",
                fence_prefix: Some("demo:wf:run:fence:"),
                jobs: 6,
                ttl: Duration::from_secs(6),
                renew_every: Some(Duration::from_secs(2)),
                hold_ms: (3_000, 12_000),
                stall_percent: 12,
                phrase: "run lock",
            },
            4,
        ),
        (
            Profile {
                label: "approver",
                prefix: "demo:approval:lock:",
                fence_prefix: None,
                jobs: 3,
                ttl: Duration::from_secs(3),
                renew_every: None,
                hold_ms: (300, 2_000),
                stall_percent: 8,
                phrase: "approval lock",
            },
            3,
        ),
        (
            Profile {
                label: "reconciler",
                prefix: "demo:reconciler:lock:leader",
                fence_prefix: None,
                jobs: 1,
                ttl: Duration::from_secs(9),
                renew_every: Some(Duration::from_secs(3)),
                hold_ms: (15_000, 40_000),
                stall_percent: 15,
                phrase: "reconciler lock",
            },
            2,
        ),
    ]
}

fn print_banner(redis: &RedisChild, addr: std::net::SocketAddr, config: &Path, log: &Path) {
    let port = redis.port();
    println!(
        "lockwatch demo is running.

  exporter      http://{addr}/          status page
                http://{addr}/metrics   Prometheus metrics
                http://{addr}/api/v1/locks?namespace=workflow
  redis-server  127.0.0.1:{port}         try: redis-cli -p {port} --scan --pattern 'demo:*'
  config        {config}
  worker log    {log}
  inspect       lockwatch inspect -c {config} --exporter http://{addr} --namespace workflow
                lockwatch inspect -c {config} --exporter http://{addr} demo:approval:lock:0

What to expect within a minute:
  lockwatch_up{{target=\"demo\"}} 1
  lockwatch_locks_without_ttl{{namespace=\"reconciler\"}} 1       the orphaned lock nobody will free
  lockwatch_locks_renewal_overdue{{namespace=\"workflow\"}} > 0   now and then, while a worker stalls
  lockwatch_lock_handoffs_total                                 grows as locks change hands
  lockwatch_fence_token{{namespace=\"workflow\"}}                 climbs with every acquisition
  lockwatch_lock_transitions_total{{kind=\"acquired\"}}            keyspace notifications, as they happen
  lockwatch_lock_expiry_takeovers_total                         a stalled worker's lock expired and another took it
  'renewal failed' / 'release failed' lines in the worker log    the stale holders waking up,
  lockwatch_lock_events_total{{outcome=\"not_owned\"}}             counted from that log by the event intake
  'busy, will retry' lines in the worker log                    workers waiting their turn: contention, the lock
  lockwatch_lock_events_total{{op=\"acquire\",outcome=\"busy\"}}     working; the status page shows it apart, never as failures

Ctrl-C stops the workers and the exporter, kills redis-server and removes its directory.",
        config = config.display(),
        log = log.display()
    );
}
