//! Redis Sentinel: asking a sentinel which node is the primary of a group and which
//! replicas it has, and the pub/sub connection on which sentinels announce a switch
//! (`+switch-master`). Sentinels get the target's TLS files when their URL is `rediss://`.

use redis::Value;
use redis::aio::{MultiplexedConnection, PubSub};

use super::NodeAddr;
use crate::config::TargetConfig;

/// The channel on which sentinels announce a new primary.
pub const SWITCH_CHANNEL: &str = "+switch-master";

/// One sentinel of a target.
#[derive(Clone)]
pub struct Sentinel {
    client: redis::Client,
    /// `host:port`, for messages.
    pub addr: String,
}

impl std::fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sentinel")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// A replica as a sentinel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub addr: NodeAddr,
    /// Not flagged down or disconnected by the sentinel.
    pub up: bool,
}

impl Sentinel {
    /// The sentinels of `t` (none unless its mode is sentinel).
    pub fn all(t: &TargetConfig) -> redis::RedisResult<Vec<Sentinel>> {
        let crate::config::Topology::Sentinel(s) = &t.topology else {
            return Ok(Vec::new());
        };
        s.sentinels
            .iter()
            .map(|info| {
                Ok(Sentinel {
                    client: super::tls::client(info, &t.tls)?,
                    addr: NodeAddr::of(info).map_or_else(|| info.addr().to_string(), |a| a.to_string()),
                })
            })
            .collect()
    }

    /// A one-off connection to this sentinel, with the same timeouts as `Link::once`.
    pub async fn connect(&self) -> redis::RedisResult<MultiplexedConnection> {
        super::connect::once_with(&self.client, super::connect::TIMEOUT).await
    }

    pub async fn pubsub(&self) -> redis::RedisResult<PubSub> {
        self.client.get_async_pubsub().await
    }
}

/// The primary of group `name` as this sentinel knows it; `None` when it does not know the group.
pub async fn primary(conn: &mut MultiplexedConnection, name: &str) -> redis::RedisResult<Option<NodeAddr>> {
    let reply: Option<(String, u16)> = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(name)
        .query_async(conn)
        .await?;
    Ok(reply.map(|(host, port)| NodeAddr { host, port }))
}

/// The replicas of group `name`.
pub async fn replicas(conn: &mut MultiplexedConnection, name: &str) -> redis::RedisResult<Vec<Replica>> {
    let reply: Value = redis::cmd("SENTINEL")
        .arg("REPLICAS")
        .arg(name)
        .query_async(conn)
        .await?;
    let Value::Array(items) = reply else {
        return Ok(Vec::new());
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let mut out = Vec::new();
    for item in items {
        let fields: Vec<(String, String)> = match item {
            Value::Map(m) => m.iter().filter_map(|(k, v)| Some((text(k)?, text(v)?))).collect(),
            Value::Array(f) => f
                .chunks(2)
                .filter_map(|p| Some((text(p.first()?)?, text(p.get(1)?)?)))
                .collect(),
            _ => continue,
        };
        let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let (Some(host), Some(port)) = (get("ip"), get("port").and_then(|p| p.parse().ok())) else {
            continue;
        };
        let flags = get("flags").unwrap_or("");
        out.push(Replica {
            addr: NodeAddr {
                host: host.to_string(),
                port,
            },
            up: !["s_down", "o_down", "disconnected"].iter().any(|f| flags.contains(f)),
        });
    }
    Ok(out)
}
