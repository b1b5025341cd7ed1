//! The nodes of each target and who is primary: one server (standalone), the shards of a
//! Redis Cluster (`CLUSTER SHARDS` every second), or the primary a Sentinel group names
//! (asked every second, and at once on `+switch-master`). The follower publishes a
//! [`Layout`] that the sampler and the watcher read, pings every node for
//! `lockwatch_node_up`, asks each primary which server it is (`INFO server`, else `HELLO`)
//! when it first answers and again after every failed ping (a restart, an upgrade) for
//! `lockwatch_target_info` and the status page, and records each primary change (failover)
//! for the sampler, which compares the locks held before with what the new primary has.

mod discover;
pub mod metrics;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::access::cluster;
use crate::access::sentinel::Sentinel;
use crate::access::server::{self, Server};
use crate::access::{Link, LinkError, NodeAddr};
use crate::config::{TargetConfig, Topology};
use discover::Found;
pub use metrics::TopologyMetrics;

/// How often the topology is asked again.
pub const REFRESH: Duration = Duration::from_secs(1);
/// Failovers kept in a layout for the sampler to handle (more than can happen between two passes).
const FAILOVERS_KEPT: usize = 64;
/// A slot no primary serves.
const NO_OWNER: u16 = u16::MAX;
/// How long an answer that leaves slots unserved which were served is taken for a moment
/// of a failover (failovers told against the layout before it) rather than a lost shard.
const SETTLE: Duration = Duration::from_secs(5);

/// A primary and the link to it.
#[derive(Debug, Clone)]
pub struct Primary {
    pub addr: String,
    pub link: Link,
}

/// A primary change: `from` was replaced by `to` for `slots` (all keys when `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failover {
    /// Increases by one with each failover of the target.
    pub seq: u64,
    pub from: String,
    pub to: String,
    pub slots: Option<Vec<(u16, u16)>>,
}

impl Failover {
    /// Whether `key` lived on the primary that was replaced.
    pub fn covers(&self, key: &[u8]) -> bool {
        match &self.slots {
            None => true,
            Some(ranges) => {
                let s = cluster::slot(key);
                ranges.iter().any(|&(a, b)| (a..=b).contains(&s))
            }
        }
    }
}

/// The target's nodes as last found.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// Found at least once; until then the target has no primaries to work on.
    pub discovered: bool,
    pub primaries: Vec<Primary>,
    pub replicas: Vec<NodeAddr>,
    /// Cluster: the index in `primaries` serving each slot.
    slots: Option<Arc<[u16]>>,
    /// The latest failovers, oldest first.
    pub failovers: Vec<Failover>,
    /// Why the topology is unknown, while it is.
    pub problem: Option<String>,
}

impl Layout {
    /// The primary serving `key` (standalone and Sentinel: the one primary).
    pub fn primary_of(&self, key: &[u8]) -> Option<usize> {
        match &self.slots {
            None => (!self.primaries.is_empty()).then_some(0),
            Some(_) => self.serving(cluster::slot(key)),
        }
    }

    /// Cluster: the primary serving `slot` (`None`: no primary, or not a cluster).
    pub fn serving(&self, slot: u16) -> Option<usize> {
        self.slots
            .as_ref()?
            .get(usize::from(slot))
            .copied()
            .filter(|&i| i != NO_OWNER)
            .map(usize::from)
    }

    pub fn is_cluster(&self) -> bool {
        self.slots.is_some()
    }

    /// The primaries' addresses, to tell whether they changed.
    pub fn primary_addrs(&self) -> Vec<&str> {
        self.primaries.iter().map(|p| p.addr.as_str()).collect()
    }
}

/// A reader's view of a target's layout.
#[derive(Debug, Clone)]
pub struct Nodes {
    rx: watch::Receiver<Arc<Layout>>,
    /// Which servers the primaries are, each server and version once (empty until told).
    servers: watch::Receiver<Arc<[Server]>>,
    /// The sender of a fixed layout, kept so the layout stays readable.
    _fixed: Option<Arc<watch::Sender<Arc<Layout>>>>,
}

impl Nodes {
    pub fn current(&self) -> Arc<Layout> {
        self.rx.borrow().clone()
    }

