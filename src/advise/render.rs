//! `advise` output: text for a person (what was seen, then each recommended setting with its
//! reasoning, then the TOML), the TOML snippet alone, or JSON.

use std::fmt::Write as _;

use super::Report;
use super::recommend::{Advice, Margin, Spread, secs};

/// A number of events, as a count.
fn n(v: f64) -> String {
    format!("{v:.0}")
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), secs)
}

fn spread(s: &Spread) -> String {
    let longest = match s.longest {
        Some((lo, Some(hi))) => format!(", longest {}–{}", secs(lo), secs(hi)),
        Some((lo, None)) => format!(", longest over {}", secs(lo)),
        None => String::new(),
    };
    format!("p50 {}, p99 {}, p99.9 {}{longest}", opt(s.p50), opt(s.p99), opt(s.p999))
}

fn margin(m: &Margin) -> String {
    if m.count <= 0.0 {
        return "none measured".into();
    }
    format!(
        "{} measured: p0.1 {}, p1 {}, p50 {}",
        n(m.count),
        opt(m.p001),
        opt(m.p1),
        opt(m.p50)
    )
}

fn one(out: &mut String, a: &Advice) {
    let c = &a.current;
    let _ = writeln!(
        out,
        "namespace {}  (now: ttl {}, {}{})",
        a.namespace,
        c.ttl,
        c.renew_every
            .as_ref()
            .map_or_else(|| "not renewed".to_string(), |e| format!("renewed every {e}")),
        c.fence_pattern
            .as_ref()
            .map_or_else(|| ", no fence_pattern".to_string(), |f| format!(", fenced ({f})"))
    );
    let s = &a.seen;
    let _ = writeln!(
        out,
        "  holds          {} released: {}; {} expired",
        n(s.holds_released.count),
        spread(&s.holds_released),
        n(s.holds_expired)
    );
    let _ = writeln!(
        out,
        "  renewals       {}: interval {}",
        n(s.renewal_interval.count),
        spread(&s.renewal_interval)
    );
    let _ = writeln!(
        out,
        "  TTL headroom   at renewal {}; at release {}",
        margin(&s.headroom_at_renewal),
        margin(&s.headroom_at_release)
    );
    let overdue = match (s.overdue_max, s.overdue_minutes) {
        (Some(m), Some(min)) => format!("at most {} at once, in {} minutes", n(m), n(min)),
        (Some(m), None) => format!("{} now", n(m)),
        _ => "–".into(),
    };
    let _ = writeln!(
        out,
        "  near misses    {}   takeovers {}   expired {}   overdue {overdue}",
        n(s.near_misses),
        n(s.takeovers),
        n(s.expired)
    );
    if let Some(stall) = &s.longest_stall {
        let _ = writeln!(out, "  longest stall  {}: {}", secs(stall.seconds), stall.evidence);
    }
    match (&a.recommended, &a.not_enough_data) {
        (Some(r), _) => {
            let _ = writeln!(out, "  recommended");
            for (key, setting) in [
                ("ttl", &r.ttl),
                ("renew_every", &r.renew_every),
                ("renew_grace", &r.renew_grace),
            ] {
                let v = setting
                    .value
                    .as_ref()
                    .map_or_else(|| "(none)".to_string(), |v| format!("\"{v}\""));
                let _ = writeln!(out, "    {key:<12} {v:<10} {}", setting.why);
            }
            let _ = writeln!(
                out,
                "    {:<12} {:<10} {}",
                "fencing",
                if r.fencing_needed { "needed" } else { "optional" },
                r.fencing
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "  {why}");
        }
        (None, None) => {}
    }
}

/// Everything, for a person.
pub fn text(r: &Report) -> String {
    let mut out = format!("lockwatch advise: {}\n\n", r.source);
    for a in &r.namespaces {
        one(&mut out, a);
        out.push('\n');
    }
    let snippet = toml(r);
    if snippet.is_empty() {
        out.push_str("No recommendation: not enough data in any namespace.\n");
    } else {
        out.push_str("Config (merge into the namespaces' entries; pattern and the rest unchanged):\n\n");
        out.push_str(&snippet);
    }
    out
}

/// The recommended settings as `[[namespace]]` entries; empty when nothing is recommended.
pub fn toml(r: &Report) -> String {
    let mut out = String::new();
    for a in &r.namespaces {
        let Some(rec) = &a.recommended else { continue };
        let _ = writeln!(out, "[[namespace]]\nname = \"{}\"", a.namespace);
        for (key, setting) in [
            ("ttl", &rec.ttl),
            ("renew_every", &rec.renew_every),
            ("renew_grace", &rec.renew_grace),
        ] {
            if let Some(v) = &setting.value {
                let _ = writeln!(out, "{key} = \"{v}\"");
            }
        }
        if rec.fencing_needed && a.current.fence_pattern.is_none() {
            let _ = writeln!(
                out,
                "# fence_pattern = \"…\"   # takeovers or near misses were seen: issue fencing tokens with INCR and watch them"
            );
        }
        out.push('\n');
    }
    out
}

/// The report as JSON, with the TOML snippet.
pub fn json(r: &Report) -> String {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    v["toml"] = serde_json::Value::String(toml(r));
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}
