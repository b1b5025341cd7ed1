//! The lock operations as Redis runs them: acquire (`SET NX PX`), the compare-and-delete
//! release and compare-and-pexpire renewal the runbooks recommend, and the fenced write of
//! the drill's protected resource. The demo, the drill and the tests all use these.
//!
//! An application's own release or renew script can stand in for the safe ones
//! (`LockScripts::custom`), as the drill does with `--release-script` / `--renew-script`.

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{RedisResult, Script, Value};

/// Compare-and-delete: the release the runbooks recommend.
pub const SAFE_RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
/// Compare-and-pexpire: the renewal the runbooks recommend.
pub const SAFE_RENEW: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
/// Compare-and-set on a resource: a write carries its fencing token and is refused when
/// the resource has seen a higher one. An accepted write also sets the resource's expiry
/// to ARGV[3] ms when given (the drill's keys all expire).
pub const FENCED_WRITE: &str = r#"
local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) < seen then return 0 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
if ARGV[3] then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1
"#;
/// `INCR` of a fencing counter that also sets its expiry (ARGV[1] ms), in one step: a
/// counter that must not outlive its user (the drill's) is never left without one.
pub const NEXT_FENCE_EXPIRING: &str =
    "local n = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return n";

/// The release and renew scripts in use (by default the safe ones).
#[derive(Debug, Clone)]
pub struct LockScripts {
    release: Script,
    renew: Script,
    write: Script,
}

impl Default for LockScripts {
    fn default() -> Self {
        LockScripts::custom(SAFE_RELEASE, SAFE_RENEW)
    }
}

impl LockScripts {
    /// The application's own scripts: release gets KEYS[1] lock, ARGV[1] token; renew
    /// also ARGV[2] ttl in ms. Either says yes with a positive number, `OK` or true.
    pub fn custom(release: &str, renew: &str) -> Self {
        LockScripts {
            release: Script::new(release),
            renew: Script::new(renew),
            write: Script::new(FENCED_WRITE),
        }
    }

    /// Put the three scripts in the server's script cache (`SCRIPT LOAD`), so that each later
    /// use is a single `EVALSHA`.
    pub async fn load(&self, conn: &mut impl ConnectionLike) -> RedisResult<()> {
        for script in [&self.release, &self.renew, &self.write] {
            script.load_async(conn).await?;
        }
        Ok(())
    }

    /// Release `key` if `token` holds it; false when it does not (any more).
    pub async fn release(&self, conn: &mut impl ConnectionLike, key: &str, token: &str) -> RedisResult<bool> {
        let v: Value = self.release.key(key).arg(token).invoke_async(conn).await?;
        Ok(truthy(&v))
    }

    /// Extend `key` to `ttl` if `token` holds it; false when it does not (any more).
    pub async fn renew<C: ConnectionLike>(
        &self,
        c: &mut C,
        key: &str,
        token: &str,
        ttl: Duration,
    ) -> RedisResult<bool> {
        let v: Value = self.renew.key(key).arg(token).arg(millis(ttl)).invoke_async(c).await?;
        Ok(truthy(&v))
    }

    /// Write `value` to the hash `resource` under fencing token `fence`; false when the
    /// resource has seen a higher token. An accepted write sets the resource to expire
    /// after `expire` when given.
    pub async fn fenced_write(
        &self,
        conn: &mut impl ConnectionLike,
        resource: &str,
        fence: i64,
        value: &str,
        expire: Option<Duration>,
    ) -> RedisResult<bool> {
        let mut call = self.write.key(resource);
        call.arg(fence).arg(value);
        if let Some(d) = expire {
            call.arg(millis(d));
        }
        let v: Value = call.invoke_async(conn).await?;
        Ok(truthy(&v))
    }
}

/// `SET key token NX PX ttl`: true when the lock was free and is now `token`'s.
pub async fn acquire<C: ConnectionLike>(c: &mut C, key: &str, token: &str, ttl: Duration) -> RedisResult<bool> {
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(millis(ttl))
        .query_async(c)
        .await?;
    Ok(set.is_some())
}

/// `INCR` of a fencing counter: the next token.
pub async fn next_fence(conn: &mut impl ConnectionLike, fence_key: &str) -> RedisResult<i64> {
    redis::cmd("INCR").arg(fence_key).query_async(conn).await
}

/// The next token of a fencing counter that expires `expire` after this increment
/// ([`NEXT_FENCE_EXPIRING`]).
pub async fn next_fence_expiring(
    conn: &mut impl ConnectionLike,
    fence_key: &str,
    expire: Duration,
) -> RedisResult<i64> {
    static SCRIPT: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| Script::new(NEXT_FENCE_EXPIRING));
    SCRIPT.key(fence_key).arg(millis(expire)).invoke_async(conn).await
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// How an application's script says yes: a positive number, `OK`, or true.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Int(n) => *n > 0,
        Value::Okay => true,
        Value::Boolean(b) => *b,
        Value::SimpleString(s) => s.eq_ignore_ascii_case("ok"),
        Value::BulkString(b) => b.eq_ignore_ascii_case(b"ok") || b == b"1",
        _ => false,
    }
}
