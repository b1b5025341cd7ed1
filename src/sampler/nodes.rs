//! The sampler's connections to the target's current primaries, following the topology:
//! a read and a scan connection per primary, and the reader (the primary's connection, or
//! a cluster's routed one). A change of primaries restarts the walks in progress; each
//! failover is handed to `failover` before the next pass reads the new primary.

use redis::aio::ConnectionManager;

use super::Sampler;
use crate::access::reader::Reader;
use crate::topology::Layout;

/// One primary's connections.
#[derive(Clone)]
pub(super) struct NodeConns {
    pub(super) addr: String,
    pub(super) conn: ConnectionManager,
    /// Walks SCAN cursors: its own connection, so a page never waits behind a read pipeline.
    pub(super) scan: ConnectionManager,
}

/// Why a pass cannot run now.
pub(super) fn not_ready(layout: &Layout) -> redis::RedisError {
    let why = layout
        .problem
        .clone()
        .unwrap_or_else(|| "the topology has no primary".to_string());
    redis::RedisError::from(std::io::Error::new(std::io::ErrorKind::NotConnected, why))
}

impl Sampler {
    /// Take the current layout: connections for new primaries, the reader, walks restarted
    /// when the primaries changed, failovers handled. Errors when there is nothing to read yet.
    pub(super) async fn follow_nodes(&mut self) -> redis::RedisResult<()> {
        let (layout, changed) = self.nodes.look();
        if changed || self.reader.is_none() {
            let addrs: Vec<&str> = layout.primary_addrs();
            let same =
                addrs.len() == self.primaries.len() && self.primaries.iter().zip(&addrs).all(|(c, a)| c.addr == *a);
            if !same {
                let mut next = Vec::with_capacity(layout.primaries.len());
                for p in &layout.primaries {
                    match self.primaries.iter().find(|c| c.addr == p.addr) {
                        Some(c) => next.push(c.clone()),
                        None => next.push(NodeConns {
                            addr: p.addr.clone(),
                            conn: p.link.managed().map_err(|e| e.source)?,
                            scan: p.link.managed().map_err(|e| e.source)?,
                        }),
                    }
                }
                let had = !self.primaries.is_empty();
                self.primaries = next;
                if had {
                    // Positions of the old primaries mean nothing on the new ones.
                    for ns in &self.locks.namespaces {
                        ns.table().abandon();
                    }
                    self.walk.restart();
                }
                if !layout.is_cluster() {
                    self.reader = self.primaries.first().map(|c| Reader::Direct(c.conn.clone()));
                }
            }
            if layout.is_cluster() && self.reader.is_none() {
                let budget = self.target.sample_budget.max(std::time::Duration::from_secs(1));
                self.reader = crate::access::cluster::routed(&self.target, budget)
                    .await?
                    .map(Reader::Routed);
            }
        }
        if !layout.discovered || self.primaries.is_empty() {
            return Err(not_ready(&layout));
        }
        let pending: Vec<_> = layout
            .failovers
            .iter()
            .filter(|f| f.seq > self.failovers_handled)
            .cloned()
            .collect();
        for f in pending {
            self.failover(&f).await?;
            self.failovers_handled = f.seq;
        }
        Ok(())
    }

    /// Every connection a pass may use, checked to work (`alive`): a pass succeeds only on
    /// working connections, and one remade after an outage fails no later pass. `Err`
    /// names the node that does not answer.
    pub(super) async fn check_conns(&mut self) -> Result<(), (String, redis::RedisError)> {
        let checks = self.primaries.iter_mut().flat_map(|c| {
            let addr = c.addr.as_str();
            [&mut c.conn, &mut c.scan].map(|conn| async move {
                crate::access::connect::alive(conn)
                    .await
                    .map_err(|e| (addr.to_string(), e))
            })
        });
        futures_util::future::try_join_all(checks).await.map(|_| ())
    }

    /// The reader, once `follow_nodes` has succeeded.
    pub(super) fn reader(&self) -> redis::RedisResult<Reader> {
        self.reader.clone().ok_or_else(|| not_ready(&self.nodes.current()))
    }
}
