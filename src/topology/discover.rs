//! Finding a target's nodes: a cluster's shards from the first node that answers, a
//! Sentinel group's primary and replicas from the first sentinel that knows the group;
//! telling failovers from resharding; and the `+switch-master` subscription.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Follower, Layout, NO_OWNER};
use crate::access::NodeAddr;
use crate::access::cluster::{self, SLOTS};
use crate::access::sentinel::{self, SWITCH_CHANNEL, Sentinel};

/// Limit on one topology question.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// A topology as found.
#[derive(Debug, Clone, Default)]
pub(super) struct Found {
    pub primaries: Vec<NodeAddr>,
    pub replicas: Vec<NodeAddr>,
    /// Cluster: the index in `primaries` serving each slot (`NO_OWNER` when none).
    pub slots: Option<Vec<u16>>,
}

/// Ask the nodes in `asked`, in order, for the cluster's shards; the first answer wins.
pub(super) async fn cluster(f: &mut Follower, asked: Vec<NodeAddr>) -> Result<Found, String> {
    let tls = matches!(f.target.connection.addr(), redis::ConnectionAddr::TcpTls { .. });
    let mut last = "no node to ask".to_string();
    let mut seen = Vec::new();
    for node in asked {
        if seen.contains(&node) {
            continue;
        }
        seen.push(node.clone());
        let Some(mut conn) = f.conn(&node) else { continue };
        match tokio::time::timeout(ASK_TIMEOUT, cluster::shards(&mut conn, tls)).await {
            Ok(Ok(shards)) if !shards.is_empty() => return Ok(from_shards(shards)),
            Ok(Ok(_)) => last = format!("{node}: CLUSTER SHARDS listed no shard"),
            Ok(Err(e)) => last = format!("{node}: {}", crate::access::tls::explain(&f.target, &e)),
            Err(_) => last = format!("{node}: no answer within {}s", ASK_TIMEOUT.as_secs()),
        }
    }
    Err(format!("cannot discover the cluster: {last}"))
}

fn from_shards(mut shards: Vec<cluster::Shard>) -> Found {
    // In address order: nodes answer CLUSTER SHARDS in an order of their own, and a new
    // order must not look like new primaries.
    shards.sort_by(|a, b| a.primary.cmp(&b.primary));
    let mut found = Found {
        slots: Some(vec![NO_OWNER; SLOTS]),
        ..Found::default()
    };
    for shard in shards {
        if !shard.primary_up && shard.slots.is_empty() {
            // A failed primary whose slots a replica took over: listed until it rejoins.
            found.replicas.push(shard.primary);
            continue;
        }
        let i = u16::try_from(found.primaries.len()).unwrap_or(NO_OWNER);
        if let Some(map) = &mut found.slots {
            for (a, b) in &shard.slots {
                for s in *a..=(*b).min(SLOTS as u16 - 1) {
                    map[usize::from(s)] = i;
                }
            }
        }
        // A failed node stays in the topology (its `node_up` at 0) until it rejoins.
        found
            .replicas
            .extend(shard.failing.into_iter().filter(|n| *n != shard.primary));
        found.primaries.push(shard.primary);
        found.replicas.extend(shard.replicas);
    }
    found.replicas.sort();
    found.replicas.dedup();
    found
}

/// Ask the sentinels, in order, for the primary of `name` and its replicas.
pub(super) async fn sentinel(sentinels: &[Sentinel], name: &str) -> Result<Found, String> {
    let mut last = "no sentinel configured".to_string();
    for s in sentinels {
        let ask = async {
            let mut conn = s.connect().await?;
            let primary = sentinel::primary(&mut conn, name).await?;
            let replicas = sentinel::replicas(&mut conn, name).await.unwrap_or_default();
            Ok::<_, redis::RedisError>((primary, replicas))
        };
        match tokio::time::timeout(ASK_TIMEOUT, ask).await {
            Ok(Ok((Some(primary), replicas))) => {
                let mut replicas: Vec<NodeAddr> =
                    replicas.into_iter().map(|r| r.addr).filter(|r| *r != primary).collect();
                replicas.sort();
                return Ok(Found {
                    primaries: vec![primary],
                    replicas,
                    slots: None,
                });
            }
            Ok(Ok((None, _))) => last = format!("sentinel {} does not know master_name `{name}`", s.addr),
            Ok(Err(e)) => last = format!("sentinel {}: {e}", s.addr),
            Err(_) => last = format!("sentinel {}: no answer within {}s", s.addr, ASK_TIMEOUT.as_secs()),
        }
    }
    Err(format!("cannot find the primary: {last}"))
}

/// Whether `found` serves every slot `base` served (Sentinel: always).
pub(super) fn serves_all(base: &Layout, found: &Found) -> bool {
    match (&base.slots, &found.slots) {
        (Some(before), Some(now)) => before.iter().zip(now).all(|(&b, &n)| b == NO_OWNER || n != NO_OWNER),
        _ => true,
    }
}

/// A primary change: from, to, and the slots it concerns (`None`: every key).
pub(super) type Switch = (String, String, Option<Vec<(u16, u16)>>);

/// Primary changes from `old` to `found` that are failovers: a node that was not a primary
/// now serves what a primary served (all keys for Sentinel; per slot for a cluster). Slots
/// moving between existing primaries are resharding, not failover.
pub(super) fn failovers(old: &Layout, found: &Found) -> Vec<Switch> {
    let was_primary = |a: &str| old.primaries.iter().any(|p| p.addr == a);
    match (&old.slots, &found.slots) {
        (None, None) => match (old.primaries.first(), found.primaries.first()) {
            (Some(before), Some(now)) if before.addr != now.to_string() => {
                vec![(before.addr.clone(), now.to_string(), None)]
            }
            _ => Vec::new(),
        },
        (Some(before), Some(now)) => {
            let mut out: Vec<Switch> = Vec::new();
            for (s, (&b, &n)) in before.iter().zip(now.iter()).enumerate() {
                let (Some(from), Some(to)) = (
                    old.primaries.get(usize::from(b)).map(|p| p.addr.clone()),
                    found.primaries.get(usize::from(n)).map(|a| a.to_string()),
                ) else {
                    continue;
                };
                if from == to || was_primary(&to) {
                    continue;
                }
                let s = s as u16;
                match out.iter_mut().find(|(f, t, _)| *f == from && *t == to) {
                    Some((_, _, Some(ranges))) => match ranges.last_mut() {
                        Some((_, end)) if *end + 1 == s => *end = s,
                        _ => ranges.push((s, s)),
                    },
                    _ => out.push((from, to, Some(vec![(s, s)]))),
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// Subscribe to `+switch-master` on the first sentinel that takes it, and wake the
/// follower on each announcement; another sentinel is tried when the connection ends.
pub(super) async fn watch_switches(sentinels: Vec<Sentinel>, wake: Arc<Notify>, shutdown: CancellationToken) {
    let mut next = 0usize;
    loop {
        let s = &sentinels[next % sentinels.len()];
        next += 1;
        let session = async {
            let mut pubsub = s.pubsub().await?;
            pubsub.subscribe(SWITCH_CHANNEL).await?;
            let mut stream = pubsub.on_message();
            while stream.next().await.is_some() {
                wake.notify_one();
            }
            Ok::<_, redis::RedisError>(())
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            r = session => {
                if let Err(e) = r {
                    tracing::debug!(sentinel = %s.addr, error = %e, "cannot follow +switch-master here; trying the next sentinel");
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
