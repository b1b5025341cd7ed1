//! One-off connections to a target, for the parts that ask a few questions and leave
//! (`check-config --connect`, `inspect`, the `require` pre-flight of `serve`). The sampler
//! and the watcher keep long-lived connections of their own.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::config::TargetConfig;

/// Limit on connecting and on each reply.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// Connect to `t` with [`TIMEOUT`] on the connection and every reply.
pub async fn once(t: &TargetConfig) -> redis::RedisResult<MultiplexedConnection> {
    let client = redis::Client::open(t.connection.clone())?;
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(TIMEOUT));
    client.get_multiplexed_async_connection_with_config(&cfg).await
}
