//! One-off questions to Redis for the commands that look rather than watch: a key's type,
//! TTL, owner and fencing counter (`inspect`), the server's version, and which of the
//! permissions lockwatch needs the configured user lacks (`check-config --connect`): each
//! command tried as lockwatch sends it, on a key or channel of the config's patterns, a
//! refusal named as the ACL rule that grants it. Probes only read; what to print is the
//! command's.

use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisResult, ServerErrorKind, Value};

use super::connect::{Link, TIMEOUT};
use super::owner;
use super::server::Server;
use crate::config::{NamespaceConfig, TargetConfig, ValueKind};
use crate::glob::Glob;

/// A key's Redis type (`none` when absent) and PTTL, read atomically.
pub(crate) async fn type_and_pttl(conn: &mut impl ConnectionLike, key: &str) -> RedisResult<(String, i64)> {
    let replies = super::read::multi_exec(
        conn,
        vec![
            redis::cmd("TYPE").arg(key).to_owned(),
            redis::cmd("PTTL").arg(key).to_owned(),
        ],
    )
    .await?;
    Ok(redis::from_redis_value(Value::Array(replies))?)
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

/// Which server it is (`INFO server`, else `HELLO`; unknown when neither tells), and
/// whether the user may not run `INFO`.
pub(crate) async fn server(conn: &mut impl ConnectionLike) -> RedisResult<(Server, Option<Missing>)> {
    match super::server::info(conn).await {
        Ok(server) => Ok((server, None)),
        Err(e) => {
            let missing = classify(e, "INFO", "info", "")?;
            let server = super::server::hello(conn).await.unwrap_or_else(|_| Server::unknown());
            Ok((server, missing))
        }
    }
}

/// A permission the configured user lacks, named the way an ACL rule grants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Missing {
    /// The command itself (`name` as typed, `rule` as ACL rules write it: `config|get`),
    /// tried `on` a key pattern or channel (empty for commands without one).
    Command {
        name: &'static str,
        rule: &'static str,
        on: String,
    },
    /// Reading the keys of `pattern`: grant `%R~<pattern>` (lockwatch only reads them), or
    /// `~<pattern>` before Redis 7.0 ([`key_rule`]).
    Keys { pattern: String },
    /// Subscribing to the channel pattern: grant `&<channel>`.
    Channel { channel: String },
    /// Refused for another reason (a renamed or disabled command): Redis's answer.
    Other { name: &'static str, why: String },
}

impl Missing {
    /// Whether an ACL rule grants it (not `Other`: a renamed or disabled command).
    pub(crate) fn grantable(&self) -> bool {
        !matches!(self, Missing::Other { .. })
    }
}

/// The rule that lets a user read the keys of `pattern`: `%R~<pattern>` (read-only) where
/// the server has read-only key patterns (Redis 7.0 and later, Valkey), else `~<pattern>`.
pub(crate) fn key_rule(pattern: &str, read_only: bool) -> String {
    match read_only {
        true => format!("%R~{pattern}"),
        false => format!("~{pattern}"),
    }
}

/// Run `cmd` and say whether the user may: `Ok(None)` when Redis ran it (an error answer
/// that is not a refusal, like WRONGTYPE, counts as allowed), `Ok(Some(_))` naming what
/// is missing, `Err` when the connection failed.
pub(crate) async fn refusal(
    conn: &mut impl ConnectionLike,
    name: &'static str,
    rule: &'static str,
    cmd: &redis::Cmd,
    on: &str,
) -> RedisResult<Option<Missing>> {
    let answer: RedisResult<Value> = cmd.query_async(conn).await;
    match answer {
        Ok(_) => Ok(None),
        Err(e) => classify(e, name, rule, on),
    }
}

/// What a refusal of `name` tried on `on` (a key pattern or a channel) means.
fn classify(e: redis::RedisError, name: &'static str, rule: &'static str, on: &str) -> RedisResult<Option<Missing>> {
    let detail = e.detail().unwrap_or_default();
    // A refused EXEC comes back as EXECABORT "… because of: NOPERM …".
    if e.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) || detail.contains("NOPERM") {
        // Redis checks the command first, then keys, then channels, and says which failed.
        return Ok(Some(if detail.contains("channel") {
            Missing::Channel {
                channel: on.to_string(),
            }
        } else if detail.contains("key") {
            Missing::Keys {
                pattern: on.to_string(),
            }
        } else {
            Missing::Command {
                name,
                rule,
                on: on.to_string(),
            }
        }));
    }
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_unrecoverable_error() {
        return Err(e);
    }
    if detail.contains("unknown command") {
        return Ok(Some(Missing::Other {
            name,
            why: e.to_string(),
        }));
    }
    Ok(None)
}

/// The read command of a namespace's lock values: `MGET`, or `HGETALL` for Redisson.
pub(crate) fn read_command(kind: &ValueKind) -> (&'static str, &'static str) {
    match kind {
        ValueKind::Redisson => ("HGETALL", "hgetall"),
        _ => ("MGET", "mget"),
    }
}

