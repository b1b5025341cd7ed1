//! The `notify-keyspace-events` setting: which flags lockwatch needs, reading them, and
//! the `notifications` policy (auto, require, configure) applied on each connect.
//!
//! Shared by the watcher and `check-config --connect`, so both say the same thing.

use redis::aio::ConnectionLike;

use crate::config::{NamespaceConfig, Notifications, ValueKind};

/// Flags the watcher needs: keyspace channels (`K`, which it subscribes to by pattern),
/// generic (`g`: del, expire), string (`$`: set), expired (`x`), evicted (`e`); and hash
/// (`h`) when a namespace holds Redisson locks.
pub fn needed_flags(namespaces: &[NamespaceConfig]) -> String {
    let mut needed = String::from("Kg$xe");
    if namespaces.iter().any(|n| n.value == ValueKind::Redisson) {
        needed.push('h');
    }
    needed
}

/// Expand Redis's `A` alias (`g$lshzxet`) so flags can be compared one by one.
fn expand(flags: &str) -> String {
    flags.replace('A', "g$lshzxet")
}

/// Flags of `needed` that `current` lacks.
pub fn missing_flags(current: &str, needed: &str) -> String {
    let have = expand(current);
    needed.chars().filter(|c| !have.contains(*c)).collect()
}

/// `current` plus whatever of `needed` it lacks, nothing removed.
pub fn merge_flags(current: &str, needed: &str) -> String {
    let mut out = current.to_string();
    out.push_str(&missing_flags(current, needed));
    out
}

/// The command that turns on what is missing and keeps what is set.
pub fn fix_command(current: &str, needed: &str) -> String {
    format!("CONFIG SET notify-keyspace-events '{}'", merge_flags(current, needed))
}

/// Of the server's setting `current`, the flags lockwatch subscribes for (of `needed`) and
/// the others, each with what it is, which lockwatch never counts from: ("K g $ x e",
/// "E (keyevent channels), o (overwritten)…"). Events of ignored classes arrive on the same
/// keyspace channels (`overwritten` before a `set`, `type_changed`, `hexpired`…) and change
/// no count: only set, del, expire, expired, evicted and Redisson's hash writes do.
pub fn flag_use(current: &str, needed: &str) -> (String, String) {
    let have = expand(current);
    let mut used = Vec::new();
    let mut ignored = Vec::new();
    let mut seen = String::new();
    for c in have.chars().filter(|c| *c != 'A') {
        if seen.contains(c) {
            continue;
        }
        seen.push(c);
        if needed.contains(c) {
            used.push(c.to_string());
            continue;
        }
        let what = match c {
            'E' => "keyevent channels",
            'l' => "lists",
            's' => "sets",
            'h' => "hashes, hash-field expiry",
            'z' => "sorted sets",
            't' => "streams",
            'm' => "key misses",
            'n' => "new keys",
            'd' => "module types",
            'o' => "overwritten",
            'c' => "type_changed",
            _ => "a class lockwatch does not know",
        };
        ignored.push(format!("{c} ({what})"));
    }
    (used.join(" "), ignored.join(", "))
}

/// What lockwatch cannot see without each flag of `missing`, in words.
pub fn consequences(missing: &str) -> String {
    let words: Vec<&str> = missing
        .chars()
        .filter_map(|c| match c {
            'K' => {
                Some("`K`: keyspace channels, so nothing arrives at all (`E` alone delivers only on keyevent channels)")
            }
            'g' => Some("`g`: `del` and `expire`, so releases and renewals go unseen"),
            '$' => Some("`$`: `set`, so acquisitions go unseen"),
            'x' => Some("`x`: `expired`, so expiries, and with them expiry takeovers, go unseen"),
            'e' => Some("`e`: `evicted`, so locks dropped by the maxmemory policy go unseen"),
            'h' => Some("`h`: hash writes, so Redisson locks' acquisitions go unseen"),
            _ => None,
        })
        .collect();
    words.join("; ")
}

/// Where to set `flags` on the common providers, after the `CONFIG SET` line.
pub fn where_to_set(flags: &str) -> String {
    format!(
        "set notify-keyspace-events to '{flags}' — self-managed: redis-cli CONFIG SET notify-keyspace-events '{flags}' (and in redis.conf); ElastiCache and MemoryDB: the parameter group's notify-keyspace-events; Azure Cache for Redis (Standard, Premium): Advanced settings → Keyspace notifications; Memorystore: the instance's redis config notify-keyspace-events; Redis Cloud and Upstash: CONFIG SET where allowed, else the provider's support"
    )
}

/// What the server's setting is, as far as lockwatch can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flags {
    /// `CONFIG GET` answered.
    Set(String),
    /// `CONFIG GET` was refused (managed Redis, ACL): the setting is unknown.
    Unreadable(String),
}

