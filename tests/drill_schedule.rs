//! The scheduled drill as shipped for Debian: `lockwatch-drill@.service` and
//! `lockwatch-drill@.timer` pass `systemd-analyze verify`, and a real systemd manager
//! (`systemd --user`, see tests/common/systemd.rs) runs them against a real redis-server and
//! the exporter: the timer fires, the templated service runs the drill named by its instance
//! with the arguments of its environment file, under the unit's sandboxing, and ends with the
//! drill's exit status — success when the drill was safe, a failed unit (listed by `systemctl
//! --failed`) when it was unsafe — and the exporter shows each drill's verdict on /metrics
//! and its status page, and `LockDrillUnsafe` fires in a real Prometheus scraping it.
//! The units are the shipped files with only paths changed (the binary, the config, the
//! environment files) plus two drop-ins: the timer fires 1 s after it starts, and the
//! service's output goes to a file (no journald runs in the test).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::systemd::{self, UserManager, unit_values as values};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
const SERVICE: &str = "lockwatch-drill@.service";
const TIMER: &str = "lockwatch-drill@.timer";

fn shipped(name: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join("deploy/debian").join(name)).unwrap()
}

/// A shipped unit with its paths pointed at this test's: the binary, the config and the
/// directory of the environment files. Each path must be in the unit.
fn with_paths(unit: &str, bin: &Path, config: &Path, env_dir: &Path) -> String {
    let mut text = unit.to_string();
    for (from, to) in [
        ("/usr/bin/lockwatch ", format!("{} ", bin.display())),
        ("/etc/lockwatch/lockwatch.toml", config.display().to_string()),
        (
            "/etc/lockwatch/drill-%i.env",
            env_dir.join("drill-%i.env").display().to_string(),
        ),
    ] {
        if unit.contains("[Service]") {
            assert!(text.contains(from), "{from} is not in the unit:\n{unit}");
        }
        text = text.replace(from, &to);
    }
    text
}

/// Whether a unit with `PrivateTmp=` cannot see `p`: it gets its own `/tmp` and `/var/tmp`.
fn hidden_from_units(p: &Path) -> bool {
    p.starts_with("/tmp") || p.starts_with("/var/tmp")
}

/// A directory for the test that the units see: in the build's temporary directory, or
/// under `/var/lib/lockwatch-tests` when the checkout is in `/tmp` (a CI's clone).
fn work_dir() -> tempfile::TempDir {
    let mut base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if hidden_from_units(&base) {
        base = PathBuf::from("/var/lib/lockwatch-tests");
        std::fs::create_dir_all(&base).unwrap();
    }
    tempfile::Builder::new()
        .prefix("drill-schedule-")
        .tempdir_in(base)
        .unwrap()
}

/// The lockwatch binary where the units see it: a copy in `dir` when it is built in `/tmp`.
fn binary(dir: &Path) -> PathBuf {
    if !hidden_from_units(Path::new(BIN)) {
        return PathBuf::from(BIN);
    }
    let copy = dir.join("lockwatch");
    std::fs::copy(BIN, &copy).unwrap();
    copy
}

