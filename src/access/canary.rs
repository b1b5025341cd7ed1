//! The canary: a key of lockwatch's own on each primary, `lockwatch:canary:{TAG}:INSTANCE`,
//! written with `SET … PX 300` (one write) and read once after its TTL (`PTTL`, which makes
//! the primary expire it), so that its keyspace notifications — `set`, `expire`, `expired` —
//! prove end to end that the flags `K`, `$`, `g` and `x` deliver on this connection.
//!
//! Shared by the watcher (every interval, on its own subscription) and `check-config
//! --connect` (one round on a connection of its own), so both judge the same way.
//!
//! A *marker* (`lockwatch:canary:{TAG}:INSTANCE:mSEQ`) is the same kind of write, put in a
//! slot that a node is giving up by atomic slot migration: its `set` marks a place in that
//! node's stream of notifications and, copied by the import, the same place in the
//! importing node's (the watcher's slot handoff).

use std::time::Duration;

use redis::aio::ConnectionLike;

/// Every canary key begins so; SCAN pages and the watcher leave such keys out of every namespace.
pub const PREFIX: &str = "lockwatch:canary:";
/// The canary's TTL: short, so that a canary outlives no round.
pub const TTL_MS: u64 = 300;
/// When the canary is read after its write: past its TTL, so the read expires it.
pub const TOUCH_AFTER: Duration = Duration::from_millis(TTL_MS + 100);
/// A round's events must have arrived this long after the write.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// One canary event, by the flag that delivers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// `set` — flag `$`.
    Set = 1,
    /// `expire` (the `PX` of the `SET`) — flag `g`.
    Expire = 2,
    /// `expired` — flag `x`.
    Expired = 4,
}

/// All three events of a round.
pub const ALL: u8 = Seen::Set as u8 | Seen::Expire as u8 | Seen::Expired as u8;

impl Seen {
    /// The event a notification's payload names, if a canary event.
    pub fn of(payload: &[u8]) -> Option<Seen> {
        match payload {
            b"set" => Some(Seen::Set),
            b"expire" => Some(Seen::Expire),
            b"expired" => Some(Seen::Expired),
            _ => None,
        }
    }
}

/// What a round's events say of the flags: `None` when all three arrived, else the gap in
/// words — which flags, and what lockwatch cannot see without them.
pub fn gap(seen: u8) -> Option<String> {
    if seen & ALL == ALL {
        return None;
    }
    if seen == 0 {
        return Some(
            "no keyspace event of the canary arrived: notify-keyspace-events lacks `K` (keyspace channels; `E` alone delivers only on keyevent channels, which lockwatch does not use) or is empty — nothing of the locks is seen"
                .into(),
        );
    }
    let mut lacks = Vec::new();
    if seen & Seen::Set as u8 == 0 {
        lacks.push("`$` (no `set`: acquisitions unseen)");
    }
    if seen & Seen::Expire as u8 == 0 {
        lacks.push("`g` (no `expire`/`del`: renewals and releases unseen)");
    }
    if seen & Seen::Expired as u8 == 0 {
        lacks.push("`x` (no `expired`: expiries, and so takeovers, unseen)");
    }
    Some(format!(
        "the canary's events show notify-keyspace-events lacks {}",
        lacks.join(", ")
    ))
}

/// The flags the canary's events stand for, as a round that saw `seen` proves them.
pub fn proven_flags(seen: u8) -> String {
    let mut out = String::new();
    if seen != 0 {
        out.push('K');
    }
    for (bit, flag) in [(Seen::Set, '$'), (Seen::Expire, 'g'), (Seen::Expired, 'x')] {
        if seen & bit as u8 != 0 {
            out.push(flag);
        }
    }
    out
}

/// The canary key of `instance` with hash tag `tag`.
fn key(tag: &str, instance: &str) -> Vec<u8> {
    format!("{PREFIX}{{{tag}}}:{instance}").into_bytes()
}

/// The canary key of `instance` that `fits` (on a cluster: whose slot the primary serves),
/// with the first tag of `0`, `1`, … that does; `None` when none of 100,000 does.
pub fn key_for(instance: &str, fits: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
    (0..100_000u32).map(|n| key(&n.to_string(), instance)).find(|k| fits(k))
}