pub async fn read(conn: &mut impl ConnectionLike) -> redis::RedisResult<Flags> {
    let got: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query_async(conn)
        .await;
    match got {
        Ok(v) => Ok(Flags::Set(v.get(1).cloned().unwrap_or_default())),
        Err(e) if is_refusal(&e) => Ok(Flags::Unreadable(e.to_string())),
        Err(e) => Err(e),
    }
}

/// An error reply (unknown command, NOPERM, disabled) rather than a broken connection.
pub(crate) fn is_refusal(e: &redis::RedisError) -> bool {
    !(e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_unrecoverable_error())
}

/// What applying the policy found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The flags lockwatch needs are on (`flags` is the server's value).
    On { flags: String },
    /// `configure` added the missing flags: from `before` to `after`.
    Configured { before: String, after: String },
    /// Flags are missing (auto): the watcher subscribes, but will see too little.
    Missing { flags: String, missing: String },
    /// The setting could not be read (or, for configure, written): subscribing anyway.
    Unknown { why: String },
}

/// The policy refuses to go on.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error(
        "keyspace notifications are required (notifications = \"require\") but notify-keyspace-events is \"{flags}\", which lacks `{missing}`; enable them with: redis-cli {fix}"
    )]
    Required {
        flags: String,
        missing: String,
        fix: String,
    },
    #[error(
        "keyspace notifications are required (notifications = \"require\") but CONFIG GET notify-keyspace-events was refused ({why}); enable notify-keyspace-events '{needed}' in the server's settings and use notifications = \"auto\", which subscribes without checking"
    )]
    Unverifiable { why: String, needed: String },
    #[error("cannot check notify-keyspace-events: {0}")]
    Redis(#[from] redis::RedisError),
}

/// Check (and for `configure`, fix) the server's setting per `policy`.
pub async fn apply(
    policy: Notifications,
    needed: &str,
    conn: &mut impl ConnectionLike,
) -> Result<Applied, NotifyError> {
    let flags = match read(conn).await? {
        Flags::Set(f) => f,
        Flags::Unreadable(why) => {
            return match policy {
                Notifications::Require => Err(NotifyError::Unverifiable {
                    why,
                    needed: needed.to_string(),
                }),
                _ => Ok(Applied::Unknown { why }),
            };
        }
    };
    let missing = missing_flags(&flags, needed);
    if missing.is_empty() {
        return Ok(Applied::On { flags });
    }
    match policy {
        Notifications::Require => Err(NotifyError::Required {
            fix: fix_command(&flags, needed),
            flags,
            missing,
        }),
        Notifications::Configure => {
            let after = merge_flags(&flags, needed);
            let set: redis::RedisResult<()> = redis::cmd("CONFIG")
                .arg("SET")
                .arg("notify-keyspace-events")
                .arg(&after)
                .query_async(conn)
                .await;
            match set {
                Ok(()) => Ok(Applied::Configured { before: flags, after }),
                Err(e) if is_refusal(&e) => Ok(Applied::Unknown {
                    why: format!("CONFIG SET refused: {e}"),
                }),
                Err(e) => Err(e.into()),
            }
        }
        Notifications::Auto | Notifications::Off => Ok(Applied::Missing { flags, missing }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_used_and_those_ignored_are_told_apart() {
        let (used, ignored) = flag_use("AKEoc", "Kg$xe");
        assert_eq!(used, "g $ x e K");
        assert!(
            ignored.starts_with("l (lists), s (sets), h (hashes, hash-field expiry)"),
            "{ignored}"
        );
        assert!(
            ignored.ends_with("E (keyevent channels), o (overwritten), c (type_changed)"),
            "{ignored}"
        );
        let (used, ignored) = flag_use("Kg$xeh", "Kg$xeh");
        assert_eq!((used.as_str(), ignored.as_str()), ("K g $ x e h", ""));
    }

    #[test]
    fn flags_are_compared_with_the_alias_expanded() {
        assert_eq!(missing_flags("KEA", "Kg$xe"), "");
        assert_eq!(missing_flags("KA", "Kg$xeh"), "");
        assert_eq!(missing_flags("", "Kg$xe"), "Kg$xe");
        // Keyevent channels (E) alone do not deliver on the keyspace channels lockwatch uses.
        assert_eq!(missing_flags("Ex", "Kg$xe"), "Kg$e");
        assert_eq!(merge_flags("Kl", "Kg$xe"), "Klg$xe");
        assert_eq!(fix_command("", "Kg$xe"), "CONFIG SET notify-keyspace-events 'Kg$xe'");
    }
}
