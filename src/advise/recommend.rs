//! From what one namespace's locks did to a `ttl`, `renew_every` and `renew_grace`, each
//! with its reasoning, and whether fencing is needed. Pure: the observations come in, the
//! advice goes out; no Redis, no clock.
//!
//! The rule: find the longest stall seen — the worst gap between a hold's writes beyond its
//! usual renewal cadence, or the longest job of a lock that is not renewed; holds that
//! expired count as twice the TTL they outlasted, since no metric says by how much — and
//! size the TTL so that a third of it can go to renewing and the rest still covers 1.5×
//! that stall.

use std::time::Duration;

use serde::Serialize;

use super::histogram::Buckets;
use crate::config::NamespaceConfig;
use crate::duration;

/// Lifecycle events (holds ended plus renewals) below which advise says "not enough data".
pub const MIN_EVENTS: f64 = 20.0;
/// How much longer than the longest stall seen a lock must survive.
const MARGIN: f64 = 1.5;
/// An expired hold's stall counts as this many times the TTL it outlasted.
const EXPIRED_STALL_FACTOR: f64 = 2.0;

/// What one namespace's locks did over the window (summed over targets).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    pub holds_released: Buckets,
    pub holds_expired: Buckets,
    pub renewal_interval: Buckets,
    pub headroom_renewal: Buckets,
    pub headroom_release: Buckets,
    pub near_misses: f64,
    pub takeovers: f64,
    /// Locks that expired (holds whose start was not seen included).
    pub expired: f64,
    /// Most holders overdue at once (Prometheus: over the window; exporter: now).
    pub overdue_max: Option<f64>,
    /// Minutes of the window with a holder overdue (Prometheus only).
    pub overdue_minutes: Option<f64>,
}

/// A duration distribution: how many, the usual and the worst (seconds).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Spread {
    pub count: f64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    #[serde(rename = "p99.9")]
    pub p999: Option<f64>,
    /// The bucket the largest observation fell in, `[above, at most]` (`null`: beyond the largest bound).
    pub longest: Option<(f64, Option<f64>)>,
}

/// The headroom distribution: how little was left, at the low end.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Margin {
    pub count: f64,
    #[serde(rename = "p0.1")]
    pub p001: Option<f64>,
    pub p1: Option<f64>,
    pub p50: Option<f64>,
}

/// The longest stall seen and where it shows.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stall {
    pub seconds: f64,
    pub evidence: String,
    /// The evidence in a few words, for the ttl's reasoning.
    #[serde(skip)]
    pub short: String,
}

/// The summary of what was seen.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Seen {
    pub holds_released: Spread,
    pub holds_expired: f64,
    pub renewal_interval: Spread,
    pub headroom_at_renewal: Margin,
    pub headroom_at_release: Margin,
    pub near_misses: f64,
    pub takeovers: f64,
    pub expired: f64,
    pub overdue_max: Option<f64>,
    pub overdue_minutes: Option<f64>,
    pub longest_stall: Option<Stall>,
}

/// A setting as it is and as advised.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Setting {
    /// `None`: not set (no renewal).
    pub value: Option<String>,
    pub why: String,
}

/// The recommendation for one namespace.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Recommended {
    pub ttl: Setting,
    pub renew_every: Setting,
    pub renew_grace: Setting,
    pub fencing_needed: bool,
    pub fencing: String,
}

/// The current settings, as the config has them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Current {
    pub ttl: String,
    pub renew_every: Option<String>,
    pub renew_grace: Option<String>,
    pub fence_pattern: Option<String>,
}

/// Everything said about one namespace.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Advice {
    pub namespace: String,
    pub current: Current,
    pub seen: Seen,
    /// `None` when there was too little to go by; `not_enough_data` says why.
    pub recommended: Option<Recommended>,
    pub not_enough_data: Option<String>,
}

fn spread(b: &Buckets) -> Spread {
    Spread {
        count: b.count(),
        p50: b.quantile(0.5),
        p99: b.quantile(0.99),
        p999: b.quantile(0.999),
        longest: b.largest().map(|(lo, hi)| (lo, hi.is_finite().then_some(hi))),
    }
}

fn margin(b: &Buckets) -> Margin {
    Margin {
        count: b.count(),
        p001: b.quantile(0.001),
        p1: b.quantile(0.01),
        p50: b.quantile(0.5),
    }
}

/// The upper end of where the largest observation lies; beyond the largest bound, twice it.
fn worst(b: &Buckets) -> Option<f64> {
    b.largest().map(|(lo, hi)| if hi.is_finite() { hi } else { lo * 2.0 })
}

/// "1.5s", "250ms", "2m".
pub fn secs(s: f64) -> String {
    duration::format(Duration::from_millis((s.max(0.0) * 1000.0).round() as u64))
}

/// Durations an operator would write, in ms.
const LADDER: &[u64] = &[
    1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1_000, 1_500, 2_000, 2_500, 3_000, 5_000, 7_500, 10_000, 15_000,
    20_000, 30_000, 45_000, 60_000, 90_000, 120_000, 180_000, 300_000, 600_000, 900_000, 1_200_000, 1_800_000,
    3_600_000,
];

