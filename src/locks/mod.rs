//! What is known of each target's locks, between the parts that learn it and the parts
//! that show it: per namespace the lock and fence table (`table`), the target's sampling
//! status, and the views the HTTP side asks for (`view`). The sampler fills the tables,
//! the lifecycle watcher consults them for owners, the API and status page read views.
//!
//! Knows nothing of Redis or metrics; TTL arithmetic is in `ttl` (pure).

pub mod events;
pub mod table;
pub(crate) mod ttl;
pub(crate) mod view;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use foldhash::fast::RandomState;

use crate::config::{NamespaceConfig, TargetConfig};
use table::NamespaceTable;

/// A namespace's config and its lock table.
pub struct NamespaceLocks {
    pub config: NamespaceConfig,
    /// Seeds owner hashes, so the sampler's and the lifecycle watcher's can be compared.
    hasher: RandomState,
    table: Mutex<NamespaceTable>,
}

impl NamespaceLocks {
    /// Seeded hash of an owner token, the same as the lock table's.
    pub fn owner_hash(&self, owner: &[u8]) -> u64 {
        self.hasher.hash_one(owner)
    }

    /// The lock table; a poisoned lock (a panic elsewhere) still yields the data.
    pub fn table(&self) -> MutexGuard<'_, NamespaceTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How the target's sampling is going, for `/`, `/readyz` and the API.
#[derive(Debug, Clone, Default)]
pub struct TargetStatus {
    pub passes: u64,
    pub up: bool,
    pub last_error: Option<String>,
    pub last_duration: Duration,
    pub last_pass_at: Option<SystemTime>,
    pub last_truncated: bool,
}

/// Everything known about one target's locks.
pub struct TargetLocks {
    pub name: String,
    pub display_url: String,
    pub namespaces: Vec<NamespaceLocks>,
    status: Mutex<TargetStatus>,
    /// Origin of the sampler clock: lock ages are measured from it.
    origin: Instant,
    /// The watcher's subscription: 0 while not subscribed, else the number of the
    /// subscription (it grows with each one), so the sampler sees every resubscription.
    subscription: AtomicU64,
    subscriptions: AtomicU64,
}

impl TargetLocks {
    /// Empty tables for `target`'s namespaces; owner tokens are kept only with `show_owners`.
    pub fn new(target: &TargetConfig, namespaces: &[NamespaceConfig], show_owners: bool) -> Self {
        TargetLocks {
            name: target.name.clone(),
            display_url: target.display_url.clone(),
            namespaces: namespaces
                .iter()
                .map(|n| {
                    let hasher = RandomState::default();
                    NamespaceLocks {
                        config: n.clone(),
                        hasher: hasher.clone(),
                        table: Mutex::new(NamespaceTable::with_hasher(show_owners, hasher)),
                    }
                })
                .collect(),
            status: Mutex::new(TargetStatus::default()),
            origin: Instant::now(),
            subscription: AtomicU64::new(0),
            subscriptions: AtomicU64::new(0),
        }
    }

    pub fn status(&self) -> TargetStatus {
        self.status.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Change the status under its lock; `f` sees the previous one.
    pub fn update_status<R>(&self, f: impl FnOnce(&mut TargetStatus) -> R) -> R {
        f(&mut self.status.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The watcher is subscribed, with flags that let it see every lock event: the
    /// target's locks are tracked from events from now on.
    pub fn subscribed(&self) {
        let n = self.subscriptions.fetch_add(1, Ordering::Relaxed) + 1;
        self.subscription.store(n, Ordering::Relaxed);
    }

    /// The watcher lost its subscription (or found the flags off): scan mode.
    pub fn unsubscribed(&self) {
        self.subscription.store(0, Ordering::Relaxed);
    }

    /// Repairs confirmed so far in all namespaces: lock changes the events missed.
    pub fn repaired(&self) -> u64 {
        self.namespaces.iter().map(|n| n.table().repaired()).sum()
    }

    /// The number of the subscription in force, `None` in scan mode.
    pub fn subscription(&self) -> Option<u64> {
        Some(self.subscription.load(Ordering::Relaxed)).filter(|n| *n != 0)
    }

    /// The gauges' values for namespace `ns`: in events mode the census of this moment, in
    /// scan mode what the last completed cycle counted.
    pub fn census(&self, ns: &NamespaceLocks) -> table::Census {
        let table = ns.table();
        match self.subscription() {
            Some(_) => table.census_at(&ns.config, self.now_ms()),
            None => table.last().clone(),
        }
    }

    /// Milliseconds on the sampler clock now.
    pub fn now_ms(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}