/// The keyspace channel pattern of the canaries in `db`.
pub fn channel(db: i64) -> String {
    format!("__keyspace@{db}__:{PREFIX}*")
}

/// How a canary write went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    Ok,
    /// The server refused it (ACL `NOPERM`, a read-only user, a command renamed away): the
    /// canary cannot work here, and lockwatch falls back to the flags or passive evidence.
    Refused(String),
}

/// Write the canary: one `SET key value PX TTL_MS`.
pub async fn write(conn: &mut impl ConnectionLike, key: &[u8], value: &str) -> redis::RedisResult<Written> {
    let r: redis::RedisResult<redis::Value> = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("PX")
        .arg(TTL_MS)
        .query_async(conn)
        .await;
    match r {
        Ok(_) => Ok(Written::Ok),
        // MOVED: the key's slot is another node's, which is no refusal.
        Err(e)
            if super::notify::is_refusal(&e) && e.kind() != redis::ErrorKind::Server(redis::ServerErrorKind::Moved) =>
        {
            Ok(Written::Refused(e.to_string()))
        }
        Err(e) => Err(e),
    }
}

/// What one round on connections of its own found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The events that arrived (`Seen` bits; `ALL`: proven).
    Seen(u8),
    /// The write was refused: Redis's answer.
    Refused(String),
    /// `PSUBSCRIBE` of the canary channel was refused: Redis's answer.
    ChannelRefused(String),
}

/// One round on `link`'s node (`check-config --connect`): subscribe to the canary channel of
/// `db`, write a canary on a slot the node serves (a cluster node answers MOVED for others),
/// read it after its TTL, and gather its events until the deadline.
pub async fn probe(link: &super::Link, db: i64, instance: &str) -> redis::RedisResult<Probe> {
    use futures_util::StreamExt;
    let timed_out = |what: &str| redis::RedisError::from((redis::ErrorKind::Io, "timed out", what.to_string()));
    let pubsub = tokio::time::timeout(DEADLINE, link.pubsub())
        .await
        .map_err(|_| timed_out("connecting for pub/sub"))??;
    let (mut sink, mut stream) = pubsub.split();
    let chan = channel(db);
    match tokio::time::timeout(DEADLINE, sink.psubscribe(chan.as_str())).await {
        Err(_) => return Err(timed_out("PSUBSCRIBE")),
        Ok(Err(e)) if super::notify::is_refusal(&e) => return Ok(Probe::ChannelRefused(e.to_string())),
        Ok(r) => r?,
    }
    let mut conn = link.once().await?;
    let mut written = None;
    for n in 0..256u32 {
        let k = key(&n.to_string(), instance);
        match write(&mut conn, &k, instance).await {
            Ok(Written::Ok) => {
                written = Some(k);
                break;
            }
            Ok(Written::Refused(why)) => return Ok(Probe::Refused(why)),
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Moved) => continue,
            Err(e) => return Err(e),
        }
    }
    let Some(k) = written else {
        return Ok(Probe::Refused("no canary key this node serves was found".into()));
    };
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let prefix = format!("__keyspace@{db}__:").into_bytes();
    let mut seen = 0u8;
    let mut touched = false;
    let touch_at = tokio::time::Instant::now() + TOUCH_AFTER;
    while seen & ALL != ALL {
        let until = if touched { deadline } else { touch_at };
        match tokio::time::timeout_at(until, stream.next()).await {
            Ok(Some(msg)) => {
                let ours = msg
                    .get_channel::<Vec<u8>>()
                    .is_ok_and(|c| c.strip_prefix(prefix.as_slice()) == Some(k.as_slice()));
                if ours && let Some(bit) = Seen::of(msg.get_payload_bytes()) {
                    seen |= bit as u8;
                }
            }
            Ok(None) => break,
            Err(_) if !touched => {
                touched = true;
                touch(&mut conn, &k).await?;
            }
            Err(_) => break,
        }
    }
    Ok(Probe::Seen(seen))
}

/// The marker number `seq` of canary key `key`.
pub fn marker(key: &[u8], seq: u64) -> Vec<u8> {
    [key, format!(":m{seq}").as_bytes()].concat()
}

