//! `lockwatch check-config`: print what a valid config means, and with `--connect` check
//! each target: reachable, keyspace notifications, and every permission `serve`, `inspect`
//! and this check need — each missing one named with the ACL rule that grants it.
//!
//! Loading (and its errors) belongs to `config`, the questions to Redis to `access`; this
//! command only asks and reports.

use std::io::Write;

use super::check_grants::{Check, channels, db_of, refused};
use super::{CommandError, Status};
use crate::access::probe::{self, Missing};
use crate::cli::CheckConfigArgs;
use crate::config::{Config, Mode, NamespaceConfig, Notifications, TargetConfig, Topology, ValueKind};
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
        healthy &= check_node(config, node, t.topology.mode(), out).await?;
    }
    Ok(healthy && !nodes.is_empty())
}

/// One node (the standalone server, a cluster's or a Sentinel group's primary) of a target
/// in `mode`.
async fn check_node(config: &Config, t: &TargetConfig, mode: Mode, out: &mut impl Write) -> std::io::Result<bool> {
    match check_permissions(config, t, mode, out).await {
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

/// Reachability, then every permission serve, inspect and check-config need on `t`: each
/// missing one named with the ACL rule that grants it, and when any is, the whole rule.
async fn check_permissions(config: &Config, t: &TargetConfig, mode: Mode, out: &mut impl Write) -> Result<bool, Check> {
    let mut conn = crate::access::connect::once(t).await?;
    let ping = probe::refusal(&mut conn, "PING", "ping", &redis::cmd("PING"), "").await?;
    let (server, info) = probe::server(&mut conn).await?;
    writeln!(
        out,
        "✓ target {}: reachable, {} ({})",
        t.name,
        server.name(),
        mode.as_str()
    )?;
    // Before Redis 7.0 a key pattern cannot be read-only: the rules and advice differ.
    let read_only = server.read_only_key_patterns();
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
        any_missing |= m.grantable();
        writeln!(
            out,
            "  ! target {}: {} — optional: HELLO tells which server it is (lockwatch_target_info, the line above) without it",
            t.name,
            refused(&m)
        )?;
    }
    let notifications = super::check_notify::check(t, config, &mut conn, read_only, out).await?;
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
            writeln!(out, "  ✗ namespace {}: {}{why}", n.name, refused_in(m, n, read_only))?;
        }
    }
    if any_missing {
        let dialect = if read_only { "Redis 7" } else { "Redis 6.2" };
        writeln!(
            out,
            "  → everything lockwatch needs here, as one {dialect} command (replace PASSWORD): {}",
            acl_rule(config, t, read_only)
        )?;
    }
    Ok(healthy)
}

/// [`refused`] in a namespace's words: which pattern a command was refused on, lock keys
/// or fencing counters; keys granted read-only where the server can (`read_only`).
fn refused_in(m: &Missing, n: &NamespaceConfig, read_only: bool) -> String {
    let fence = |p: &str| n.fence_pattern.as_ref().is_some_and(|f| f.as_str() == p);
    match m {
        Missing::Command { name, rule, on } => {
            let what = if fence(on) { "on fencing counters" } else { "on" };
            format!("the user may not run {name} {what} `{on}` (grant `+{rule}`)")
        }
        Missing::Keys { pattern } => {
            let what = if fence(pattern) { "fencing counters" } else { "keys" };
            let rule = probe::key_rule(pattern, read_only);
            format!("the user may not read the {what} `{pattern}` (grant `{rule}`)")
        }
        Missing::Other { name, why } => format!("{name} refused on `{}`: {why}", n.pattern),
        other => refused(other),
    }
}

/// The ACL rule that grants exactly what `serve`, `inspect` and `check-config` need on `t`
/// with this config (docs/security.md's "Least privilege" line, filled in): every key
/// pattern read-only, the keyspace channels by their literal patterns. `+info` and
/// `+config|get` are optional (see the docs). Without read-only key patterns (`read_only`
/// false: before Redis 7.0) the 6.2 line: `~` key patterns, channels reset first (6.2's
/// `reset` leaves every channel allowed), and no canary, whose `+set` would reach every key
/// pattern of the user.
fn acl_rule(config: &Config, t: &TargetConfig, read_only: bool) -> String {
    let user = t
        .connection
        .redis_settings()
        .username()
        .filter(|u| *u != "default")
        .unwrap_or("lockwatch");
    let db = db_of(t);
    let watching = t.notifications != Notifications::Off;
    let head = [
        "reset",
        "on",
        ">PASSWORD",
        "resetchannels",
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
    let mut rules: Vec<String> = head
        .iter()
        .filter(|r| !read_only || **r != "resetchannels")
        .map(|r| r.to_string())
        .collect();
    if config.namespaces.iter().any(|n| n.value == ValueKind::Redisson) {
        rules.push("+hgetall".into());
    }
    if watching {
        rules.extend(["+config|get", "+psubscribe"].map(String::from));
    }
    // `+set` on the canary keys alone: every other key pattern is read-only.
    let canary = watching && read_only;
    if canary {
        rules.push("+set".into());
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
    rules.extend(patterns.map(|p| probe::key_rule(p.as_str(), read_only)));
    if canary {
        rules.push(format!("~{}*", crate::access::canary::PREFIX));
    }
    if watching {
        rules.extend(channels(config, t).into_iter().map(|c| format!("&{c}")));
    }
    if canary {
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
