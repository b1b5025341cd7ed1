//! One-off questions to Redis for the commands that look rather than watch: a key's type,
//! TTL, owner and fencing counter (`inspect`), the server's version and whether the
//! configured user may run what lockwatch needs (`check-config --connect`).

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use super::owner;
use crate::config::ValueKind;

/// A key's Redis type (`none` when absent) and PTTL, read atomically.
pub(crate) async fn type_and_pttl(conn: &mut impl ConnectionLike, key: &str) -> RedisResult<(String, i64)> {
    redis::pipe()
        .atomic()
        .cmd("TYPE")
        .arg(key)
        .cmd("PTTL")
        .arg(key)
        .query_async(conn)
        .await
}

/// The owner of a lock key of `redis_type`, read the way `kind` says; `Err` explains in
/// words why the key holds no owner where the namespace expects one.
pub(crate) async fn owner_of(
    conn: &mut impl ConnectionLike,
    key: &str,
    redis_type: &str,
    kind: &ValueKind,
) -> RedisResult<Result<Vec<u8>, String>> {
    Ok(match (redis_type, kind) {
        ("string", ValueKind::Redisson) => Err("a string, but the namespace holds Redisson hash locks".into()),
        ("string", kind) => {
            let v: Vec<u8> = redis::cmd("GET").arg(key).query_async(conn).await?;
            owner::from_string(kind, &v)
                .map(|o| o.into_owned())
                .map_err(|_| "its value does not hold an owner where the namespace's `value` says".to_string())
        }
        ("hash", ValueKind::Redisson) => {
            let fields: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL").arg(key).query_async(conn).await?;
            fields
                .into_iter()
                .next()
                .map(|(f, _)| f)
                .ok_or_else(|| "an empty hash".to_string())
        }
        (t, _) => Err(format!("a {t}, which is not how this namespace keeps locks")),
    })
}

/// The values of `keys` as text (fencing counters as they are stored), `None` where absent.
pub(crate) async fn texts(conn: &mut impl ConnectionLike, keys: &[Vec<u8>]) -> RedisResult<Vec<Option<String>>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let values: Vec<Value> = redis::cmd("MGET").arg(keys).query_async(conn).await?;
    Ok(values.iter().map(text).collect())
}

/// The `redis_version` of `INFO server`, or `unknown`.
pub(crate) async fn server_version(conn: &mut impl ConnectionLike) -> String {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .trim()
        .to_string()
}

/// The commands a namespace's sampling needs that the server refuses, each with the
/// refusal, tried on `probe_key` (a key the pattern matches). Also returns the name of the
/// read command the namespace's `value` needs.
pub(crate) async fn refused_for_namespace(
    conn: &mut impl ConnectionLike,
    pattern: &str,
    probe_key: &str,
    kind: &ValueKind,
) -> (&'static str, Vec<String>) {
    let mut denied = Vec::new();
    let scan: RedisResult<Value> = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(1)
        .query_async(conn)
        .await;
    denied.extend(scan.err().map(|e| format!("SCAN ({e})")));
    let read = match kind {
        ValueKind::Redisson => "HGETALL",
        _ => "MGET",
    };
    let r: RedisResult<Value> = redis::cmd(read).arg(probe_key).query_async(conn).await;
    denied.extend(r.err().map(|e| format!("{read} ({e})")));
    let r: RedisResult<Value> = redis::cmd("PTTL").arg(probe_key).query_async(conn).await;
    denied.extend(r.err().map(|e| format!("PTTL ({e})")));
    (read, denied)
}

/// `PING`.
pub(crate) async fn ping(conn: &mut impl ConnectionLike) -> RedisResult<()> {
    redis::cmd("PING").query_async(conn).await
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}
