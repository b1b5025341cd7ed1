//! `lockwatch check-config`: print what a valid config means, and with `--connect` check
//! each target: reachable, keyspace notifications, and every permission `serve`, `inspect`
//! and this check need — each missing one named with the ACL rule that grants it.
//!
//! Loading (and its errors) belongs to `config`, the questions to Redis to `access`; this
//! command only asks and reports.

use std::io::Write;

use super::{CommandError, Status};
use crate::access::probe::{self, Missing};
use crate::cli::CheckConfigArgs;
use crate::config::{Config, NamespaceConfig, Notifications, TargetConfig, Topology, ValueKind};
use crate::duration::format as dur;

pub(super) async fn command(args: CheckConfigArgs) -> Result<Status, CommandError> {
    let config = super::load_served(&args.config, None, args.web_config_file.clone())?;
    let healthy = run(&config, args.connect, &mut std::io::stdout())
        .await
        .map_err(anyhow::Error::from)?;
    Ok(if healthy { Status::Fine } else { Status::Unhealthy })
}

/// Print the summary (and connection checks); `Ok(false)` when a check found a problem.
async fn run(config: &Config, connect: bool, out: &mut impl Write) -> std::io::Result<bool> {
    writeln!(
        out,
        "{}: OK — {} target(s), {} namespace(s), {} log source(s), {} rule(s); listen {}",
        config.source,
        config.targets.len(),
        config.namespaces.len(),
        config.logs.len(),
        config.rules.len(),
        config.server.listen
    )?;
    if let Some(web) = &config.server.web {
        let tls = match &web.tls {
            Some(_) => format!("HTTPS, client certificates {}", web.client_auth),
            None => "HTTP".to_string(),
        };
        writeln!(
            out,
            "  web config {}: {tls}, {} basic auth user(s)",
            web.path.display(),
            web.users.len()
        )?;
    }
    for t in &config.targets {
        writeln!(
            out,
            "  target {}: {} — sample every {}, budget {}, SCAN COUNT {}, notifications {}{}",
            t.name,
            t.display_url,
            dur(t.sample_interval),
            dur(t.sample_budget),
            t.scan_count,
            t.notifications.as_str(),
            t.environment
                .as_ref()
                .map(|e| format!(", environment {e}"))
                .unwrap_or_default()
        )?;
    }
    for n in &config.namespaces {
        let renew = match (n.renew_every, n.overdue_below()) {
            (Some(every), Some(below)) => format!("renewed every {}, overdue below {} left", dur(every), dur(below)),
            _ => "not renewed".to_string(),
        };
        writeln!(
            out,
            "  namespace {}: `{}` ttl {}, {renew}, max_hold {}, value {:?}{}",
            n.name,
            n.pattern,
            dur(n.ttl),
            n.max_hold.map(dur).unwrap_or_else(|| "none".into()),
            n.value,
            n.fence_pattern
                .as_ref()
                .map(|f| format!(", fence `{f}`"))
                .unwrap_or_default()
        )?;
    }
    if !connect {
        return Ok(true);
    }
    let mut healthy = true;
    for t in &config.targets {
        healthy &= check_target(config, t, out).await?;
    }
    Ok(healthy)
}

/// A target's topology questions, then each primary (one for standalone and Sentinel).
async fn check_target(config: &Config, t: &TargetConfig, out: &mut impl Write) -> std::io::Result<bool> {
    let (mut healthy, nodes) = super::check_nodes::topology(t, out).await?;
    for node in &nodes {
        healthy &= check_node(config, node, out).await?;
    }
    Ok(healthy && !nodes.is_empty())
}

async fn check_node(config: &Config, t: &TargetConfig, out: &mut impl Write) -> std::io::Result<bool> {
    match check_permissions(config, t, out).await {
        Ok(healthy) => Ok(healthy),
        Err(Check::Io(e)) => Err(e),
        Err(Check::Redis(e)) => {
            let e = crate::access::tls::explain(t, &e);
            writeln!(out, "✗ target {}: cannot connect to {}: {e}", t.name, t.display_url)?;
            if e.to_string().contains("permissions to run the 'select'") {
                let db = db_of(t);
                writeln!(
                    out,
                    "  ✗ target {}: the user may not SELECT {db} (grant `+select|{db}`)",
                    t.name
                )?;
            }
            Ok(false)
        }
    }
}

