//! The alerting group of the rules: one alert per lock failure class (and one for sustained
//! contention, `contention`; one for a drill's worker left frozen, `drill`; three on the drill
//! results recorded at the exporter, `drill_results`), each with severity,
//! summary, description, runbook and dashboard links; per-namespace thresholds become
//! extra branches of the same alert, joined by `or`.

use std::fmt::Write as _;

use super::{NOT_OWNED, RENEW_FAILURE, Ratio};
use crate::config::{AlertsConfig, Config, Thresholds};

/// Which dashboard an alert links to.
pub(super) enum Dashboard {
    /// The namespace dashboard, with the target variable when the alert has a target.
    Namespace {
        target: bool,
    },
    Overview,
}

pub(super) struct Alert<'a> {
    pub(super) name: &'a str,
    pub(super) expr: String,
    pub(super) for_: &'a str,
    pub(super) severity: &'a str,
    pub(super) window: Option<&'a str>,
    pub(super) summary: &'a str,
    pub(super) description: String,
    pub(super) dashboard: Dashboard,
}

/// `LockNotOwnedRatioHigh` → `lock-not-owned-ratio-high`, the runbook's file stem.
pub fn runbook_slug(alert: &str) -> String {
    let mut s = String::new();
    let chars: Vec<char> = alert.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
        let prev_lower = i > 0 && chars[i - 1].is_lowercase();
        if c.is_uppercase() && i > 0 && (prev_lower || next_lower) {
            s.push('-');
        }
        s.extend(c.to_lowercase());
    }
    s
}

pub(super) fn push_alert(out: &mut String, a: &Alert<'_>, cfg: &AlertsConfig) {
    let _ = writeln!(out, "      - alert: {}\n        expr: |", a.name);
    for line in super::replicas::across(&a.expr).lines() {
        let _ = writeln!(out, "          {line}");
    }
    let _ = writeln!(out, "        for: {}", a.for_);
    let _ = writeln!(out, "        labels:\n          severity: {}", a.severity);
    if let Some(w) = a.window {
        let _ = writeln!(out, "          window: {w}");
    }
    let dashboard = match a.dashboard {
        Dashboard::Namespace { target } => format!(
            "{}/d/lockwatch-namespace/lockwatch-namespace?var-namespace={{{{ $labels.namespace }}}}{}",
            cfg.dashboard_base_url,
            if target { "&var-target={{ $labels.target }}" } else { "" }
        ),
        Dashboard::Overview => format!("{}/d/lockwatch-overview/lockwatch-overview", cfg.dashboard_base_url),
    };
    let _ = writeln!(out, "        annotations:");
    let _ = writeln!(out, "          summary: {}", quote(a.summary));
    let _ = writeln!(out, "          description: {}", quote(&a.description));
    let _ = writeln!(
        out,
        "          runbook_url: {}",
        quote(&format!("{}/{}.md", cfg.runbook_base_url, runbook_slug(a.name)))
    );
    let _ = writeln!(out, "          dashboard_url: {}", quote(&dashboard));
}

/// A YAML single-quoted scalar.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The namespaces of one threshold value: `(selector, value)`, the default first. The
/// default's selector excludes every namespace with a value of its own.
pub(super) fn variants<T: PartialEq + Copy>(config: &Config, get: impl Fn(&Thresholds) -> T) -> Vec<(String, T)> {
    let default = get(&config.alerts.defaults);
    let mut own: Vec<(Vec<&str>, T)> = Vec::new();
    for ns in &config.namespaces {
        let v = get(&ns.alerts);
        if v == default {
            continue;
        }
        match own.iter_mut().find(|(_, x)| *x == v) {
            Some((names, _)) => names.push(&ns.name),
            None => own.push((vec![&ns.name], v)),
        }
    }
    let alternation = |names: &[&str]| {
        names
            .iter()
            .map(|n| n.replace('.', "\\."))
            .collect::<Vec<_>>()
            .join("|")
    };
    let mut out = Vec::with_capacity(own.len() + 1);
    let excluded: Vec<&str> = own.iter().flat_map(|(n, _)| n.iter().copied()).collect();
    out.push((
        if excluded.is_empty() {
            String::new()
        } else {
            format!("namespace!~`{}`", alternation(&excluded))
        },
        default,
    ));
    for (names, v) in own {
        let sel = if names.len() == 1 {
            format!("namespace=\"{}\"", names[0])
        } else {
            format!("namespace=~`{}`", alternation(&names))
        };
        out.push((sel, v));
    }
    out
}

