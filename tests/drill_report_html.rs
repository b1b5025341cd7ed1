//! The drill's HTML report rendered in real headless Chromium, for real runs against a real
//! redis-server: a passing stale-holder run with `lockwatch serve` counting, a failing one
//! (a plain-DEL release script) and the network-delay and pause-and-delay runs (the proxy
//! lane, A frozen with its renewal held). Every step is
//! present, the failing steps are marked and only they, the timeline's events are in time
//! order and placed by it, nothing is loaded from anywhere, and the console stays silent.
//! Screenshots at 1280 px and at a phone's 390 px go to `target/test-artifacts/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::drill::{exited, run as drill, text, write_config};
use common::headless;

/// The value of each `attr="…"` in `s`, in order.
fn attrs<'a>(s: &'a str, attr: &str) -> Vec<&'a str> {
    s.split(&format!(" {attr}=\""))
        .skip(1)
        .filter_map(|v| v.split('"').next())
        .collect()
}

/// The opening tags of elements of class `class` (and maybe others after it).
fn tags<'a>(dom: &'a str, class: &str) -> Vec<&'a str> {
    dom.split('<')
        .filter(|t| t.contains(&format!("class=\"{class}\"")) || t.contains(&format!("class=\"{class} ")))
        .map(|t| t.split('>').next().unwrap_or(""))
        .collect()
}

/// One timeline event as rendered: time, lane, words, x.
#[derive(Debug)]
struct Drawn {
    at: u64,
    lane: String,
    what: String,
    x: f64,
}

fn events(dom: &str) -> Vec<Drawn> {
    dom.split("<g class=\"event")
        .skip(1)
        .map(|g| {
            let g = g.split("</g>").next().unwrap_or("");
            let head = g.split('>').next().unwrap_or("");
            Drawn {
                at: attrs(head, "data-at")[0].parse().unwrap(),
                lane: attrs(head, "data-lane")[0].to_string(),
                what: g
                    .rsplit("</text>")
                    .nth(1)
                    .and_then(|t| t.rsplit('>').next())
                    .unwrap_or("")
                    .to_string(),
                x: attrs(g, "cx")[0].parse().unwrap(),
            }
        })
        .collect()
}

/// The time of the first event saying `what`.
fn at(drawn: &[Drawn], what: &str) -> u64 {
    drawn
        .iter()
        .find(|d| d.what == what)
        .unwrap_or_else(|| panic!("no event {what:?} in {drawn:#?}"))
        .at
}

/// Render `page` in Chromium, check what every report must be, keep screenshots named
/// `name`: every one of `steps` present, exactly `failing` marked; the drawn events.
fn check_page(page: &Path, name: &str, steps: usize, failing: &[usize]) -> (String, Vec<Drawn>) {
    let html = std::fs::read_to_string(page).unwrap();
    // Self-contained: links only inside the page; nothing fetched, no script.
    for link in attrs(&html, "href").into_iter().chain(attrs(&html, "src")) {
        assert!(link.starts_with('#'), "{name}: a link out of the page: {link}");
    }
    for bad in [
        "<script",
        "<link",
        "<img",
        "<iframe",
        "@import",
        "url(",
        "src=\"http",
        "href=\"http",
    ] {
        assert!(!html.contains(bad), "{name}: {bad} in the page");
    }
    let profile = tempfile::tempdir().unwrap();
    let r = headless::render(page, profile.path());
    assert!(r.console.is_empty(), "{name}: console messages {:?}", r.console);
    let dom = r.dom;
    // Every step, in order, and the failing ones marked.
    let marked: Vec<(usize, bool)> = tags(&dom, "step")
        .iter()
        .map(|t| {
            (
                attrs(t, "data-step")[0].parse().unwrap(),
                attrs(t, "data-ok")[0] == "true",
            )
        })
        .collect();
    let want: Vec<(usize, bool)> = (1..=steps).map(|n| (n, !failing.contains(&n))).collect();
    assert_eq!(marked, want, "{name}: steps and their marks");
    for t in tags(&dom, "step") {
        assert_eq!(t.contains("deviation"), t.contains("data-ok=\"false\""), "{name}: {t}");
    }
    // The timeline: each lane's events in time order, every x placed by its time; the
    // close-up of a burst, when there is one, the same, and only moments of the whole.
    let drawing = |class: &str| {
        let svg = dom.split(&format!("<svg class=\"timeline {class}\"")).nth(1)?;
        Some(events(svg.split("</svg>").next().unwrap_or("")))
    };
    let drawn = drawing("whole").unwrap_or_else(|| panic!("{name}: no timeline"));
    assert!(drawn.len() > steps, "{name}: {drawn:#?}");
    in_time_order(name, &drawn);
    if let Some(close) = drawing("burst") {
        in_time_order(name, &close);
        assert!(close.len() >= 5, "{name}: {close:#?}");
        for c in &close {
            assert!(
                drawn.iter().any(|d| (d.at, &d.what) == (c.at, &c.what)),
                "{name}: {c:?}"
            );
        }
    }
    let listed: Vec<u64> = dom
        .split("<tr data-at=\"")
        .skip(1)
        .filter_map(|t| t.split('"').next()?.parse().ok())
        .collect();
    assert!(listed.is_sorted() && listed.len() == drawn.len(), "{name}: {listed:?}");
    // Screenshots to look at: desktop light and dark, phone.
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    for (suffix, size, dark) in [
        ("1280", (1280, 2400), false),
        ("1280-dark", (1280, 2400), true),
        ("390", (390, 4000), false),
        ("390-top", (390, 1000), false),
    ] {
        let shot = artifacts.join(format!("drill-report-{name}-{suffix}.png"));
        let bytes = headless::screenshot(page, profile.path(), &shot, size, dark);
        assert!(bytes > 20_000, "{name}: a screenshot of {bytes} bytes");
    }
    (dom, drawn)
}

