//! `lockwatch drill --cleanup`: finds what interrupted runs left in the drill namespace —
//! locks and fencing counters whose id is a run's (`drill-<run>-<n>`, or `{drill-<run>}-<n>`
//! on a cluster) and the fenced resources `lockwatch-drill:<run>:<n>:resource` — on every
//! primary, deletes them and says what it removed. A key that merely resembles a run's is
//! never touched: the run must be eight hex digits and the cycle a number.

use std::collections::BTreeMap;

use redis::aio::MultiplexedConnection;
use serde::Serialize;

use super::plan::Plan;
use super::{DrillError, Options};
use crate::access::read::scan_page;
use crate::config::Config;

/// The resources' key prefix (see `plan::keys_for`).
const RESOURCE: &[u8] = b"lockwatch-drill:";

/// What a cleanup found and did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Cleanup {
    pub target: String,
    pub namespace: String,
    /// The `SCAN MATCH` patterns walked on each primary.
    pub patterns: Vec<String>,
    /// Per run id, the keys deleted (those gone meanwhile are not listed).
    pub removed: BTreeMap<String, Vec<String>>,
}

impl Cleanup {
    /// What was removed, run by run, in words.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if self.removed.is_empty() {
            out.push_str(&format!(
                "nothing left by a drill on target {} (namespace {}; walked {})\n",
                self.target,
                self.namespace,
                self.patterns.join(", ")
            ));
        }
        for (run, keys) in &self.removed {
            out.push_str(&format!("removed {} keys of run {run}:\n", keys.len()));
            for k in keys {
                out.push_str(&format!("  {k}\n"));
            }
        }
        out
    }
}

/// Find and delete the keys of interrupted runs (of `only_run`, when given).
pub async fn cleanup(config: &Config, opts: &Options, only_run: Option<&str>) -> Result<Cleanup, DrillError> {
    let plan = Plan::new(config, opts)?;
    let target = plan.target;
    let unreachable = |source| DrillError::Unreachable {
        target: target.name.clone(),
        source,
    };
    let mut primaries = crate::access::connect::primaries(target).await.map_err(unreachable)?;
    let shapes = Shapes::of(&plan);
    let mut done = Cleanup {
        target: target.name.clone(),
        namespace: plan.ns.name.clone(),
        patterns: shapes.matches(),
        removed: BTreeMap::new(),
    };
    for (_, conn) in &mut primaries {
        for pattern in &done.patterns {
            for key in scan_all(conn, pattern, target.scan_count).await.map_err(unreachable)? {
                let Some(run) = shapes.run_of(&key) else { continue };
                if only_run.is_some_and(|r| r != run) {
                    continue;
                }
                // The key lives where SCAN found it: deleted there, one at a time (keys of
                // several slots cannot share a DEL on a cluster).
                let n: i64 = redis::cmd("DEL")
                    .arg(&key)
                    .query_async(conn)
                    .await
                    .map_err(unreachable)?;
                if n > 0 {
                    let keys = done.removed.entry(run).or_default();
                    keys.push(String::from_utf8_lossy(&key).into_owned());
                }
            }
        }
    }
    Ok(done)
}

/// Every key of a `SCAN MATCH pattern` walk.
async fn scan_all(conn: &mut MultiplexedConnection, pattern: &str, count: usize) -> redis::RedisResult<Vec<Vec<u8>>> {
    let mut keys = Vec::new();
    let mut cursor = 0;
    loop {
        let (next, page) = scan_page(conn, pattern, cursor, count).await?;
        keys.extend(page);
        if next == 0 {
            keys.sort();
            keys.dedup();
            return Ok(keys);
        }
        cursor = next;
    }
}

/// The literal parts around the id of the namespace's lock and fence patterns.
struct Shapes {
    lock: (Vec<u8>, Vec<u8>),
    fence: Option<(Vec<u8>, Vec<u8>)>,
}

impl Shapes {
    fn of(plan: &Plan<'_>) -> Shapes {
        Shapes {
            lock: plan.ns.pattern.single_wildcard().unwrap_or_default(),
            fence: plan.ns.fence_pattern.as_ref().and_then(|f| f.single_wildcard()),
        }
    }

