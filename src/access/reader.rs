//! Reading lock keys wherever they live: on the one primary of a standalone or Sentinel
//! target (a page per MULTI/EXEC pipeline), or through a cluster's routed connection, one
//! key at a time with single commands (keys of different slots cannot share a MULTI, and a
//! single command is what the connection follows through `MOVED` and `ASK` while slots
//! migrate). Pages run their keys concurrently on that connection.

use futures_util::StreamExt;
use redis::RedisResult;
use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;

use super::read::{self, Counter, KeyRead};
use crate::config::ValueKind;
use crate::vocab::Unreadable;

/// Keys of one page read at once through a cluster connection.
const ROUTED_IN_FLIGHT: usize = 64;
/// Reads of a key whose value and PTTL disagree (the key changed between the two
/// replies of a non-atomic read), or that met a passing cluster error, before it is
/// taken as it reads (or the error stands).
const ROUTED_ATTEMPTS: usize = 3;
/// Wait before reading again after a passing cluster error.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(50);

/// A cluster error that passes: a slot moving or a failover in progress.
fn passing(e: &redis::RedisError) -> bool {
    matches!(
        e.code(),
        Some("TRYAGAIN" | "CLUSTERDOWN" | "MOVED" | "ASK" | "LOADING" | "MASTERDOWN")
    ) || e.is_io_error()
}

/// Where a target's lock keys are read.
#[derive(Clone)]
pub enum Reader {
    /// The primary holds every key.
    Direct(ConnectionManager),
    /// A Redis Cluster: each key on the node serving its slot.
    Routed(ClusterConnection),
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reader::Direct(_) => "Reader::Direct",
            Reader::Routed(_) => "Reader::Routed",
        })
    }
}

impl Reader {
    /// Owner and PTTL of each key, in `keys`' order.
    pub async fn read_locks(&self, kind: &ValueKind, keys: &[Vec<u8>]) -> RedisResult<Vec<KeyRead>> {
        match self {
            Reader::Direct(conn) => read::read_locks(&mut conn.clone(), kind, keys).await,
            Reader::Routed(conn) => {
                let one = |key: Vec<u8>| {
                    let mut conn = conn.clone();
                    let kind = kind.clone();
                    async move {
                        let mut attempt = 0;
                        loop {
                            attempt += 1;
                            match read::read_one(&mut conn, &kind, &key).await {
                                Ok(KeyRead::Unreadable(Unreadable::WrongType)) if attempt < ROUTED_ATTEMPTS => {}
                                Ok(read) => return Ok(read),
                                Err(e) if attempt < ROUTED_ATTEMPTS && passing(&e) => {
                                    tokio::time::sleep(RETRY_AFTER).await;
                                }
                                Err(e) => return Err(e),
                            }
                        }
                    }
                };
                futures_util::stream::iter(keys.iter().cloned().map(one))
                    .buffered(ROUTED_IN_FLIGHT)
                    .collect::<Vec<RedisResult<KeyRead>>>()
                    .await
                    .into_iter()
                    .collect()
            }
        }
    }

    /// The owner of each string lock key (no TTL), in `keys`' order: one `MGET` on a
    /// primary, a `GET` per key through a cluster.
    pub async fn read_owners(&self, kind: &ValueKind, keys: &[Vec<u8>]) -> RedisResult<Vec<KeyRead>> {
        match self {
            Reader::Direct(conn) => read::read_owners(&mut conn.clone(), kind, keys).await,
            Reader::Routed(_) if *kind == ValueKind::Redisson => self.read_locks(kind, keys).await,
            Reader::Routed(_) => {
                let values = self.read_values(keys).await?;
                Ok(values.into_iter().map(|v| read::owner_of(kind, v)).collect())
            }
        }
    }

    /// Values of fencing counters, in `keys`' order.
    pub async fn read_counters(&self, keys: &[Vec<u8>]) -> RedisResult<Vec<Counter>> {
        match self {
            Reader::Direct(conn) => read::read_counters(&mut conn.clone(), keys).await,
            Reader::Routed(_) => Ok(self.read_values(keys).await?.into_iter().map(read::counter).collect()),
        }
    }

    /// Each string key's value through a cluster, `GET` by `GET` (another type: `None`,
    /// as `MGET` reads it).
    async fn read_values(&self, keys: &[Vec<u8>]) -> RedisResult<Vec<Option<Vec<u8>>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Reader::Direct(conn) => redis::cmd("MGET").arg(keys).query_async(&mut conn.clone()).await,
            Reader::Routed(conn) => {
                let one = |key: Vec<u8>| {
                    let mut conn = conn.clone();
                    async move {
                        let mut attempt = 0;
                        loop {
                            attempt += 1;
                            let value: RedisResult<Option<Vec<u8>>> =
                                redis::cmd("GET").arg(&key).query_async(&mut conn).await;
                            match value {
                                Ok(v) => return Ok(v),
                                // Not a string: as `MGET` reads it.
                                Err(e) if e.code() == Some("WRONGTYPE") => return Ok(None),
                                Err(e) if attempt < ROUTED_ATTEMPTS && passing(&e) => {
                                    tokio::time::sleep(RETRY_AFTER).await;
                                }
                                Err(e) => return Err(e),
                            }
                        }
                    }
                };
                futures_util::stream::iter(keys.iter().cloned().map(one))
                    .buffered(ROUTED_IN_FLIGHT)
                    .collect::<Vec<_>>()
                    .await
                    .into_iter()
                    .collect()
            }
        }
    }
}
