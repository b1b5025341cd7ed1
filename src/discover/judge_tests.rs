use super::*;
use crate::access::survey::{Kind, Sampled};
use crate::discover::family::Census;

fn add(c: &mut Census, key: &str, value: &str, pttl: i64) {
    c.add(&Sampled {
        key: key.as_bytes().to_vec(),
        kind: Kind::String {
            len: value.len(),
            head: value.as_bytes().to_vec(),
        },
        pttl_ms: pttl,
    });
}

fn find<'a>(ps: &'a [Pattern], p: &str) -> &'a Pattern {
    ps.iter()
        .find(|x| x.pattern == p)
        .unwrap_or_else(|| panic!("no {p} in {ps:#?}"))
}

#[test]
fn locks_fences_and_what_is_not_a_lock() {
    let mut c = Census::default();
    for i in 0..50 {
        add(
            &mut c,
            &format!("billing:lock:{i}"),
            "0123456789abcdef0123456789abcdef",
            30_000 - i * 10,
        );
        add(&mut c, &format!("billing:fence:{i}"), &i.to_string(), -1);
        add(&mut c, &format!("cache:product:{i}"), r#"{"name": "x"}"#, 300_000);
        add(&mut c, &format!("ratelimit:user:{i}"), "3", 60_000);
        add(&mut c, &format!("stats:views:{i}"), "99", -1);
        add(
            &mut c,
            &format!("session:{i:08x}aa"),
            "0123456789abcdef0123456789abcdef",
            1_800_000,
        );
    }
    add(&mut c, "jobs:lock:daily", "web-1:4312:main", 9_000);
    add(&mut c, "jobs:lock:weekly", "web-1:4312:main", 8_000);
    add(&mut c, "jobs:lock:orphan", "web-1:4312:main", -1);
    for i in 0..50 {
        add(&mut c, &format!("other:run:fence:{i}"), "9", -1);
    }
    let ps = judge(c.into_families());
    let lock = find(&ps, "billing:lock:*");
    assert_eq!(lock.verdict, Verdict::Lock);
    let ns = lock.namespace.as_ref().unwrap();
    assert_eq!((ns.name.as_str(), ns.ttl.as_str()), ("billing", "30s"));
    assert_eq!(ns.fence_pattern.as_deref(), Some("billing:fence:*"));
    assert_eq!(find(&ps, "billing:fence:*").verdict, Verdict::FenceCounter);
    let jobs = find(&ps, "jobs:lock:*");
    assert_eq!((jobs.keys, jobs.namespace.as_ref().unwrap().ttl.as_str()), (3, "9s"));
    assert!(jobs.reason.contains("1 of 3 keys carry no TTL"), "{}", jobs.reason);
    // Counters whose name is not beside a lock family's are not its fences.
    assert_eq!(find(&ps, "other:run:fence:*").verdict, Verdict::NotALock);
    for (p, why) in [
        ("cache:product:*", "cache"),
        ("ratelimit:user:*", "rate-limit"),
        ("stats:views:*", "counters"),
        ("session:*", "session"),
    ] {
        let x = find(&ps, p);
        assert_eq!(x.verdict, Verdict::NotALock, "{p}");
        assert!(x.reason.contains(why), "{p}: {}", x.reason);
    }
    assert_eq!(ps.iter().filter(|p| p.verdict == Verdict::Lock).count(), 2);
}

#[test]
fn ttl_estimates_round_up_to_written_durations() {
    assert_eq!(estimate_ttl(29_870), "30s");
    assert_eq!(estimate_ttl(10_000), "10s");
    assert_eq!(estimate_ttl(10_001), "11s");
    assert_eq!(estimate_ttl(8_700), "9s");
    assert_eq!(estimate_ttl(61_000), "1m1s");
    assert_eq!(estimate_ttl(1_799_500), "30m");
    assert_eq!(estimate_ttl(240), "300ms");
    assert_eq!(estimate_ttl(0), "100ms");
}

#[test]
fn names_are_unique_and_valid() {
    let mut taken = Vec::new();
    assert_eq!(unique_name("payments:{acct:*}:lock", &mut taken), "payments_acct");
    assert_eq!(unique_name("payments:{acct-*}:lock", &mut taken), "payments_acct_2");
    assert_eq!(unique_name("lock:*", &mut taken), "locks");
}
