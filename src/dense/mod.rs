//! A compact hash map for millions of small entries: the entries sit densely in chunks of
//! [`CHUNK`] (no allocation per entry beyond what a key owns, no copy of them all as the map
//! grows) and are found through a table of 4-byte positions, so an empty bucket costs 5
//! bytes instead of a whole entry. Removal moves the last entry into the hole.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

mod key;
pub use key::Key;

/// Entries per chunk; the first chunk grows up to it as a vector does, the others are made
/// whole, so growing never copies (nor frees) more than one chunk.
pub const CHUNK: usize = 4096;

/// An index of at most this many buckets is never shrunk.
const SHRINK_ABOVE: usize = 16 * 1024;

/// The entries, position `i` at `chunks[i / CHUNK][i % CHUNK]`; every chunk but the last full.
#[derive(Clone)]
struct Slots<K, V> {
    chunks: Vec<Vec<(K, V)>>,
    len: usize,
}

impl<K, V> Slots<K, V> {
    const fn new() -> Self {
        Slots {
            chunks: Vec::new(),
            len: 0,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, i: usize) -> Option<&(K, V)> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK)
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut (K, V)> {
        self.chunks.get_mut(i / CHUNK)?.get_mut(i % CHUNK)
    }

    fn push(&mut self, entry: (K, V)) {
        match self.chunks.get_mut(self.len / CHUNK) {
            Some(c) => c.push(entry),
            None => {
                let mut c = Vec::with_capacity(if self.len == 0 { 4 } else { CHUNK });
                c.push(entry);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }

    /// Remove position `i`, the last entry taking its place.
    fn swap_remove(&mut self, i: usize) -> Option<(K, V)> {
        let last = self.chunks.get_mut((self.len - 1) / CHUNK)?.pop()?;
        self.len -= 1;
        // An empty last chunk is kept until the one before it is a quarter empty, so an
        // insert and a removal in turn at a chunk's edge do not allocate and free each time.
        if self.chunks.len() >= 2
            && self.chunks.last().is_some_and(Vec::is_empty)
            && self.len % CHUNK < CHUNK * 3 / 4
            && self.len / CHUNK + 2 == self.chunks.len()
        {
            self.chunks.pop();
        }
        if i == self.len {
            return Some(last);
        }
        self.get_mut(i).map(|s| std::mem::replace(s, last))
    }

    fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }

    fn iter(&self) -> impl Iterator<Item = &(K, V)> {
        self.chunks.iter().flatten()
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut (K, V)> {
        self.chunks.iter_mut().flatten()
    }
}

/// Keys to values, in dense chunks indexed by a table of `u32` positions.
#[derive(Clone)]
pub struct DenseMap<K, V, S> {
    index: HashTable<u32>,
    slots: Slots<K, V>,
    hasher: S,
}

impl<K, V, S: Default> Default for DenseMap<K, V, S> {
    fn default() -> Self {
        DenseMap {
            index: HashTable::new(),
            slots: Slots::new(),
            hasher: S::default(),
        }
    }
}

impl<K: std::fmt::Debug, V: std::fmt::Debug, S> std::fmt::Debug for DenseMap<K, V, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.slots.iter().map(|(k, v)| (k, v))).finish()
    }
}

