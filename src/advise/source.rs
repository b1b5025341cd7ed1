//! Where `advise` learns what the locks did: Prometheus (`increase` over the window, per
//! namespace, summed over targets and lockwatch instances) or a running exporter's
//! `/metrics` (everything since it started). Both come out as the same [`Observed`] per
//! namespace name.

use std::collections::BTreeMap;
use std::time::Duration;

use super::AdviseError;
use super::histogram::Buckets;
use super::recommend::Observed;
use crate::exposition;
use crate::vocab::metric;

/// What one series or query result fills in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    HoldsReleased,
    HoldsExpired,
    RenewalInterval,
    HeadroomRenewal,
    HeadroomRelease,
    NearMisses,
    Takeovers,
    Expired,
    OverdueMax,
    OverdueMinutes,
}

/// Observations by namespace name.
pub type ByNamespace = BTreeMap<String, Observed>;

fn add(by: &mut ByNamespace, ns: &str, field: Field, le: Option<f64>, v: f64) {
    let o = by.entry(ns.to_string()).or_default();
    let bucket = |b: &mut Buckets| {
        if let Some(le) = le {
            b.add(le, v);
        }
    };
    match field {
        Field::HoldsReleased => bucket(&mut o.holds_released),
        Field::HoldsExpired => bucket(&mut o.holds_expired),
        Field::RenewalInterval => bucket(&mut o.renewal_interval),
        Field::HeadroomRenewal => bucket(&mut o.headroom_renewal),
        Field::HeadroomRelease => bucket(&mut o.headroom_release),
        Field::NearMisses => o.near_misses += v,
        Field::Takeovers => o.takeovers += v,
        Field::Expired => o.expired += v,
        Field::OverdueMax => o.overdue_max = Some(o.overdue_max.unwrap_or(0.0).max(v)),
        Field::OverdueMinutes => o.overdue_minutes = Some(o.overdue_minutes.unwrap_or(0.0) + v),
    }
}

/// Which field a sample of the exporter's `/metrics` fills, if any.
fn field_of(s: &exposition::Sample) -> Option<Field> {
    let bucket = |base: &str| s.name.strip_suffix("_bucket") == Some(base);
    Some(if bucket(metric::LOCK_HOLD_DURATION_SECONDS) {
        match s.label("end")? {
            "released" => Field::HoldsReleased,
            "expired" => Field::HoldsExpired,
            _ => return None,
        }
    } else if bucket(metric::LOCK_RENEWAL_INTERVAL_SECONDS) {
        Field::RenewalInterval
    } else if bucket(metric::LOCK_TTL_HEADROOM_SECONDS) {
        match s.label("at")? {
            "renewal" => Field::HeadroomRenewal,
            "release" => Field::HeadroomRelease,
            _ => return None,
        }
    } else if s.name == metric::LOCK_NEAR_MISSES_TOTAL {
        Field::NearMisses
    } else if s.name == metric::LOCK_EXPIRY_TAKEOVERS_TOTAL {
        Field::Takeovers
    } else if s.name == metric::LOCK_TRANSITIONS_TOTAL && s.label("kind") == Some("expired") {
        Field::Expired
    } else if s.name == metric::LOCKS_RENEWAL_OVERDUE {
        Field::OverdueMax
    } else {
        return None;
    })
}

fn le(v: &str) -> Option<f64> {
    match v {
        "+Inf" => Some(f64::INFINITY),
        _ => v.parse().ok(),
    }
}

/// Everything since the exporter at `text` started.
pub fn from_exposition(text: &str) -> ByNamespace {
    let mut by = ByNamespace::new();
    for s in exposition::samples(text) {
        let (Some(field), Some(ns)) = (field_of(&s), s.label("namespace")) else {
            continue;
        };
        add(&mut by, ns, field, s.label("le").and_then(le), s.value);
    }
    by
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap_or_default()
}

/// The exporter's `/metrics`.
pub async fn exporter(url: &str) -> Result<ByNamespace, AdviseError> {
    let at = format!("{}/metrics", url.trim_end_matches('/'));
    let fail = |why: String| AdviseError::Source { url: at.clone(), why };
    let resp = client().get(&at).send().await.map_err(|e| fail(e.to_string()))?;
    if !resp.status().is_success() {
        return Err(fail(format!("answered {}", resp.status())));
    }
    let text = resp.text().await.map_err(|e| fail(e.to_string()))?;
    Ok(from_exposition(&text))
}

