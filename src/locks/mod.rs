//! What is known of each target's locks, between the parts that learn it and the parts
//! that show it: per namespace the lock and fence table (`table`), the target's sampling
//! status, and the views the HTTP side asks for (`view`). The sampler fills the tables,
//! the lifecycle watcher consults them for owners, the API and status page read views.
//!
//! Knows nothing of Redis or metrics; TTL arithmetic is in `ttl` (pure).

mod entry;
mod event_reads;
pub mod events;
pub mod incidents;
pub mod recent;
pub mod table;
pub(crate) mod ttl;
pub(crate) mod view;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use foldhash::fast::RandomState;

use crate::config::{NamespaceConfig, TargetConfig};
use incidents::{Incident, IncidentLog, Kind};
use recent::{Bucket, Series};
use table::NamespaceTable;

/// A namespace's config and its lock table.
pub struct NamespaceLocks {
    pub config: NamespaceConfig,
    /// Seeds owner hashes, so the sampler's and the lifecycle watcher's can be compared.
    hasher: RandomState,
    table: Mutex<NamespaceTable>,
    /// The last hour, for the status page's charts.
    recent: Mutex<Recent>,
}

/// A namespace's last hour and the gauges of its last pass (to see episodes begin).
#[derive(Default)]
struct Recent {
    series: Series,
    overdue: i64,
    without_ttl: i64,
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

/// An empty table (and last hour) for namespace `n`, its owner hashes seeded anew.
fn fresh(n: &NamespaceConfig, show_owners: bool) -> NamespaceLocks {
    let hasher = RandomState::default();
    NamespaceLocks {
        config: n.clone(),
        hasher: hasher.clone(),
        table: Mutex::new(NamespaceTable::with_hasher(show_owners, hasher)),
        recent: Mutex::default(),
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
    /// Shared only with the tables of the same target before a reload that carried them over.
    pub namespaces: Vec<Arc<NamespaceLocks>>,
    status: Mutex<TargetStatus>,
    /// Origin of the sampler clock: lock ages are measured from it.
    origin: Instant,
    /// The watcher's subscription: 0 while not subscribed, else the number of the
    /// subscription (it grows with each one), so the sampler sees every resubscription.
    subscription: AtomicU64,
    subscriptions: AtomicU64,
    /// Recent incidents of all namespaces, for the status page's timeline.
    incidents: Mutex<IncidentLog>,
}

impl TargetLocks {
    /// Empty tables for `target`'s namespaces; owner tokens are kept only with `show_owners`.
    pub fn new(target: &TargetConfig, namespaces: &[NamespaceConfig], show_owners: bool) -> Self {
        TargetLocks {
            name: target.name.clone(),
            display_url: target.display_url.clone(),
            namespaces: namespaces.iter().map(|n| Arc::new(fresh(n, show_owners))).collect(),
            status: Mutex::new(TargetStatus::default()),
            incidents: Mutex::default(),
            origin: Instant::now(),
            subscription: AtomicU64::new(0),
            subscriptions: AtomicU64::new(0),
        }
    }

    /// The tables of the same target for new `namespaces` (a reload): a namespace whose
    /// config did not change shares its table and last hour with `from` (on the same
    /// clock); a changed or new one starts empty. Once `from`'s sampler and watcher have
    /// stopped, [`TargetLocks::resume`] takes the rest over.
    pub fn carrying(
        from: &TargetLocks,
        target: &TargetConfig,
        namespaces: &[NamespaceConfig],
        show_owners: bool,
    ) -> Self {
        let kept = |n: &NamespaceConfig| from.namespaces.iter().find(|o| o.config == *n).cloned();
        TargetLocks {
            name: target.name.clone(),
            display_url: target.display_url.clone(),
            namespaces: namespaces
                .iter()
                .map(|n| kept(n).unwrap_or_else(|| Arc::new(fresh(n, show_owners))))
                .collect(),
            status: Mutex::new(TargetStatus::default()),
            incidents: Mutex::default(),
            origin: from.origin,
            subscription: AtomicU64::new(0),
            subscriptions: AtomicU64::new(0),
        }
    }

    /// Take over from `from` (this was made `carrying` it; its sampler has stopped): its
    /// status and the incidents of the namespaces carried over. Where `from` is in events
    /// mode, its watcher goes on following the carried tables (it is handed these), so these
    /// are in events mode at once; otherwise every table goes to scan mode (what only
    /// events mode keeps dropped, a fresh cycle next).
    pub fn resume(&self, from: &TargetLocks) {
        *self.status.lock().unwrap_or_else(|p| p.into_inner()) = from.status();
        let incidents = from.incidents.lock().unwrap_or_else(|p| p.into_inner()).carried(|old| {
            let carried = from.namespaces.get(old)?;
            self.namespaces.iter().position(|n| Arc::ptr_eq(n, carried))
        });
        *self.incidents.lock().unwrap_or_else(|p| p.into_inner()) = incidents;
        if from.subscription().is_some() {
            self.subscribed();
            return;
        }
        for ns in &self.namespaces {
            ns.table().enter_scan_mode();
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

    /// A pass's census of namespace `ns` (by index): into its last hour; an overdue episode
    /// beginning, or more locks without TTL than the pass before, into the incidents.
    pub fn record_census(&self, ns: usize, census: &table::Census) {
        let Some(n) = self.namespaces.get(ns) else {
            return;
        };
        let at = recent::wall_ms();
        let (overdue, without_ttl) = {
            let mut r = n.recent.lock().unwrap_or_else(|p| p.into_inner());
            r.series.gauges(at, census.held, census.overdue);
            let before = (r.overdue, r.without_ttl);
            (r.overdue, r.without_ttl) = (census.overdue, census.without_ttl);
            before
        };
        let count = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
        if census.overdue > 0 && overdue == 0 {
            let key = (census.overdue == 1)
                .then(|| self.only_key(n, |pttl| ttl::renewal_overdue(pttl, n.config.overdue_below())));
            self.incident(at, ns, Kind::Overdue, count(census.overdue), key.flatten().as_deref());
        }
        if census.without_ttl > without_ttl {
            let key = (census.without_ttl == 1).then(|| self.only_key(n, |pttl| pttl < 0));
            self.incident(
                at,
                ns,
                Kind::WithoutTtl,
                count(census.without_ttl - without_ttl),
                key.flatten().as_deref(),
            );
        }
    }

    /// The key of the one lock of `n` whose time left `pick` accepts (the census counted one).
    fn only_key(&self, n: &NamespaceLocks, pick: impl Fn(i64) -> bool) -> Option<Vec<u8>> {
        let now = self.now_ms();
        let table = n.table();
        table
            .locks()
            .find(|(_, e)| e.known() && pick(e.pttl_at(now)))
            .map(|(k, _)| k.to_vec())
    }

    /// An expiry takeover of `key` in namespace `ns`, seen now.
    pub fn record_takeover(&self, ns: usize, key: &[u8]) {
        let at = recent::wall_ms();
        if let Some(n) = self.namespaces.get(ns) {
            n.recent.lock().unwrap_or_else(|p| p.into_inner()).series.takeover(at);
        }
        self.incident(at, ns, Kind::Takeover, 1, Some(key));
    }

    /// `key` of namespace `ns` lost in a failover.
    pub fn record_lost(&self, ns: usize, key: &[u8]) {
        self.incident(recent::wall_ms(), ns, Kind::LostInFailover, 1, Some(key));
    }

    fn incident(&self, at: i64, ns: usize, kind: Kind, count: u32, key: Option<&[u8]>) {
        let mut log = self.incidents.lock().unwrap_or_else(|p| p.into_inner());
        log.push(at, ns, kind, count, key);
    }

    /// Namespace `ns`'s last hour up to `now_ms`, oldest bucket first (`None`: no pass).
    pub fn last_hour(&self, ns: usize, now_ms: i64) -> Vec<Option<Bucket>> {
        self.namespaces.get(ns).map_or_else(Vec::new, |n| {
            n.recent
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .series
                .last_hour(now_ms)
        })
    }

    /// The incidents kept, oldest first (namespace indexes are into `namespaces`).
    pub fn incidents(&self) -> Vec<Incident> {
        self.incidents
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .all()
            .cloned()
            .collect()
    }
}
