//! Reading lock keys wherever they live: on the one primary of a standalone or Sentinel
//! target (a page per MULTI/EXEC pipeline), or through a cluster's routed connection, one
//! key per pipeline (keys of different slots cannot share one), following `MOVED` and `ASK`
//! while slots migrate. Pages run their keys concurrently on that connection.

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
/// replies of a non-atomic read) before it is taken as it reads.
const ROUTED_ATTEMPTS: usize = 3;

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
                        let keys = [key];
                        let mut last = KeyRead::Gone;
                        for _ in 0..ROUTED_ATTEMPTS {
                            let mut got = read::read_locks_with(&mut conn, &kind, &keys, false).await?;
                            last = got.pop().unwrap_or(KeyRead::Gone);
                            if last != KeyRead::Unreadable(Unreadable::WrongType) {
                                break;
                            }
                        }
                        Ok::<_, redis::RedisError>(last)
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

    /// Values of fencing counters, in `keys`' order.
    pub async fn read_counters(&self, keys: &[Vec<u8>]) -> RedisResult<Vec<Counter>> {
        match self {
            Reader::Direct(conn) => read::read_counters(&mut conn.clone(), keys).await,
            Reader::Routed(conn) => {
                let one = |key: Vec<u8>| {
                    let mut conn = conn.clone();
                    async move {
                        let mut got = read::read_counters(&mut conn, &[key]).await?;
                        Ok::<_, redis::RedisError>(got.pop().unwrap_or(Counter::Gone))
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
