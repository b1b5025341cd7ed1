//! A reload that changed the namespaces, taken by the running watcher: the channels of the
//! namespaces that changed are subscribed (and the old ones unsubscribed) on the live
//! connections, so the notifications of those that did not change never pause, and their
//! keys' lifecycle state, the per-key history and their lock tables carry on.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::tracker::Tracker;
use super::{SessionError, Watcher, channels, takeover_counters, tracker_params};
use crate::access::notify;
use crate::config::NamespaceConfig;
use crate::locks::TargetLocks;

/// The namespaces after a reload, with the target's tables for them.
pub(crate) struct Renamespace {
    pub(crate) namespaces: Vec<NamespaceConfig>,
    /// Made by `TargetLocks::carrying`: the tables of unchanged namespaces are the running ones.
    pub(crate) locks: Arc<TargetLocks>,
    /// For each namespace the watcher has now, its index in `namespaces` if it did not change.
    pub(crate) carried: Vec<Option<usize>>,
}

/// Where a running watcher takes namespace changes.
#[derive(Clone)]
pub(crate) struct Renamespacer(pub(super) mpsc::UnboundedSender<Renamespace>);

impl Renamespacer {
    /// Hand the change over; `false` when the watcher has stopped.
    pub(crate) fn send(&self, change: Renamespace) -> bool {
        self.0.send(change).is_ok()
    }
}

impl Watcher {
    /// Take the new namespaces: channels, metrics, takeover counters, lock tables and the
    /// tracker's keys (renumbered; those of changed namespaces forgotten). `false` when they
    /// need other notification flags (a Redisson namespace came or went): the subscription
    /// must then be made anew.
    pub(super) fn renamespace(&mut self, change: Renamespace, tracker: &mut Tracker) -> bool {
        let Renamespace {
            namespaces,
            locks,
            carried,
        } = change;
        let needed = notify::needed_flags(&namespaces);
        let same_flags = needed == self.needed;
        self.needed = needed;
        self.channels = channels(&self.target, &namespaces);
        self.metrics = self.families.for_target(&self.target.name, &namespaces);
        *self.state.takeovers.lock().unwrap_or_else(|p| p.into_inner()) = takeover_counters(&namespaces, &self.metrics);
        tracker.renamespace(&carried, &tracker_params(&namespaces));
        self.namespaces = namespaces;
        self.locks = locks;
        self.epoch = self.epoch.wrapping_add(1);
        self.renumber = carried;
        tracing::info!(target_name = %self.target.name, patterns = self.channels.len(),
            "namespaces reloaded: the unchanged ones followed on without a pause");
        same_flags
    }

    /// The number now of namespace `ns` as numbered at `epoch` (a read asked before the
    /// namespaces changed answers after); `None` when it changed since.
    pub(super) fn renumbered(&self, epoch: u32, ns: usize) -> Option<usize> {
        if epoch == self.epoch {
            Some(ns)
        } else if epoch.wrapping_add(1) == self.epoch {
            self.renumber.get(ns).copied().flatten()
        } else {
            None
        }
    }

    /// On every primary's live connection: unsubscribe the channels of `before` that are
    /// gone, subscribe the new ones.
    pub(super) async fn resubscribe(
        &self,
        before: &[Vec<u8>],
        sinks: &mut [crate::access::pubsub::Sink],
        limit: Duration,
    ) -> Result<(), SessionError> {
        let now: Vec<&Vec<u8>> = self.channels.iter().map(|(c, _, _)| c).collect();
        for sink in sinks.iter_mut() {
            for c in before.iter().filter(|c| !now.contains(c)) {
                tokio::time::timeout(limit, sink.punsubscribe(c.as_slice()))
                    .await
                    .map_err(|_| SessionError::Timeout("PUNSUBSCRIBE"))??;
            }
            for c in now.iter().filter(|c| !before.contains(c)) {
                super::session::psubscribe(sink, c, limit).await?;
            }
        }
        Ok(())
    }
}