/// What a namespace needs that the user may not do, each tried on a key its pattern
/// matches: sampling (SCAN, MGET or HGETALL, PTTL), `inspect` (TYPE, and GET for string
/// values) and the fencing counters (MGET on a key of `fence_pattern`). Each command and
/// each key pattern is named once.
pub(crate) async fn namespace_refusals(
    conn: &mut impl ConnectionLike,
    ns: &NamespaceConfig,
) -> RedisResult<Vec<Missing>> {
    let pattern = ns.pattern.as_str();
    let key = example_key(&ns.pattern);
    let (read, read_rule) = read_command(&ns.value);
    let mut tries = vec![
        (
            "SCAN",
            "scan",
            redis::cmd("SCAN")
                .arg(0)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1)
                .clone(),
            pattern,
        ),
        (read, read_rule, redis::cmd(read).arg(&key).clone(), pattern),
        ("PTTL", "pttl", redis::cmd("PTTL").arg(&key).clone(), pattern),
        ("TYPE", "type", redis::cmd("TYPE").arg(&key).clone(), pattern),
    ];
    if ns.value != ValueKind::Redisson {
        tries.push(("GET", "get", redis::cmd("GET").arg(&key).clone(), pattern));
    }
    if let Some(fence) = &ns.fence_pattern {
        let fence_key = example_key(fence);
        tries.push((
            "MGET",
            "mget",
            redis::cmd("MGET").arg(fence_key).clone(),
            fence.as_str(),
        ));
    }
    let mut missing: Vec<Missing> = Vec::new();
    for (name, rule, cmd, on) in &tries {
        let Some(m) = refusal(conn, name, rule, cmd, on).await? else {
            continue;
        };
        let seen = missing.iter().any(|old| match (old, &m) {
            (Missing::Command { rule: a, .. }, Missing::Command { rule: b, .. }) => a == b,
            (a, b) => a == b,
        });
        if !seen {
            missing.push(m);
        }
    }
    Ok(missing)
}

/// MULTI and EXEC (the sampler reads each page of locks in one transaction), tried on a
/// connection of their own that is dropped after: a refused EXEC would leave it inside
/// the transaction.
pub(crate) async fn transaction_refusals(t: &TargetConfig) -> RedisResult<Vec<Missing>> {
    let mut conn = super::connect::once(t).await?;
    let mut missing = Vec::new();
    missing.extend(refusal(&mut conn, "MULTI", "multi", &redis::cmd("MULTI"), "").await?);
    missing.extend(refusal(&mut conn, "EXEC", "exec", &redis::cmd("EXEC"), "").await?);
    Ok(missing)
}

/// `CONFIG SET`, asked without changing anything: of a parameter that does not exist,
/// which Redis refuses only after the ACL check has let the command through.
pub(crate) async fn config_set_refusal(conn: &mut impl ConnectionLike) -> RedisResult<Option<Missing>> {
    let cmd = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lockwatch-permission-probe")
        .arg("0")
        .clone();
    refusal(conn, "CONFIG SET", "config|set", &cmd, "").await
}

/// `CONFIG GET notify-keyspace-events`, as the watcher asks it.
pub(crate) async fn config_get_refusal(conn: &mut impl ConnectionLike) -> RedisResult<Option<Missing>> {
    let cmd = redis::cmd("CONFIG").arg("GET").arg("notify-keyspace-events").clone();
    refusal(conn, "CONFIG GET", "config|get", &cmd, "").await
}

/// The keyspace channel pattern the watcher subscribes to for the keys of `pattern`.
pub(crate) fn keyspace_channel(db: i64, pattern: &Glob) -> String {
    format!("__keyspace@{db}__:{}", pattern.as_str())
}

/// PSUBSCRIBE of each of `channels`, on a pub/sub connection of its own that is dropped
/// after. A refused command is named once (its channels are not checked then: Redis
/// checks the command first).
pub(crate) async fn channel_refusals(t: &TargetConfig, channels: &[String]) -> RedisResult<Vec<Missing>> {
    let timed_out = || redis::RedisError::from((redis::ErrorKind::Io, "timed out", "PSUBSCRIBE".to_string()));
    let link = Link::new(t).map_err(|e| e.source)?;
    let pubsub = tokio::time::timeout(TIMEOUT, link.pubsub())
        .await
        .map_err(|_| timed_out())??;
    let (mut sink, _stream) = pubsub.split();
    let mut missing = Vec::new();
    for channel in channels {
        let answer = tokio::time::timeout(TIMEOUT, sink.psubscribe(channel.as_str()))
            .await
            .map_err(|_| timed_out())?;
        let Err(e) = answer else { continue };
        match classify(e, "PSUBSCRIBE", "psubscribe", channel)? {
            Some(m @ Missing::Command { .. }) => {
                missing.push(m);
                break;
            }
            Some(m) => missing.push(m),
            None => {}
        }
    }
    Ok(missing)
}

/// A key `pattern` matches, to try commands on (it need not exist).
fn example_key(pattern: &Glob) -> Vec<u8> {
    pattern.overlap(pattern).unwrap_or_default()
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