    /// Which servers the primaries are, as last asked: each server and version once, more
    /// than one only while a cluster's primaries differ (a rolling upgrade); empty until
    /// one has said (or when neither `INFO` nor `HELLO` answers).
    pub fn servers(&self) -> Arc<[Server]> {
        self.servers.borrow().clone()
    }

    /// The layout as now, and whether it changed since this handle last looked.
    pub fn look(&mut self) -> (Arc<Layout>, bool) {
        let changed = self.rx.has_changed().unwrap_or(false);
        (self.rx.borrow_and_update().clone(), changed)
    }

    /// Wait for the next change (forever once the follower is gone).
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// The fixed layout of a standalone target, without a follower (tests, benchmarks).
    pub fn standalone(t: &TargetConfig) -> Result<Nodes, LinkError> {
        let link = Link::new(t)?;
        let layout = Layout {
            discovered: true,
            primaries: vec![Primary {
                addr: link.node(),
                link,
            }],
            ..Layout::default()
        };
        let (tx, rx) = watch::channel(Arc::new(layout));
        Ok(Nodes {
            rx,
            servers: watch::channel(Arc::from([])).1,
            _fixed: Some(Arc::new(tx)),
        })
    }
}

/// Follows one target's topology.
pub struct Follower {
    target: TargetConfig,
    link: Link,
    tx: watch::Sender<Arc<Layout>>,
    metrics: metrics::Handles,
    /// Connections for pings and topology questions, by node.
    conns: HashMap<String, ConnectionManager>,
    sentinels: Vec<Sentinel>,
    switch: Arc<Notify>,
    failover_seq: u64,
    /// The last layout that served every slot the one before it served: failovers are told
    /// against it, so an answer caught in the middle of one hides none (Redis 8.2 lists the
    /// shard being failed over with no slots and both nodes as primaries for a moment).
    settled: Option<Arc<Layout>>,
    /// Since when answers have left served slots unserved.
    unsettled_since: Option<std::time::Instant>,
    /// Which server each primary said it is, by address.
    servers: HashMap<String, Server>,
    /// Nodes whose last ping failed: asked again which server they are once they answer.
    down: HashSet<String>,
    servers_tx: watch::Sender<Arc<[Server]>>,
}

impl Follower {
    /// The follower of `t` and the handle its readers use. Connects lazily.
    pub fn new(t: &TargetConfig, metrics: &TopologyMetrics) -> Result<(Follower, Nodes), LinkError> {
        let link = Link::new(t)?;
        let initial = match t.topology {
            Topology::Standalone => Layout {
                discovered: true,
                primaries: vec![Primary {
                    addr: link.node(),
                    link: link.clone(),
                }],
                ..Layout::default()
            },
            _ => Layout {
                problem: Some("topology not discovered yet".into()),
                ..Layout::default()
            },
        };
        let sentinels = Sentinel::all(t).map_err(|source| LinkError {
            target: t.name.clone(),
            source,
        })?;
        let (tx, rx) = watch::channel(Arc::new(initial));
        let (servers_tx, servers) = watch::channel(Arc::from([]));
        let follower = Follower {
            target: t.clone(),
            link,
            tx,
            metrics: {
                metrics.tls_unverified(&t.name, t.tls.insecure);
                metrics.for_target(&t.name, t.topology.mode().as_str())
            },
            conns: HashMap::new(),
            sentinels,
            switch: Arc::new(Notify::new()),
            failover_seq: 0,
            settled: None,
            unsettled_since: None,
            servers: HashMap::new(),
            down: HashSet::new(),
            servers_tx,
        };
        Ok((
            follower,
            Nodes {
                rx,
                servers,
                _fixed: None,
            },
        ))
    }

