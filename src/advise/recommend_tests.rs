//! The recommendation rules on hand-made observations.

use std::path::Path;

use super::*;
use crate::config::{Config, Overrides};

fn ns(extra: &str) -> NamespaceConfig {
    let text = format!(
        "[[target]]\nname = \"t\"\nurl = \"redis://127.0.0.1:1\"\n[[namespace]]\nname = \"n\"\npattern = \"n:*\"\n{extra}\n"
    );
    let c = Config::from_toml(&text, "t.toml", Path::new("."), &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
    c.namespaces[0].clone()
}

/// `n` observations at each of `values` seconds, in buckets of 0.25 s up to 10 s.
fn observed(values: &[(f64, u32)]) -> Buckets {
    let mut b = Buckets::default();
    let mut le = 0.25;
    while le <= 10.0 {
        let c: u32 = values.iter().filter(|(v, _)| *v <= le).map(|(_, n)| n).sum();
        b.add(le, f64::from(c));
        le += 0.25;
    }
    let all: u32 = values.iter().map(|(_, n)| n).sum();
    b.add(f64::INFINITY, f64::from(all));
    b
}

fn value(s: &Setting) -> Option<f64> {
    s.value.as_deref().map(|v| {
        crate::duration::parse(v)
            .unwrap_or_else(|e| panic!("{v}: {e}"))
            .as_secs_f64()
    })
}

#[test]
fn the_ladder_rounds_to_durations_people_write() {
    assert_eq!(nice_up(4.5), 5.0);
    assert_eq!(nice_up(0.0), 0.001);
    assert_eq!(nice_up(4000.0), 4020.0);
    assert_eq!(nice_down(5.0 / 3.0), 1.5);
    assert_eq!(nice_down(0.0), 0.001);
    assert_eq!(secs(1.5), "1s500ms");
}

#[test]
fn too_little_data_recommends_nothing_and_says_so() {
    let a = advise(&ns("ttl = \"1s\""), &Observed::default());
    assert!(a.recommended.is_none());
    let why = a.not_enough_data.unwrap_or_default();
    assert!(
        why.starts_with("not enough data: 0 holds ended and 0 renewals"),
        "{why}"
    );
    let few = Observed {
        holds_released: observed(&[(0.3, 5)]),
        ..Observed::default()
    };
    assert!(advise(&ns("ttl = \"1s\""), &few).recommended.is_none());
}

#[test]
fn renewals_with_expiries_get_a_ttl_that_outlives_twice_the_lost_one() {
    let o = Observed {
        holds_released: observed(&[(1.0, 20)]),
        holds_expired: observed(&[(1.0, 1)]),
        renewal_interval: observed(&[(0.25, 60), (0.7, 2)]),
        takeovers: 1.0,
        expired: 1.0,
        ..Observed::default()
    };
    let a = advise(&ns("ttl = \"1s\"\nrenew_every = \"250ms\""), &o);
    let r = a.recommended.unwrap_or_else(|| panic!("{:?}", a.not_enough_data));
    let (ttl, every) = (value(&r.ttl).unwrap_or(0.0), value(&r.renew_every).unwrap_or(0.0));
    // The expired hold counts as a 2 s stall: 1.5× that must fit between renewal and expiry.
    assert!(ttl - every >= 3.0, "{r:#?}");
    assert!(every <= ttl / 3.0, "{r:#?}");
    let grace = value(&r.renew_grace).unwrap_or(f64::MAX);
    assert!(grace < ttl - every, "{r:#?}");
    assert!(r.fencing_needed);
    assert!(r.ttl.why.contains("1 hold expired under the 1s TTL"), "{}", r.ttl.why);
    assert!(
        r.fencing.starts_with("Needed: 1 takeover, 1 expiry and 0 near misses"),
        "{}",
        r.fencing
    );
    assert_eq!(a.seen.longest_stall.map(|s| s.seconds), Some(2.0));
}

#[test]
fn a_healthy_renewing_namespace_keeps_its_settings() {
    let o = Observed {
        holds_released: observed(&[(5.0, 30)]),
        renewal_interval: observed(&[(10.0, 100)]),
        headroom_renewal: observed(&[(10.0, 100)]),
        ..Observed::default()
    };
    let a = advise(&ns("ttl = \"30s\"\nrenew_every = \"10s\""), &o);
    let r = a.recommended.unwrap_or_else(|| panic!("{:?}", a.not_enough_data));
    assert_eq!(r.ttl.value.as_deref(), Some("30s"));
    assert_eq!(r.renew_every.value.as_deref(), Some("10s"));
    assert!(
        r.ttl
            .why
            .contains("The current 30s TTL renewed every 10s survives a 20s stall"),
        "{}",
        r.ttl.why
    );
    assert!(!r.fencing_needed);
}

#[test]
fn long_jobs_without_renewal_get_a_longer_ttl_or_renewal() {
    // Jobs of up to 2.75 s under a 3 s TTL, some of them near misses.
    let o = Observed {
        holds_released: observed(&[(1.0, 30), (2.75, 5)]),
        near_misses: 5.0,
        ..Observed::default()
    };
    let a = advise(&ns("ttl = \"3s\""), &o);
    let r = a.recommended.unwrap_or_else(|| panic!("{:?}", a.not_enough_data));
    let ttl = value(&r.ttl).unwrap_or(0.0);
    let every = value(&r.renew_every).unwrap_or(0.0);
    assert!(ttl - every >= 1.5 * 2.75, "{r:#?}");
    assert!(
        r.renew_every.why.contains("outlive any fixed TTL"),
        "{}",
        r.renew_every.why
    );
    // Short jobs under a long TTL: nothing to change, no renewal needed.
    let calm = Observed {
        holds_released: observed(&[(1.0, 30)]),
        ..Observed::default()
    };
    let r = advise(&ns("ttl = \"3s\""), &calm)
        .recommended
        .unwrap_or_else(|| panic!("none"));
    assert_eq!(r.ttl.value.as_deref(), Some("3s"));
    assert_eq!(r.renew_every.value, None);
}
