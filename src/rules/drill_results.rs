//! The alerts on the drill results recorded at the exporter (`POST /api/v1/drills`):
//! `LockDrillUnsafe` (the latest verdict is `unsafe`), `LockDrillNotExercised` (the last two
//! runs exercised nothing) and `LockDrillStale` (no result within `drill_max_age`).
//!
//! A drill records at one replica of an HA pair, so each (target, namespace, drill) is
//! judged by the replica holding its latest run (the largest last-run timestamp; that
//! largest taken over the last hour, so a replica missing a scrape or two does not hand the
//! verdict to the other replica's older run), and one alert per drill fires.

use super::alerts::{Alert, Dashboard, braces, either, indent, listed, push_alert, variants};
use crate::config::Config;
use crate::vocab::metric;

/// The labels a drill's alert carries: one alert per drill, whichever replica knows it.
const DRILL: &str = "job, target, namespace, drill";

/// How far back the latest run of a drill is looked for across the replicas.
const LATEST_WITHIN: &str = "1h";

/// Runs in a row that exercised nothing before `LockDrillNotExercised` fires.
const NOT_EXERCISED_RUNS: u32 = 2;

/// The last-run timestamp of each replica that holds the drill's latest run.
fn latest_run() -> String {
    let ts = metric::DRILL_LAST_RUN_TIMESTAMP_SECONDS;
    format!("{ts}\n== on ({DRILL}) group_left\nmax by ({DRILL}) (max_over_time({ts}[{LATEST_WITHIN}]))")
}

/// Series of the replica holding the latest run whose latest verdict is `verdict`.
fn latest_verdict(verdict: &str) -> String {
    format!(
        "{}{{verdict=\"{verdict}\"}} == 1\nand ignoring (verdict)\n(\n{}\n)",
        metric::DRILL_VERDICT,
        indent(&latest_run())
    )
}

/// Where a drill's report is read and how it is run again, for descriptions.
const REPORT: &str = "Its report is at /drills/{{ $labels.drill }} on the lockwatch replica it recorded at; rerun it with lockwatch drill … --name {{ $labels.drill }}.";

pub(super) fn alerts(out: &mut String, config: &Config) {
    push_alert(
        out,
        &Alert {
            name: "LockDrillUnsafe",
            expr: format!("max by ({DRILL}) (\n{}\n)", indent(&latest_verdict("unsafe"))),
            for_: "0m",
            severity: "critical",
            window: None,
            summary: "Drill {{ $labels.drill }}: a worker went on under a lost lock in namespace {{ $labels.namespace }}",
            description: format!(
                "The latest run of drill {{{{ $labels.drill }}}} in namespace {{{{ $labels.namespace }}}} on target {{{{ $labels.target }}}} was judged unsafe: the worker went on working under a lock it no longer held, after another worker had taken it. The same code does the same work twice the next time a pause outlasts the TTL. {REPORT}"
            ),
            dashboard: Dashboard::Namespace { target: true },
        },
        &config.alerts,
    );
    push_alert(
        out,
        &Alert {
            name: "LockDrillNotExercised",
            expr: format!(
                "max by ({DRILL}) (\n  {} >= {NOT_EXERCISED_RUNS}\n  and ignoring (verdict)\n  (\n{}\n  )\n)",
                metric::DRILL_VERDICT_STREAK,
                indent(&indent(&latest_verdict("not_exercised")))
            ),
            for_: "0m",
            severity: "warning",
            window: None,
            summary: "Drill {{ $labels.drill }} no longer tests anything in namespace {{ $labels.namespace }}",
            description: format!(
                "The last {{{{ $value }}}} runs of drill {{{{ $labels.drill }}}} in namespace {{{{ $labels.namespace }}}} on target {{{{ $labels.target }}}} exercised nothing: no lock the frozen worker held expired and was taken over while it was frozen (or it held none, or the witness could not vouch), so nothing could be done twice and nothing was judged. The drill no longer tests anything; run it while the worker holds a lock another worker waits for (the busy worker, a busier moment, a longer --for). {REPORT}"
            ),
            dashboard: Dashboard::Namespace { target: true },
        },
        &config.alerts,
    );
    let ages = variants(config, |t| t.drill_max_age);
    let branches = ages
        .iter()
        .map(|(sel, age)| {
            let ts = metric::DRILL_LAST_RUN_TIMESTAMP_SECONDS;
            format!(
                "time() - max by ({DRILL}) (max_over_time({ts}{}[{LATEST_WITHIN}])) > {}",
                braces(sel),
                age.as_secs_f64()
            )
        })
        .collect();
    let thresholds = listed(&ages, |age| crate::duration::format(*age));
    push_alert(
        out,
        &Alert {
            name: "LockDrillStale",
            expr: either(branches),
            for_: "0m",
            severity: "warning",
            window: None,
            summary: "Drill {{ $labels.drill }} has recorded no result for too long in namespace {{ $labels.namespace }}",
            description: format!(
                "Drill {{{{ $labels.drill }}}} in namespace {{{{ $labels.namespace }}}} on target {{{{ $labels.target }}}} last recorded a result {{{{ $value | humanizeDuration }}}} ago (threshold {thresholds}): its schedule stopped (a systemd timer, a Kubernetes CronJob, a CI job), or its runs fail before they record. The verdict shown is no longer current. {REPORT}"
            ),
            dashboard: Dashboard::Namespace { target: true },
        },
        &config.alerts,
    );
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, Overrides};

    #[test]
    fn one_alert_per_drill_whichever_replica_holds_it() {
        let text = "[[target]]\nname = \"main\"\nurl = \"redis://127.0.0.1:6379/0\"\n\
                    [[namespace]]\nname = \"payout\"\npattern = \"payout:*\"\nttl = \"30s\"\n\
                    [namespace.alerts]\ndrill_max_age = \"1d\"\n";
        let cfg = Config::from_toml(text, "t.toml", Path::new("."), &Overrides::default()).unwrap();
        let alerts = crate::rules::render(&cfg).alerts;
        for name in ["LockDrillUnsafe", "LockDrillNotExercised", "LockDrillStale"] {
            let at = alerts.find(&format!("- alert: {name}\n")).unwrap();
            let expr = &alerts[at..at + alerts[at..].find("        for:").unwrap()];
            // Not rewritten per replica: no `instance`, the drill kept, one series per drill.
            assert!(!expr.contains("instance"), "{expr}");
            assert!(expr.contains("max by (job, target, namespace, drill)"), "{expr}");
        }
        assert!(alerts.contains(r#"{namespace="payout"}[1h])) > 86400"#), "{alerts}");
        assert!(alerts.contains(r#"{namespace!~`payout`}[1h])) > 691200"#), "{alerts}");
    }
}
