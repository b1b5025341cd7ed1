//! Connections to a target: long-lived managed ones that reconnect by themselves (the
//! sampler's and the watcher's), one-off ones with a timeout on every reply (commands that
//! ask a few questions and leave), and the pub/sub connection of the watcher. A `rediss://`
//! target's CA and client certificate are set on the client (`tls::client`), so every kind
//! of connection, and every part that uses one, speaks the same TLS.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection, PubSub};

use crate::config::{TargetConfig, TargetTls, Topology};

/// Limit on connecting and on each reply of a one-off connection.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// A target could not be set up for connecting (a bad URL or TLS setting).
#[derive(Debug, thiserror::Error)]
#[error("target {target}: {source}")]
pub struct LinkError {
    pub target: String,
    pub source: redis::RedisError,
}

/// How lockwatch reaches one target. Cheap to clone; connects only when asked.
#[derive(Clone)]
pub struct Link {
    target: String,
    client: redis::Client,
    /// The target's connection settings, for the links of its other nodes (`at`).
    info: redis::ConnectionInfo,
    tls: TargetTls,
    /// Reply limit of managed connections: a pass never waits longer than its budget.
    response_timeout: Duration,
    connect_timeout: Duration,
    max_backoff: Duration,
    db: i64,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Link {
    pub fn new(t: &TargetConfig) -> Result<Self, LinkError> {
        let client = super::tls::client(&t.connection, &t.tls).map_err(|source| LinkError {
            target: t.name.clone(),
            source,
        })?;
        Ok(Link {
            target: t.name.clone(),
            client,
            info: t.connection.clone(),
            tls: t.tls.clone(),
            response_timeout: t.sample_budget,
            connect_timeout: t.sample_budget.min(Duration::from_secs(5)),
            max_backoff: t.sample_interval.min(Duration::from_secs(5)),
            db: t.connection.redis_settings().db(),
        })
    }

    /// The same target's node at `node` (a cluster node, the primary a sentinel names):
    /// the target's credentials, database and TLS, another address.
    pub fn at(&self, node: &NodeAddr) -> Result<Link, LinkError> {
        let info = at_addr(&self.info, node);
        let client = super::tls::client(&info, &self.tls).map_err(|source| LinkError {
            target: self.target.clone(),
            source,
        })?;
        Ok(Link {
            client,
            info,
            ..self.clone()
        })
    }

    /// Where this link connects, as `host:port` (a unix socket's path).
    pub fn node(&self) -> String {
        NodeAddr::of(&self.info).map_or_else(|| format!("{}", self.info.addr()), |a| a.to_string())
    }

    /// The database number, for keyspace channel names.
    pub fn db(&self) -> i64 {
        self.db
    }

    /// A connection that reconnects by itself (lazily: a Redis that is down now is not an
    /// error here; the first command says so). Call inside a tokio runtime.
    pub fn managed(&self) -> Result<ConnectionManager, LinkError> {
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(self.response_timeout))
            .set_connection_timeout(Some(self.connect_timeout))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(100))
            .set_max_delay(self.max_backoff);
        ConnectionManager::new_lazy_with_config(self.client.clone(), config).map_err(|source| LinkError {
            target: self.target.clone(),
            source,
        })
    }

    /// A one-off connection with [`TIMEOUT`] on connecting and on every reply.
    pub async fn once(&self) -> redis::RedisResult<MultiplexedConnection> {
        once_with(&self.client, TIMEOUT).await
    }

    /// A one-off connection with [`TIMEOUT`] on connecting and `replies` on every reply (the
    /// drill's worker A, whose requests may be held in the network on purpose).
    pub async fn once_replying_within(&self, replies: Duration) -> redis::RedisResult<MultiplexedConnection> {
        once_with(&self.client, replies).await
    }

    /// A pub/sub connection.
    pub async fn pubsub(&self) -> redis::RedisResult<PubSub> {
        self.client.get_async_pubsub().await
    }

    /// The watcher's subscription connection (`pubsub`): the same address, credentials and
    /// TLS, read by lockwatch itself; `limit` bounds connecting and the handshake.
    pub async fn subscriber(
        &self,
        limit: Duration,
    ) -> Result<(super::pubsub::Sink, super::pubsub::Messages), super::pubsub::PubSubError> {
        super::pubsub::connect(&self.info, &self.tls, limit.min(self.connect_timeout)).await
    }

    /// The client behind the link, for the access layer's own kinds of connection.
    pub(super) fn client(&self) -> &redis::Client {
        &self.client
    }
}