/// A position in the dense vector, as the index keeps it (at most `u32::MAX` entries).
fn pos(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

impl<K: Hash + Eq, V, S: BuildHasher> DenseMap<K, V, S> {
    pub fn with_hasher(hasher: S) -> Self {
        DenseMap {
            index: HashTable::new(),
            slots: Slots::new(),
            hasher,
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.len() == 0
    }

    fn find<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
    {
        let slots = &self.slots;
        self.index
            .find(self.hasher.hash_one(key), |&i| {
                slots.get(i as usize).is_some_and(|s| s.0.borrow() == key)
            })
            .map(|&i| i as usize)
    }

    pub fn get<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find(key).and_then(|i| self.slots.get(i)).map(|s| &s.1)
    }

    pub fn get_mut<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        let i = self.find(key)?;
        self.slots.get_mut(i).map(|s| &mut s.1)
    }

    pub fn contains_key<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find(key).is_some()
    }

    /// Insert or replace; the value replaced, if any.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let h = self.hasher.hash_one(&key);
        let (slots, hasher) = (&self.slots, &self.hasher);
        let entry = self.index.entry(
            h,
            |&i| slots.get(i as usize).is_some_and(|s| s.0 == key),
            |&i| slots.get(i as usize).map_or(0, |s| hasher.hash_one(&s.0)),
        );
        match entry {
            Entry::Occupied(e) => {
                let i = *e.get() as usize;
                self.slots.get_mut(i).map(|s| std::mem::replace(&mut s.1, value))
            }
            Entry::Vacant(e) => {
                e.insert(pos(self.slots.len()));
                self.slots.push((key, value));
                None
            }
        }
    }

    /// The value of `key`, inserted with `make` first when absent (`None` only past
    /// `u32::MAX` entries).
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> Option<&mut V> {
        let i = match self.find(&key) {
            Some(i) => i,
            None => {
                let i = self.slots.len();
                self.insert(key, make());
                i
            }
        };
        self.slots.get_mut(i).map(|s| &mut s.1)
    }

    pub fn remove<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let i = self.find(key)?;
        let removed = self.remove_at(i).map(|s| s.1);
        self.shrink_when_sparse();
        removed
    }

    /// An index grown for many more entries than are left (a million locks taken and
    /// released) is rebuilt for twice those left: a lookup then probes a table that fits
    /// the cache, and its memory is returned. Rebuilding costs one pass over what is left,
    /// at most once per three quarters removed.
    fn shrink_when_sparse(&mut self) {
        let len = self.slots.len();
        if self.index.capacity() > SHRINK_ABOVE.max(len.saturating_mul(8)) {
            let (slots, hasher) = (&self.slots, &self.hasher);
            self.index.shrink_to(len.saturating_mul(2), |&i| {
                slots.get(i as usize).map_or(0, |s| hasher.hash_one(&s.0))
            });
        }
    }

    /// Remove the entry at position `i`: the last entry moves into its place.
    fn remove_at(&mut self, i: usize) -> Option<(K, V)> {
        let last = self.slots.len().checked_sub(1)?;
        let h = self.hasher.hash_one(&self.slots.get(i)?.0);
        if let Ok(e) = self.index.find_entry(h, |&j| j as usize == i) {
            e.remove();
        }
        if i != last
            && let Some(s) = self.slots.get(last)
        {
            let lh = self.hasher.hash_one(&s.0);
            if let Some(p) = self.index.find_mut(lh, |&j| j as usize == last) {
                *p = pos(i);
            }
        }
        self.slots.swap_remove(i)
    }

    /// Keep only the entries for which `keep` says yes.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        let mut i = 0;
        while let Some((k, v)) = self.slots.get_mut(i) {
            if keep(k, v) {
                i += 1;
            } else {
                self.remove_at(i);
            }
        }
        self.shrink_when_sparse();
    }

    pub fn clear(&mut self) {
        self.index.clear();
        self.slots.clear();
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.slots.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.slots.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.slots.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.slots.iter_mut().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    type Map = DenseMap<Box<[u8]>, u64, foldhash::fast::RandomState>;

    #[test]
    fn behaves_like_a_hash_map() {
        let mut d = Map::default();
        let mut h: HashMap<Box<[u8]>, u64> = HashMap::new();
        let mut x: u64 = 12345;
        for step in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k: Box<[u8]> = format!("k{}", x % 20_000).into_bytes().into();
            match x % 5 {
                0 | 1 => assert_eq!(d.insert(k.clone(), step), h.insert(k, step)),
                2 => assert_eq!(d.remove(&k[..]), h.remove(&k)),
                3 => assert_eq!(d.get(&k[..]), h.get(&k)),
                _ => {
                    if let Some(v) = d.get_or_insert_with(k.clone(), || 1) {
                        *v += 1;
                    }
                    *h.entry(k).or_insert(1) += 1;
                }
            }
            if step % 50_000 == 0 && step > 0 {
                d.retain(|_, v| *v % 3 != 0);
                h.retain(|_, v| *v % 3 != 0);
            }
            assert_eq!(d.len(), h.len());
        }
        let mut a: Vec<_> = d.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let mut b: Vec<_> = h.clone().into_iter().collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        for k in h.keys() {
            assert_eq!(d.remove(&k[..]), h.get(k).copied());
        }
        assert!(d.is_empty() && d.slots.chunks.len() <= 1, "emptied, its chunks freed");
    }

    #[test]
    fn an_index_left_sparse_by_removals_shrinks_and_still_finds_every_key() {
        let mut d = Map::default();
        let key = |i: u64| -> Box<[u8]> { format!("k{i}").into_bytes().into() };
        for i in 0..200_000 {
            d.insert(key(i), i);
        }
        let grown = d.index.capacity();
        for i in 0..195_000 {
            assert_eq!(d.remove(&key(i)[..]), Some(i));
        }
        assert!(
            d.index.capacity() * 8 <= grown,
            "{} of {grown} buckets kept",
            d.index.capacity()
        );
        for i in 195_000..200_000 {
            assert_eq!(d.get(&key(i)[..]), Some(&i));
        }
        assert_eq!(d.len(), 5_000);
    }
}
