//! Connections to a target: long-lived managed ones that reconnect by themselves (the
//! sampler's and the watcher's), one-off ones with a timeout on every reply (commands that
//! ask a few questions and leave), and the pub/sub connection of the watcher. A `rediss://`
//! target's CA and client certificate are set on the client (`tls::client`), so every kind
//! of connection, and every part that uses one, speaks the same TLS.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection, PubSub};

use crate::config::TargetConfig;

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
        let client = super::tls::client(t).map_err(|source| LinkError {
            target: t.name.clone(),
            source,
        })?;
        Ok(Link {
            target: t.name.clone(),
            client,
            response_timeout: t.sample_budget,
            connect_timeout: t.sample_budget.min(Duration::from_secs(5)),
            max_backoff: t.sample_interval.min(Duration::from_secs(5)),
            db: t.connection.redis_settings().db(),
        })
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
        let cfg = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT));
        self.client.get_multiplexed_async_connection_with_config(&cfg).await
    }

    /// A pub/sub connection.
    pub async fn pubsub(&self) -> redis::RedisResult<PubSub> {
        self.client.get_async_pubsub().await
    }
}

/// A one-off connection to `t` with [`TIMEOUT`] on connecting and every reply. A TLS
/// failure comes back as `tls::explain`'s sentence.
pub async fn once(t: &TargetConfig) -> redis::RedisResult<MultiplexedConnection> {
    let link = Link::new(t).map_err(|e| e.source)?;
    link.once().await.map_err(|e| super::tls::explained(t, e))
}
