//! `lockwatch inspect`: the runbook's "inspect owner and TTL" step. For a key: its type,
//! owner, PTTL read against the namespace's TTL and renewal cadence, fencing token, and
//! recent lifecycle (from a running exporter). For a namespace: its held locks, those
//! closest to expiry first, overdue and TTL-less ones marked.
//!
//! Reads Redis directly (what is true now) and never writes. `render` prints.

mod render;

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};

use crate::access::probe;
use crate::access::read::{self, KeyRead};
use crate::config::{Config, NamespaceConfig, TargetConfig, ValueKind};
use crate::locks::ttl;

pub use render::{Format, render_key, render_namespace};

#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("give a KEY or --namespace NS (or both, to check the key is in that namespace)")]
    NothingAsked,
    #[error("no target `{0}` in the config")]
    UnknownTarget(String),
    #[error("the config has {0} targets; choose one with --target")]
    WhichTarget(usize),
    #[error("no namespace `{asked}` in the config; configured: {known}")]
    UnknownNamespace { asked: String, known: String },
    #[error("key `{key}` does not match namespace {namespace}'s pattern `{pattern}`")]
    NotInNamespace {
        key: String,
        namespace: String,
        pattern: String,
    },
    #[error("target {target} ({url}): {source}")]
    Redis {
        target: String,
        url: String,
        source: redis::RedisError,
    },
    #[error("target {target} ({url}): no answer within {secs}s")]
    Timeout { target: String, url: String, secs: u64 },
}

/// What to inspect, from the command line.
#[derive(Debug, Clone)]
pub struct Request {
    pub key: Option<String>,
    pub namespace: Option<String>,
    pub target: Option<String>,
    pub show_owner: bool,
    /// Base URL of a running exporter, for history.
    pub exporter: Option<String>,
    pub limit: usize,
}

/// How a held lock stands against its namespace's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Expiring, with at least the renewal margin left (or not renewed at all).
    Ok,
    /// Renewed locks below `ttl - renew_every - grace`: the holder missed a renewal.
    Overdue,
    /// No expiry: never freed if the holder dies.
    NoTtl,
}

#[derive(Debug, Clone, Serialize)]
pub struct KeyReport {
    pub target: String,
    pub url: String,
    /// How `redis-cli` reaches the key: `-u '<url>'`, or a cluster node with `-c`.
    pub cli: String,
    pub key: String,
    pub namespace: Option<String>,
    /// Redis type (`string`, `hash`, … or `none` when the key does not exist).
    pub redis_type: String,
    /// Owner token, redacted unless asked for.
    pub owner: Option<String>,
    pub owner_bytes: Option<usize>,
    pub pttl_ms: Option<i64>,
    pub standing: Option<Standing>,
    pub ttl_ms: Option<u64>,
    pub renew_every_ms: Option<u64>,
    pub overdue_below_ms: Option<u64>,
    pub fence_key: Option<String>,
    pub fence: Option<String>,
    /// Why the key is not a readable lock, if it is not.
    pub problem: Option<String>,
    pub history: History,
}