/// The queries, over `window` (a Prometheus duration like `7d`), and what each fills.
fn queries(w: &str) -> Vec<(Field, String)> {
    let hist = |name: &str, sel: &str| format!("sum by (namespace, le) (increase({name}_bucket{sel}[{w}]))");
    let total = |name: &str, sel: &str| format!("sum by (namespace) (increase({name}{sel}[{w}]))");
    let overdue = metric::LOCKS_RENEWAL_OVERDUE;
    vec![
        (
            Field::HoldsReleased,
            hist(metric::LOCK_HOLD_DURATION_SECONDS, r#"{end="released"}"#),
        ),
        (
            Field::HoldsExpired,
            hist(metric::LOCK_HOLD_DURATION_SECONDS, r#"{end="expired"}"#),
        ),
        (Field::RenewalInterval, hist(metric::LOCK_RENEWAL_INTERVAL_SECONDS, "")),
        (
            Field::HeadroomRenewal,
            hist(metric::LOCK_TTL_HEADROOM_SECONDS, r#"{at="renewal"}"#),
        ),
        (
            Field::HeadroomRelease,
            hist(metric::LOCK_TTL_HEADROOM_SECONDS, r#"{at="release"}"#),
        ),
        (Field::NearMisses, total(metric::LOCK_NEAR_MISSES_TOTAL, "")),
        (Field::Takeovers, total(metric::LOCK_EXPIRY_TAKEOVERS_TOTAL, "")),
        (
            Field::Expired,
            total(metric::LOCK_TRANSITIONS_TOTAL, r#"{kind="expired"}"#),
        ),
        (
            Field::OverdueMax,
            format!("max by (namespace) (max_over_time({overdue}[{w}]))"),
        ),
        (
            Field::OverdueMinutes,
            format!("count_over_time((max by (namespace) ({overdue}) > 0)[{w}:1m])"),
        ),
    ]
}

/// Prometheus at `url`, over `window`.
pub async fn prometheus(url: &str, window: &str) -> Result<ByNamespace, AdviseError> {
    let http = client();
    let at = format!("{}/api/v1/query", url.trim_end_matches('/'));
    let mut by = ByNamespace::new();
    for (field, query) in queries(window) {
        let fail = |why: String| AdviseError::Source {
            url: at.clone(),
            why: format!("{why} (query {query})"),
        };
        let resp = http
            .get(&at)
            .query(&[("query", query.as_str())])
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        let status = resp.status();
        let v: serde_json::Value = resp.json().await.map_err(|e| fail(e.to_string()))?;
        if !status.is_success() || v["status"] != "success" {
            return Err(fail(format!(
                "answered {status}: {}",
                v["error"].as_str().unwrap_or("no error given")
            )));
        }
        for r in v["data"]["result"].as_array().into_iter().flatten() {
            let Some(ns) = r["metric"]["namespace"].as_str() else {
                continue;
            };
            let value = r["value"][1].as_str().and_then(|s| s.parse::<f64>().ok());
            let Some(value) = value.filter(|v| v.is_finite()) else {
                continue;
            };
            let le = r["metric"]["le"].as_str().and_then(le);
            add(&mut by, ns, field, le, value);
        }
    }
    Ok(by)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exporter_series_are_summed_over_targets() {
        let text = "\
lockwatch_lock_renewal_interval_seconds_bucket{target=\"a\",namespace=\"n\",le=\"1\"} 2
lockwatch_lock_renewal_interval_seconds_bucket{target=\"a\",namespace=\"n\",le=\"+Inf\"} 3
lockwatch_lock_renewal_interval_seconds_bucket{target=\"b\",namespace=\"n\",le=\"1\"} 1
lockwatch_lock_renewal_interval_seconds_bucket{target=\"b\",namespace=\"n\",le=\"+Inf\"} 1
lockwatch_lock_renewal_interval_seconds_count{target=\"a\",namespace=\"n\"} 3
lockwatch_lock_hold_duration_seconds_bucket{target=\"a\",namespace=\"n\",end=\"expired\",le=\"+Inf\"} 2
lockwatch_lock_expiry_takeovers_total{target=\"a\",namespace=\"n\"} 1
lockwatch_lock_expiry_takeovers_total{target=\"b\",namespace=\"n\"} 1
lockwatch_lock_transitions_total{target=\"a\",namespace=\"n\",kind=\"renewed\"} 9
lockwatch_locks_renewal_overdue{target=\"a\",namespace=\"n\"} 1
";
        let by = from_exposition(text);
        let o = &by["n"];
        assert_eq!(o.renewal_interval.count(), 4.0);
        assert_eq!(o.holds_expired.count(), 2.0);
        assert_eq!(o.takeovers, 2.0);
        assert_eq!(o.expired, 0.0);
        assert_eq!(o.overdue_max, Some(1.0));
        assert_eq!(o.overdue_minutes, None);
    }

    #[test]
    fn every_query_is_per_namespace_over_the_window() {
        for (_, q) in queries("7d") {
            assert!(q.contains("[7d"), "{q}");
            assert!(q.contains("by (namespace"), "{q}");
        }
    }
}