/// Whether a managed connection works now: `PING`. A manager answers the first command
/// after an outage with what broke (the dead socket, or its last failed reconnect) and only
/// then reconnects: after such an error the `PING` is sent once more, on the new connection.
pub async fn alive(conn: &mut ConnectionManager) -> redis::RedisResult<()> {
    let ping = redis::cmd("PING");
    match ping.query_async::<()>(conn).await {
        Err(e) if e.is_connection_dropped() => ping.query_async(conn).await,
        done => done,
    }
}

/// A one-off connection of `client` with [`TIMEOUT`] on connecting and `replies` on every
/// reply.
pub(crate) async fn once_with(client: &redis::Client, replies: Duration) -> redis::RedisResult<MultiplexedConnection> {
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(replies));
    client.get_multiplexed_async_connection_with_config(&cfg).await
}

/// A one-off connection to `t` with [`TIMEOUT`] on connecting and every reply: to its
/// server, to the primary its sentinels name, or to the first cluster seed that answers.
/// A TLS failure comes back as `tls::explain`'s sentence.
pub async fn once(t: &TargetConfig) -> redis::RedisResult<MultiplexedConnection> {
    let link = primary_link(t).await?;
    link.once().await.map_err(|e| super::tls::explained(t, e))
}

/// A one-off connection to the primary that holds `key`: on a cluster, the node serving
/// its slot (asked of a seed); elsewhere the same as [`once`]. For commands that keep to
/// keys of one slot (the drill's, which share a hash tag).
pub async fn for_key(t: &TargetConfig, key: &[u8]) -> redis::RedisResult<MultiplexedConnection> {
    let link = link_for_key(t, key).await?;
    link.once().await.map_err(|e| super::tls::explained(t, e))
}