/// One expression from per-namespace branches: the only branch as it is, several joined
/// by `or` (their namespaces never overlap).
pub(super) fn either(branches: Vec<String>) -> String {
    if branches.len() == 1 {
        return branches.into_iter().next().unwrap_or_default();
    }
    branches
        .iter()
        .map(|b| format!("(\n{}\n)", indent(b)))
        .collect::<Vec<_>>()
        .join("\nor\n")
}

/// `s` with every line indented by two spaces.
pub(super) fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

/// Thresholds per selector, for descriptions: `5; 10 (namespace="payout")`.
pub(super) fn listed<T>(variants: &[(String, T)], show: impl Fn(&T) -> String) -> String {
    variants
        .iter()
        .map(|(sel, v)| {
            if sel.is_empty() {
                show(v)
            } else {
                format!("{} ({sel})", show(v))
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub(super) fn braces(sel: &str) -> String {
    if sel.is_empty() {
        String::new()
    } else {
        format!("{{{sel}}}")
    }
}

/// The three rules of a ratio alert: fast pair, slow pair, fallback. `variants` are the
/// namespace selectors with their (budget, minimum failures).
fn ratio_alerts(
    out: &mut String,
    cfg: &AlertsConfig,
    r: &Ratio,
    name: &str,
    what: &str,
    variants: &[(String, (f64, u32))],
) {
    let thresholds = listed(variants, |(budget, min)| format!("{budget}, at least {min} failures"));
    for (long, short, factor, secs, for_, severity, window) in [
        ("1h", "5m", 14.4, 3600, "2m", "critical", "fast"),
        ("6h", "30m", 6.0, 21600, "15m", "warning", "slow"),
    ] {
        let branches = variants
            .iter()
            .map(|(sel, (budget, min))| {
                let s = braces(sel);
                format!(
                    "{ratio_long}{s} > ({factor} * {budget})\nand\n{ratio_short}{s} > ({factor} * {budget})\nand on (job, instance, namespace)\n{events}{s} * {secs} >= {min}",
                    ratio_long = r.ratio(long),
                    ratio_short = r.ratio(short),
                    events = r.events_rate(long),
                )
            })
            .collect();
        push_alert(
            out,
            &Alert {
                name,
                expr: either(branches),
                for_,
                severity,
                window: Some(window),
                summary: &format!("{what} in namespace {{{{ $labels.namespace }}}}"),
                description: format!(
                    "{{{{ $value | humanizePercentage }}}} of {denominator} in namespace {{{{ $labels.namespace }}}} on target {{{{ $labels.target }}}} failed over the last {long} (and over the last {short}), above {factor} × the budget (budget {thresholds}, in {long}). Holders are outliving their TTL and losing their locks while they work.",
                    denominator = if r.name == "not_owned" {
                        "releases and renewals"
                    } else {
                        "renewals"
                    },
                ),
                dashboard: Dashboard::Namespace { target: true },
            },
            cfg,
        );
    }
    let branches = variants
        .iter()
        .map(|(sel, (_, min))| {
            let s = braces(sel);
            format!(
                "{events_1h}{s} * 3600 >= {min}\nand\n{events_5m}{s} > 0\nunless on (job, instance, namespace)\n{successes}",
                events_1h = r.events_rate("1h"),
                events_5m = r.events_rate("5m"),
                successes = r.successes_rate("1h"),
            )
        })
        .collect();
    let mins = listed(variants, |(_, min)| min.to_string());
    push_alert(
        out,
        &Alert {
            name,
            expr: either(branches),
            for_: "15m",
            severity: "warning",
            window: Some("fallback"),
            summary: &format!("{what} in namespace {{{{ $labels.namespace }}}} (no ratio: no transitions seen)"),
            description: format!(
                "{{{{ $value | humanize }}}} failures in the last hour in namespace {{{{ $labels.namespace }}}} (lockwatch job {{{{ $labels.job }}}}), still occurring after 15 minutes. lockwatch sees no lock transitions for this namespace (keyspace notifications off for its targets), so no ratio can be computed; this fires on a sustained rate of at least {mins} an hour instead."
            ),
            dashboard: Dashboard::Namespace { target: false },
        },
        cfg,
    );
}

/// The alerting group.
pub(super) fn alerts(config: &Config) -> String {
    let cfg = &config.alerts;
    let mut out = String::from("  - name: lockwatch-alerts\n    rules:\n");
    let o = &mut out;
    ratio_alerts(
        o,
        cfg,
        &NOT_OWNED,
        "LockNotOwnedRatioHigh",
        "Sustained \"lock not owned\" failures",
        &variants(config, |t| (t.not_owned_budget, t.min_bad_events)),
    );
    ratio_alerts(
        o,
        cfg,
        &RENEW_FAILURE,
        "LockRenewFailuresSustained",
        "Sustained lock renewal failures",
        &variants(config, |t| (t.renew_failure_budget, t.min_bad_events)),
    );
    {
        let takeovers = variants(config, |t| t.min_takeovers);
        let branches = takeovers
            .iter()
            .map(|(sel, min)| {
                format!(
                    "sum by (job, instance, target, namespace) (increase(lockwatch_lock_expiry_takeovers_total{}[15m])) >= {min}",
                    braces(sel)
                )
            })
            .collect();
        let mins = listed(&takeovers, |min| min.to_string());
        push_alert(
            o,
            &Alert {
                name: "LockExpiryTakeovers",
                expr: either(branches),
                for_: "1m",
                severity: "critical",
                window: None,
                summary: "Expired locks taken over by other owners in namespace {{ $labels.namespace }}",
                description: format!(
                    "{{{{ $value | humanize }}}} locks of namespace {{{{ $labels.namespace }}}} on target {{{{ $labels.target }}}} expired while held and were taken by another owner within one TTL in the last 15 minutes (threshold {mins}). Their first holders may still be working: two holders at once."
                ),
                dashboard: Dashboard::Namespace { target: true },
            },
            cfg,
        );
    }
    super::headroom::alert(o, config);
    super::contention::alert(o, config);
    let gauge_alerts: [(&str, &str, &str, &str, &str, &str); 3] = [
        (
            "LockRenewalOverdue",
            "max by (job, instance, target, namespace) (max_over_time(lockwatch_locks_renewal_overdue[2m])) > 0",
            "1m",
            "warning",
            "A lock holder missed its renewal in namespace {{ $labels.namespace }}",
            "{{ $value }} holders of namespace {{ $labels.namespace }} on target {{ $labels.target }} let their lock's remaining TTL fall below ttl - renew_every - grace within the last 2 minutes: they missed a renewal and are stalled (GC pause, CPU throttling, SIGSTOP, network delay) or stopped renewing. Their locks expire next.",
        ),
        (
            "LockWithoutTTL",
            "max by (job, instance, target, namespace) (lockwatch_locks_without_ttl) > 0",
            "5m",
            "warning",
            "Locks without an expiry in namespace {{ $labels.namespace }}",
            "{{ $value }} lock keys of namespace {{ $labels.namespace }} on target {{ $labels.target }} have no TTL (PTTL -1). If their holders die they are never freed.",
        ),
        (
            "LockHeldTooLong",
            "max by (job, instance, target, namespace) (lockwatch_locks_held_too_long) > 0",
            "5m",
            "warning",
            "Locks held longer than max_hold in namespace {{ $labels.namespace }}",
            "{{ $value }} locks of namespace {{ $labels.namespace }} on target {{ $labels.target }} have been held by the same owner longer than the namespace's max_hold: a stuck job, or a renewal loop that outlived its work.",
        ),
    ];
    for (name, expr, for_, severity, summary, description) in gauge_alerts {
        push_alert(
            o,
            &Alert {
                name,
                expr: expr.to_string(),
                for_,
                severity,
                window: None,
                summary,
                description: description.to_string(),
                dashboard: Dashboard::Namespace { target: true },
            },
            cfg,
        );
    }
    let counter_alerts: [(&str, &str, &str, &str); 3] = [
        (
            "LockEvicted",
            r#"lockwatch_lock_transitions_total{kind="evicted"}"#,
            "Held locks evicted by Redis in namespace {{ $labels.namespace }}",
            "{{ $value | humanize }} held locks of namespace {{ $labels.namespace }} on target {{ $labels.target }} were evicted by the maxmemory policy in the last 15 minutes. Another worker can take an evicted lock at once while its holder still works.",
        ),
        (
            "LockFenceTokenRegression",
            "lockwatch_fence_regressions_total",
            "A fencing counter went backwards in namespace {{ $labels.namespace }}",
            "A fencing counter of namespace {{ $labels.namespace }} on target {{ $labels.target }} went backwards or vanished {{ $value | humanize }} times in the last 15 minutes (a failover that lost writes, a flush, a counter with a TTL). Fencing tokens may be issued twice and stale writes accepted.",
        ),
        (
            "LockLostInFailover",
            "lockwatch_locks_lost_in_failover_total",
            "Locks lost in a failover in namespace {{ $labels.namespace }}",
            "{{ $value | humanize }} locks of namespace {{ $labels.namespace }} on target {{ $labels.target }} were held on the old primary and are absent on the new one after a failover in the last 15 minutes: their holders may still be working while other workers take the same locks. Only fencing protects the resource; check what those jobs wrote.",
        ),
    ];
    for (name, series, summary, description) in counter_alerts {
        push_alert(
            o,
            &Alert {
                name,
                expr: format!("sum by (job, instance, target, namespace) (increase({series}[15m])) > 0"),
                for_: "0m",
                severity: "critical",
                window: None,
                summary,
                description: description.to_string(),
                dashboard: Dashboard::Namespace { target: true },
            },
            cfg,
        );
    }
    super::drill::alert(o, config);
    super::drill_results::alerts(o, config);
    let job = &cfg.job;
    let meta: [(&str, String, &str, &str, String); 5] = [
        (
            "LockwatchDown",
            format!("up{{job=\"{job}\"}} == 0\nunless on (job)\nmax by (job) (up{{job=\"{job}\"}}) == 0"),
            "5m",
            "A lockwatch replica is down or not scraped",
            format!(
                "Prometheus has not scraped lockwatch instance {{{{ $labels.instance }}}} (job {job}) for 5 minutes; another replica still is, so lock alerts still fire, once. Bring the replica back before the other one goes too."
            ),
        ),
        (
            "LockwatchSampleFailing",
            "max by (job, instance, target) (lockwatch_up) == 0\nor on (job, instance, target)\n(\n  sum by (job, instance, target) (rate(lockwatch_sample_errors_total[15m]))\n  /\n  (sum by (job, instance, target) (rate(lockwatch_sample_passes_total[15m])) > 0)\n) > 0.25".into(),
            "5m",
            "lockwatch cannot sample target {{ $labels.target }}",
            "lockwatch's sample passes of target {{ $labels.target }} have failed for 5 minutes, or more than a quarter of them over 15 minutes (Redis down or unreachable, authentication or ACL, timeouts). Lock gauges are stale. Value: {{ $value }} (0 when the last pass failed, else the share of failed passes).".into(),
        ),
        (
            "LockwatchSampleTruncated",
            "sum by (job, instance, target) (rate(lockwatch_sample_truncated_total[15m]))\n/\n(sum by (job, instance, target) (rate(lockwatch_sample_passes_total[15m])) > 0)\n> 0.5".into(),
            "15m",
            "lockwatch passes of target {{ $labels.target }} are cut by sample_budget",
            "{{ $value | humanizePercentage }} of the sample passes of target {{ $labels.target }} were cut short by sample_budget over the last 15 minutes: the keyspace takes longer to walk than the budget allows, and lock gauges update only once a full walk completes.".into(),
        ),
        (
            "LockwatchNotificationsUnverified",
            "max by (job, instance, target) (lockwatch_notifications_verification{state!=\"verified\"}) == 1".into(),
            "5m",
            "lockwatch cannot show that keyspace notifications of target {{ $labels.target }} arrive",
            "For 5 minutes lockwatch has not shown that keyspace notifications of target {{ $labels.target }} arrive: not subscribed, PSUBSCRIBE refused, flags missing (CONFIG GET), a canary round short of events (flags missing or lost on the way, as where CONFIG is denied), pending proof, or silent (lock changes found by reads that no notification announced). lockwatch_notifications_verification says which, and the status page, the log and check-config --connect the exact setting to change. The target is in scan mode: lock gauges stay exact from SCAN passes, but transitions, expiry takeovers, hold durations and the successes under the failure ratios are not counted.".into(),
        ),
        (
            "LockwatchNotificationsUnreliable",
            // Repairs in each of three consecutive 20-minute windows (each longer than a
            // reconcile interval): a reconnect's burst lands in one or two of them, repairs
            // that keep happening in all three. The value is the last hour's repairs.
            "sum by (job, instance, target) (increase(lockwatch_reconcile_repairs_total[1h]))\nand\nsum by (job, instance, target) (increase(lockwatch_reconcile_repairs_total[20m])) > 0\nand\nsum by (job, instance, target) (increase(lockwatch_reconcile_repairs_total[20m] offset 20m)) > 0\nand\nsum by (job, instance, target) (increase(lockwatch_reconcile_repairs_total[20m] offset 40m)) > 0".into(),
            "15m",
            "Keyspace notifications of target {{ $labels.target }} keep missing lock changes",
            "The reconciling SCAN of target {{ $labels.target }} repaired {{ $value | humanize }} lock changes in the last hour that keyspace notifications had missed, with repairs in each of the last three 20-minute windows, still occurring after 15 minutes; a burst after one reconnect does not fire this. Notifications are being lost (flags partly off, a proxy dropping pub/sub, the subscriber cut by client-output-buffer-limit, a cluster node not subscribed): in events mode, this target's lock gauges (held, renewal overdue, held too long), transitions and expiry takeovers are late or wrong until each reconcile.".into(),
        ),
    ];
    push_alert(
        o,
        &Alert {
            name: "LockwatchDown",
            expr: format!("max by (job) (up{{job=\"{job}\"}}) == 0\nor\nabsent(up{{job=\"{job}\"}})"),
            for_: "5m",
            severity: "critical",
            window: None,
            summary: "No lockwatch replica is up",
            description: format!(
                "Prometheus has scraped no lockwatch instance of job {job} for 5 minutes (all down, or none found). No lock alert can fire while they are gone."
            ),
            dashboard: Dashboard::Overview,
        },
        cfg,
    );
    for (name, expr, for_, summary, description) in meta {
        push_alert(
            o,
            &Alert {
                name,
                expr,
                for_,
                severity: "warning",
                window: None,
                summary,
                description,
                dashboard: Dashboard::Overview,
            },
            cfg,
        );
    }
    out
}
