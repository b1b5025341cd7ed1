//! `lockwatch check-config`: print what a valid config means, and with `--connect` check
//! each target: reachable, keyspace notifications, and the permissions the sampler needs.
//!
//! Loading (and its errors) belongs to `config`; this module only reports.

use std::io::Write;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::config::{Config, Notifications, TargetConfig, ValueKind};
use crate::duration::format as dur;

/// Keyspace-notification classes the lifecycle watcher needs: keyspace events (`K`),
/// generic (`g`: del, expire), string (`$`: set), expired (`x`), evicted (`e`).
const NEEDED_FLAGS: &str = "Kg$xe";

/// Print the summary (and connection checks); `Ok(false)` when a check found a problem.
pub async fn run(config: &Config, connect: bool, out: &mut impl Write) -> std::io::Result<bool> {
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
            "  target {}: {} — sample every {}, budget {}, SCAN COUNT {}, notifications {:?}{}",
            t.name,
            t.display_url,
            dur(t.sample_interval),
            dur(t.sample_budget),
            t.scan_count,
            t.notifications,
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
            writeln!(out, "✗ target {}: cannot connect to {}: {e}", t.name, t.display_url)?;
            return Ok(false);
        }
    };
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    writeln!(out, "✓ target {}: reachable, Redis {version}", t.name)?;
    let mut healthy = check_notifications(t, config, &mut conn, out).await?;
    for n in &config.namespaces {
        let probe = String::from_utf8_lossy(&n.pattern.overlap(&n.pattern).unwrap_or_default()).into_owned();
        let mut denied = Vec::new();
        let scan: redis::RedisResult<redis::Value> = redis::cmd("SCAN")
            .arg(0)
            .arg("MATCH")
            .arg(n.pattern.as_str())
            .arg("COUNT")
            .arg(1)
            .query_async(&mut conn)
            .await;
        denied.extend(scan.err().map(|e| format!("SCAN ({e})")));
        let read = match n.value {
            ValueKind::Redisson => "HGETALL",
            _ => "MGET",
        };
        let r: redis::RedisResult<redis::Value> = redis::cmd(read).arg(&probe).query_async(&mut conn).await;
        denied.extend(r.err().map(|e| format!("{read} ({e})")));
        let r: redis::RedisResult<redis::Value> = redis::cmd("PTTL").arg(&probe).query_async(&mut conn).await;
        denied.extend(r.err().map(|e| format!("PTTL ({e})")));
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
        return Ok(true);
    }
    let mut needed = NEEDED_FLAGS.to_string();
    if config.namespaces.iter().any(|n| n.value == ValueKind::Redisson) {
        needed.push('h');
    }
    let got: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query_async(conn)
        .await;
    match got {
        Ok(v) => {
            let flags = v.get(1).cloned().unwrap_or_default();
            let missing = missing_flags(&flags, &needed);
            if missing.is_empty() {
                writeln!(
                    out,
                    "  ✓ notifications: notify-keyspace-events = \"{flags}\" has what lockwatch needs"
                )?;
                Ok(true)
            } else {
                let fix = format!(
                    "redis-cli CONFIG SET notify-keyspace-events '{}'",
                    merge_flags(&flags, &needed)
                );
                let required = t.notifications == Notifications::Require;
                writeln!(
                    out,
                    "  {} notifications: notify-keyspace-events = \"{flags}\" lacks `{missing}`; {}: {fix}",
                    if required { "✗" } else { "!" },
                    if t.notifications == Notifications::Configure {
                        "lockwatch will add them at start, as if by"
                    } else {
                        "enable them with"
                    }
                )?;
                Ok(!required)
            }
        }
        Err(e) => {
            writeln!(
                out,
                "  ! notifications: CONFIG GET refused ({e}); on managed Redis, enable notify-keyspace-events '{needed}' in the provider's settings"
            )?;
            Ok(t.notifications != Notifications::Require)
        }
    }
}

async fn connect(t: &TargetConfig) -> redis::RedisResult<MultiplexedConnection> {
    let client = redis::Client::open(t.connection.clone())?;
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(5)));
    let mut conn = client.get_multiplexed_async_connection_with_config(&cfg).await?;
    redis::cmd("PING").query_async::<()>(&mut conn).await?;
    Ok(conn)
}

/// Expand Redis's `A` alias (`g$lshzxet`) so flags can be compared one by one.
fn expand(flags: &str) -> String {
    flags.replace('A', "g$lshzxet")
}

/// Flags of `needed` that `current` lacks. `K` or `E` both deliver events.
pub fn missing_flags(current: &str, needed: &str) -> String {
    let have = expand(current);
    needed
        .chars()
        .filter(|c| match c {
            'K' => !have.contains('K') && !have.contains('E'),
            c => !have.contains(*c),
        })
        .collect()
}

/// `current` plus whatever of `needed` it lacks, nothing removed.
pub fn merge_flags(current: &str, needed: &str) -> String {
    let mut out = current.to_string();
    out.push_str(&missing_flags(current, needed));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_compared_with_the_alias_expanded() {
        assert_eq!(missing_flags("KEA", NEEDED_FLAGS), "");
        assert_eq!(missing_flags("", NEEDED_FLAGS), "Kg$xe");
        assert_eq!(missing_flags("Ex", NEEDED_FLAGS), "g$e");
        assert_eq!(merge_flags("Kl", "Kg$xe"), "Klg$xe");
    }
}
