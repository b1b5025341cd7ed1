//! Redis Cluster: which node serves which slots (`CLUSTER SHARDS`, or `CLUSTER SLOTS` on
//! servers before 7.0), the slot of a key, and the routed connection that reads a key
//! wherever it lives now (following `MOVED` and `ASK` while slots migrate).
//!
//! Scans and keyspace notifications are node-local and go to each node's own `Link`.

use std::time::Duration;

use redis::Value;
use redis::cluster_async::ClusterConnection;

use super::NodeAddr;
use crate::config::{TargetConfig, Topology};

/// Slots of a Redis Cluster.
pub const SLOTS: usize = 16_384;

/// One shard: its primary, replicas and slot ranges (inclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    pub primary: NodeAddr,
    /// False for a primary the cluster marks failed.
    pub primary_up: bool,
    pub replicas: Vec<NodeAddr>,
    /// Replicas (or a failed primary) marked failing by the cluster.
    pub failing: Vec<NodeAddr>,
    pub slots: Vec<(u16, u16)>,
}

/// The slot of `key`: CRC16 (XMODEM) of the key, or of its `{hash tag}` when it has a
/// non-empty one, modulo 16384.
pub fn slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter().position(|&b| b == b'}').map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty());
    crc16(tagged.unwrap_or(key)) % SLOTS as u16
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A connection that routes each key to the node serving its slot, for a cluster target.
/// `None` for other modes. Connects lazily on first use of each node.
pub async fn routed(t: &TargetConfig, response_timeout: Duration) -> redis::RedisResult<Option<ClusterConnection>> {
    let Topology::Cluster { seeds } = &t.topology else {
        return Ok(None);
    };
    let settings = t.connection.redis_settings();
    let mut builder = redis::cluster::ClusterClientBuilder::new(seeds.clone())
        .connection_timeout(response_timeout.min(Duration::from_secs(5)))
        .response_timeout(response_timeout)
        .retries(3);
    if let Some(p) = settings.password() {
        builder = builder.password(p);
    }
    if let Some(u) = settings.username() {
        builder = builder.username(u);
    }
    if let Some(certs) = super::tls::certificates(&t.tls) {
        builder = builder.certs(certs);
    }
    let client = builder.build()?;
    Ok(Some(client.get_async_connection().await?))
}

/// The shards as `conn`'s node sees them. `tls`: use the nodes' TLS ports.
pub async fn shards(conn: &mut impl redis::aio::ConnectionLike, tls: bool) -> redis::RedisResult<Vec<Shard>> {
    let reply: redis::RedisResult<Value> = redis::cmd("CLUSTER").arg("SHARDS").query_async(conn).await;
    match reply {
        Ok(v) => parse_shards(v, tls),
        // An older server (no CLUSTER SHARDS), or a user allowed only CLUSTER SLOTS.
        Err(e) if !(e.is_io_error() || e.is_timeout() || e.is_connection_dropped()) => {
            let v: Value = redis::cmd("CLUSTER").arg("SLOTS").query_async(conn).await?;
            parse_slots(v)
        }
        Err(e) => Err(e),
    }
}

/// The slot ranges of each import the node on `conn` lists, oldest first: Valkey 9's
/// `CLUSTER GETSLOTMIGRATIONS` (`operation` `IMPORT`, `slot_ranges`), else Redis 8.4's
/// `CLUSTER MIGRATION STATUS ALL` (`operation` `import`, `slots`). An error when the node
/// has neither (or the user may not ask).
pub async fn imports(conn: &mut impl redis::aio::ConnectionLike) -> redis::RedisResult<Vec<Vec<(u16, u16)>>> {
    let valkey: redis::RedisResult<Value> = redis::cmd("CLUSTER").arg("GETSLOTMIGRATIONS").query_async(conn).await;
    let (listed, ranges) = match valkey {
        Ok(v) => (v, "slot_ranges"),
        Err(e) if e.is_io_error() || e.is_timeout() => return Err(e),
        Err(_) => {
            let v = redis::cmd("CLUSTER")
                .arg("MIGRATION")
                .arg("STATUS")
                .arg("ALL")
                .query_async(conn)
                .await?;
            (v, "slots")
        }
    };
    let Value::Array(jobs) = listed else {
        return Err(bad("the migrations are not an array"));
    };
    Ok(jobs
        .into_iter()
        .map(pairs)
        .filter(|f| {
            f.iter()
                .any(|(k, v)| k == "operation" && string(v).is_some_and(|o| o.eq_ignore_ascii_case("import")))
        })
        .map(|f| {
            f.iter()
                .find(|(k, _)| k == ranges)
                .and_then(|(_, v)| string(v))
                .map(|text| slot_ranges(&text))
                .unwrap_or_default()
        })
        .collect())
}

/// `0-99 200-299` (or `0-99,200-299`, or single slots) as ranges.
fn slot_ranges(text: &str) -> Vec<(u16, u16)> {
    text.split(|c: char| c.is_whitespace() || c == ',')
        .filter_map(|t| {
            let (a, b) = t.split_once('-').unwrap_or((t, t));
            let (a, b) = (a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?);
            (a <= b && usize::from(b) < SLOTS).then_some((a, b))
        })
        .collect()
}