    /// Follow the topology until `shutdown`.
    pub async fn run(mut self, shutdown: CancellationToken) {
        self.metrics.start();
        if !self.sentinels.is_empty() {
            tokio::spawn(discover::watch_switches(
                self.sentinels.clone(),
                self.switch.clone(),
                shutdown.clone(),
            ));
        }
        loop {
            self.refresh().await;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(REFRESH) => {}
                _ = self.switch.notified() => {}
            }
        }
    }

    /// Ask for the topology, publish what changed, ping every node.
    async fn refresh(&mut self) {
        let found = match &self.target.topology {
            Topology::Standalone => None,
            Topology::Cluster { seeds } => {
                let mut asked: Vec<NodeAddr> = self.current_nodes();
                asked.extend(seeds.iter().filter_map(NodeAddr::of));
                Some(discover::cluster(self, asked).await)
            }
            Topology::Sentinel(s) => Some(discover::sentinel(&self.sentinels, &s.master_name).await),
        };
        match found {
            Some(Ok(found)) => self.publish(found),
            Some(Err(problem)) => {
                self.tx.send_modify(|l| {
                    let mut next = (**l).clone();
                    next.problem = Some(problem);
                    *l = Arc::new(next);
                });
            }
            None => {}
        }
        self.ping_all().await;
    }

    fn current_nodes(&self) -> Vec<NodeAddr> {
        let layout = self.tx.borrow().clone();
        let mut nodes: Vec<NodeAddr> = layout.primaries.iter().filter_map(|p| parse_addr(&p.addr)).collect();
        nodes.extend(layout.replicas.iter().cloned());
        nodes
    }

    /// A connection to `node` for pings and topology questions, made once.
    fn conn(&mut self, node: &NodeAddr) -> Option<ConnectionManager> {
        let key = node.to_string();
        if let Some(c) = self.conns.get(&key) {
            return Some(c.clone());
        }
        let conn = self.link.at(node).and_then(|l| l.managed()).ok()?;
        self.conns.insert(key, conn.clone());
        Some(conn)
    }

    /// Publish a found topology: new links for new primaries, failovers recorded.
    fn publish(&mut self, found: Found) {
        let old = self.tx.borrow().clone();
        let old_addrs: Vec<&str> = old.primary_addrs();
        let base = self.settled.clone().unwrap_or_else(|| old.clone());
        let settled = self.settles(&base, &found);
        let mut changes = Vec::new();
        if old.discovered && settled {
            changes = discover::failovers(&base, &found);
        }
        let primaries: Vec<Primary> = found
            .primaries
            .iter()
            .filter_map(|addr| {
                let name = addr.to_string();
                match old.primaries.iter().find(|p| p.addr == name) {
                    Some(p) => Some(p.clone()),
                    None => self.link.at(addr).ok().map(|link| Primary { addr: name, link }),
                }
            })
            .collect();
        let mut failovers = old.failovers.clone();
        for (from, to, slots) in changes {
            self.failover_seq += 1;
            self.metrics.failovers.inc();
            tracing::warn!(target_name = %self.target.name, from = %from, to = %to,
                "failover: a new primary took over; locks it did not receive are lost and counted in lockwatch_locks_lost_in_failover_total");
            failovers.push(Failover {
                seq: self.failover_seq,
                from,
                to,
                slots,
            });
        }
        if failovers.len() > FAILOVERS_KEPT {
            failovers.drain(..failovers.len() - FAILOVERS_KEPT);
        }
        // Found's primary index → the index among the primaries that have a link.
        let index: Vec<u16> = found
            .primaries
            .iter()
            .map(|a| {
                let name = a.to_string();
                primaries
                    .iter()
                    .position(|p| p.addr == name)
                    .and_then(|i| u16::try_from(i).ok())
                    .unwrap_or(NO_OWNER)
            })
            .collect();
        let slots = found.slots.as_ref().map(|owners| {
            let map: Vec<u16> = owners
                .iter()
                .map(|&o| index.get(usize::from(o)).copied().unwrap_or(NO_OWNER))
                .collect();
            Arc::<[u16]>::from(map)
        });
        let new_addrs: Vec<String> = primaries.iter().map(|p| p.addr.clone()).collect();
        let same = old.discovered
            && old.problem.is_none()
            && old_addrs == new_addrs.iter().map(String::as_str).collect::<Vec<_>>()
            && old.replicas == found.replicas
            && old.slots == slots
            && failovers.len() == old.failovers.len();
        self.metrics.nodes(primaries.len(), found.replicas.len());
        if same {
            if settled {
                self.settled = Some(old);
            }
            return;
        }
        if !old.discovered || old_addrs != new_addrs.iter().map(String::as_str).collect::<Vec<_>>() {
            tracing::info!(target_name = %self.target.name, primaries = %new_addrs.join(","),
                replicas = found.replicas.len(), "topology");
        }
        let layout = Layout {
            discovered: true,
            primaries,
            replicas: found.replicas,
            slots,
            failovers,
            problem: None,
        };
        let layout = Arc::new(layout);
        if settled {
            self.settled = Some(layout.clone());
        }
        self.tx.send_replace(layout);
    }

    /// Whether `found` is settled: it serves every slot `base` served, or has left some
    /// unserved for [`SETTLE`] (a shard lost, not a moment of a failover).
    fn settles(&mut self, base: &Layout, found: &Found) -> bool {
        if discover::serves_all(base, found) {
            self.unsettled_since = None;
            return true;
        }
        let since = *self.unsettled_since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() < SETTLE {
            return false;
        }
        self.unsettled_since = None;
        true
    }

    /// PING every node of the layout; `lockwatch_node_up` from the answers.
    async fn ping_all(&mut self) {
        let layout = self.tx.borrow().clone();
        let mut nodes: Vec<String> = layout.primaries.iter().map(|p| p.addr.clone()).collect();
        nodes.extend(layout.replicas.iter().map(|r| r.to_string()));
        let mut pings = Vec::with_capacity(nodes.len());
        for node in &nodes {
            let conn = match (&self.target.topology, parse_addr(node)) {
                (Topology::Standalone, _) => match self.conns.get(node) {
                    Some(c) => Some(c.clone()),
                    None => self.link.managed().ok().inspect(|c| {
                        self.conns.insert(node.clone(), c.clone());
                    }),
                },
                (_, Some(addr)) => self.conn(&addr),
                (_, None) => None,
            };
            pings.push(async move {
                let Some(mut c) = conn else { return false };
                let ping = redis::cmd("PING");
                let answer = tokio::time::timeout(Duration::from_secs(2), ping.query_async::<String>(&mut c)).await;
                matches!(answer, Ok(Ok(_)))
            });
        }
        let answers = futures_util::future::join_all(pings).await;
        self.conns.retain(|k, _| nodes.contains(k));
        self.ask_servers(&layout, &nodes, &answers).await;
        self.metrics.node_up(nodes.iter().map(String::as_str).zip(answers));
    }

    /// Ask each primary that answered which server it is, when it has not said yet or its
    /// last ping failed (it may have restarted as another version); publish what changed.
    async fn ask_servers(&mut self, layout: &Layout, nodes: &[String], answers: &[bool]) {
        let primaries = &nodes[..layout.primaries.len().min(nodes.len())];
        for (node, &up) in primaries.iter().zip(answers) {
            if !up {
                self.down.insert(node.clone());
                continue;
            }
            let back = self.down.remove(node);
            if self.servers.contains_key(node) && !back {
                continue;
            }
            let Some(mut conn) = self.conns.get(node).cloned() else {
                continue;
            };
            let asked = tokio::time::timeout(Duration::from_secs(2), server::ask(&mut conn)).await;
            let found = match asked {
                Ok(Ok(s)) => s,
                Ok(Err(e)) if crate::access::notify::is_refusal(&e) => {
                    tracing::info!(target_name = %self.target.name, node = %node, error = %e,
                        "INFO and HELLO refused: lockwatch_target_info says the server is unknown");
                    Server::unknown()
                }
                // Not answered now: asked again at the next ping.
                _ => continue,
            };
            if self.servers.get(node) != Some(&found) {
                tracing::info!(target_name = %self.target.name, node = %node, server = %found.name(), "server");
            }
            self.servers.insert(node.clone(), found);
        }
        self.servers.retain(|n, _| primaries.contains(n));
        self.down.retain(|n| nodes.contains(n));
        let mut now: Vec<Server> = self
            .servers
            .values()
            .filter(|s| s.family != server::Family::Unknown)
            .cloned()
            .collect();
        now.sort();
        now.dedup();
        if **self.servers_tx.borrow() != *now {
            self.metrics.servers(&now);
            self.servers_tx.send_replace(Arc::from(now));
        }
    }
}

/// `host:port` (or `[v6]:port`) back into an address.
fn parse_addr(s: &str) -> Option<NodeAddr> {
    let (host, port) = s.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some(NodeAddr {
        host: host.to_string(),
        port: port.parse().ok()?,
    })
}
