//! Fills each structure that holds a tracked lock with `n` locks the way the exporter does,
//! for `benches/footprint.rs` to weigh with a counting allocator (the per-lock cost table
//! of the README). Not used by the exporter itself.

use std::any::Any;
use std::time::Duration;

use super::headroom::{Expiry, Headroom};
use super::history::History;
use super::tracker::{Notice, Observer, Tracker};
use crate::config::{NamespaceConfig, ValueKind};
use crate::glob::Glob;
use crate::locks::events::{Found, Need, Write};
use crate::locks::recent::Series;
use crate::locks::table::NamespaceTable;
use crate::vocab::{HeadroomAt, HoldEnd, Transition};

/// A filled structure, kept alive until dropped.
pub type Filled = Box<dyn Any>;

/// The key of lock `i`: 23 bytes, as `benches/lifecycle_load.rs` writes them.
pub fn key(i: usize) -> Vec<u8> {
    format!("bench:lock:mem:{i:08}").into_bytes()
}

fn owner(i: usize) -> Vec<u8> {
    format!("owner-{i:08}-0123456789abcdef").into_bytes()
}

fn ns() -> Option<NamespaceConfig> {
    Some(NamespaceConfig {
        name: "bench".into(),
        pattern: Glob::new("bench:lock:*").ok()?,
        ttl: Duration::from_secs(30),
        renew_every: Some(Duration::from_secs(10)),
        renew_grace: Duration::from_secs(5),
        max_hold: None,
        value: ValueKind::Token,
        fence_pattern: None,
        log_phrases: vec![],
        alerts: Default::default(),
    })
}

const NOW: i64 = 1_000_000;

/// The lock table in events mode: each key announced by a notification, then read.
pub fn lock_table(n: usize) -> Filled {
    let mut t = NamespaceTable::new(false);
    let Some(ns) = ns() else { return Box::new(t) };
    for i in 0..n {
        let k = key(i);
        let Need::Full(seq) = t.announce(&k, Write::Value, NOW) else {
            continue;
        };
        let o = owner(i);
        t.event_read(
            &ns,
            &k,
            seq,
            Found::Lock {
                owner: &o,
                pttl_ms: 600_000,
            },
            NOW,
            NOW,
            NOW,
        );
    }
    Box::new(t)
}

/// Suspects: keys a counting reconciling walk found that no event announced (at most
/// 100,000 per namespace are kept).
pub fn suspects(n: usize) -> Filled {
    let mut t = NamespaceTable::new(false);
    let Some(ns) = ns() else { return Box::new(t) };
    for i in 0..n {
        let o = owner(i);
        t.walk_found(
            &ns,
            &key(i),
            Found::Lock {
                owner: &o,
                pttl_ms: 600_000,
            },
            NOW,
            true,
        );
    }
    Box::new(t)
}

/// An observer that answers every owner read at once and ignores the rest.
#[derive(Default)]
struct Answer {
    read: Option<u32>,
}

impl Observer for Answer {
    fn transition(&mut self, _: usize, _: &[u8], _: Transition, _: Option<u64>) {}
    fn hold(&mut self, _: usize, _: HoldEnd, _: i64) {}
    fn takeover(&mut self, _: usize, _: &[u8], _: u64, _: u64, _: i64) {}
    fn read_owner(&mut self, _: usize, _: &[u8], generation: u32) {
        self.read = Some(generation);
    }
    fn owner_learnt(&mut self, _: usize, _: &[u8], _: u64) {}
    fn headroom(&mut self, _: usize, _: HeadroomAt, _: Headroom) {}
    fn renewal_interval(&mut self, _: usize, _: i64) {}
    fn expiry(&mut self, _: usize, _: &[u8]) -> Expiry {
        Expiry::Left(20_000)
    }
}

/// The lifecycle tracker: each lock acquired (`set`, then the `expire` of its PX) and its
/// owner read. With `renewing`, each then gets a `SET … XX` whose owner read has not come
/// back (the headroom it had is kept until it does).
pub fn tracker(n: usize, renewing: bool) -> Filled {
    let mut t = Tracker::new(&[(30_000, false)], super::MAX_TRACKED);
    let mut obs = Answer::default();
    for i in 0..n {
        let k = key(i);
        t.notice(0, &k, Notice::Set, NOW, || None, &mut obs);
        t.notice(0, &k, Notice::Expire, NOW, || None, &mut obs);
        if let Some(g) = obs.read.take() {
            t.owner_read(&k, g, Some(i as u64 + 7), &mut obs);
        }
        if renewing {
            t.notice(0, &k, Notice::Set, NOW + 5_000, || None, &mut obs);
        }
    }
    Box::new(t)
}

/// The history: one acquisition recorded per lock, within the target's cap.
pub fn history(n: usize) -> Filled {
    let mut h = History::new(super::HISTORY_CAP);
    for i in 0..n {
        h.push(&key(i), NOW, Transition::Acquired, Some(i as u64 + 7));
    }
    Box::new(h)
}

/// The last hour's ring of one namespace (fixed, whatever the number of locks).
pub fn recent() -> Filled {
    Box::new(Series::default())
}