    /// `SCAN MATCH` patterns that cover every key a run creates.
    fn matches(&self) -> Vec<String> {
        let around = |(p, s): &(Vec<u8>, Vec<u8>)| {
            let mut m = crate::glob::escape(p);
            m.extend_from_slice(b"*drill-*");
            m.extend(crate::glob::escape(s));
            String::from_utf8_lossy(&m).into_owned()
        };
        let mut out = vec![around(&self.lock)];
        out.extend(self.fence.as_ref().map(around));
        out.push(format!("{}*", String::from_utf8_lossy(RESOURCE)));
        out.dedup();
        out
    }

    /// The run a key belongs to, when it is exactly the shape of a run's key.
    fn run_of(&self, key: &[u8]) -> Option<String> {
        let id = |(p, s): &(Vec<u8>, Vec<u8>)| key.strip_prefix(p.as_slice())?.strip_suffix(s.as_slice());
        if let Some(run) = id(&self.lock).and_then(|id| run_in(id, b'-')) {
            return Some(run);
        }
        if let Some(run) = self.fence.as_ref().and_then(id).and_then(|id| run_in(id, b'-')) {
            return Some(run);
        }
        let rest = key.strip_prefix(RESOURCE)?.strip_suffix(b":resource")?;
        run_in(rest, b':').or_else(|| {
            // Unclustered: `<run>:<n>`.
            let (run, n) = split_once(rest, b':')?;
            (is_run(run) && is_number(n)).then(|| String::from_utf8_lossy(run).into_owned())
        })
    }
}

/// `drill-<run><sep><n>` or `{drill-<run>}<sep><n>`: the run.
fn run_in(id: &[u8], sep: u8) -> Option<String> {
    let (head, n) = split_once_last(id, sep)?;
    let run = match head.strip_prefix(b"{drill-") {
        Some(tagged) => tagged.strip_suffix(b"}")?,
        None => head.strip_prefix(b"drill-")?,
    };
    (is_run(run) && is_number(n)).then(|| String::from_utf8_lossy(run).into_owned())
}

fn is_run(b: &[u8]) -> bool {
    b.len() == 8 && b.iter().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

fn is_number(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(u8::is_ascii_digit)
}

fn split_once(b: &[u8], sep: u8) -> Option<(&[u8], &[u8])> {
    let i = b.iter().position(|c| *c == sep)?;
    Some((&b[..i], &b[i + 1..]))
}

fn split_once_last(b: &[u8], sep: u8) -> Option<(&[u8], &[u8])> {
    let i = b.iter().rposition(|c| *c == sep)?;
    Some((&b[..i], &b[i + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes() -> Shapes {
        Shapes {
            lock: (b"drill:lock:".to_vec(), vec![]),
            fence: Some((b"drill:fence:".to_vec(), b":n".to_vec())),
        }
    }

    #[test]
    fn only_the_keys_of_runs_are_recognised() {
        let s = shapes();
        let run = |k: &str| s.run_of(k.as_bytes());
        let id = Some("0a1b2c3d".to_string());
        for k in [
            "drill:lock:drill-0a1b2c3d-1",
            "drill:lock:{drill-0a1b2c3d}-12",
            "drill:fence:drill-0a1b2c3d-1:n",
            "drill:fence:{drill-0a1b2c3d}-3:n",
            "lockwatch-drill:0a1b2c3d:2:resource",
            "lockwatch-drill:{drill-0a1b2c3d}:2:resource",
        ] {
            assert_eq!(run(k), id, "{k}");
        }
        for k in [
            "drill:lock:job-7",
            "drill:lock:drill-0a1b2c3d",
            "drill:lock:drill-0a1b2c3-1",
            "drill:lock:drill-0A1B2C3D-1",
            "drill:lock:drill-0a1b2c3d-x",
            "drill:lock:drill-0a1b2c3d-1:extra",
            "drill:fence:drill-0a1b2c3d-1",
            "lockwatch-drill:0a1b2c3d:2",
            "lockwatch-drill:notes",
            "other:drill-0a1b2c3d-1",
        ] {
            assert_eq!(run(k), None, "{k}");
        }
        assert_eq!(
            s.matches(),
            vec!["drill:lock:*drill-*", "drill:fence:*drill-*:n", "lockwatch-drill:*"]
        );
    }
}
