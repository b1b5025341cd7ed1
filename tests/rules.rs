//! The shipped alert and recording rules: `promtool check rules` (with lint) and
//! `promtool test rules` pass; `alerts/` is exactly `lockwatch rules` for the defaults;
//! per-namespace thresholds render into working rules; every `runbook_url` names a runbook
//! with the required sections; every metric a rule reads is one lockwatch really exports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use lockwatch::config::{Config, Overrides};
use lockwatch::rules::{self, ALERTS_FILE, RECORDING_FILE};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");

fn shipped() -> PathBuf {
    Path::new(ROOT).join("alerts")
}

fn promtool(args: &[&str]) -> (bool, String) {
    let bin = common::require_binary("promtool", "prometheus");
    let out = Command::new(bin).args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn config(text: &str) -> Config {
    Config::from_toml(text, "t.toml", Path::new("."), &Overrides::default()).unwrap_or_else(|e| panic!("{e}"))
}

const DEFAULTS: &str = "[[target]]\nname = \"main\"\nurl = \"redis://127.0.0.1:6379/0\"\n";

#[test]
fn shipped_rules_pass_promtool_check_with_lint() {
    for file in [RECORDING_FILE, ALERTS_FILE] {
        let path = shipped().join(file);
        let (ok, out) = promtool(&["check", "rules", "--lint=all", "--lint-fatal", path.to_str().unwrap()]);
        assert!(ok, "{out}");
    }
}

#[test]
fn shipped_rules_pass_their_promtool_unit_tests() {
    let files = ["alerts.test.yml", "drills.test.yml", "drills_stale.test.yml"].map(|f| {
        Path::new(ROOT)
            .join("tests/rules")
            .join(f)
            .to_str()
            .unwrap()
            .to_string()
    });
    let mut args = vec!["test", "rules"];
    args.extend(files.iter().map(String::as_str));
    let (ok, out) = promtool(&args);
    assert!(ok, "{out}");
    assert_eq!(out.matches("SUCCESS").count(), files.len(), "{out}");
}

#[test]
fn shipped_files_are_the_rendering_of_the_defaults() {
    let files = rules::render(&config(DEFAULTS));
    for (name, rendered) in [(RECORDING_FILE, &files.recording), (ALERTS_FILE, &files.alerts)] {
        let on_disk = std::fs::read_to_string(shipped().join(name)).unwrap();
        assert!(
            on_disk == *rendered,
            "alerts/{name} differs from `lockwatch rules` for the defaults: run `cargo run -- rules -c <a config without [alerts]> --out alerts`"
        );
    }
    // The command writes the same files.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.toml"), DEFAULTS).unwrap();
    let out = Command::new(BIN)
        .args(["rules", "-c", "c.toml", "--out", "out"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for name in [RECORDING_FILE, ALERTS_FILE] {
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out").join(name)).unwrap(),
            std::fs::read_to_string(shipped().join(name)).unwrap()
        );
    }
    // Without --out: one file with both groups, valid for promtool.
    let out = Command::new(BIN)
        .args(["rules", "-c", "c.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    std::fs::write(dir.path().join("all.yml"), &out.stdout).unwrap();
    let (ok, text) = promtool(&["check", "rules", dir.path().join("all.yml").to_str().unwrap()]);
    assert!(ok && text.contains("54 rules found"), "{text}");
}

#[test]
fn per_namespace_thresholds_apply_to_their_namespace_only() {
    let cfg = config(&format!(
        "{DEFAULTS}
[alerts]
runbook_base_url = \"https://wiki.example.org/runbooks/\"
dashboard_base_url = \"https://grafana.example.org\"
job = \"locks\"
min_bad_events = 3
[[namespace]]
name = \"payout\"
pattern = \"payout:*\"
ttl = \"30s\"
[namespace.alerts]
not_owned_budget = 0.1
min_takeovers = 5
min_contention_timeouts = 20
drill_max_age = \"10m\"
[[namespace]]
name = \"wf.runs\"
pattern = \"wf:*\"
ttl = \"30s\"
[namespace.alerts]
not_owned_budget = 0.1
[[namespace]]
name = \"plain\"
pattern = \"plain:*\"
ttl = \"30s\"
"
    ));
    let dir = tempfile::tempdir().unwrap();
    let rules_dir = dir.path().join("alerts");
    rules::render(&cfg).write(&rules_dir).unwrap();
    for name in [RECORDING_FILE, ALERTS_FILE] {
        let (ok, out) = promtool(&[
            "check",
            "rules",
            "--lint=all",
            "--lint-fatal",
            rules_dir.join(name).to_str().unwrap(),
        ]);
        assert!(ok, "{out}");
    }
    let alerts = std::fs::read_to_string(rules_dir.join(ALERTS_FILE)).unwrap();
    assert!(alerts.contains(r#"namespace!~`payout|wf\.runs`"#), "{alerts}");
    assert!(alerts.contains(r#"namespace=~`payout|wf\.runs`"#), "{alerts}");
    assert!(alerts.contains(r#"{namespace="payout"}[15m]))) >= 5"#), "{alerts}");
    assert!(
        alerts.contains(r#"{op="acquire", outcome="timeout", namespace="payout"}[15m]))) >= 20"#)
            && alerts.contains(r#"{op="acquire", outcome="timeout", namespace!~`payout`}[15m]))) >= 100"#),
        "{alerts}"
    );
    assert!(
        alerts.contains(r#"(lockwatch_drill_last_run_timestamp_seconds{namespace="payout"}[1h])) > 600"#)
            && alerts.contains(r#"(lockwatch_drill_last_run_timestamp_seconds{namespace!~`payout`}[1h])) > 691200"#),
        "{alerts}"
    );
    assert!(
        alerts.contains("https://wiki.example.org/runbooks/lock-evicted.md"),
        "{alerts}"
    );
    assert!(alerts.contains(r#"up{job="locks"}"#), "{alerts}");
    // 10% of releases failing: pages for `plain` (default budget), not for `payout`
    // (budget 0.1: the fast threshold is 144%, so never); 3 takeovers page `plain` only; a
    // drill last run at 0 s is stale after 10m in `payout`, not in `plain` (8d).
    let test = r#"
rule_files: [../alerts/lockwatch-recording.rules.yml, ../alerts/lockwatch-alerts.rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'lockwatch_lock_transitions_total{job="locks", instance="i", target="main", namespace="payout", kind="released"}'
        values: '0+9x30'
      - series: 'lockwatch_lock_events_total{job="locks", instance="i", namespace="payout", op="release", outcome="not_owned"}'
        values: '0+1x30'
      - series: 'lockwatch_lock_transitions_total{job="locks", instance="i", target="main", namespace="plain", kind="released"}'
        values: '0+9x30'
      - series: 'lockwatch_lock_events_total{job="locks", instance="i", namespace="plain", op="release", outcome="not_owned"}'
        values: '0+1x30'
      - series: 'lockwatch_lock_expiry_takeovers_total{job="locks", instance="i", target="main", namespace="payout"}'
        values: '0 1 2 3x20'
      - series: 'lockwatch_lock_expiry_takeovers_total{job="locks", instance="i", target="main", namespace="plain"}'
        values: '0 1 2 3x20'
      - series: 'lockwatch_drill_last_run_timestamp_seconds{job="locks", instance="i", target="main", namespace="payout", drill="d"}'
        values: '0x20'
      - series: 'lockwatch_drill_last_run_timestamp_seconds{job="locks", instance="i", target="main", namespace="plain", drill="d"}'
        values: '0x20'
    promql_expr_test:
      - expr: ALERTS{alertstate="firing", window="fast"}
        eval_time: 10m
        exp_samples:
          - labels: 'ALERTS{alertname="LockNotOwnedRatioHigh", alertstate="firing", severity="critical", window="fast", job="locks", target="main", namespace="plain"}'
            value: 1
      - expr: ALERTS{alertstate="firing", alertname="LockExpiryTakeovers"}
        eval_time: 10m
        exp_samples:
          - labels: 'ALERTS{alertname="LockExpiryTakeovers", alertstate="firing", severity="critical", job="locks", target="main", namespace="plain"}'
            value: 1
      - expr: ALERTS{alertname="LockDrillStale"}
        eval_time: 10m
        exp_samples: []
      - expr: ALERTS{alertname="LockDrillStale"}
        eval_time: 11m
        exp_samples:
          - labels: 'ALERTS{alertname="LockDrillStale", alertstate="firing", severity="warning", job="locks", target="main", namespace="payout", drill="d"}'
            value: 1
"#;
    std::fs::create_dir_all(dir.path().join("tests")).unwrap();
    let test_file = dir.path().join("tests/t.yml");
    std::fs::write(&test_file, test).unwrap();
    let (ok, out) = promtool(&["test", "rules", test_file.to_str().unwrap()]);
    assert!(ok, "{out}");
}

/// One rule of a rules file.
struct Rule {
    /// The alert or recorded name.
    name: String,
    runbook_url: Option<String>,
    /// Every metric name its expression reads.
    reads: Vec<String>,
}

/// The rules of a file, and the names it records.
fn read_rules(path: &Path) -> (Vec<Rule>, Vec<String>) {
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut alerts = Vec::new();
    let mut recorded = Vec::new();
    for group in doc["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            let expr = rule["expr"].as_str().unwrap();
            let names = common::promql_metric_names(expr)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}\n{expr}", path.display()));
            if let Some(r) = rule["record"].as_str() {
                recorded.push(r.to_string());
                alerts.push(Rule {
                    name: r.to_string(),
                    runbook_url: None,
                    reads: names,
                });
            } else {
                alerts.push(Rule {
                    name: rule["alert"].as_str().unwrap().to_string(),
                    runbook_url: rule["annotations"]["runbook_url"].as_str().map(str::to_string),
                    reads: names,
                });
            }
        }
    }
    (alerts, recorded)
}

#[test]
fn every_alert_links_a_runbook_with_the_required_sections() {
    const SECTIONS: [&str; 6] = [
        "## What it means",
        "## Impact",
        "## Triage",
        "## Mitigation",
        "## Verify the fix",
        "## Rehearse it",
    ];
    let (alerts, _) = read_rules(&shipped().join(ALERTS_FILE));
    let index = std::fs::read_to_string(Path::new(ROOT).join("runbooks/README.md")).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for Rule { name, runbook_url, .. } in &alerts {
        let url = runbook_url
            .as_deref()
            .unwrap_or_else(|| panic!("{name} has no runbook_url"));
        let file = url
            .strip_prefix(lockwatch::config::AlertsConfig::default().runbook_base_url.as_str())
            .and_then(|f| f.strip_prefix('/'))
            .unwrap_or_else(|| panic!("{name}: {url} is not under the runbook base"));
        assert_eq!(file, format!("{}.md", rules::runbook_slug(name)));
        let text = std::fs::read_to_string(Path::new(ROOT).join("runbooks").join(file))
            .unwrap_or_else(|e| panic!("{name}: runbooks/{file}: {e}"));
        assert!(
            text.starts_with(&format!("# {name}")),
            "runbooks/{file} must start with `# {name}`"
        );
        let mut at = 0;
        for s in SECTIONS {
            let found = text[at..]
                .find(&format!("\n{s}\n"))
                .unwrap_or_else(|| panic!("runbooks/{file}: no `{s}` (after the sections before it)"));
            at += found + s.len();
        }
        assert!(index.contains(file), "runbooks/README.md does not link {file}");
        seen.insert(name.clone());
    }
    let expected = [
        "LockNotOwnedRatioHigh",
        "LockRenewFailuresSustained",
        "LockExpiryTakeovers",
        "LockHeadroomLow",
        "LockContentionSustained",
        "LockRenewalOverdue",
        "LockWithoutTTL",
        "LockHeldTooLong",
        "LockEvicted",
        "LockFenceTokenRegression",
        "LockLostInFailover",
        "LockDrillLeftFrozen",
        "LockDrillUnsafe",
        "LockDrillNotExercised",
        "LockDrillStale",
        "LockwatchDown",
        "LockwatchSampleFailing",
        "LockwatchSampleTruncated",
        "LockwatchNotificationsUnverified",
        "LockwatchNotificationsUnreliable",
    ];
    assert_eq!(seen, expected.iter().map(|s| s.to_string()).collect());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_a_rule_reads_is_exported_by_lockwatch() {
    let exported = common::exported_metric_names().await;
    let (recording, recorded) = read_rules(&shipped().join(RECORDING_FILE));
    let (alerting, _) = read_rules(&shipped().join(ALERTS_FILE));
    let mut checked = 0;
    for Rule { name: rule, reads, .. } in recording.iter().chain(&alerting) {
        for name in reads {
            // `up` is Prometheus's own; recorded names are defined by the recording rules.
            let known = exported.contains(name) || recorded.contains(name) || name == "up";
            assert!(known, "{rule} reads {name}, which lockwatch does not export");
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} metric references found");
}