/// Each lane's events in time order, and every x placed by its time.
fn in_time_order(name: &str, drawn: &[Drawn]) {
    for lane in ["worker_a", "worker_b", "redis"] {
        let times: Vec<u64> = drawn.iter().filter(|d| d.lane == lane).map(|d| d.at).collect();
        assert!(!times.is_empty(), "{name}: lane {lane} empty");
        assert!(times.is_sorted(), "{name}: lane {lane} out of order: {times:?}");
    }
    let mut by_time: Vec<&Drawn> = drawn.iter().collect();
    by_time.sort_by_key(|d| d.at);
    assert!(
        by_time.windows(2).all(|w| w[0].x <= w[1].x),
        "{name}: x not placed by time: {by_time:#?}"
    );
}

fn page(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.html"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_run_with_its_counters() {
    let dir = tempfile::tempdir().unwrap();
    let (_redis, config, s, exporter) = common::drill::served(dir.path()).await;
    let (cfg, record) = (config.clone(), page(dir.path(), "pass"));
    let rec = record.clone();
    let out = tokio::task::spawn_blocking(move || {
        drill(
            &cfg,
            &[
                "--yes",
                "--exporter",
                &exporter,
                "--format",
                "html",
                "--report",
                rec.to_str().unwrap(),
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // --format html prints the very page --report FILE.html writes.
    assert_eq!(text(&out.stdout), std::fs::read_to_string(&record).unwrap());
    let (dom, drawn) = tokio::task::spawn_blocking(move || check_page(&record, "pass", 9, &[]))
        .await
        .unwrap();
    assert!(dom.contains("class=\"verdict passed\""));
    assert!(!dom.contains("id=\"deviations\""), "no deviation box on a pass");
    assert!(dom.contains("6 of 6 counters moved as expected"), "{dom}");
    assert_eq!(dom.matches("<tr data-ok=\"true\"><td><code>lockwatch_").count(), 6);
    assert!(dom.contains("redis-cli"), "the commands to check it yourself");
    // The incident in its real order: frozen, expired, taken over, woken, refused.
    let order = [
        "A acquires",
        "B refused",
        "SIGSTOP",
        "key expired",
        "B takes over",
        "B's fenced write",
        "SIGCONT",
        "renew refused",
        "release refused",
        "stale write refused",
        "B's lock intact",
    ];
    happened_in_order(&drawn, &order);
    // A was frozen for the TTL at least: the period's bar spans it.
    assert!(at(&drawn, "SIGCONT") - at(&drawn, "SIGSTOP") >= 1000, "{drawn:#?}");
    assert!(dom.contains("<rect class=\"span\" data-from="));
    assert!(
        dom.contains("<svg class=\"timeline burst\""),
        "a close-up of the takeover"
    );
    s.stop().await;
}

#[test]
fn a_failing_run_marks_the_stale_release_and_its_consequence() {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &r.url(), "", "1s");
    let script = common::drill::plain_del_release(dir.path());
    let record = page(dir.path(), "fail");
    let out = drill(
        &config,
        &[
            "--yes",
            "--release-script",
            script.to_str().unwrap(),
            "--format",
            "json",
            "--report",
            record.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The JSON carries the timeline too.
    assert_eq!(report["ttl_ms"], 1000);
    assert!(report["events"].as_array().is_some_and(|e| e.len() > 9), "{report}");
    let failing: Vec<usize> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["ok"] == false)
        .map(|s| s["n"].as_u64().unwrap() as usize)
        .collect();
    assert_eq!(failing, [7, 9], "{report}");
    let (dom, drawn) = check_page(&record, "fail", 9, &failing);
    assert!(dom.contains("class=\"verdict failed\""));
    let deviations = dom.split("id=\"deviations\"").nth(1).expect("a deviation box");
    assert!(
        deviations.contains("Step 7 — A tries to release") && deviations.contains("plain DEL"),
        "{deviations}"
    );
    let bad: Vec<&str> = drawn
        .iter()
        .filter(|d| d.what.contains("ACCEPTED") || d.what.contains("damaged"))
        .map(|d| d.what.as_str())
        .collect();
    assert_eq!(bad, ["release ACCEPTED", "B's lock damaged"]);
    // B's own release finds nothing to release: its lock was deleted under it.
    let whole = dom.split("<svg class=\"timeline burst\"").next().unwrap_or("");
    let mut deviating: Vec<&str> = whole
        .split("<g class=\"event deviation\"")
        .skip(1)
        .filter_map(|g| g.split("</text>").next()?.rsplit('>').next())
        .collect();
    deviating.sort_by_key(|w| at(&drawn, w));
    // The damage is found no later than B's release; both can fall in the same millisecond,
    // where the drawing's lane order, not time, would decide a sorted list.
    assert_eq!(deviating.first(), Some(&"release ACCEPTED"), "{deviating:?}");
    let mut rest = deviating[1..].to_vec();
    rest.sort_unstable();
    assert_eq!(rest, ["B releases", "B's lock damaged"]);
    assert!(at(&drawn, "B's lock damaged") <= at(&drawn, "B releases"));
    assert!(at(&drawn, "release ACCEPTED") > at(&drawn, "SIGCONT"));
}

/// A passing run of `scenario` with its report in `name`.html: the rendered page's checks
/// and the drawn events.
fn delayed_run(scenario: &str) -> (String, Vec<Drawn>) {
    let r = common::redis(&[]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &r.url(), "", "1s");
    let record = page(dir.path(), scenario);
    let out = drill(
        &config,
        &["--yes", "--scenario", scenario, "--report", record.to_str().unwrap()],
    );
    exited(&out, 0, "");
    let (dom, drawn) = check_page(&record, scenario, 9, &[]);
    assert!(dom.contains("data-lane=\"proxy\""));
    assert!(
        at(&drawn, "let through") - at(&drawn, "renewal held") >= 1000,
        "held past the TTL"
    );
    (dom, drawn)
}

/// `order`'s events drawn in that order of time.
fn happened_in_order(drawn: &[Drawn], order: &[&str]) {
    let times: Vec<u64> = order.iter().map(|w| at(drawn, w)).collect();
    assert!(times.is_sorted(), "{order:?} at {times:?}");
}

#[test]
fn a_network_delay_run_draws_the_held_renewal_in_the_proxy_lane() {
    let (_, drawn) = delayed_run("network-delay");
    happened_in_order(
        &drawn,
        &[
            "A acquires",
            "renewal held",
            "key expired",
            "B takes over",
            "let through",
            "late renew refused",
            "release refused",
        ],
    );
    assert!(drawn.iter().all(|d| d.what != "SIGSTOP"), "A is never frozen here");
}

#[test]
fn a_pause_and_delay_run_draws_a_frozen_a_with_its_renewal_held() {
    let (_, drawn) = delayed_run("pause-and-delay");
    happened_in_order(
        &drawn,
        &[
            "renewal held",
            "SIGSTOP",
            "key expired",
            "B takes over",
            "let through",
            "answers A, frozen",
            "SIGCONT",
            "late renew refused",
            "release held",
            "late release refused",
            "write held",
            "late write refused",
            "B's lock intact",
        ],
    );
}
