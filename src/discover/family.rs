//! A family: the sampled keys of one key template, as counts — types and value shapes,
//! PTTLs (a bounded, evenly thinned sample), a few example keys to test a broader pattern
//! against, and a bottom-k sketch of the ids in place of `*` to tell which counter family
//! sits beside which lock family. Values are never kept.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

use super::shape::{self, Shape};
use crate::access::survey::{Kind, Sampled};
use crate::glob::Glob;

/// PTTLs kept per family (thinned by half whenever full).
const PTTLS: usize = 2048;
/// Example keys kept per family.
const EXAMPLES: usize = 16;
/// Ids kept per family: those of smallest hash, the same ones in every family.
const IDS: usize = 256;
/// Families kept; keys of further templates are only counted.
const FAMILIES: usize = 5000;

#[derive(Debug, Clone)]
pub(crate) struct Family {
    pub template: String,
    pub keys: u64,
    pub with_ttl: u64,
    pub shapes: BTreeMap<Shape, u64>,
    /// Longest value seen (bytes of a string, fields of a hash).
    pub max_len: usize,
    pttls: Vec<i64>,
    /// Every `stride`-th PTTL is kept.
    stride: u64,
    ttl_seen: u64,
    pub examples: Vec<Vec<u8>>,
    /// Literal prefix and suffix around the template's one `*`, when it has one.
    wildcard: Option<(Vec<u8>, Vec<u8>)>,
    pub ids: BTreeSet<(u64, Vec<u8>)>,
}

impl Family {
    fn new(template: String) -> Self {
        let wildcard = Glob::new(&template).ok().and_then(|g| g.single_wildcard());
        Family {
            template,
            keys: 0,
            with_ttl: 0,
            shapes: BTreeMap::new(),
            max_len: 0,
            pttls: Vec::new(),
            stride: 1,
            ttl_seen: 0,
            examples: Vec::new(),
            wildcard,
            ids: BTreeSet::new(),
        }
    }

    fn add(&mut self, s: &Sampled) {
        self.keys += 1;
        *self.shapes.entry(shape::of(&s.kind)).or_default() += 1;
        self.max_len = self.max_len.max(match &s.kind {
            Kind::String { len, .. } | Kind::Hash { len, .. } => *len,
            Kind::Other(_) => 0,
        });
        if s.pttl_ms >= 0 {
            self.with_ttl += 1;
            self.add_pttl(s.pttl_ms);
        }
        if self.examples.len() < EXAMPLES {
            self.examples.push(s.key.clone());
        }
        if let Some((p, x)) = &self.wildcard
            && let Some(id) = s
                .key
                .strip_prefix(p.as_slice())
                .and_then(|r| r.strip_suffix(x.as_slice()))
        {
            let mut h = std::hash::DefaultHasher::new();
            id.hash(&mut h);
            self.ids.insert((h.finish(), id.to_vec()));
            if self.ids.len() > IDS {
                self.ids.pop_last();
            }
        }
    }

    fn add_pttl(&mut self, ms: i64) {
        if self.ttl_seen.is_multiple_of(self.stride) {
            self.pttls.push(ms);
            if self.pttls.len() >= PTTLS {
                self.pttls = self.pttls.iter().step_by(2).copied().collect();
                self.stride *= 2;
            }
        }
        self.ttl_seen += 1;
    }

    /// Another family's keys taken in (a merge of sibling families).
    pub fn absorb(&mut self, other: Family) {
        self.keys += other.keys;
        self.with_ttl += other.with_ttl;
        for (s, n) in other.shapes {
            *self.shapes.entry(s).or_default() += n;
        }
        self.max_len = self.max_len.max(other.max_len);
        self.pttls.extend(other.pttls);
        self.examples.extend(other.examples);
        self.examples.truncate(EXAMPLES * 4);
    }

    /// The most common shape.
    pub fn dominant(&self) -> Shape {
        self.shapes
            .iter()
            .max_by_key(|(s, n)| (**n, std::cmp::Reverse(**s)))
            .map_or(Shape::Other, |(s, _)| *s)
    }

    /// Sorted PTTLs seen (a sample of them).
    pub fn pttls(&self) -> Vec<i64> {
        let mut v = self.pttls.clone();
        v.sort_unstable();
        v
    }

    /// Ids shared with `other` (both sketches keep the smallest hashes, so equal id sets
    /// give equal sketches).
    pub fn shared_ids(&self, other: &Family) -> usize {
        self.ids.intersection(&other.ids).count()
    }
}

/// The families of a sample, by template.
#[derive(Debug, Default)]
pub(crate) struct Census {
    families: HashMap<String, Family>,
    /// Keys of templates past [`FAMILIES`].
    pub unsorted: u64,
}

impl Census {
    pub fn add(&mut self, s: &Sampled) {
        let template = shape::template(&s.key);
        if let Some(f) = self.families.get_mut(&template) {
            f.add(s);
        } else if self.families.len() < FAMILIES {
            let mut f = Family::new(template.clone());
            f.add(s);
            self.families.insert(template, f);
        } else {
            self.unsorted += 1;
        }
    }

    /// The families, most keys first.
    pub fn into_families(self) -> Vec<Family> {
        let mut v: Vec<Family> = self.families.into_values().collect();
        v.sort_by(|a, b| b.keys.cmp(&a.keys).then_with(|| a.template.cmp(&b.template)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str, v: &str, pttl: i64) -> Sampled {
        Sampled {
            key: k.as_bytes().to_vec(),
            kind: Kind::String {
                len: v.len(),
                head: v.as_bytes().to_vec(),
            },
            pttl_ms: pttl,
        }
    }

    #[test]
    fn families_by_template_with_sketches_that_meet() {
        let mut c = Census::default();
        for i in 0..5000 {
            c.add(&key(
                &format!("a:lock:{i}"),
                "0123456789abcdef0123456789abcdef",
                1000 + i,
            ));
        }
        for i in (0..5000).rev() {
            c.add(&key(&format!("a:fence:{i}"), "7", -1));
        }
        let fams = c.into_families();
        assert_eq!(fams.len(), 2);
        let (fence, lock) = (&fams[0], &fams[1]);
        assert_eq!(
            (fence.template.as_str(), lock.template.as_str()),
            ("a:fence:*", "a:lock:*")
        );
        assert_eq!(lock.with_ttl, 5000);
        assert_eq!(lock.dominant(), Shape::Hex);
        assert_eq!(fence.dominant(), Shape::Integer);
        assert_eq!(lock.shared_ids(fence), IDS);
        let p = lock.pttls();
        assert!(
            p.len() < PTTLS && p[0] == 1000 && *p.last().unwrap_or(&0) >= 5900,
            "{}",
            p.len()
        );
    }
}
