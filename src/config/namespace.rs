//! `[[namespace]]`: a family of lock keys — pattern, TTL and renewal cadence, how the owner
//! is stored (`ValueKind`), its fencing counters (`FenceMap`) and alert thresholds — and the
//! checks that keep every key in one namespace. Reading keys is the `access` layer's job.

use std::time::Duration;

use super::raw::{RawNamespace, S};
use super::{ConfigError, Cx, Thresholds};
use crate::duration;
use crate::glob::Glob;
use crate::vocab::UNKNOWN_NAMESPACE;

/// How the owner is read from a lock key's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueKind {
    /// The whole string value is the owner token.
    Token,
    /// The value is JSON; this dotted path holds the owner.
    Json(Vec<String>),
    /// A Redisson lock: a hash whose one field `<uuid>:<threadId>` is the owner.
    Redisson,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceConfig {
    pub name: String,
    pub pattern: Glob,
    pub ttl: Duration,
    pub renew_every: Option<Duration>,
    /// Slack on top of `ttl - renew_every` before a renewal counts as missed.
    pub renew_grace: Duration,
    pub max_hold: Option<Duration>,
    pub value: ValueKind,
    pub fence_pattern: Option<Glob>,
    pub log_phrases: Vec<String>,
    /// Alert thresholds: `[alerts]` with this namespace's `[namespace.alerts]` on top.
    pub alerts: Thresholds,
}

impl NamespaceConfig {
    /// Maps this namespace's lock keys to their fencing counters' keys.
    pub(crate) fn fence_map(&self) -> FenceMap {
        FenceMap::new(self)
    }

    /// Remaining TTL below which a renewed lock's holder has missed a renewal; `None` when
    /// the namespace's locks are not renewed.
    pub(crate) fn overdue_below(&self) -> Option<Duration> {
        let every = self.renew_every?;
        Some(self.ttl.saturating_sub(every).saturating_sub(self.renew_grace))
    }
}

/// From a lock key to its fencing counter's key, when both patterns are `prefix*suffix`:
/// the part in place of `*` is the lock's id, the same in both.
pub(crate) struct FenceMap {
    lock: Option<(Vec<u8>, Vec<u8>)>,
    fence: Option<(Vec<u8>, Vec<u8>)>,
}

impl FenceMap {
    pub(crate) fn new(ns: &NamespaceConfig) -> Self {
        FenceMap {
            lock: ns.pattern.single_wildcard(),
            fence: ns.fence_pattern.as_ref().and_then(|f| f.single_wildcard()),
        }
    }

    pub(crate) fn key_for(&self, lock_key: &[u8]) -> Option<Vec<u8>> {
        let ((lp, ls), (fp, fs)) = (self.lock.as_ref()?, self.fence.as_ref()?);
        let id = lock_key.strip_prefix(lp.as_slice())?.strip_suffix(ls.as_slice())?;
        Some([fp.as_slice(), id, fs.as_slice()].concat())
    }
}

