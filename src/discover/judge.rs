//! What each family is: a lock family (tokens or Redisson hashes with a TTL), the fencing
//! counters beside one, or not a lock (cache entries, sessions, rate-limit counters…) and
//! why; sibling lock families merged into one pattern where no other family's key would
//! fall in it; and the `[[namespace]]` each lock family suggests. Pure.

use std::time::Duration;

use serde::Serialize;

use super::family::Family;
use super::shape::Shape;
use crate::glob::Glob;

/// A lock TTL longer than this, without a lock-like name, is a session's or a credential's.
const LONGEST_LOCK_TTL_MS: i64 = 6 * 3600 * 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Lock,
    FenceCounter,
    NotALock,
}

#[derive(Debug, Clone, Serialize)]
pub struct ShapeCount {
    pub shape: Shape,
    pub keys: u64,
}

/// The PTTLs seen, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub min_ms: i64,
    pub p50_ms: i64,
    pub p90_ms: i64,
    pub max_ms: i64,
}

/// A `[[namespace]]` entry.
#[derive(Debug, Clone, Serialize)]
pub struct Suggested {
    pub name: String,
    pub pattern: String,
    pub ttl: String,
    pub value: Option<&'static str>,
    pub fence_pattern: Option<String>,
}

/// One pattern of the keyspace and what it is.
#[derive(Debug, Clone, Serialize)]
pub struct Pattern {
    pub pattern: String,
    pub keys: u64,
    pub with_ttl: u64,
    pub ttl: Option<Spread>,
    pub shapes: Vec<ShapeCount>,
    /// The longest value: bytes of a string, fields of a hash.
    pub largest: usize,
    pub verdict: Verdict,
    pub reason: String,
    pub namespace: Option<Suggested>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hint {
    Lock,
    Session,
    Cache,
    RateLimit,
    None,
}

/// What the literal words of a template say.
fn hint(template: &str) -> Hint {
    let t = template.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if has(&["lock", "mutex", "lease", "leader", "sema"]) {
        Hint::Lock
    } else if has(&["sess"]) {
        Hint::Session
    } else if has(&["cache"]) {
        Hint::Cache
    } else if has(&["rate", "limit", "throttle", "quota"]) {
        Hint::RateLimit
    } else {
        Hint::None
    }
}

/// First pass: lock (`Some(redisson?)`), counter, or not a lock with the reason.
enum First {
    Lock { redisson: bool, note: Option<String> },
    Counter,
    Not(String),
}

fn first(f: &Family) -> First {
    let h = hint(&f.template);
    let none_expire = f.with_ttl == 0;
    let most_expire = f.with_ttl * 2 >= f.keys;
    let longest = f.pttls().last().copied().unwrap_or(-1);
    let not = |s: &str| First::Not(s.to_string());
    match f.dominant() {
        Shape::RedissonHash if most_expire => First::Lock {
            redisson: true,
            note: None,
        },
        Shape::RedissonHash => not("Redisson-shaped hashes without a TTL: a Redisson lock always carries its lease"),
        Shape::Integer if none_expire => First::Counter,
        Shape::Integer if h == Hint::Lock && most_expire => First::Lock {
            redisson: false,
            note: Some("values are integers, not owner tokens: lockwatch cannot tell one holder from the next".into()),
        },
        Shape::Integer => not("integers with a TTL: rate-limit or quota counters"),
        s if s.token_like() => match h {
            Hint::Session => not("token values under a session name: sessions"),
            Hint::Cache => not("token values under a cache name: cached credentials"),
            Hint::RateLimit => not("token values under a rate-limit name"),
            Hint::Lock if none_expire => First::Lock {
                redisson: false,
                note: None,
            },
            _ if none_expire => not("tokens without a TTL: lock libraries always set one"),
            Hint::None if !most_expire => not("tokens, mostly without a TTL: lock libraries always set one"),
            Hint::None if longest > LONGEST_LOCK_TTL_MS => {
                not("tokens with TTLs of hours to days: sessions or credentials, not locks")
            }
            _ => First::Lock {
                redisson: false,
                note: None,
            },
        },
        Shape::Json if h == Hint::Session || (!none_expire && longest > 10 * 60 * 1000) => {
            not("JSON documents with a long TTL: sessions")
        }
        Shape::Json => not("JSON documents: cache entries or application data"),
        Shape::Text | Shape::Binary if h == Hint::Session => not("values under a session name: sessions"),
        Shape::Text | Shape::Binary => not("text or binary values, not tokens: cache entries or application data"),
        Shape::Hash => not("hashes whose fields are not Redisson's uuid:threadId: application data"),
        _ => not("lists, sets, sorted sets or streams: not a lock shape lockwatch reads"),
    }
}

/// Judge every family: pair counters with the lock family beside them, merge sibling lock
/// families, suggest namespaces. Most keys first within each verdict.
pub(crate) fn judge(families: Vec<Family>) -> Vec<Pattern> {
    let firsts: Vec<First> = families.iter().map(first).collect();
    // Counters beside a lock family: the most shared ids, and patterns that cannot overlap.
    let mut fence_of: Vec<Option<usize>> = vec![None; families.len()];
    let mut fenced: Vec<Option<usize>> = vec![None; families.len()];
    for (c, cf) in families.iter().enumerate() {
        if !matches!(firsts[c], First::Counter) {
            continue;
        }
        // Beside: ids in common, and a name that says so (a common first word, or a
        // counter's word); the closest name first, then the most ids in common.
        let best = families
            .iter()
            .enumerate()
            .filter(|(l, _)| matches!(firsts[*l], First::Lock { .. }))
            .filter(|(l, _)| fenced[*l].is_none())
            .map(|(l, lf)| (beside(&cf.template, &lf.template), cf.shared_ids(lf), l))
            .filter(|(near, n, _)| *near > 0 && *n > 0)
            .max();
        if let Some((_, _, l)) = best
            && disjoint(&cf.template, &families[l].template)
        {
            fence_of[c] = Some(l);
            fenced[l] = Some(c);
        }
    }
    let mut out = Vec::new();
    let mut lock_groups: Vec<(Family, bool, Option<String>, Option<String>)> = Vec::new();
    for (i, (f, first)) in families.iter().zip(firsts).enumerate() {
        match first {
            First::Lock { redisson, note } => {
                let fence = fenced[i].map(|c| families[c].template.clone());
                lock_groups.push((f.clone(), redisson, note, fence));
            }
            First::Counter => match fence_of[i] {
                Some(l) => out.push(pattern(
                    f,
                    Verdict::FenceCounter,
                    format!(
                        "integers without a TTL beside the lock family `{}`: its fencing counters",
                        families[l].template
                    ),
                    None,
                )),
                None => out.push(pattern(
                    f,
                    Verdict::NotALock,
                    "integers without a TTL, beside no lock family: counters".into(),
                    None,
                )),
            },
            First::Not(reason) => out.push(pattern(f, Verdict::NotALock, reason, None)),
        }
    }
    let merged = merge_siblings(lock_groups, &families);
    let mut names = Vec::new();
    for (f, redisson, note, fence) in merged {
        let name = unique_name(&f.template, &mut names);
        let ttl = estimate_ttl(f.pttls().last().copied().unwrap_or(0));
        let longest = f.pttls().last().map_or("none".into(), |ms| show_ms(*ms));
        let mut reason = format!(
            "{} with a TTL (longest seen {longest}: ttl estimated {ttl})",
            if redisson {
                "Redisson lock hashes"
            } else {
                "owner tokens"
            }
        );
        if let Some(n) = note {
            reason = format!("{reason}; {n}");
        }
        if f.with_ttl < f.keys {
            reason = format!(
                "{reason}; {} of {} keys carry no TTL: a holder that dies leaves them forever",
                f.keys - f.with_ttl,
                f.keys
            );
        }
        let suggested = Suggested {
            name,
            pattern: f.template.clone(),
            ttl,
            value: redisson.then_some("redisson"),
            fence_pattern: fence,
        };
        out.push(pattern(&f, Verdict::Lock, reason, Some(suggested)));
    }
    let rank = |v: Verdict| match v {
        Verdict::Lock => 0,
        Verdict::FenceCounter => 1,
        Verdict::NotALock => 2,
    };
    out.sort_by(|a, b| {
        rank(a.verdict)
            .cmp(&rank(b.verdict))
            .then(b.keys.cmp(&a.keys))
            .then(a.pattern.cmp(&b.pattern))
    });
    out
}

/// How closely a counter family's name sits beside a lock family's, 0 when not at all: the
/// literal words before the first `*` must be as many and differ in one at most
/// (`billing:fence:*` beside `billing:lock:*`); then the more words in common, and a
/// counter's word (`fence`, `token`, `epoch`…), the closer.
fn beside(counter: &str, lock: &str) -> usize {
    let words = |t: &str| -> Vec<String> {
        let literal = t.split('*').next().unwrap_or("");
        literal
            .split([':', '/', '{', '}', '-', '_', '.'])
            .filter(|w| !w.is_empty())
            .map(str::to_ascii_lowercase)
            .collect()
    };
    let (c, l) = (words(counter), words(lock));
    let shared = c.iter().zip(&l).filter(|(a, b)| a == b).count();
    if c.len() != l.len() || shared + 1 < c.len() {
        return 0;
    }
    let named = ["fenc", "token", "epoch", "seq", "counter", "version", "generation"]
        .iter()
        .any(|w| counter.to_ascii_lowercase().contains(w));
    1 + shared + usize::from(named)
}

/// Whether no key can match both patterns.
fn disjoint(a: &str, b: &str) -> bool {
    match (Glob::new(a), Glob::new(b)) {
        (Ok(a), Ok(b)) => a.overlap(&b).is_none(),
        _ => false,
    }
}

type LockGroup = (Family, bool, Option<String>, Option<String>);

/// Unfenced lock families of one kind under the same parent (`jobs:lock:daily`,
/// `jobs:lock:weekly`) become `jobs:lock:*` when no key of any other family matches it.
fn merge_siblings(groups: Vec<LockGroup>, all: &[Family]) -> Vec<LockGroup> {
    let parent = |t: &str| t.rfind([':', '/']).map(|at| t[..=at].to_string());
    let mut out: Vec<LockGroup> = Vec::new();
    let mut pending: Vec<LockGroup> = Vec::new();
    for g in groups {
        if g.3.is_none() && parent(&g.0.template).is_some() {
            pending.push(g);
        } else {
            out.push(g);
        }
    }
    while let Some(g) = pending.pop() {
        let p = parent(&g.0.template).unwrap_or_default();
        let (siblings, rest): (Vec<LockGroup>, Vec<LockGroup>) = pending
            .into_iter()
            .partition(|o| o.1 == g.1 && parent(&o.0.template).as_deref() == Some(p.as_str()));
        pending = rest;
        if siblings.is_empty() {
            out.push(g);
            continue;
        }
        let wide = format!("{p}*");
        let members: Vec<&str> = std::iter::once(&g)
            .chain(&siblings)
            .map(|s| s.0.template.as_str())
            .collect();
        let clash = Glob::new(&wide).map_or(true, |glob| {
            all.iter()
                .filter(|f| !members.contains(&f.template.as_str()))
                .any(|f| f.examples.iter().any(|k| glob.matches(k)))
        });
        if clash {
            out.push(g);
            out.extend(siblings);
            continue;
        }
        let (mut fam, redisson, mut note, _) = g;
        for (f, _, n, _) in siblings {
            fam.absorb(f);
            note = note.or(n);
        }
        fam.template = wide;
        out.push((fam, redisson, note, None));
    }
    out
}

fn pattern(f: &Family, verdict: Verdict, reason: String, namespace: Option<Suggested>) -> Pattern {
    let p = f.pttls();
    let at = |q: usize| p[(p.len() - 1) * q / 100];
    Pattern {
        pattern: f.template.clone(),
        keys: f.keys,
        with_ttl: f.with_ttl,
        ttl: (!p.is_empty()).then(|| Spread {
            min_ms: at(0),
            p50_ms: at(50),
            p90_ms: at(90),
            max_ms: at(100),
        }),
        shapes: f
            .shapes
            .iter()
            .rev()
            .map(|(s, n)| ShapeCount { shape: *s, keys: *n })
            .collect(),
        largest: f.max_len,
        verdict,
        reason,
        namespace,
    }
}

/// The TTL an application sets, from the longest PTTL seen: rounded up to 100 ms below a
/// second, to whole seconds below ten minutes, to whole minutes above (a PTTL just read is a
/// hair under the TTL set).
pub(crate) fn estimate_ttl(longest_ms: i64) -> String {
    let ms = u64::try_from(longest_ms.max(1)).unwrap_or(1);
    let unit = match ms {
        ..1_000 => 100,
        1_000..600_000 => 1_000,
        _ => 60_000,
    };
    crate::duration::format(Duration::from_millis(ms.div_ceil(unit) * unit))
}

/// A PTTL for reading: whole seconds from 10 s, tenths of a second from 1 s.
pub(crate) fn show_ms(ms: i64) -> String {
    let ms = u64::try_from(ms).unwrap_or(0);
    let rounded = match ms {
        10_000.. => (ms + 500) / 1000 * 1000,
        1_000.. => (ms + 50) / 100 * 100,
        _ => ms,
    };
    crate::duration::format(Duration::from_millis(rounded))
}

/// A namespace name from the pattern's words, without the generic ones; unique in `taken`.
fn unique_name(pattern: &str, taken: &mut Vec<String>) -> String {
    const GENERIC: [&str; 8] = ["lock", "locks", "mutex", "lease", "redlock", "redisson", "key", "keys"];
    let words: Vec<String> = pattern
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && !GENERIC.contains(&w.to_ascii_lowercase().as_str()))
        .map(str::to_ascii_lowercase)
        .collect();
    let mut base = words.join("_");
    base.truncate(56);
    if base.is_empty() || base == "unknown" {
        base = "locks".into();
    }
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}_{n}");
        n += 1;
    }
    taken.push(name.clone());
    name
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