/// The smallest ladder value (seconds) not below `s`; beyond the ladder, whole minutes.
fn nice_up(s: f64) -> f64 {
    let ms = (s * 1000.0).ceil().max(1.0) as u64;
    let v = LADDER
        .iter()
        .copied()
        .find(|&l| l >= ms)
        .unwrap_or_else(|| ms.div_ceil(60_000) * 60_000);
    v as f64 / 1000.0
}

/// The largest ladder value (seconds) not above `s` (at least 1 ms).
fn nice_down(s: f64) -> f64 {
    let ms = (s * 1000.0).floor() as u64;
    let v = LADDER.iter().copied().rev().find(|&l| l <= ms).unwrap_or(1);
    v as f64 / 1000.0
}

fn current(ns: &NamespaceConfig) -> Current {
    Current {
        ttl: duration::format(ns.ttl),
        renew_every: ns.renew_every.map(duration::format),
        renew_grace: ns.renew_every.map(|_| duration::format(ns.renew_grace)),
        fence_pattern: ns.fence_pattern.as_ref().map(|g| g.as_str().to_string()),
    }
}

/// The advice for namespace `ns` from what its locks did.
pub fn advise(ns: &NamespaceConfig, o: &Observed) -> Advice {
    let renewals = o.renewal_interval.count();
    let holds = o.holds_released.count() + o.holds_expired.count();
    let stall = longest_stall(ns, o);
    let seen = Seen {
        holds_released: spread(&o.holds_released),
        holds_expired: o.holds_expired.count(),
        renewal_interval: spread(&o.renewal_interval),
        headroom_at_renewal: margin(&o.headroom_renewal),
        headroom_at_release: margin(&o.headroom_release),
        near_misses: o.near_misses,
        takeovers: o.takeovers,
        expired: o.expired,
        overdue_max: o.overdue_max,
        overdue_minutes: o.overdue_minutes,
        longest_stall: stall.clone(),
    };
    let mut advice = Advice {
        namespace: ns.name.clone(),
        current: current(ns),
        seen,
        recommended: None,
        not_enough_data: None,
    };
    match stall {
        Some(stall) if holds + renewals >= MIN_EVENTS => advice.recommended = Some(recommend(ns, o, &stall)),
        _ => {
            advice.not_enough_data = Some(format!(
                "not enough data: {holds:.0} holds ended and {renewals:.0} renewals seen; advise needs at least {MIN_EVENTS:.0} of them together (with keyspace notifications on) before it recommends anything"
            ))
        }
    }
    advice
}

/// The longest stall the observations show, and in what words.
fn longest_stall(ns: &NamespaceConfig, o: &Observed) -> Option<Stall> {
    let ttl = ns.ttl.as_secs_f64();
    let seen = if o.renewal_interval.count() > 0.0 {
        let cadence = o.renewal_interval.quantile(0.5).unwrap_or(0.0);
        worst(&o.renewal_interval).map(|w| Stall {
            seconds: (w - cadence).max(0.0),
            evidence: format!(
                "renewals came every {} (median) and at worst up to {} apart: a stall of up to {} between renewals",
                secs(cadence),
                secs(w),
                secs((w - cadence).max(0.0))
            ),
            short: format!("renewals up to {} apart", secs(w)),
        })
    } else {
        worst(&o.holds_released).map(|w| Stall {
            seconds: w,
            evidence: format!("the longest hold released ran up to {} without a renewal", secs(w)),
            short: format!("holds of up to {} without renewal", secs(w)),
        })
    };
    // Prometheus's `increase` extrapolates: counts come back as 1.06 for one.
    let lost = o.expired.max(o.holds_expired.count()).round();
    if lost <= 0.0 {
        return seen;
    }
    let counted = EXPIRED_STALL_FACTOR * ttl;
    let short = format!(
        "{lost:.0} hold{s} expired under the {} TTL, counted as {}",
        secs(ttl),
        secs(counted),
        s = if lost == 1.0 { "" } else { "s" }
    );
    let expired = format!(
        "{lost:.0} hold{s} expired under the {} TTL ({:.0} taken over): their holders stalled past what was left, by an amount no metric shows, so advise counts {} ({EXPIRED_STALL_FACTOR}× the TTL)",
        secs(ttl),
        o.takeovers,
        secs(counted),
        s = if lost == 1.0 { "" } else { "s" },
    );
    Some(match seen {
        Some(s) if s.seconds >= counted => Stall {
            seconds: s.seconds,
            evidence: format!("{}; {expired}", s.evidence),
            short: s.short,
        },
        Some(s) => Stall {
            seconds: counted,
            evidence: format!("{}; {expired}", s.evidence),
            short,
        },
        None => Stall {
            seconds: counted,
            evidence: expired,
            short,
        },
    })
}