impl Cx<'_> {
    pub(super) fn namespaces(
        &self,
        raw: Vec<RawNamespace>,
        defaults: Thresholds,
    ) -> Result<Vec<NamespaceConfig>, ConfigError> {
        let mut out: Vec<NamespaceConfig> = Vec::with_capacity(raw.len());
        for (i, n) in raw.into_iter().enumerate() {
            let ns = self.namespace(&n, i, defaults, &out)?;
            self.check_overlaps(&ns, i, &n, &out)?;
            out.push(ns);
        }
        Ok(out)
    }

    /// Namespace `i`, checked on its own and for a name distinct from the `earlier` ones.
    fn namespace(
        &self,
        n: &RawNamespace,
        i: usize,
        defaults: Thresholds,
        earlier: &[NamespaceConfig],
    ) -> Result<NamespaceConfig, ConfigError> {
        let k = |field: &str| format!("namespace[{i}].{field}");
        let name = self.name(&n.name, &k("name"))?;
        if name == UNKNOWN_NAMESPACE {
            return Err(self.err(
                Some(&n.name.span()),
                k("name"),
                "`unknown` is reserved for events that match no namespace",
            ));
        }
        if earlier.iter().any(|o| o.name == name) {
            return Err(self.err(
                Some(&n.name.span()),
                k("name"),
                format!("duplicate namespace name `{name}`"),
            ));
        }
        let glob = |v: &S<String>, field: &str| {
            Glob::new(v.get_ref())
                .map_err(|e| self.err(Some(&v.span()), k(field), format!("bad glob `{}`: {e}", v.get_ref())))
        };
        let pattern = glob(&n.pattern, "pattern")?;
        let fence_pattern = n.fence_pattern.as_ref().map(|f| glob(f, "fence_pattern")).transpose()?;
        let ttl = self.duration(&n.ttl, &k("ttl"))?;
        let (renew_every, renew_grace) = self.renewal(n, i, ttl)?;
        let max_hold = n
            .max_hold
            .as_ref()
            .map(|v| self.duration(v, &k("max_hold")))
            .transpose()?;
        let value = match &n.value {
            None => ValueKind::Token,
            Some(v) => parse_value_kind(v.get_ref()).ok_or_else(|| {
                self.err(
                    Some(&v.span()),
                    k("value"),
                    format!("`{}` is not one of token, json:<field>, redisson", v.get_ref()),
                )
            })?,
        };
        let mut log_phrases = Vec::with_capacity(n.log_phrases.len());
        for (j, p) in n.log_phrases.iter().enumerate() {
            if p.get_ref().trim().is_empty() {
                return Err(self.err(
                    Some(&p.span()),
                    format!("namespace[{i}].log_phrases[{j}]"),
                    "empty phrase would match every line",
                ));
            }
            log_phrases.push(p.get_ref().to_lowercase());
        }
        Ok(NamespaceConfig {
            name,
            pattern,
            ttl,
            renew_every,
            renew_grace,
            max_hold,
            value,
            fence_pattern,
            log_phrases,
            alerts: self.thresholds(&n.alerts, defaults, &k("alerts"))?,
        })
    }

    /// `renew_every` (shorter than `ttl`) and `renew_grace` (which must leave room for a
    /// renewal to count as overdue); the grace defaults to half of the smaller of the
    /// renewal period and the margin left after it.
    fn renewal(&self, n: &RawNamespace, i: usize, ttl: Duration) -> Result<(Option<Duration>, Duration), ConfigError> {
        let k = |field: &str| format!("namespace[{i}].{field}");
        let renew_every = match &n.renew_every {
            Some(v) => {
                let every = self.duration(v, &k("renew_every"))?;
                if every >= ttl {
                    return Err(self.err(
                        Some(&v.span()),
                        k("renew_every"),
                        format!(
                            "{} is not shorter than ttl ({}): the lock would expire before its renewal",
                            duration::format(every),
                            duration::format(ttl)
                        ),
                    ));
                }
                Some(every)
            }
            None => None,
        };
        let renew_grace = match (&n.renew_grace, renew_every) {
            (Some(v), None) => {
                return Err(self.err(Some(&v.span()), k("renew_grace"), "renew_grace needs renew_every"));
            }
            (Some(v), Some(every)) => {
                let grace = self.duration(v, &k("renew_grace"))?;
                if grace >= ttl - every {
                    return Err(self.err(
                        Some(&v.span()),
                        k("renew_grace"),
                        format!(
                            "{} leaves no room: ttl - renew_every is {}, so no lock could ever count as overdue",
                            duration::format(grace),
                            duration::format(ttl - every)
                        ),
                    ));
                }
                grace
            }
            (None, Some(every)) => every.min(ttl - every) / 2,
            (None, None) => Duration::ZERO,
        };
        Ok((renew_every, renew_grace))
    }

    /// A key must belong to one namespace only, and a fence counter must never look like a lock.
    fn check_overlaps(
        &self,
        ns: &NamespaceConfig,
        i: usize,
        raw: &RawNamespace,
        earlier: &[NamespaceConfig],
    ) -> Result<(), ConfigError> {
        let show = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
        if let Some(f) = &ns.fence_pattern
            && let Some(key) = f.overlap(&ns.pattern)
        {
            let span = raw.fence_pattern.as_ref().map(|f| f.span());
            return Err(self.err(
                span.as_ref(),
                format!("namespace[{i}].fence_pattern"),
                format!(
                    "`{f}` overlaps the lock pattern `{}` (both match e.g. `{}`): fence counters need keys of their own",
                    ns.pattern,
                    show(&key)
                ),
            ));
        }
        for o in earlier {
            let mine = std::iter::once(("pattern", &ns.pattern))
                .chain(ns.fence_pattern.as_ref().map(|f| ("fence_pattern", f)));
            for (field, g) in mine {
                let theirs = std::iter::once(&o.pattern).chain(o.fence_pattern.as_ref());
                for og in theirs {
                    if let Some(key) = g.overlap(og) {
                        let span = if field == "pattern" {
                            Some(raw.pattern.span())
                        } else {
                            raw.fence_pattern.as_ref().map(|f| f.span())
                        };
                        return Err(self.err(
                            span.as_ref(),
                            format!("namespace[{i}].{field}"),
                            format!(
                                "`{g}` and namespace `{}`'s `{og}` can match the same key (e.g. `{}`): make the patterns disjoint so every lock has one namespace",
                                o.name,
                                show(&key)
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// `token`, `redisson` or `json:<dotted.path>` (no empty path segment).
fn parse_value_kind(s: &str) -> Option<ValueKind> {
    match s {
        "token" => Some(ValueKind::Token),
        "redisson" => Some(ValueKind::Redisson),
        _ => {
            let path = s.strip_prefix("json:")?;
            let parts: Vec<String> = path.split('.').map(str::to_string).collect();
            (!parts.iter().any(String::is_empty)).then_some(ValueKind::Json(parts))
        }
    }
}
