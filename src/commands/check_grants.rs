//! What the target checks of `check-config --connect` share: `Check`, what stops one (the
//! output, or Redis); a refusal in words with the rule that grants it (`refused`); a
//! target's database (`db_of`) and the keyspace channels the watcher subscribes to
//! (`channels`). The checks themselves are `check_config`'s, `check_nodes`'s and
//! `check_notify`'s; this module imports none of them.

use crate::access::probe::{self, Missing};
use crate::config::{Config, TargetConfig};

/// What stopped a target's checks: the output, or Redis (connecting, a dropped connection).
pub(super) enum Check {
    Io(std::io::Error),
    Redis(redis::RedisError),
}

impl From<std::io::Error> for Check {
    fn from(e: std::io::Error) -> Self {
        Check::Io(e)
    }
}

impl From<redis::RedisError> for Check {
    fn from(e: redis::RedisError) -> Self {
        Check::Redis(e)
    }
}

/// What the user may not do, and the rule that grants it.
pub(super) fn refused(m: &Missing) -> String {
    match m {
        Missing::Command { name: "PSUBSCRIBE", .. } => {
            "the user may not run PSUBSCRIBE (grant `+psubscribe`; its channels are checked once it may)".into()
        }
        Missing::Command { name, rule, .. } => format!("the user may not run {name} (grant `+{rule}`)"),
        Missing::Keys { pattern } => format!("the user may not read the keys `{pattern}` (grant `%R~{pattern}`)"),
        Missing::Channel { channel } => {
            format!("the user may not PSUBSCRIBE `{channel}` (grant `&{channel}`)")
        }
        Missing::Other { name, why } => format!("{name} refused: {why}"),
    }
}

/// The database `t` selects.
pub(super) fn db_of(t: &TargetConfig) -> i64 {
    t.connection.redis_settings().db()
}

/// The keyspace channels the watcher subscribes to: each namespace's locks and fencing counters.
pub(super) fn channels(config: &Config, t: &TargetConfig) -> Vec<String> {
    config
        .namespaces
        .iter()
        .flat_map(|n| std::iter::once(&n.pattern).chain(&n.fence_pattern))
        .map(|p| probe::keyspace_channel(db_of(t), p))
        .collect()
}