/// The number of `key` when it is a marker of `instance`'s canaries.
pub fn marker_seq(key: &[u8], instance: &str) -> Option<u64> {
    let rest = key.strip_prefix(PREFIX.as_bytes())?;
    let close = rest.iter().position(|&b| b == b'}')?;
    let rest = rest.get(close + 1..)?.strip_prefix(b":")?;
    let n = rest.strip_prefix(instance.as_bytes())?.strip_prefix(b":m")?;
    std::str::from_utf8(n).ok()?.parse().ok()
}

/// How long a marker lives.
const MARKER_TTL_MS: u64 = 2_000;

/// How a marker write went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marked {
    Ok,
    /// `MOVED`: the node does not serve the marker's slot (any more).
    Moved,
    /// `ASK`: the slot is being migrated key by key (`MIGRATE`), not atomically.
    Ask,
    /// No write allowed here (ACL, a command renamed away): Redis's answer.
    Refused(String),
}

/// Write marker `key` (`SET key 1 PX …`) on the node of `conn`, without following a
/// redirection: its `set` marks a place in that node's stream of notifications, and in the
/// stream of a node that copies the slot from it (an atomic slot migration's import).
pub async fn mark(conn: &mut impl ConnectionLike, key: &[u8]) -> redis::RedisResult<Marked> {
    let r: redis::RedisResult<redis::Value> = redis::cmd("SET")
        .arg(key)
        .arg(1)
        .arg("PX")
        .arg(MARKER_TTL_MS)
        .query_async(conn)
        .await;
    match r {
        Ok(_) => Ok(Marked::Ok),
        Err(e) if e.code() == Some("MOVED") => Ok(Marked::Moved),
        Err(e) if e.code() == Some("ASK") => Ok(Marked::Ask),
        Err(e)
            if super::notify::is_refusal(&e) && !matches!(e.code(), Some("TRYAGAIN" | "CLUSTERDOWN" | "LOADING")) =>
        {
            Ok(Marked::Refused(e.to_string()))
        }
        Err(e) => Err(e),
    }
}

/// Read the canary after its TTL: the primary expires it now (the `expired` event) rather
/// than when its expiry cycle happens to sample it. A refusal is the write's to report.
pub async fn touch(conn: &mut impl ConnectionLike, key: &[u8]) -> redis::RedisResult<()> {
    let r: redis::RedisResult<redis::Value> = redis::cmd("PTTL").arg(key).query_async(conn).await;
    match r {
        Err(e) if !super::notify::is_refusal(&e) => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_name_each_missing_flag() {
        assert_eq!(gap(ALL), None);
        assert!(gap(0).unwrap().contains("lacks `K`"));
        let g = gap(Seen::Set as u8 | Seen::Expire as u8).unwrap();
        assert!(g.contains("`x`") && !g.contains("`$`") && !g.contains("`g`"), "{g}");
        let g = gap(Seen::Expired as u8).unwrap();
        assert!(g.contains("`$`") && g.contains("`g`") && !g.contains("`x`"), "{g}");
        assert_eq!(proven_flags(ALL), "K$gx");
        assert_eq!(proven_flags(Seen::Set as u8), "K$");
        assert_eq!(proven_flags(0), "");
    }

    #[test]
    fn keys_carry_a_tag_that_lands_on_the_wanted_slot() {
        use super::super::cluster::slot;
        let k = key_for("abc", |k| slot(k) >= 16_000).unwrap();
        assert!(slot(&k) >= 16_000);
        assert!(k.starts_with(PREFIX.as_bytes()) && k.ends_with(b"}:abc"));
        assert_eq!(key_for("abc", |_| true).unwrap(), b"lockwatch:canary:{0}:abc");
        assert_eq!(key_for("abc", |_| false), None);
        assert_eq!(channel(3), "__keyspace@3__:lockwatch:canary:*");
    }

    #[test]
    fn markers_are_told_by_their_instance_and_number() {
        let m = marker(&key("7", "abc"), 42);
        assert_eq!(m, b"lockwatch:canary:{7}:abc:m42");
        assert_eq!(marker_seq(&m, "abc"), Some(42));
        assert_eq!(marker_seq(&m, "abd"), None, "another exporter's");
        assert_eq!(marker_seq(&key("7", "abc"), "abc"), None, "the canary itself");
        assert_eq!(marker_seq(b"lw:lock:1", "abc"), None);
    }
}