#[test]
fn the_drill_units_pass_systemd_analyze_verify() {
    let dir = work_dir();
    let config = dir.path().join("lockwatch.toml");
    std::fs::write(&config, "").unwrap();
    let bin = binary(dir.path());
    for name in [SERVICE, TIMER] {
        let unit = with_paths(&shipped(name), &bin, &config, dir.path());
        std::fs::write(dir.path().join(name), unit).unwrap();
    }
    std::fs::write(dir.path().join("drill-payouts.env"), shipped("drill-example.env")).unwrap();
    // A template is verified as an instance of it; the timer's unit is the service's.
    let mut paths = Vec::new();
    for (template, instance) in [
        (SERVICE, "lockwatch-drill@payouts.service"),
        (TIMER, "lockwatch-drill@payouts.timer"),
    ] {
        let link = dir.path().join(instance);
        std::os::unix::fs::symlink(dir.path().join(template), &link).unwrap();
        paths.push(link);
    }
    let units: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let (passed, text) = systemd::verify(&units, dir.path());
    assert!(passed && text.trim().is_empty(), "systemd-analyze verify:\n{text}");

    // A broken unit fails it: the check can fail.
    let broken = dir.path().join("broken@.service");
    std::fs::write(
        &broken,
        with_paths(&shipped(SERVICE), &bin, &config, dir.path()).replace("Type=oneshot", "Type=oneshot-ish"),
    )
    .unwrap();
    let link = dir.path().join("broken@x.service");
    std::os::unix::fs::symlink(&broken, &link).unwrap();
    let (_, text) = systemd::verify(&[&link], dir.path());
    assert!(!text.trim().is_empty(), "systemd-analyze verify took a broken unit");

    // What the units promise, line by line.
    let service = shipped(SERVICE);
    let exec = values(&service, "ExecStart");
    assert_eq!(
        exec,
        [
            "/usr/bin/lockwatch drill --config /etc/lockwatch/lockwatch.toml --yes --name %i --report %S/lockwatch-drill/%i.html $LOCKWATCH_DRILL_ARGS"
        ]
    );
    for (key, value) in [
        ("Type", "oneshot"),
        ("EnvironmentFile", "/etc/lockwatch/drill-%i.env"),
        ("StateDirectory", "lockwatch-drill"),
        ("TimeoutStartSec", "15min"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("CapabilityBoundingSet", "CAP_SYS_PTRACE CAP_KILL CAP_DAC_OVERRIDE"),
    ] {
        assert_eq!(values(&service, key), [value], "{key}");
    }
    for absent in [
        "Restart",
        "ProtectControlGroups",
        "ProtectKernelTunables",
        "ProtectProc",
        "SuccessExitStatus",
    ] {
        assert!(values(&service, absent).is_empty(), "{absent}= must not be set");
    }
    let timer = shipped(TIMER);
    for (key, value) in [
        ("OnCalendar", "daily"),
        ("RandomizedDelaySec", "2h"),
        ("Persistent", "true"),
        ("WantedBy", "timers.target"),
    ] {
        assert_eq!(values(&timer, key), [value], "{key}");
    }
    // The example environment file names one drill's arguments, and only those.
    let example = shipped("drill-example.env");
    let set: Vec<&str> = example
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    assert_eq!(set.len(), 1, "{set:?}");
    assert!(
        set[0].starts_with("LOCKWATCH_DRILL_ARGS=\"--freeze cgroup:"),
        "{}",
        set[0]
    );
    for flag in ["--for ", "--exporter http://", "--namespace "] {
        assert!(set[0].contains(flag), "{flag}: {}", set[0]);
    }
}

/// One drill instance set up in the manager: its environment file and the output drop-in.
fn instance(m: &UserManager, env_dir: &Path, name: &str, args: &str) -> (PathBuf, PathBuf) {
    std::fs::write(
        env_dir.join(format!("drill-{name}.env")),
        format!("# drill {name}\nLOCKWATCH_DRILL_ARGS=\"{args}\"\n"),
    )
    .unwrap();
    m.capture_output(&format!("lockwatch-drill@{name}.service"))
}

/// Start the instance's timer and wait for the service it fires to run to its end: what
/// systemd says of the run, its stdout, and its stdout and stderr as one text.
fn run_by_timer(
    m: &UserManager,
    name: &str,
    (stdout, stderr): &(PathBuf, PathBuf),
) -> (std::collections::BTreeMap<String, String>, String, String) {
    m.ok(&["start", &format!("lockwatch-drill@{name}.timer")]);
    let ran = m.wait_ran(&format!("lockwatch-drill@{name}.service"), Duration::from_secs(90));
    let json = std::fs::read_to_string(stdout).unwrap_or_default();
    let out = format!("{json}\n{}", std::fs::read_to_string(stderr).unwrap_or_default());
    let timer = m.show(&format!("lockwatch-drill@{name}.timer"), &["LastTriggerUSec", "Result"]);
    assert!(
        timer
            .get("LastTriggerUSec")
            .is_some_and(|t| !t.is_empty() && t != "n/a"),
        "the timer of {name} never fired: {timer:?}"
    );
    (ran, json, out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_run_by_the_systemd_timer_turns_into_a_verdict_on_metrics() {
    let dir = work_dir();
    let (_r, config, s, exporter) = common::drill::served(dir.path()).await;
    let env_dir = dir.path().join("etc");
    std::fs::create_dir_all(&env_dir).unwrap();
    let m = UserManager::start(&dir.path().join("systemd"));
    let bin = binary(dir.path());
    m.install(SERVICE, &with_paths(&shipped(SERVICE), &bin, &config, &env_dir));
    m.install(TIMER, &with_paths(&shipped(TIMER), &bin, &config, &env_dir));
    // The timer as shipped, firing 1 s after it starts instead of at a random moment of the
    // night (RandomizedDelaySec and AccuracySec delay every elapse, so they go to 0 here).
    m.drop_in(
        TIMER,
        "test-now.conf",
        "[Timer]\nOnActiveSec=1s\nRandomizedDelaySec=0\nAccuracySec=1ms\n",
    );

    // A safe drill: the unit succeeds, the report is in its state directory, the verdict
    // is on the exporter.
    let safe_out = instance(&m, &env_dir, "staging", &format!("--exporter {exporter} --format json"));
    let unsafe_out = instance(
        &m,
        &env_dir,
        "unsafe-release",
        &format!(
            "--exporter {exporter} --release-script {}",
            common::drill::plain_del_release(dir.path()).display()
        ),
    );
    m.ok(&["daemon-reload"]);
    let (ran, json, out) = run_by_timer(&m, "staging", &safe_out);
    assert_eq!(
        (ran["Result"].as_str(), ran["ExecMainStatus"].as_str()),
        ("success", "0"),
        "{ran:?}\n{out}"
    );
    let report: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(
        report["result"].as_str().is_some_and(|r| r.starts_with("passed")),
        "{out}"
    );
    let html = m
        .state_dirs()
        .iter()
        .map(|d| d.join("lockwatch-drill/staging.html"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no report staging.html in the unit's state directory\n{out}"));
    assert!(std::fs::read_to_string(html).unwrap().contains("<html"));

    // An unsafe drill (a release that just DELs): the unit fails with exit 1 and is listed
    // by `systemctl --failed`.
    let (ran, _, out) = run_by_timer(&m, "unsafe-release", &unsafe_out);
    assert_eq!(
        (ran["Result"].as_str(), ran["ExecMainStatus"].as_str()),
        ("exit-code", "1"),
        "{ran:?}\n{out}"
    );
    let failed = m.ok(&["list-units", "--failed", "--plain", "--no-legend"]);
    assert!(failed.contains("lockwatch-drill@unsafe-release.service"), "{failed}");
    assert!(!failed.contains("lockwatch-drill@staging.service"), "{failed}");

    // What the exporter recorded of each.
    let verdict = |drill: &'static str, verdict: &'static str| {
        move |m: &common::Metrics| {
            m.get(
                "lockwatch_drill_verdict",
                &[
                    ("target", "staging"),
                    ("namespace", "drill"),
                    ("drill", drill),
                    ("verdict", verdict),
                ],
            ) == Some(1.0)
        }
    };
    s.wait_for(
        Duration::from_secs(10),
        "the staging drill's safe verdict",
        verdict("staging", "safe"),
    )
    .await;
    s.wait_for(
        Duration::from_secs(10),
        "the unsafe-release drill's unsafe verdict",
        verdict("unsafe-release", "unsafe"),
    )
    .await;
    let metrics = s.metrics().await;
    for drill in ["staging", "unsafe-release"] {
        assert!(
            metrics.val("lockwatch_drill_last_run_timestamp_seconds", &[("drill", drill)]) > 0.0,
            "{drill}"
        );
    }
    // Where people look: the status page's drills section, unsafe first.
    let (status, _, page) = s.get("/").await;
    assert_eq!(status, 200);
    let line = |d: &str, v: &str| page.find(&format!(r#"data-drill="{d}" data-verdict="{v}""#));
    let (bad, good) = (line("unsafe-release", "unsafe"), line("staging", "safe"));
    assert!(bad.is_some() && good.is_some() && bad < good, "{page}");
    // And the page: LockDrillUnsafe in a real Prometheus scraping the exporter.
    let prom = common::prometheus::Prometheus::with_shipped_rules(&[s.addr.to_string()]);
    let firing = prom
        .wait_firing(
            "LockDrillUnsafe",
            &[
                ("drill", "unsafe-release"),
                ("namespace", "drill"),
                ("target", "staging"),
            ],
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(firing.len(), 1, "{firing:?}");
    let others = prom.json("/api/v1/alerts", &[]).await.unwrap();
    assert!(
        !others.to_string().contains(r#""drill":"staging""#),
        "the safe drill raises nothing: {others}"
    );
    drop(m);
    s.stop().await;
}