/// The link to the primary that holds `key` (see [`for_key`]).
pub async fn link_for_key(t: &TargetConfig, key: &[u8]) -> redis::RedisResult<Link> {
    let seed = primary_link(t).await?;
    if !matches!(t.topology, Topology::Cluster { .. }) {
        return Ok(seed);
    }
    let mut conn = seed.once().await.map_err(|e| super::tls::explained(t, e))?;
    let tls = matches!(t.connection.addr(), redis::ConnectionAddr::TcpTls { .. });
    let slot = super::cluster::slot(key);
    let shards = super::cluster::shards(&mut conn, tls).await?;
    let Some(shard) = shards
        .iter()
        .find(|s| s.primary_up && s.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
    else {
        return Err(redis::RedisError::from((
            redis::ErrorKind::Io,
            "no primary serves the slot",
            format!("slot {slot}"),
        )));
    };
    seed.at(&shard.primary).map_err(|e| e.source)
}

/// The links to each of `t`'s primaries that are up (a cluster's, asked of a seed; the one
/// primary otherwise).
pub async fn primary_links(t: &TargetConfig) -> redis::RedisResult<Vec<Link>> {
    let first = primary_link(t).await?;
    if !matches!(t.topology, Topology::Cluster { .. }) {
        return Ok(vec![first]);
    }
    let mut conn = first.once().await.map_err(|e| super::tls::explained(t, e))?;
    let tls = matches!(t.connection.addr(), redis::ConnectionAddr::TcpTls { .. });
    let mut out = Vec::new();
    for shard in super::cluster::shards(&mut conn, tls).await? {
        if shard.primary_up {
            out.push(first.at(&shard.primary).map_err(|e| e.source)?);
        }
    }
    Ok(out)
}

/// One-off connections to each of `t`'s primaries (a cluster's, asked of a seed; the one
/// primary otherwise), with their addresses.
pub async fn primaries(t: &TargetConfig) -> redis::RedisResult<Vec<(String, MultiplexedConnection)>> {
    let mut out = Vec::new();
    for link in primary_links(t).await? {
        out.push((link.node(), link.once().await.map_err(|e| super::tls::explained(t, e))?));
    }
    Ok(out)
}

/// The link to `t`'s primary (a cluster: its first seed that answers).
pub async fn primary_link(t: &TargetConfig) -> redis::RedisResult<Link> {
    let link = Link::new(t).map_err(|e| e.source)?;
    match &t.topology {
        Topology::Standalone => Ok(link),
        Topology::Sentinel(s) => {
            let mut last = None;
            for sentinel in super::sentinel::Sentinel::all(t)? {
                let asked = async {
                    let mut conn = sentinel.connect().await?;
                    super::sentinel::primary(&mut conn, &s.master_name).await
                };
                match asked.await {
                    Ok(Some(addr)) => return link.at(&addr).map_err(|e| e.source),
                    Ok(None) => {
                        last = Some(redis::RedisError::from((
                            redis::ErrorKind::Io,
                            "unknown master_name",
                            format!("sentinel {} does not know `{}`", sentinel.addr, s.master_name),
                        )))
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| redis::RedisError::from((redis::ErrorKind::Io, "no sentinel"))))
        }
        Topology::Cluster { seeds } => {
            let mut last = None;
            for seed in seeds.iter().filter_map(NodeAddr::of) {
                let node = link.at(&seed).map_err(|e| e.source)?;
                match node.once().await {
                    Ok(_) => return Ok(node),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| redis::RedisError::from((redis::ErrorKind::Io, "no seed node"))))
        }
    }
}

/// A cluster node's refusal of the target's database, as one sentence; `None` when `text`
/// is no such refusal. Valkey 9 serves databases in cluster mode below its
/// `cluster-databases`; Redis Cluster, and Valkey before 9, only database 0.
pub fn database_refused(t: &TargetConfig, text: &str) -> Option<String> {
    let db = t.connection.redis_settings().db();
    let refusal = ["DB index is out of range", "SELECT is not allowed in cluster mode"];
    (db != 0 && matches!(t.topology, Topology::Cluster { .. }) && refusal.iter().any(|r| text.contains(r))).then(|| {
        format!(
            "the cluster does not serve database {db} ({text}): only Valkey 9 and later serve databases other than 0 in cluster mode, those below its `cluster-databases` setting"
        )
    })
}

/// `info` with the address of `node`: same credentials, database and TLS.
pub fn at_addr(info: &redis::ConnectionInfo, node: &NodeAddr) -> redis::ConnectionInfo {
    let addr = match info.addr() {
        redis::ConnectionAddr::TcpTls {
            insecure, tls_params, ..
        } => redis::ConnectionAddr::TcpTls {
            host: node.host.clone(),
            port: node.port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => redis::ConnectionAddr::Tcp(node.host.clone(), node.port),
    };
    info.clone().set_addr(addr)
}

/// A node's address as Redis names it (`CLUSTER SHARDS`, `SENTINEL get-master-addr-by-name`)
/// and as the `node` label shows it: `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeAddr {
    pub host: String,
    pub port: u16,
}

impl NodeAddr {
    pub fn of(info: &redis::ConnectionInfo) -> Option<NodeAddr> {
        match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) | redis::ConnectionAddr::TcpTls { host, port, .. } => {
                Some(NodeAddr {
                    host: host.clone(),
                    port: *port,
                })
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}