/// Recent transitions from the exporter, or why there are none.
#[derive(Debug, Clone, Serialize, Default)]
pub struct History {
    pub source: Option<String>,
    pub transitions: Vec<Transition>,
    pub unavailable: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Transition {
    pub target: String,
    pub at: String,
    pub at_ms: i64,
    pub kind: String,
    pub owner_hash: Option<String>,
    pub takeover: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeldLock {
    pub key: String,
    pub owner: String,
    pub pttl_ms: i64,
    pub standing: Standing,
    pub fence: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NamespaceReport {
    pub target: String,
    pub url: String,
    pub namespace: String,
    pub pattern: String,
    pub ttl_ms: u64,
    pub overdue_below_ms: Option<u64>,
    pub held: usize,
    pub overdue: usize,
    pub without_ttl: usize,
    pub unreadable: usize,
    /// The first `limit` locks: without TTL first, then the least time left.
    pub locks: Vec<HeldLock>,
}

/// What `inspect` found.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Report {
    Key(Box<KeyReport>),
    Namespace(NamespaceReport),
}

impl Report {
    /// Exit status: a key that does not exist is "unhealthy" (1).
    pub fn healthy(&self) -> bool {
        match self {
            Report::Key(k) => k.redis_type != "none",
            Report::Namespace(_) => true,
        }
    }
}

const TIMEOUT: Duration = crate::access::connect::TIMEOUT;

pub async fn run(config: &Config, req: &Request) -> Result<Report, InspectError> {
    let target = pick_target(config, req.target.as_deref())?;
    let asked_ns = match &req.namespace {
        Some(name) => Some(config.namespace(name).ok_or_else(|| {
            InspectError::UnknownNamespace {
                asked: name.clone(),
                known: config
                    .namespaces
                    .iter()
                    .map(|n| n.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        })?),
        None => None,
    };
    match (&req.key, asked_ns) {
        (Some(key), ns) => {
            let routed = within(target, crate::access::cluster::routed(target, TIMEOUT)).await?;
            let ns = match ns {
                Some(n) if !n.pattern.matches(key.as_bytes()) => {
                    return Err(InspectError::NotInNamespace {
                        key: key.clone(),
                        namespace: n.name.clone(),
                        pattern: n.pattern.as_str().to_string(),
                    });
                }
                Some(n) => Some(n),
                None => config.namespaces.iter().find(|n| n.pattern.matches(key.as_bytes())),
            };
            // A cluster's key and its fencing counter may live on different nodes: routed.
            let mut report = match routed {
                Some(mut routed) => within(target, inspect_key(&mut routed, target, ns, key, req.show_owner)).await?,
                None => {
                    let mut conn = within(target, crate::access::connect::once(target)).await?;
                    within(target, inspect_key(&mut conn, target, ns, key, req.show_owner)).await?
                }
            };
            report.history = match ns {
                Some(_) => history(config, target, key, req.exporter.as_deref()).await,
                None => History {
                    unavailable: Some("the key matches no namespace, so lockwatch keeps no history of it".into()),
                    ..History::default()
                },
            };
            Ok(Report::Key(Box::new(report)))
        }
        (None, Some(ns)) => {
            let mut conns = within(target, crate::access::connect::primaries(target)).await?;
            Ok(Report::Namespace(
                within(
                    target,
                    inspect_namespace(&mut conns, target, ns, req.show_owner, req.limit),
                )
                .await?,
            ))
        }
        (None, None) => Err(InspectError::NothingAsked),
    }
}

/// `f` within the time limit, its errors named after the target.
async fn within<T>(target: &TargetConfig, f: impl Future<Output = redis::RedisResult<T>>) -> Result<T, InspectError> {
    tokio::time::timeout(TIMEOUT, f)
        .await
        .map_err(|_| InspectError::Timeout {
            target: target.name.clone(),
            url: target.display_url.clone(),
            secs: TIMEOUT.as_secs(),
        })?
        .map_err(|source| InspectError::Redis {
            target: target.name.clone(),
            url: target.display_url.clone(),
            source,
        })
}

fn pick_target<'a>(config: &'a Config, name: Option<&str>) -> Result<&'a TargetConfig, InspectError> {
    config.target(name).map_err(|e| match e {
        crate::config::TargetChoice::Unknown(n) => InspectError::UnknownTarget(n),
        crate::config::TargetChoice::Which(n) => InspectError::WhichTarget(n),
    })
}

/// `redis-cli` options for `target` (passwords left out, as in the shown URL).
fn cli_options(target: &TargetConfig) -> String {
    match (&target.topology, crate::access::NodeAddr::of(&target.connection)) {
        (crate::config::Topology::Cluster { .. }, Some(a)) => {
            format!("-c {}-h {} -p {}", target.cli_tls(false), a.host, a.port)
        }
        _ => format!("{}-u '{}'", target.cli_tls(true), target.display_url),
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn standing(ns: &NamespaceConfig, pttl_ms: i64) -> Standing {
    if pttl_ms == -1 {
        Standing::NoTtl
    } else if ttl::renewal_overdue(pttl_ms, ns.overdue_below()) {
        Standing::Overdue
    } else {
        Standing::Ok
    }
}

fn show(owner: &[u8], show_owner: bool) -> String {
    if show_owner {
        String::from_utf8_lossy(owner).into_owned()
    } else {
        "<redacted>".to_string()
    }
}

async fn inspect_key(
    conn: &mut impl redis::aio::ConnectionLike,
    target: &TargetConfig,
    ns: Option<&NamespaceConfig>,
    key: &str,
    show_owner: bool,
) -> redis::RedisResult<KeyReport> {
    let (redis_type, pttl_ms) = probe::type_and_pttl(conn, key).await?;
    let mut r = KeyReport {
        target: target.name.clone(),
        url: target.display_url.clone(),
        cli: cli_options(target),
        key: key.to_string(),
        namespace: ns.map(|n| n.name.clone()),
        redis_type: redis_type.clone(),
        owner: None,
        owner_bytes: None,
        pttl_ms: (pttl_ms != -2).then_some(pttl_ms),
        standing: None,
        ttl_ms: ns.map(|n| ms(n.ttl)),
        renew_every_ms: ns.and_then(|n| n.renew_every.map(ms)),
        overdue_below_ms: ns.and_then(|n| n.overdue_below().map(ms)),
        fence_key: None,
        fence: None,
        problem: None,
        history: History::default(),
    };
    if let Some(ns) = ns
        && let Some(fk) = ns.fence_map().key_for(key.as_bytes())
    {
        r.fence = probe::texts(conn, std::slice::from_ref(&fk)).await?.pop().flatten();
        r.fence_key = Some(String::from_utf8_lossy(&fk).into_owned());
    }
    if redis_type == "none" {
        return Ok(r);
    }
    let kind = ns.map(|n| n.value.clone()).unwrap_or(ValueKind::Token);
    let owner = probe::owner_of(conn, key, &redis_type, &kind).await?;
    match owner {
        Ok(o) => {
            r.owner_bytes = Some(o.len());
            r.owner = Some(show(&o, show_owner));
            r.standing = ns.map(|n| standing(n, pttl_ms));
        }
        Err(p) => r.problem = Some(p),
    }
    Ok(r)
}

/// The namespace's locks on every primary (`conns`). On a cluster, keys of different slots
/// cannot share a MULTI or an MGET: each is read on its own.
async fn inspect_namespace(
    conns: &mut [(String, MultiplexedConnection)],
    target: &TargetConfig,
    ns: &NamespaceConfig,
    show_owner: bool,
    limit: usize,
) -> redis::RedisResult<NamespaceReport> {
    let mut locks = Vec::new();
    let mut unreadable = 0;
    let fences = ns.fence_map();
    // On a cluster, keys are read through the routed connection (a key may move meanwhile).
    let mut routed = crate::access::cluster::routed(target, crate::access::connect::TIMEOUT).await?;
    for (_, conn) in conns.iter_mut() {
        let mut cursor = 0u64;
        loop {
            let (next, keys) = read::scan_page(conn, ns.pattern.as_str(), cursor, target.scan_count).await?;
            let fence_keys: Vec<Vec<u8>> = keys.iter().filter_map(|k| fences.key_for(k)).collect();
            let (reads, fence_values) = match &mut routed {
                None => (
                    read::read_locks(conn, &ns.value, &keys).await?,
                    probe::texts(conn, &fence_keys).await?,
                ),
                Some(routed) => {
                    let mut reads = Vec::with_capacity(keys.len());
                    for k in &keys {
                        reads.push(read::read_one(routed, &ns.value, k).await?);
                    }
                    let mut values = Vec::with_capacity(fence_keys.len());
                    for k in &fence_keys {
                        values.extend(probe::texts(routed, std::slice::from_ref(k)).await?);
                    }
                    (reads, values)
                }
            };
            let mut fence_values = fence_values.iter();
            for (key, read) in keys.iter().zip(reads) {
                let fence = fences.key_for(key).and_then(|_| fence_values.next()).cloned().flatten();
                match read {
                    KeyRead::Lock { owner, pttl_ms } => locks.push(HeldLock {
                        key: String::from_utf8_lossy(key).into_owned(),
                        owner: show(&owner, show_owner),
                        pttl_ms,
                        standing: standing(ns, pttl_ms),
                        fence,
                    }),
                    // `read_locks` reads owner and TTL: never an owner alone.
                    KeyRead::Gone | KeyRead::Owner(_) => {}
                    KeyRead::Unreadable(_) => unreadable += 1,
                }
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
    }
    // SCAN may return a key twice.
    locks.sort_by(|a, b| a.key.cmp(&b.key));
    locks.dedup_by(|a, b| a.key == b.key);
    locks.sort_by_key(|l| (l.standing != Standing::NoTtl, l.pttl_ms));
    let overdue = locks.iter().filter(|l| l.standing == Standing::Overdue).count();
    let without_ttl = locks.iter().filter(|l| l.standing == Standing::NoTtl).count();
    let held = locks.len();
    locks.truncate(limit);
    Ok(NamespaceReport {
        target: target.name.clone(),
        url: target.display_url.clone(),
        namespace: ns.name.clone(),
        pattern: ns.pattern.as_str().to_string(),
        ttl_ms: ms(ns.ttl),
        overdue_below_ms: ns.overdue_below().map(ms),
        held,
        overdue,
        without_ttl,
        unreadable,
        locks,
    })
}

#[derive(Deserialize)]
struct HistoryBody {
    transitions: Vec<Transition>,
}

/// The exporter's history of `key`: from `--exporter`, else from the config's listen address.
async fn history(config: &Config, target: &TargetConfig, key: &str, exporter: Option<&str>) -> History {
    let base = match exporter {
        Some(u) => u.trim_end_matches('/').to_string(),
        None => {
            let mut addr = config.server.listen;
            if addr.ip().is_unspecified() {
                addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            format!("http://{addr}")
        }
    };
    let mut h = History {
        source: Some(base.clone()),
        ..History::default()
    };
    let client = match reqwest::Client::builder().timeout(Duration::from_secs(3)).build() {
        Ok(c) => c,
        Err(e) => {
            h.unavailable = Some(e.to_string());
            return h;
        }
    };
    let got = client
        .get(format!("{base}/api/v1/locks/history"))
        .query(&[("key", key), ("target", target.name.as_str())])
        .send()
        .await;
    match got {
        Ok(resp) if resp.status().is_success() => match resp.json::<HistoryBody>().await {
            Ok(body) => h.transitions = body.transitions,
            Err(e) => h.unavailable = Some(format!("unreadable answer: {e}")),
        },
        Ok(resp) => {
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            h.unavailable = Some(format!("{status}: {}", text.trim()));
        }
        Err(e) if e.is_connect() || e.is_timeout() => {
            h.unavailable =
                Some("no exporter answers there (is `lockwatch serve` running? else pass --exporter URL)".into())
        }
        Err(e) => h.unavailable = Some(e.to_string()),
    }
    h
}