fn recommend(ns: &NamespaceConfig, o: &Observed, stall: &Stall) -> Recommended {
    let ttl0 = ns.ttl.as_secs_f64();
    let renews = o.renewal_interval.count() > 0.0;
    let lost = o.expired > 0.0 || o.takeovers > 0.0 || o.holds_expired.count() > 0.0;
    let need = MARGIN * stall.seconds;
    let cadence = o.renewal_interval.quantile(0.5);
    // What the current settings survive: ttl minus the renewal period (or the whole ttl).
    let every0 = ns.renew_every.map(|d| d.as_secs_f64()).or(cadence.filter(|_| renews));
    let survives0 = ttl0 - every0.unwrap_or(0.0);
    let keep = !lost && survives0 >= need;
    let (ttl, every) = if keep {
        (ttl0, every0)
    } else if renews || lost || o.near_misses > 0.0 {
        let ttl = nice_up((need * 3.0 / 2.0).max(ttl0));
        (ttl, Some(nice_down(ttl / 3.0)))
    } else {
        (nice_up(need.max(ttl0)), None)
    };
    let survives = ttl - every.unwrap_or(0.0);
    let ttl_why = if keep {
        format!(
            "The longest stall seen is {} ({}). The current {} TTL{} survives a {} stall, at least {MARGIN}× that.",
            secs(stall.seconds),
            stall.short,
            secs(ttl),
            every.map(|e| format!(" renewed every {}", secs(e))).unwrap_or_default(),
            secs(survives0)
        )
    } else {
        format!(
            "The longest stall counted is {} ({}). A {} TTL{} survives a {} stall, {MARGIN}× that{}.",
            secs(stall.seconds),
            stall.short,
            secs(ttl),
            every.map(|e| format!(" renewed every {}", secs(e))).unwrap_or_default(),
            secs(survives),
            if ttl0 < ttl {
                format!("; the current {} does not", secs(ttl0))
            } else {
                String::new()
            }
        )
    };
    let renew_every = match every {
        None => Setting {
            value: None,
            why: "Not needed by what was seen: every hold ended well within its TTL without renewing. Renew if jobs may grow."
                .into(),
        },
        Some(e) if keep => Setting {
            value: Some(secs(e)),
            why: format!("Keep it: renewals every {} leave the TTL room for the stalls seen.", secs(e)),
        },
        Some(e) => Setting {
            value: Some(secs(e)),
            why: format!(
                "A third of the TTL or less: a holder can miss a renewal and still keep its lock{}.",
                if renews {
                    String::new()
                } else {
                    "; renewing is what lets a job outlive any fixed TTL".into()
                }
            ),
        },
    };
    let renew_grace = grace(o, ttl, every);
    let fence_needed = lost || o.near_misses > 0.0;
    let seen = format!(
        "{}, {} and {} were seen",
        plural(o.takeovers, "takeover", "takeovers"),
        plural(o.expired.max(o.holds_expired.count()), "expiry", "expiries"),
        plural(o.near_misses, "near miss", "near misses")
    );
    let fencing = match (fence_needed, &ns.fence_pattern) {
        (true, Some(f)) => format!(
            "Needed, and configured ({}): {seen}; keep the resource refusing older tokens.",
            f.as_str()
        ),
        (true, None) => format!(
            "Needed: {seen}. A holder can lose its lock while it works; only a fencing token (INCR) that the resource checks refuses its late writes. Set fence_pattern so lockwatch watches the counters."
        ),
        (false, _) => "Not needed by what was seen: no takeover, expiry or near miss. Still the only protection when a stall outlasts the TTL.".into(),
    };
    Recommended {
        ttl: Setting {
            value: Some(secs(ttl)),
            why: ttl_why,
        },
        renew_every,
        renew_grace,
        fencing_needed: fence_needed,
        fencing,
    }
}

/// `n` and the word for it: "1 takeover", "2 takeovers".
fn plural(n: f64, one: &str, many: &str) -> String {
    format!("{n:.0} {}", if (n - 1.0).abs() < f64::EPSILON { one } else { many })
}

/// The grace before a renewal counts as missed: the lateness renewals showed (p99.9 minus
/// median interval), at least a tenth of the period, and leaving the overdue mark above 0.
fn grace(o: &Observed, ttl: f64, every: Option<f64>) -> Setting {
    let Some(every) = every else {
        return Setting {
            value: None,
            why: "Only with renew_every.".into(),
        };
    };
    let late = match (o.renewal_interval.quantile(0.999), o.renewal_interval.quantile(0.5)) {
        (Some(hi), Some(mid)) => (hi - mid).max(0.0),
        _ => 0.0,
    };
    let mut g = nice_up(late.max(every / 10.0));
    if g >= ttl - every {
        g = nice_down((ttl - every) / 2.0);
    }
    Setting {
        value: Some(secs(g)),
        why: format!(
            "Renewals came up to {} later than usual (p99.9 minus median interval); a {} grace keeps on-time renewals from counting as overdue and flags a holder {} after its last renewal, {} before its lock would expire.",
            secs(late),
            secs(g),
            secs(every + g),
            secs(ttl - every - g)
        ),
    }
}

#[cfg(test)]
#[path = "recommend_tests.rs"]
mod tests;
