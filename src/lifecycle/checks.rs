//! The session's checks of its own notifications: `notify-keyspace-events` on every primary
//! (the `notifications` policy applied again; `configure` puts missing flags back), folded
//! into what `verify` needs, and a verdict acted on: gauges, the lock tables' mode (events
//! only while verified), the status page's words and the log.

use std::time::Duration;

use redis::aio::ConnectionManager;

use super::verify::{Flags, Verdict, Verify};
use super::{Verification, Watcher};
use crate::access::notify::{self, Applied};
use crate::config::Notifications;

impl Watcher {
    /// What one primary's `Applied` says of the flags, with the gap in words when they lack.
    pub(super) fn flags_of(&self, node: &str, primaries: usize, applied: &Applied) -> Flags {
        match applied {
            Applied::On { .. } | Applied::Configured { .. } => Flags::Complete,
            Applied::Unknown { .. } => Flags::Unknown,
            Applied::Missing { flags, missing } => {
                let at = if primaries > 1 {
                    format!("{node}: ")
                } else {
                    String::new()
                };
                Flags::Missing(format!(
                    "{at}notify-keyspace-events is \"{flags}\", which lacks `{missing}` — {}; {}",
                    notify::consequences(missing),
                    notify::where_to_set(&notify::merge_flags(flags, &self.needed))
                ))
            }
        }
    }

    /// Check `notify-keyspace-events` again on every primary: the flags over all of them
    /// (`None` when no primary answered: the subscription's PING tells about the connections).
    pub(super) async fn recheck_flags(
        &mut self,
        before: &Flags,
        limit: Duration,
        conns: &mut [(String, ConnectionManager)],
    ) -> Option<Flags> {
        let policy = match self.target.notifications {
            Notifications::Configure => Notifications::Configure,
            _ => Notifications::Auto,
        };
        let primaries = conns.len();
        let mut each = Vec::with_capacity(primaries);
        for (addr, conn) in conns.iter_mut() {
            let applied = match tokio::time::timeout(limit, notify::apply(policy, &self.needed, conn)).await {
                Ok(Ok(a)) => a,
                _ => continue,
            };
            let now = self.flags_of(addr, primaries, &applied);
            if &now != before || matches!(applied, Applied::Configured { .. }) {
                self.report_applied(addr, primaries, &applied);
            }
            each.push(now);
        }
        (!each.is_empty()).then(|| fold_all(each))
    }

    /// Act on the verdict when it differs from the one `shown`: the gauges, the lock tables'
    /// mode (events only while verified: a new subscription number each time it becomes so),
    /// the status page's words and the log.
    pub(super) fn follow(&self, shown: &mut Option<Verdict>, verify: &Verify) {
        let v = verify.verdict();
        if shown.as_ref() == Some(&v) {
            return;
        }
        let was_verified = shown.as_ref().is_some_and(|s| s.state == Verification::Verified);
        let t = &self.target.name;
        let words = v.words.as_deref().unwrap_or("");
        match (v.state, was_verified) {
            (Verification::Verified, false) => {
                tracing::info!(target_name = %t, method = v.method.as_str(), how = words,
                    "keyspace notifications verified: events mode, lockwatch_notifications_connected 1");
                self.locks.subscribed();
            }
            (Verification::Verified, true) => {}
            (Verification::Pending, _) => {
                tracing::info!(target_name = %t, method = v.method.as_str(), why = words,
                    "subscribed; keyspace notifications not verified yet: scan mode until they are");
                self.locks.unsubscribed();
            }
            (state, _) => {
                tracing::warn!(target_name = %t, state = state.as_str(), method = v.method.as_str(), why = words,
                    "subscribed, but keyspace notifications are not shown to arrive: lockwatch_notifications_connected 0, scan mode until they are");
                self.locks.unsubscribed();
            }
        }
        self.publish(&v);
        *shown = Some(v);
    }
}

/// Two primaries' flags as one: a gap on either is a gap (both named), else unknown on
/// either is unknown.
fn fold(a: Flags, b: Flags) -> Flags {
    match (a, b) {
        (Flags::Missing(x), Flags::Missing(y)) => Flags::Missing(format!("{x}; {y}")),
        (m @ Flags::Missing(_), _) | (_, m @ Flags::Missing(_)) => m,
        (Flags::Unknown, _) | (_, Flags::Unknown) => Flags::Unknown,
        _ => Flags::Complete,
    }
}

/// The flags over every primary, from each one's.
pub(super) fn fold_all(each: impl IntoIterator<Item = Flags>) -> Flags {
    each.into_iter().reduce(fold).unwrap_or(Flags::Unknown)
}
