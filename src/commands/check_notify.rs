//! `check-config --connect`'s notifications checks on one node: the setting (read, and
//! under `configure` written), what a refusal of `CONFIG` means on a managed Redis,
//! `PSUBSCRIBE` of each keyspace channel, and one canary round — the proof serve needs before
//! it takes the target's locks from notifications — each said in the words a user of that
//! provider needs.

use std::io::Write;

use redis::aio::MultiplexedConnection;

use super::check_grants::{Check, channels, db_of, refused};
use crate::access::canary::{self, Probe};
use crate::access::notify;
use crate::access::probe::{self, Missing};
use crate::config::{Config, Notifications, TargetConfig};

/// What the notifications checks found.
pub(super) struct NotifyCheck {
    /// No problem that makes the target unhealthy.
    pub(super) healthy: bool,
    /// The tracking mode serve will use: events (`true`) or scan; `None` when it will not start.
    pub(super) events: Option<bool>,
    /// A permission is missing (an optional one included).
    pub(super) missing: bool,
}

/// The notifications checks: the setting (and whether the user may read and, under
/// `configure`, write it), then PSUBSCRIBE on each keyspace channel, then the canary —
/// which a server without read-only key patterns (`read_only` false: Redis 6.2) is not
/// asked to allow, as its `+set` would reach the lock keys.
pub(super) async fn check(
    t: &TargetConfig,
    config: &Config,
    conn: &mut MultiplexedConnection,
    read_only: bool,
    out: &mut impl Write,
) -> Result<NotifyCheck, Check> {
    if t.notifications == Notifications::Off {
        writeln!(
            out,
            "  - notifications: off in config; lifecycle transitions and takeovers will not be seen"
        )?;
        return Ok(NotifyCheck {
            healthy: true,
            events: Some(false),
            missing: false,
        });
    }
    let needed = notify::needed_flags(&config.namespaces);
    let policy = t.notifications.as_str();
    let mut missing_permission = false;
    let flags = notify::read(conn).await;
    let flags_read = matches!(flags, Ok(notify::Flags::Set(_)));
    let (mut healthy, mut events) = match flags {
        Ok(notify::Flags::Set(flags)) => {
            let (used, ignored) = notify::flag_use(&flags, &needed);
            match ignored.is_empty() {
                true => writeln!(out, "  · notifications: lockwatch uses every flag set ({used})")?,
                false => writeln!(
                    out,
                    "  · notifications: of \"{flags}\", lockwatch uses {}; it ignores {ignored}: their events change no count",
                    if used.is_empty() {
                        "none".to_string()
                    } else {
                        used.clone()
                    }
                )?,
            }
            let missing = notify::missing_flags(&flags, &needed);
            let set_refused = match t.notifications {
                Notifications::Configure => probe::config_set_refusal(conn).await?,
                _ => None,
            };
            missing_permission |= set_refused.as_ref().is_some_and(Missing::grantable);
            if missing.is_empty() {
                writeln!(
                    out,
                    "  ✓ notifications ({policy}): notify-keyspace-events = \"{flags}\" has what lockwatch needs"
                )?;
                if let Some(m) = &set_refused {
                    writeln!(
                        out,
                        "  ! notifications ({policy}): {} — serve could not add the flags if they were switched off",
                        refused(m)
                    )?;
                }
                (true, Some(true))
            } else if let Some(m) = &set_refused {
                writeln!(
                    out,
                    "  ✗ notifications ({policy}): notify-keyspace-events = \"{flags}\" lacks `{missing}`, and {} — serve cannot add them; or enable them with: redis-cli {}",
                    refused(m),
                    notify::fix_command(&flags, &needed)
                )?;
                (false, Some(false))
            } else {
                let fix = notify::fix_command(&flags, &needed);
                let (mark, what) = match t.notifications {
                    Notifications::Require => ("✗", "serve will refuse to start; enable them with"),
                    Notifications::Configure => ("!", "serve will add them at start, as if by"),
                    _ => ("!", "the watcher will see too little; enable them with"),
                };
                writeln!(
                    out,
                    "  {mark} notifications ({policy}): notify-keyspace-events = \"{flags}\" lacks `{missing}`; {what}: redis-cli {fix}"
                )?;
                let configure = t.notifications == Notifications::Configure;
                (t.notifications != Notifications::Require, Some(configure))
            }
        }
        Ok(notify::Flags::Unreadable(why)) => {
            let require = t.notifications == Notifications::Require;
            let instead = match read_only {
                true => "the canary below proves them instead",
                false => {
                    "the canary below, or else lock notifications that reads agree with (passive), prove them instead"
                }
            };
            let (mark, consequence) = if require {
                ("✗", "serve will refuse to start, as it cannot read them".to_string())
            } else {
                ("!", format!("{instead}; set '{needed}' in the provider's settings"))
            };
            match probe::config_get_refusal(conn).await? {
                Some(m @ Missing::Command { .. }) => {
                    missing_permission = true;
                    writeln!(
                        out,
                        "  {mark} notifications ({policy}): {} (Memorystore answers NOPERM to every user) — {consequence}",
                        refused(&m)
                    )?;
                }
                _ => writeln!(
                    out,
                    "  {mark} notifications ({policy}): CONFIG is not available here ({why}: renamed or removed, as on ElastiCache, MemoryDB and Azure Cache for Redis) — {consequence}"
                )?,
            }
            (!require, (!require).then_some(true))
        }
        Err(e) => {
            writeln!(
                out,
                "  ✗ notifications ({policy}): cannot read notify-keyspace-events: {e}"
            )?;
            return Ok(NotifyCheck {
                healthy: false,
                events: None,
                missing: missing_permission,
            });
        }
    };
    let channels = channels(config, t);
    let denied = probe::channel_refusals(t, &channels).await?;
    if denied.is_empty() {
        let list: Vec<String> = channels.iter().map(|c| format!("`{c}`")).collect();
        writeln!(out, "  ✓ notifications: PSUBSCRIBE allowed on {}", list.join(", "))?;
    } else {
        healthy = false;
        events = events.map(|_| false);
        missing_permission = true;
        for m in &denied {
            match m {
                Missing::Other { why, .. } => writeln!(
                    out,
                    "  ✗ notifications: PSUBSCRIBE is not available here ({why}): a provider without pub/sub (such as ElastiCache Serverless) — serve stays in scan mode, a SCAN pass over the namespaces every sample_interval; say so with notifications = \"off\""
                )?,
                m => writeln!(out, "  ✗ notifications: {}", refused(m))?,
            }
        }
        return Ok(NotifyCheck {
            healthy,
            events,
            missing: missing_permission,
        });
    }
    let db = db_of(t);
    let link = crate::access::Link::new(t).map_err(|e| e.source)?;
    let fallback = match flags_read {
        true => "the flags CONFIG GET reads",
        false => "lock notifications that reads agree with (passive: events mode once locks are taken)",
    };
    let every = crate::lifecycle::CANARY_EVERY.as_secs();
    match canary::probe(&link, db, &format!("check{}", std::process::id())).await? {
        Probe::Seen(seen) => match canary::gap(seen) {
            None => writeln!(
                out,
                "  ✓ notifications: the canary proved them — `set`, `expire` and `expired` of a `{}…` key arrived within {} s (serve repeats this on every primary every {every} s)",
                canary::PREFIX,
                canary::DEADLINE.as_secs(),
            )?,
            Some(gap) => {
                events = events.map(|_| false);
                writeln!(
                    out,
                    "  ! notifications ({policy}): {gap}; serve stays in scan mode until they arrive — {}",
                    notify::where_to_set(&notify::merge_flags("", &needed))
                )?;
            }
        },
        Probe::Refused(why) | Probe::ChannelRefused(why) if !read_only => writeln!(
            out,
            "  - notifications: the canary cannot run ({why}) — serve verifies by {fallback} instead; before Redis 7.0 a key pattern cannot be read-only, so the `+set` the canary needs would let this user write the lock keys too (the Redis 6.2 line leaves it out: docs/security.md)"
        )?,
        Probe::Refused(why) => {
            missing_permission = true;
            let grant = format!("`+set` and `~{}*`", canary::PREFIX);
            writeln!(
                out,
                "  ! notifications: the canary cannot run ({why}) — serve verifies by {fallback} instead; to let it prove them every {every} s (grant {grant})"
            )?;
        }
        Probe::ChannelRefused(why) => {
            missing_permission = true;
            let grant = format!("`&{}`", canary::channel(db));
            writeln!(
                out,
                "  ! notifications: the canary cannot run ({why}) — serve verifies by {fallback} instead; to let it prove them every {every} s (grant {grant})"
            )?;
        }
    }
    Ok(NotifyCheck {
        healthy,
        events,
        missing: missing_permission,
    })
}
