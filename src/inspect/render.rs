//! Printing `inspect` reports: plain text for a person on call, or JSON for a script.
//!
//! The text leads with the verdict (overdue, no TTL, takeover) in capitals, and ends with
//! the `redis-cli` commands that show the same facts first-hand.

use std::io::Write;
use std::time::Duration;

use super::{HeldLock, KeyReport, NamespaceReport, Standing};
use crate::duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

fn secs(ms: i64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

fn dur(ms: u64) -> String {
    duration::format(Duration::from_millis(ms))
}

fn verdict(s: Standing, overdue_below_ms: Option<u64>) -> String {
    match s {
        Standing::Ok => "ok".to_string(),
        Standing::Overdue => format!(
            "OVERDUE: below {}, the holder missed a renewal (stalled or dead right now)",
            overdue_below_ms.map(dur).unwrap_or_default()
        ),
        Standing::NoTtl => "NO TTL: never freed if the holder dies".to_string(),
    }
}

pub fn render_key(r: &KeyReport, format: Format, out: &mut impl Write) -> std::io::Result<()> {
    if format == Format::Json {
        return writeln!(out, "{}", serde_json::to_string_pretty(r).unwrap_or_default());
    }
    if r.redis_type == "none" {
        writeln!(
            out,
            "lock {} does not exist now (released, expired, or never taken)",
            r.key
        )?;
    } else {
        writeln!(out, "lock {}", r.key)?;
    }
    writeln!(out, "  target     {}  {}", r.target, r.url)?;
    match (&r.namespace, r.ttl_ms) {
        (Some(ns), Some(ttl)) => {
            let renew = match (r.renew_every_ms, r.overdue_below_ms) {
                (Some(every), Some(below)) => {
                    format!(", renewed every {}, overdue below {}", dur(every), dur(below))
                }
                _ => ", not renewed".to_string(),
            };
            writeln!(out, "  namespace  {ns}  (ttl {}{renew})", dur(ttl))?;
        }
        _ => writeln!(out, "  namespace  none: the key matches no namespace pattern")?,
    }
    if r.redis_type != "none" {
        writeln!(out, "  type       {}", r.redis_type)?;
        match (&r.owner, r.owner_bytes) {
            (Some(o), Some(n)) if o == "<redacted>" => {
                writeln!(out, "  owner      <redacted> ({n} bytes; --show-owner prints it)")?
            }
            (Some(o), _) => writeln!(out, "  owner      {o}")?,
            _ => {}
        }
        if let Some(p) = &r.problem {
            writeln!(out, "  UNREADABLE {p}")?;
        }
        match (r.pttl_ms, r.ttl_ms) {
            (Some(-1), _) => writeln!(out, "  TTL left   none  NO TTL: never freed if the holder dies")?,
            (Some(p), Some(ttl)) => writeln!(
                out,
                "  TTL left   {} of {}  {}",
                secs(p),
                dur(ttl),
                r.standing.map(|s| verdict(s, r.overdue_below_ms)).unwrap_or_default()
            )?,
            (Some(p), None) => writeln!(out, "  TTL left   {}", secs(p))?,
            (None, _) => {}
        }
    }
    if let Some(fk) = &r.fence_key {
        writeln!(
            out,
            "  fence      {fk} = {}",
            r.fence
                .as_deref()
                .unwrap_or("(missing: no token issued, or the counter was lost)")
        )?;
    }
    writeln!(out)?;
    let h = &r.history;
    match (&h.unavailable, h.transitions.is_empty()) {
        (Some(why), _) => match &h.source {
            Some(src) => writeln!(out, "recent lifecycle: unavailable from {src}: {why}")?,
            None => writeln!(out, "recent lifecycle: {why}")?,
        },
        (None, true) => writeln!(
            out,
            "recent lifecycle: none recorded by {} (no transition since it started, or notifications are off)",
            h.source.as_deref().unwrap_or("?")
        )?,
        (None, false) => {
            writeln!(
                out,
                "recent lifecycle (from {}, oldest first):",
                h.source.as_deref().unwrap_or("?")
            )?;
            let mut last_end: Option<i64> = None;
            for t in &h.transitions {
                let owner = t.owner_hash.as_deref().map(|o| &o[..o.len().min(8)]).unwrap_or("?");
                let note = if t.takeover {
                    match last_end {
                        Some(end) => format!(
                            "  TAKEOVER: another owner took it {} after it expired",
                            secs(t.at_ms - end)
                        ),
                        None => "  TAKEOVER: another owner took it after it expired".to_string(),
                    }
                } else {
                    String::new()
                };
                writeln!(out, "  {}  {:<9} owner {owner}{note}", t.at, t.kind)?;
                if t.kind == "expired" || t.kind == "evicted" {
                    last_end = Some(t.at_ms);
                }
            }
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "see it yourself: redis-cli {} TYPE '{k}'; redis-cli {} PTTL '{k}'",
        r.cli,
        r.cli,
        k = r.key
    )?;
    Ok(())
}

pub fn render_namespace(r: &NamespaceReport, format: Format, out: &mut impl Write) -> std::io::Result<()> {
    if format == Format::Json {
        return writeln!(out, "{}", serde_json::to_string_pretty(r).unwrap_or_default());
    }
    let renew = r
        .overdue_below_ms
        .map(|b| format!(", overdue below {}", dur(b)))
        .unwrap_or_else(|| ", not renewed".to_string());
    writeln!(
        out,
        "namespace {} on target {} ({}): pattern `{}`, ttl {}{renew}",
        r.namespace,
        r.target,
        r.url,
        r.pattern,
        dur(r.ttl_ms)
    )?;
    let mark = |n: usize, word: &str| {
        if n > 0 {
            format!("{n} {}", word.to_uppercase())
        } else {
            format!("{n} {word}")
        }
    };
    writeln!(
        out,
        "  {} held · {} · {} · {} unreadable",
        r.held,
        mark(r.overdue, "overdue"),
        mark(r.without_ttl, "without TTL"),
        r.unreadable
    )?;
    if r.locks.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    let fence_w = r
        .locks
        .iter()
        .map(|l| l.fence.as_deref().map_or(1, str::len))
        .max()
        .unwrap_or(1)
        .max(5);
    let owner_w = r.locks.iter().map(|l| l.owner.len()).max().unwrap_or(5).clamp(5, 40);
    writeln!(
        out,
        "  {:<8} {:>9}  {:<fence_w$}  {:<owner_w$}  KEY",
        "STATUS", "TTL LEFT", "FENCE", "OWNER"
    )?;
    for l in &r.locks {
        writeln!(out, "  {}", row(l, fence_w, owner_w))?;
    }
    if r.held > r.locks.len() {
        writeln!(
            out,
            "  (showing {} of {}, closest to expiry first; --limit N for more)",
            r.locks.len(),
            r.held
        )?;
    }
    Ok(())
}

fn row(l: &HeldLock, fence_w: usize, owner_w: usize) -> String {
    let status = match l.standing {
        Standing::Ok => "ok",
        Standing::Overdue => "OVERDUE",
        Standing::NoTtl => "NO TTL",
    };
    let left = if l.pttl_ms < 0 {
        "never".to_string()
    } else {
        secs(l.pttl_ms)
    };
    format!(
        "{status:<8} {left:>9}  {:<fence_w$}  {:<owner_w$}  {}",
        l.fence.as_deref().unwrap_or("-"),
        l.owner,
        l.key
    )
}
