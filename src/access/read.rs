//! The Redis round trips of a sample pass: one `SCAN MATCH … COUNT …` page, and the owner
//! and PTTL of a page of keys read in one pipeline.
//!
//! String-valued namespaces use one `MGET` for the page plus one `PTTL` per key (a
//! non-string key reads as nil from `MGET`, and its PTTL tells it exists). Redisson
//! namespaces need `HGETALL` per key. A page is read in one MULTI/EXEC, so a lock released
//! and re-taken between the value and the PTTL cannot look like a key of another type.
//! The transaction is sent as a plain pipeline (`multi_exec`): a user without `+multi`
//! gets the server's refusal as an error, where redis-rs's atomic pipeline would panic.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use super::owner;
use crate::config::ValueKind;
use crate::vocab::Unreadable;

/// What a key turned out to hold.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum KeyRead {
    Lock {
        owner: Vec<u8>,
        pttl_ms: i64,
    },
    /// The owner alone was asked for (`read_owners`): a string lock's value.
    Owner(Vec<u8>),
    /// Deleted between SCAN and the read: nothing to count.
    Gone,
    Unreadable(Unreadable),
}

/// One SCAN page: the next cursor (0 when the walk is done) and the keys, lockwatch's own
/// canaries left out (a broad pattern such as `*` would match them for a moment).
pub(crate) async fn scan_page(
    conn: &mut impl ConnectionLike,
    pattern: &str,
    cursor: u64,
    count: usize,
) -> RedisResult<(u64, Vec<Vec<u8>>)> {
    let (next, mut keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
        .arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(count)
        .query_async(conn)
        .await?;
    keys.retain(|k| !k.starts_with(super::canary::PREFIX.as_bytes()));
    Ok((next, keys))
}

/// Owner and PTTL of each key, in one pipeline (one MULTI/EXEC).
pub(crate) async fn read_locks(
    conn: &mut impl ConnectionLike,
    kind: &ValueKind,
    keys: &[Vec<u8>],
) -> RedisResult<Vec<KeyRead>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut cmds = Vec::with_capacity(keys.len() * 2 + 1);
    match kind {
        ValueKind::Redisson => {
            for k in keys {
                cmds.push(redis::cmd("HGETALL").arg(k).to_owned());
                cmds.push(redis::cmd("PTTL").arg(k).to_owned());
            }
        }
        _ => {
            cmds.push(redis::cmd("MGET").arg(keys).to_owned());
            for k in keys {
                cmds.push(redis::cmd("PTTL").arg(k).to_owned());
            }
        }
    }
    let replies = multi_exec(conn, cmds).await?;
    let mut replies = replies.into_iter();
    let mut out = Vec::with_capacity(keys.len());
    match kind {
        ValueKind::Redisson => {
            while let (Some(hash), Some(pttl)) = (replies.next(), replies.next()) {
                out.push(redisson_read(hash, pttl_of(pttl)?)?);
            }
        }
        _ => {
            let values = match replies.next() {
                Some(Value::Array(v)) => v,
                Some(Value::ServerError(e)) => return Err(e.into()),
                other => return Err(unexpected("MGET", other)),
            };
            for (value, pttl) in values.into_iter().zip(replies) {
                out.push(string_read(kind, value, pttl_of(pttl)?));
            }
        }
    }
    if out.len() != keys.len() {
        return Err(unexpected("pipeline", None));
    }
    Ok(out)
}

/// The owner of each string lock key, in one `MGET` (no TTL, no transaction: one command
/// is atomic). A key gone or of another type reads as `Gone`; a value the namespace's
/// `value` setting cannot read as `Unreadable`. Redisson namespaces read owner and TTL.
pub(crate) async fn read_owners(
    conn: &mut impl ConnectionLike,
    kind: &ValueKind,
    keys: &[Vec<u8>],
) -> RedisResult<Vec<KeyRead>> {
    if keys.is_empty() || *kind == ValueKind::Redisson {
        return read_locks(conn, kind, keys).await;
    }
    let values: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(keys).query_async(conn).await?;
    if values.len() != keys.len() {
        return Err(unexpected("MGET", None));
    }
    Ok(values.into_iter().map(|v| owner_of(kind, v)).collect())
}

/// A string lock's owner from its value as `MGET` or `GET` read it (`None`: gone, or of
/// another type).
pub(crate) fn owner_of(kind: &ValueKind, value: Option<Vec<u8>>) -> KeyRead {
    let Some(bytes) = value else {
        return KeyRead::Gone;
    };
    match owner::from_string(kind, &bytes) {
        Ok(o) => KeyRead::Owner(o.into_owned()),
        Err(reason) => KeyRead::Unreadable(reason),
    }
}

