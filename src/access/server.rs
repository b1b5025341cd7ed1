//! Which server a node is: Redis or Valkey and its version, from `INFO server`. Valkey
//! says `server_name:valkey` and `valkey_version:…`, and keeps `redis_version` at the Redis
//! release it is compatible with (7.2.4); Redis says only `redis_version`. What a server
//! supports that lockwatch's advice depends on (read-only ACL key patterns) is judged here.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// The longest version string kept: a label value is bounded, and never free text.
const VERSION_MAX: usize = 32;

/// The server family, as `lockwatch_target_info{server}` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Redis,
    Valkey,
    /// `INFO` refused, or an answer that says neither.
    Unknown,
}

impl Family {
    /// The label value: `redis`, `valkey` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Redis => "redis",
            Family::Valkey => "valkey",
            Family::Unknown => "unknown",
        }
    }
}

/// One node's server and version.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Server {
    pub family: Family,
    /// The server's own version (`valkey_version` for Valkey); `unknown` when not told.
    pub version: String,
    /// `redis_version`: the Redis release whose commands and ACL rules it has.
    redis_compat: Option<(u32, u32)>,
}

impl Server {
    /// A server that did not say what it is.
    pub fn unknown() -> Server {
        Server {
            family: Family::Unknown,
            version: "unknown".into(),
            redis_compat: None,
        }
    }

    /// Read from the text of `INFO server`.
    pub fn from_info(info: &str) -> Server {
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        let redis_version = field("redis_version");
        let redis_compat = redis_version.and_then(major_minor);
        let (family, version) = match (field("server_name"), field("valkey_version")) {
            (Some("valkey"), v) | (_, v @ Some(_)) => (Family::Valkey, v),
            _ if redis_version.is_some() => (Family::Redis, redis_version),
            _ => (Family::Unknown, None),
        };
        Server {
            family,
            version: version.filter(|v| plain(v)).unwrap_or("unknown").to_string(),
            redis_compat,
        }
    }

    /// As people write it: `Redis 7.0.15`, `Valkey 9.1.2`, `an unknown server`.
    pub fn name(&self) -> String {
        match self.family {
            Family::Redis => format!("Redis {}", self.version),
            Family::Valkey => format!("Valkey {}", self.version),
            Family::Unknown => "an unknown server".to_string(),
        }
    }

    /// The Redis release whose commands it has (`redis_version`; Valkey's says 7.2), as
    /// (major, minor), when told.
    pub fn redis_compat(&self) -> Option<(u32, u32)> {
        self.redis_compat
    }

    /// Whether ACL rules may make a key pattern read-only (`%R~`, Redis 7.0 and later, so
    /// every Valkey). A server that did not say is taken to have them.
    pub fn read_only_key_patterns(&self) -> bool {
        self.redis_compat.is_none_or(|v| v >= (7, 0))
    }
}

/// Ask a node which server it is: `INFO server`, or `HELLO` when `INFO` is refused (an
/// ACL, a command renamed away). `Err` is `INFO`'s error when neither answers.
pub async fn ask(conn: &mut impl ConnectionLike) -> RedisResult<Server> {
    match info(conn).await {
        Err(e) if super::notify::is_refusal(&e) => hello(conn).await.map_err(|_| e),
        answer => answer,
    }
}

/// `INFO server`.
pub async fn info(conn: &mut impl ConnectionLike) -> RedisResult<Server> {
    let info: String = redis::cmd("INFO").arg("server").query_async(conn).await?;
    Ok(Server::from_info(&info))
}

/// `HELLO` without a protocol version (nothing about the connection changes): its
/// `server` and `version` fields, as a flat array (RESP2) or a map (RESP3).
pub async fn hello(conn: &mut impl ConnectionLike) -> RedisResult<Server> {
    let reply: Value = redis::cmd("HELLO").query_async(conn).await?;
    let pairs: Vec<(Value, Value)> = match reply {
        Value::Map(pairs) => pairs,
        Value::Array(items) => {
            let mut it = items.into_iter();
            std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect()
        }
        _ => Vec::new(),
    };
    let field = |name: &str| {
        pairs.iter().find_map(|(k, v)| match (k, v) {
            (Value::BulkString(k), Value::BulkString(v)) if k == name.as_bytes() => {
                Some(String::from_utf8_lossy(v).into_owned())
            }
            (Value::SimpleString(k), Value::SimpleString(v)) if k == name => Some(v.clone()),
            _ => None,
        })
    };
    let (server, version) = (field("server"), field("version"));
    let info = match server.as_deref() {
        Some("valkey") => format!("server_name:valkey\nvalkey_version:{}\n", version.unwrap_or_default()),
        Some("redis") => format!("redis_version:{}\n", version.unwrap_or_default()),
        _ => String::new(),
    };
    Ok(Server::from_info(&info))
}

/// `7.0.15` → (7, 0).
fn major_minor(v: &str) -> Option<(u32, u32)> {
    let mut parts = v.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// A version as servers write it, short: digits, letters, `.`, `-`, `+`, `_`.
fn plain(v: &str) -> bool {
    !v.is_empty() && v.len() <= VERSION_MAX && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_and_valkey_are_told_apart() {
        let redis = Server::from_info("# Server\r\nredis_version:6.2.5\r\nredis_mode:standalone\r\n");
        assert_eq!((redis.family, redis.version.as_str()), (Family::Redis, "6.2.5"));
        assert!(!redis.read_only_key_patterns());
        assert_eq!(redis.name(), "Redis 6.2.5");
        let valkey = Server::from_info(
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\nserver_mode:cluster\r\n",
        );
        assert_eq!((valkey.family, valkey.version.as_str()), (Family::Valkey, "9.1.2"));
        assert!(valkey.read_only_key_patterns());
        assert_eq!(valkey.name(), "Valkey 9.1.2");
        assert!(Server::from_info("redis_version:7.0.15\r\n").read_only_key_patterns());
    }

    #[test]
    fn nothing_said_or_odd_values_are_unknown() {
        assert_eq!(Server::from_info(""), Server::unknown());
        assert!(Server::unknown().read_only_key_patterns());
        let odd = Server::from_info("redis_version:7.0 \"x\" {y}\r\n");
        assert_eq!((odd.family, odd.version.as_str()), (Family::Redis, "unknown"));
        let long = format!("redis_version:{}\r\n", "9".repeat(40));
        assert_eq!(Server::from_info(&long).version, "unknown");
    }
}
