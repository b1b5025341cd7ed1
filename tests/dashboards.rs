//! Dashboard lint: the JSON loads; every query parses as PromQL; the conventions of
//! importable community dashboards hold (datasource variable and `__inputs`, job / instance /
//! target / namespace variables, `$__rate_interval`, counters only inside `rate` /
//! `increase`, a unit and a description on every panel, stable uids); and every metric a
//! query reads is one lockwatch exports on a live `/metrics`, or a recorded rule.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

fn load(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Counter and histogram series: they mean nothing outside a rate.
fn is_counter(name: &str) -> bool {
    name.ends_with("_total") || name.ends_with("_bucket") || name.ends_with("_count") || name.ends_with("_sum")
}

/// Problems with how `expr` uses counters: bare counters, counters in a range function
/// other than rate/increase/irate, ranges other than `$__rate_interval` / `$__range`.
fn counter_problems(raw: &str) -> Vec<String> {
    use promql_parser::parser::Expr;
    use promql_parser::util::{ExprVisitor, walk_expr};
    struct V(Vec<String>);
    fn matrix_counter(e: &Expr) -> Option<String> {
        match e {
            Expr::MatrixSelector(ms) => ms.vs.name.clone().filter(|n| is_counter(n)),
            _ => None,
        }
    }
    impl ExprVisitor for V {
        type Error = String;
        fn pre_visit(&mut self, e: &Expr) -> Result<bool, String> {
            match e {
                Expr::VectorSelector(vs) => {
                    if let Some(n) = vs.name.as_deref().filter(|n| is_counter(n)) {
                        self.0.push(format!("{n} used outside rate()/increase()"));
                    }
                }
                Expr::Call(c) => {
                    for a in &c.args.args {
                        if let Some(n) = matrix_counter(a)
                            && !matches!(c.func.name, "rate" | "increase" | "irate")
                        {
                            self.0
                                .push(format!("{n} inside {}() instead of rate()/increase()", c.func.name));
                        }
                    }
                }
                _ => {}
            }
            Ok(true)
        }
    }
    let mut v = V(Vec::new());
    match promql_parser::parser::parse(&common::fill_variables(raw, ".+")) {
        Ok(e) => {
            let _ = walk_expr(&mut v, &e);
        }
        Err(e) => v.0.push(format!("does not parse: {e}")),
    }
    let mut rest = raw;
    while let Some(open) = rest.find('[') {
        let close = rest[open..].find(']').map_or(rest.len(), |c| open + c);
        let range = &rest[open + 1..close];
        if range != "$__rate_interval" && range != "$__range" {
            v.0.push(format!(
                "range [{range}]: use [$__rate_interval] (or [$__range] for totals)"
            ));
        }
        rest = &rest[close.min(rest.len())..];
        if rest.is_empty() {
            break;
        }
        rest = &rest[1..];
    }
    v.0
}

#[test]
fn dashboards_follow_the_conventions() {
    for (name, uid) in [
        ("lockwatch-overview.json", "lockwatch-overview"),
        ("lockwatch-namespace.json", "lockwatch-namespace"),
    ] {
        let d = load(name);
        assert_eq!(d["uid"], uid, "{name}: stable uid");
        let inputs = d["__inputs"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: no __inputs"));
        assert!(
            inputs
                .iter()
                .any(|i| i["type"] == "datasource" && i["pluginId"] == "prometheus"),
            "{name}: __inputs must declare the Prometheus datasource"
        );
        let vars = d["templating"]["list"].as_array().unwrap();
        let var = |n: &str| {
            vars.iter()
                .find(|v| v["name"] == n)
                .unwrap_or_else(|| panic!("{name}: no ${n} variable"))
        };
        assert_eq!(var("datasource")["type"], "datasource", "{name}");
        assert_eq!(var("datasource")["query"], "prometheus", "{name}");
        for v in ["job", "instance", "target", "namespace"] {
            assert_eq!(var(v)["type"], "query", "{name}: ${v}");
            assert_eq!(
                var(v)["datasource"]["uid"],
                "${datasource}",
                "{name}: ${v} must use $datasource"
            );
        }
        let mut problems = Vec::new();
        let panels = common::all_panels(&d);
        let mut ids = BTreeSet::new();
        for p in &panels {
            let title = p["title"].as_str().unwrap_or("?");
            let kind = p["type"].as_str().unwrap_or("?");
            if kind == "row" {
                continue;
            }
            if !ids.insert(p["id"].as_i64().unwrap_or(-1)) {
                problems.push(format!("{title}: duplicate or missing id"));
            }
            if p["description"].as_str().is_none_or(|s| s.trim().is_empty()) {
                problems.push(format!("{title}: no description"));
            }
            if kind == "text" {
                continue;
            }
            if p["fieldConfig"]["defaults"]["unit"].as_str().is_none_or(str::is_empty) {
                problems.push(format!("{title}: no unit"));
            }
            if p["datasource"]["uid"] != "${datasource}" {
                problems.push(format!("{title}: datasource is not ${{datasource}}"));
            }
            let targets = p["targets"].as_array().cloned().unwrap_or_default();
            if targets.is_empty() {
                problems.push(format!("{title}: no queries"));
            }
            for t in targets {
                let expr = t["expr"].as_str().unwrap_or("");
                for issue in counter_problems(expr) {
                    problems.push(format!("{title}: {issue}: {expr}"));
                }
                // Recorded series are taken across the replicas of a pair: no instance.
                let recorded = expr.contains("namespace:lockwatch_");
                for label in ["job=~\"$job\"", "instance=~\"$instance\""] {
                    let needed = !(recorded && label.starts_with("instance"));
                    if needed && !expr.contains(label) {
                        problems.push(format!("{title}: query does not filter {label}: {expr}"));
                    }
                }
            }
        }
        assert!(problems.is_empty(), "{name}:\n{}", problems.join("\n"));
        assert!(panels.len() >= 12, "{name}: only {} panels", panels.len());
    }
    // The namespace dashboard shows the namespace's firing alerts and links runbooks.
    let ns = load("lockwatch-namespace.json");
    let annotations = ns["annotations"]["list"].as_array().unwrap();
    assert!(
        annotations.iter().any(|a| a["expr"]
            .as_str()
            .is_some_and(|e| e.contains("ALERTS") && e.contains("$namespace"))),
        "no firing-alerts annotation for $namespace"
    );
    let runbook_links: Vec<String> = common::all_panels(&ns)
        .iter()
        .flat_map(|p| p["links"].as_array().cloned().unwrap_or_default())
        .filter_map(|l| l["url"].as_str().map(str::to_string))
        .filter(|u| u.contains("/runbooks/"))
        .collect();
    assert!(runbook_links.len() >= 5, "{runbook_links:?}");
    for url in runbook_links {
        let file = url.rsplit('/').next().unwrap();
        assert!(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("runbooks")
                .join(file)
                .is_file(),
            "{url} names no runbook"
        );
    }
}

/// The lock-event panels — the ones over `lockwatch_lock_events_total`, where failures
/// show — ask Grafana for exemplars, so a failure links to the trace of the event behind
/// it (docs/exemplars.md); no other query does, as no other family carries exemplars.
#[test]
fn lock_event_panels_show_exemplars() {
    for name in ["lockwatch-overview.json", "lockwatch-namespace.json"] {
        let d = load(name);
        let mut with = Vec::new();
        for p in common::all_panels(&d) {
            let title = p["title"].as_str().unwrap_or("?").to_string();
            for t in p["targets"].as_array().into_iter().flatten() {
                let events = t["expr"]
                    .as_str()
                    .is_some_and(|e| e.contains("lockwatch_lock_events_total"));
                let exemplar = t.get("exemplar").is_some_and(|e| e == true);
                assert_eq!(
                    exemplar, events,
                    "{name} / {title}: exemplar should be {events} on {}",
                    t["expr"]
                );
                if exemplar {
                    assert_eq!(t["datasource"]["type"], "prometheus", "{name} / {title}");
                    with.push(title.clone());
                }
            }
        }
        assert!(!with.is_empty(), "{name}: no lock-event panel shows exemplars");
        if name == "lockwatch-overview.json" {
            assert!(with.iter().any(|t| t == "Lock failures by outcome"), "{with:?}");
        }
    }
}

#[test]
fn the_lint_catches_bare_counters_and_fixed_windows() {
    assert!(counter_problems(r#"sum(lockwatch_lock_events_total{job=~"$job"})"#)[0].contains("outside rate"));
    assert!(counter_problems(r#"sum(rate(lockwatch_lock_events_total[5m]))"#)[0].contains("range [5m]"));
    assert!(
        counter_problems(r#"max_over_time(lockwatch_lock_events_total[$__rate_interval])"#)[0]
            .contains("max_over_time")
    );
    assert!(counter_problems(r#"sum(rate(lockwatch_lock_events_total[$__rate_interval]))"#).is_empty());
    assert!(counter_problems(r#"sum(rate(x[$__rate_interval]"#)[0].contains("does not parse"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_a_dashboard_reads_is_exported_by_lockwatch() {
    let exported = common::exported_metric_names().await;
    let recorded =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("alerts/lockwatch-recording.rules.yml"))
            .unwrap()
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- record: ").map(str::to_string))
            .collect::<BTreeSet<_>>();
    let queries = common::dashboard_queries();
    assert!(queries.len() >= 20, "only {} queries", queries.len());
    for q in &queries {
        let names = common::promql_metric_names(&common::fill_variables(&q.expr, ".+"))
            .unwrap_or_else(|e| panic!("{} / {}: {e}", q.dashboard, q.panel));
        for n in names {
            assert!(
                exported.contains(&n) || recorded.contains(&n),
                "{} / {} reads {n}, which lockwatch does not export",
                q.dashboard,
                q.panel
            );
        }
    }
}