/// `cmds` in one MULTI/EXEC, sent as a plain pipeline (`MULTI`, the commands, `EXEC`):
/// the replies EXEC gave, each command's error as a `Value::ServerError`. A refused MULTI
/// (no `+multi`), a command refused while queued (no permission) or a refused EXEC is that
/// refusal as an error. redis-rs's own atomic pipeline is not used: a refused MULTI makes
/// its reply bookkeeping underflow (a panic in debug builds).
pub(crate) async fn multi_exec(conn: &mut impl ConnectionLike, cmds: Vec<redis::Cmd>) -> RedisResult<Vec<Value>> {
    let n = cmds.len();
    let mut pipe = redis::pipe();
    pipe.cmd("MULTI");
    for c in cmds {
        pipe.add_command(c);
    }
    pipe.cmd("EXEC").ignore_errors();
    let replies: Vec<Value> = pipe.query_async(conn).await?;
    if replies.len() != n + 2 {
        return Err(unexpected("MULTI/EXEC", None));
    }
    let mut replies = replies.into_iter();
    // MULTI, then each command's QUEUED: the first refusal is the answer.
    for reply in replies.by_ref().take(n + 1) {
        if let Value::ServerError(e) = reply {
            return Err(e.into());
        }
    }
    match replies.next() {
        Some(Value::Array(results)) => Ok(results),
        Some(Value::ServerError(e)) => Err(e.into()),
        other => Err(unexpected("EXEC", other)),
    }
}

/// What a fencing counter key held.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Counter {
    Value(i64),
    /// Deleted between SCAN and the read (or not a string: `MGET` cannot tell).
    Gone,
    NotInteger,
}

/// Values of fencing counters, in one `MGET`.
pub(crate) async fn read_counters(conn: &mut impl ConnectionLike, keys: &[Vec<u8>]) -> RedisResult<Vec<Counter>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let values: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(keys).query_async(conn).await?;
    Ok(values.into_iter().map(counter).collect())
}

/// A fencing counter's value as read.
pub(crate) fn counter(v: Option<Vec<u8>>) -> Counter {
    match v {
        None => Counter::Gone,
        Some(b) => match std::str::from_utf8(&b).ok().and_then(|s| s.trim().parse::<i64>().ok()) {
            Some(n) => Counter::Value(n),
            None => Counter::NotInteger,
        },
    }
}

/// One key read with single commands (a value command, then `PTTL`), each routed on its
/// own: what a cluster's routed connection can follow through `MOVED` and `ASK`. The two
/// replies are not atomic; a key that changed between them reads as it was at the `PTTL`
/// or, when the two disagree on whether it exists, as `WrongType` (the caller reads again).
pub(crate) async fn read_one(conn: &mut impl ConnectionLike, kind: &ValueKind, key: &[u8]) -> RedisResult<KeyRead> {
    let value: RedisResult<Value> = match kind {
        ValueKind::Redisson => redis::cmd("HGETALL").arg(key).query_async(conn).await,
        _ => redis::cmd("GET").arg(key).query_async(conn).await,
    };
    let value = match value {
        Ok(v) => v,
        Err(e) if e.code() == Some("WRONGTYPE") => return Ok(KeyRead::Unreadable(Unreadable::WrongType)),
        Err(e) => return Err(e),
    };
    let pttl = pttl_of(redis::cmd("PTTL").arg(key).query_async(conn).await?)?;
    match kind {
        ValueKind::Redisson => redisson_read(value, pttl),
        _ => Ok(string_read(kind, value, pttl)),
    }
}

fn pttl_of(v: Value) -> RedisResult<i64> {
    match v {
        Value::Int(n) => Ok(n),
        Value::ServerError(e) => Err(e.into()),
        other => Err(unexpected("PTTL", Some(other))),
    }
}

fn string_read(kind: &ValueKind, value: Value, pttl_ms: i64) -> KeyRead {
    if pttl_ms == -2 {
        return KeyRead::Gone;
    }
    let bytes = match value {
        Value::BulkString(bytes) => bytes,
        Value::SimpleString(s) => s.into_bytes(),
        // MGET answers nil for a key of another type; PTTL says the key exists.
        _ => return KeyRead::Unreadable(Unreadable::WrongType),
    };
    match owner::from_string(kind, &bytes) {
        Ok(o) => KeyRead::Lock {
            owner: o.into_owned(),
            pttl_ms,
        },
        Err(reason) => KeyRead::Unreadable(reason),
    }
}

fn redisson_read(hash: Value, pttl_ms: i64) -> RedisResult<KeyRead> {
    if pttl_ms == -2 {
        return Ok(KeyRead::Gone);
    }
    let bulk = |v: Value| match v {
        Value::BulkString(b) => Some(b),
        _ => None,
    };
    let fields: Vec<Vec<u8>> = match hash {
        Value::Array(items) => items.into_iter().step_by(2).filter_map(bulk).collect(),
        Value::Map(pairs) => pairs.into_iter().filter_map(|(k, _)| bulk(k)).collect(),
        Value::ServerError(e) if e.code() == "WRONGTYPE" => return Ok(KeyRead::Unreadable(Unreadable::WrongType)),
        // NOPERM, LOADING, OOM…: a problem of the server, not of the key.
        Value::ServerError(e) => return Err(e.into()),
        _ => return Ok(KeyRead::Unreadable(Unreadable::BadValue)),
    };
    Ok(match owner::from_hash_fields(fields.iter().map(Vec::as_slice)) {
        Some(o) => KeyRead::Lock {
            owner: o.to_vec(),
            pttl_ms,
        },
        None => KeyRead::Gone,
    })
}

fn unexpected(what: &str, got: Option<Value>) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Parse,
        "unexpected reply",
        format!("{what} answered {got:?}"),
    ))
}