/// What stopped a target's checks: the output, or Redis (connecting, a dropped connection).
pub(super) enum Check {
    Io(std::io::Error),
    Redis(redis::RedisError),
}

impl From<std::io::Error> for Check {
    fn from(e: std::io::Error) -> Self {
        Check::Io(e)
    }
}

impl From<redis::RedisError> for Check {
    fn from(e: redis::RedisError) -> Self {
        Check::Redis(e)
    }
}

/// Reachability, then every permission serve, inspect and check-config need on `t`: each
/// missing one named with the ACL rule that grants it, and when any is, the whole rule.
async fn check_permissions(config: &Config, t: &TargetConfig, out: &mut impl Write) -> Result<bool, Check> {
    let mut conn = crate::access::connect::once(t).await?;
    let ping = probe::refusal(&mut conn, "PING", "ping", &redis::cmd("PING"), "").await?;
    let (version, info) = probe::server_version(&mut conn).await?;
    writeln!(out, "✓ target {}: reachable, Redis {version}", t.name)?;
    let mut healthy = true;
    // A permission is missing that a rule would grant: print the whole rule at the end.
    let mut any_missing = false;
    if let Some(m) = ping {
        healthy = false;
        any_missing = true;
        writeln!(
            out,
            "  ✗ target {}: {} — the watcher pings its subscription",
            t.name,
            refused(&m)
        )?;
    }
    for m in probe::transaction_refusals(t).await? {
        healthy = false;
        any_missing = true;
        writeln!(
            out,
            "  ✗ target {}: {} — the sampler reads each page of locks in one MULTI/EXEC",
            t.name,
            refused(&m)
        )?;
    }
    if let Some(m) = info {
        any_missing |= m.grant().is_some();
        writeln!(
            out,
            "  ! target {}: {} — optional: only check-config asks it, for the Redis version",
            t.name,
            refused(&m)
        )?;
    }
    let notifications = super::check_notify::check(t, config, &mut conn, out).await?;
    healthy &= notifications.healthy;
    any_missing |= notifications.missing;
    match notifications.events {
        Some(true) => events_mode(t, out)?,
        Some(false) => scan_mode(t, out)?,
        None => {}
    }
    for n in &config.namespaces {
        let denied = probe::namespace_refusals(&mut conn, n).await?;
        if denied.is_empty() {
            let (read, _) = probe::read_command(&n.value);
            let inspect = if n.value == ValueKind::Redisson {
                "TYPE"
            } else {
                "TYPE and GET"
            };
            let fence = n
                .fence_pattern
                .as_ref()
                .map(|f| format!("; MGET on fencing counters `{f}`"))
                .unwrap_or_default();
            writeln!(
                out,
                "  ✓ namespace {}: SCAN, {read} and PTTL allowed on `{}` ({inspect} for inspect too){fence}",
                n.name, n.pattern
            )?;
            continue;
        }
        healthy = false;
        any_missing = true;
        for m in &denied {
            let why = match m {
                Missing::Command {
                    name: "TYPE" | "GET", ..
                } => " — inspect needs it",
                _ => "",
            };
            writeln!(out, "  ✗ namespace {}: {}{why}", n.name, refused_in(m, n))?;
        }
    }
    if any_missing {
        writeln!(
            out,
            "  → everything lockwatch needs here, as one Redis 7 command (replace PASSWORD): {}",
            acl_rule(config, t)
        )?;
    }
    Ok(healthy)
}

/// What the user may not do, and the rule that grants it.
pub(super) fn refused(m: &Missing) -> String {
    match m {
        Missing::Command { name: "PSUBSCRIBE", .. } => {
            "the user may not run PSUBSCRIBE (grant `+psubscribe`; its channels are checked once it may)".into()
        }
        Missing::Command { name, rule, .. } => format!("the user may not run {name} (grant `+{rule}`)"),
        Missing::Keys { pattern } => format!("the user may not read the keys `{pattern}` (grant `%R~{pattern}`)"),
        Missing::Channel { channel } => {
            format!("the user may not PSUBSCRIBE `{channel}` (grant `&{channel}`)")
        }
        Missing::Other { name, why } => format!("{name} refused: {why}"),
    }
}