fn bad(what: &str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Parse, "unexpected CLUSTER reply", what.to_string()))
}

/// Key-value pairs of a RESP2 flat array or a RESP3 map.
fn pairs(v: Value) -> Vec<(String, Value)> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    };
    match v {
        Value::Map(m) => m.into_iter().map(|(k, v)| (text(&k), v)).collect(),
        Value::Array(items) => {
            let mut out = Vec::new();
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((text(&k), v));
            }
            out
        }
        _ => Vec::new(),
    }
}

fn string(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        other => string(other).and_then(|s| s.parse().ok()),
    }
}

fn parse_shards(v: Value, tls: bool) -> redis::RedisResult<Vec<Shard>> {
    let Value::Array(shards) = v else {
        return Err(bad("CLUSTER SHARDS is not an array"));
    };
    let mut out = Vec::new();
    for shard in shards {
        let mut slots = Vec::new();
        let mut primary: Option<(NodeAddr, bool)> = None;
        let mut replicas = Vec::new();
        let mut failing = Vec::new();
        for (k, v) in pairs(shard) {
            match (k.as_str(), v) {
                ("slots", Value::Array(bounds)) => {
                    let bounds: Vec<i64> = bounds.iter().filter_map(int).collect();
                    for pair in bounds.chunks(2) {
                        if let [a, b] = pair {
                            slots.push((
                                u16::try_from(*a).map_err(|_| bad("slot"))?,
                                u16::try_from(*b).map_err(|_| bad("slot"))?,
                            ));
                        }
                    }
                }
                ("nodes", Value::Array(nodes)) => {
                    for node in nodes {
                        let f: Vec<(String, Value)> = pairs(node);
                        let get = |name: &str| f.iter().find(|(k, _)| k == name).map(|(_, v)| v);
                        let host = get("ip")
                            .or_else(|| get("endpoint"))
                            .and_then(string)
                            .ok_or_else(|| bad("node without ip"))?;
                        let port = match (tls, get("tls-port").and_then(int), get("port").and_then(int)) {
                            (true, Some(p), _) | (_, _, Some(p)) | (false, Some(p), None) => p,
                            _ => return Err(bad("node without port")),
                        };
                        let addr = NodeAddr {
                            host,
                            port: u16::try_from(port).map_err(|_| bad("port"))?,
                        };
                        let role = get("role").and_then(string).unwrap_or_default();
                        let health = get("health").and_then(string).unwrap_or_default();
                        let ok = health != "fail";
                        if !ok {
                            failing.push(addr.clone());
                        }
                        if role == "master" {
                            // A failed primary stays listed until it comes back as a replica.
                            match &primary {
                                Some((_, true)) if !ok => {}
                                _ => primary = Some((addr, ok)),
                            }
                        } else if ok {
                            replicas.push(addr);
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some((p, ok)) = primary {
            replicas.retain(|r| *r != p);
            out.push(Shard {
                primary: p,
                primary_up: ok,
                replicas,
                failing,
                slots,
            });
        }
    }
    Ok(out)
}

fn parse_slots(v: Value) -> redis::RedisResult<Vec<Shard>> {
    let Value::Array(ranges) = v else {
        return Err(bad("CLUSTER SLOTS is not an array"));
    };
    let mut out: Vec<Shard> = Vec::new();
    for range in ranges {
        let Value::Array(items) = range else { continue };
        let mut it = items.into_iter();
        let (Some(a), Some(b)) = (it.next().as_ref().and_then(int), it.next().as_ref().and_then(int)) else {
            continue;
        };
        let mut nodes = it.filter_map(|n| match n {
            Value::Array(f) => Some(NodeAddr {
                host: f.first().and_then(string)?,
                port: u16::try_from(f.get(1).and_then(int)?).ok()?,
            }),
            _ => None,
        });
        let Some(primary) = nodes.next() else { continue };
        let range = (
            u16::try_from(a).map_err(|_| bad("slot"))?,
            u16::try_from(b).map_err(|_| bad("slot"))?,
        );
        match out.iter_mut().find(|s| s.primary == primary) {
            Some(s) => s.slots.push(range),
            None => out.push(Shard {
                primary,
                primary_up: true,
                replicas: nodes.collect(),
                failing: Vec::new(),
                slots: vec![range],
            }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{slot, slot_ranges};

    #[test]
    fn migration_slot_ranges_are_read_as_servers_write_them() {
        assert_eq!(slot_ranges("0-1999"), [(0, 1999)]);
        assert_eq!(slot_ranges("0-10 20-30"), [(0, 10), (20, 30)]);
        assert_eq!(slot_ranges("5,7-8"), [(5, 5), (7, 8)]);
        assert_eq!(slot_ranges("9-3 x 16384"), []);
    }

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT`.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_eq!(slot(b"foo{}{bar}"), 8363);
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b""), 0);
    }
}
