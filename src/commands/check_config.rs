//! `lockwatch check-config`: print what a valid config means, and with `--connect` check
//! each target: reachable, keyspace notifications, and the permissions the sampler needs.
//!
//! Loading (and its errors) belongs to `config`, the questions to Redis to `access`; this
//! command only asks and reports.

use std::io::Write;

use redis::aio::MultiplexedConnection;

use super::{CommandError, Status};
use crate::access::{notify, probe};
use crate::cli::CheckConfigArgs;
use crate::config::{Config, Notifications, TargetConfig};
use crate::duration::format as dur;

pub(super) async fn command(args: CheckConfigArgs) -> Result<Status, CommandError> {
    let config = super::load(&args.config, None)?;
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

async fn check_target(config: &Config, t: &TargetConfig, out: &mut impl Write) -> std::io::Result<bool> {
    let mut conn = match connect(t).await {
        Ok(c) => c,
        Err(e) => {
            let e = crate::access::tls::explain(t, &e);
            writeln!(out, "✗ target {}: cannot connect to {}: {e}", t.name, t.display_url)?;
            return Ok(false);
        }
    };
    let version = probe::server_version(&mut conn).await;
    writeln!(out, "✓ target {}: reachable, Redis {version}", t.name)?;
    let mut healthy = check_notifications(t, config, &mut conn, out).await?;
    for n in &config.namespaces {
        let probe_key = String::from_utf8_lossy(&n.pattern.overlap(&n.pattern).unwrap_or_default()).into_owned();
        let (read, denied) = probe::refused_for_namespace(&mut conn, n.pattern.as_str(), &probe_key, &n.value).await;
        if denied.is_empty() {
            writeln!(
                out,
                "  ✓ namespace {}: SCAN, {read} and PTTL allowed on `{}`",
                n.name, n.pattern
            )?;
        } else {
            healthy = false;
            writeln!(
                out,
                "  ✗ namespace {}: refused: {}. Grant the ACL user `+scan +{} +pttl ~{}`",
                n.name,
                denied.join(", "),
                read.to_lowercase(),
                n.pattern
            )?;
        }
    }
    Ok(healthy)
}

async fn check_notifications(
    t: &TargetConfig,
    config: &Config,
    conn: &mut MultiplexedConnection,
    out: &mut impl Write,
) -> std::io::Result<bool> {
    if t.notifications == Notifications::Off {
        writeln!(
            out,
            "  - notifications: off in config; lifecycle transitions and takeovers will not be seen"
        )?;
        scan_mode(t, out)?;
        return Ok(true);
    }
    let needed = notify::needed_flags(&config.namespaces);
    let policy = t.notifications.as_str();
    match notify::read(conn).await {
        Ok(notify::Flags::Set(flags)) => {
            let missing = notify::missing_flags(&flags, &needed);
            if missing.is_empty() {
                writeln!(
                    out,
                    "  ✓ notifications ({policy}): notify-keyspace-events = \"{flags}\" has what lockwatch needs"
                )?;
                events_mode(t, out)?;
                return Ok(true);
            }
            let fix = notify::fix_command(&flags, &needed);
            let (mark, what) = match t.notifications {
                Notifications::Require => ("✗", "serve will refuse to start; enable them with"),
                Notifications::Configure => ("!", "serve will add them at start, as if by"),
                _ => ("!", "the watcher will see too little; enable them with"),
            };
            writeln!(
                out,
                "  {mark} notifications ({policy}): notify-keyspace-events = \"{flags}\" lacks `{missing}`; {what}: redis-cli {fix}"
            )?;
            match t.notifications {
                Notifications::Configure => events_mode(t, out)?,
                _ => scan_mode(t, out)?,
            }
            Ok(t.notifications != Notifications::Require)
        }
        Ok(notify::Flags::Unreadable(why)) => {
            let what = if t.notifications == Notifications::Require {
                "✗ serve will refuse to start, as it cannot verify them"
            } else {
                "! serve will subscribe anyway"
            };
            writeln!(
                out,
                "  {what} — notifications ({policy}): CONFIG GET refused ({why}); on managed Redis, enable notify-keyspace-events '{needed}' in the provider's settings"
            )?;
            if t.notifications != Notifications::Require {
                events_mode(t, out)?;
            }
            Ok(t.notifications != Notifications::Require)
        }
        Err(e) => {
            writeln!(
                out,
                "  ✗ notifications ({policy}): cannot read notify-keyspace-events: {e}"
            )?;
            Ok(false)
        }
    }
}

async fn connect(t: &TargetConfig) -> redis::RedisResult<MultiplexedConnection> {
    let mut conn = crate::access::connect::once(t).await?;
    probe::ping(&mut conn).await?;
    Ok(conn)
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