/// [`refused`] in a namespace's words: which pattern a command was refused on, lock keys
/// or fencing counters.
fn refused_in(m: &Missing, n: &NamespaceConfig) -> String {
    let fence = |p: &str| n.fence_pattern.as_ref().is_some_and(|f| f.as_str() == p);
    match m {
        Missing::Command { name, rule, on } => {
            let what = if fence(on) { "on fencing counters" } else { "on" };
            format!("the user may not run {name} {what} `{on}` (grant `+{rule}`)")
        }
        Missing::Keys { pattern } if fence(pattern) => {
            format!("the user may not read the fencing counters `{pattern}` (grant `%R~{pattern}`)")
        }
        Missing::Other { name, why } => format!("{name} refused on `{}`: {why}", n.pattern),
        other => refused(other),
    }
}

pub(super) fn db_of(t: &TargetConfig) -> i64 {
    t.connection.redis_settings().db()
}

/// The keyspace channels the watcher subscribes to: each namespace's locks and fencing counters.
pub(super) fn channels(config: &Config, t: &TargetConfig) -> Vec<String> {
    config
        .namespaces
        .iter()
        .flat_map(|n| std::iter::once(&n.pattern).chain(&n.fence_pattern))
        .map(|p| probe::keyspace_channel(db_of(t), p))
        .collect()
}

/// The Redis 7 ACL rule that grants exactly what `serve`, `inspect` and `check-config`
/// need on `t` with this config (the README's "Least privilege" line, filled in): every
/// key pattern read-only, the keyspace channels by their literal patterns. `+info` and
/// `+config|get` are optional (see the README).
fn acl_rule(config: &Config, t: &TargetConfig) -> String {
    let user = t
        .connection
        .redis_settings()
        .username()
        .filter(|u| *u != "default")
        .unwrap_or("lockwatch");
    let db = db_of(t);
    let watching = t.notifications != Notifications::Off;
    let read_only = [
        "reset",
        "on",
        ">PASSWORD",
        "-@all",
        "+ping",
        "+info",
        "+scan",
        "+multi",
        "+exec",
        "+mget",
        "+pttl",
        "+type",
        "+get",
    ];
    let mut rules: Vec<String> = read_only.map(String::from).into();
    if config.namespaces.iter().any(|n| n.value == ValueKind::Redisson) {
        rules.push("+hgetall".into());
    }
    if watching {
        // `+set` on the canary keys alone: every other key pattern is read-only.
        rules.extend(["+config|get", "+psubscribe", "+set"].map(String::from));
    }
    if t.notifications == Notifications::Configure {
        rules.push("+config|set".into());
    }
    if db != 0 {
        rules.push(format!("+select|{db}"));
    }
    if matches!(t.topology, Topology::Cluster { .. }) {
        rules.extend(super::check_nodes::CLUSTER_RULES.map(String::from));
    }
    let patterns = config
        .namespaces
        .iter()
        .flat_map(|n| std::iter::once(&n.pattern).chain(&n.fence_pattern));
    rules.extend(patterns.map(|p| format!("%R~{p}")));
    if watching {
        rules.push(format!("~{}*", crate::access::canary::PREFIX));
        rules.extend(channels(config, t).into_iter().map(|c| format!("&{c}")));
        rules.push(format!("&{}", crate::access::canary::channel(db)));
    }
    let mut seen = std::collections::HashSet::new();
    rules.retain(|r| seen.insert(r.clone()));
    let quoted = rules.iter().map(|r| {
        if r.contains(char::is_whitespace) {
            format!("\"{r}\"")
        } else {
            r.clone()
        }
    });
    format!("ACL SETUSER {user} {}", quoted.collect::<Vec<_>>().join(" "))
}

/// The tracking mode serve will use for `t`: events.
fn events_mode(t: &TargetConfig, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "  - tracking: events — lock keys followed from keyspace notifications; a SCAN reconciles every {} at {} keys/s",
        dur(t.reconcile_interval),
        t.reconcile_rate
    )
}

/// The tracking mode serve will use for `t`: scan.
fn scan_mode(t: &TargetConfig, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "  - tracking: scan — lock keys found by SCAN passes every {}, whose cost follows the size of the keyspace",
        dur(t.sample_interval)
    )
}
