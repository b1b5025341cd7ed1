//! The status page in real headless Chromium (DevTools protocol, `common::cdp`) against a
//! real redis-server and the exporter: a scripted expiry takeover shows on the timeline and
//! on the key's page within one refresh of the live script; charts and numbers agree with
//! `/metrics` and the history API; no console error, no request leaving 127.0.0.1; numbers
//! present with JavaScript off; the page works under a proxy path prefix; screenshots in
//! light and dark at 1280 and 390 px kept in `target/test-artifacts/`. And more than ten
//! minutes of the demo's incidents leave the state lines above the fold at 1280×800.
//! Contention (busy and timed-out acquisitions) is said apart and never turns a namespace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cdp::{Browser, Tab};
use common::{Metrics, Served, config, conn, redis};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The live script's period as the test asks for it (`refresh=1`), and the slack allowed
/// for one refresh.
const ONE_REFRESH: Duration = Duration::from_millis(1000 + 1500);

fn cfg() -> String {
    r#"
[[target]]
name = "main"
url = "{url}"
sample_interval = "250ms"
[[namespace]]
name = "wf"
pattern = "wf:lock:*"
ttl = "5s"
"#
    .to_string()
}

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn set_px(c: &mut redis::Connection, key: &str, owner: &str, px: u64) {
    assert!(common::acquire(c, key, owner, px), "SET NX {key}");
}

async fn wait_gone(c: &mut redis::Connection, key: &str) {
    for _ in 0..100 {
        let n: i64 = redis::cmd("EXISTS").arg(key).query(c).unwrap();
        if n == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{key} did not expire");
}

/// A proxy serving the exporter under `/lw/`: the prefix is stripped from each request
/// (one request per connection); any request outside it is answered 404 and recorded.
async fn prefix_proxy(upstream: std::net::SocketAddr) -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let outside = Arc::new(Mutex::new(Vec::new()));
    let seen = outside.clone();
    tokio::spawn(async move {
        while let Ok((mut down, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match down.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let mut lines = text.split("\r\n");
                let first = lines.next().unwrap_or("").to_string();
                let path = first.split(' ').nth(1).unwrap_or("").to_string();
                let Some(rest) = path.strip_prefix("/lw/") else {
                    seen.lock().unwrap().push(path);
                    let _ = down
                        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                    return;
                };
                let mut out = first.replacen(&path, &format!("/{rest}"), 1) + "\r\n";
                for l in lines.filter(|l| !l.is_empty() && !l.to_ascii_lowercase().starts_with("connection:")) {
                    out.push_str(l);
                    out.push_str("\r\n");
                }
                out.push_str("connection: close\r\n\r\n");
                let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                if up.write_all(out.as_bytes()).await.is_err() {
                    return;
                }
                let _ = tokio::io::copy(&mut up, &mut down).await;
            });
        }
    });
    (addr, outside)
}

fn held(m: &Metrics) -> f64 {
    m.val("lockwatch_locks_held", &[("target", "main"), ("namespace", "wf")])
}

fn takeovers(m: &Metrics) -> f64 {
    m.val("lockwatch_lock_expiry_takeovers_total", &[("namespace", "wf")])
}

async fn no_errors_and_local_only(b: &Browser, tab: &Tab) {
    let errors = b.errors(tab);
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    let requests = b.requests(tab);
    assert!(!requests.is_empty());
    let away: Vec<&String> = requests
        .iter()
        .filter(|u| !u.starts_with("http://127.0.0.1:") && !u.starts_with("data:"))
        .collect();
    assert!(away.is_empty(), "requests leaving 127.0.0.1: {away:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_shows_live_on_the_timeline_and_the_key_page() {
    let r = redis(&["--notify-keyspace-events", "KEA"]);
    let s = Served::start(config(&r, &cfg())).await;
    s.wait_for(Duration::from_secs(10), "subscribed", |m| {
        m.get("lockwatch_notifications_connected", &[("target", "main")]) == Some(1.0)
    })
    .await;
    // The pages open first: a browser slow to start (a loaded machine) must not stretch
    // the time between A's expiry and B's acquisition past the namespace's ttl, which
    // would make it no takeover.
    let base = format!("http://{}/", s.addr);
    let mut b = Browser::launch().await;
    let page = b.tab().await;
    b.navigate(&page, &format!("{base}?refresh=1")).await;
    let key = b.tab().await;
    b.navigate(&key, &format!("{base}locks/wf?key=wf%3Alock%3Ajob&refresh=1"))
        .await;
    assert_eq!(
        b.eval(&key, "document.querySelectorAll('tr[data-takeover]').length")
            .await,
        0
    );

    let mut c = conn(&r);
    set_px(&mut c, "wf:lock:other", "X", 600_000);
    set_px(&mut c, "wf:lock:job", "A", 800);
    s.wait_for(Duration::from_secs(5), "two held", |m| held(m) == 2.0).await;

    // The incident: A's lock expires, B takes it.
    wait_gone(&mut c, "wf:lock:job").await;
    set_px(&mut c, "wf:lock:job", "B", 600_000);
    s.wait_for(Duration::from_secs(5), "the takeover", |m| takeovers(m) == 1.0)
        .await;
    let on_timeline = b
        .wait_until(
            &page,
            "!!document.querySelector('#incidents li[data-kind=takeover] a.key')",
            ONE_REFRESH,
        )
        .await;
    let on_key_page = b
        .wait_until(
            &key,
            "document.querySelectorAll('tr[data-takeover]').length === 1",
            ONE_REFRESH,
        )
        .await;
    println!("takeover on the timeline after {on_timeline:?}, on the key page after {on_key_page:?}");

    // Numbers and charts agree with /metrics; wait for the next refresh to carry them.
    let m = s.metrics().await;
    let updates = b
        .eval(&page, "Number(document.getElementById('live').dataset.updates||0)")
        .await;
    b.wait_until(
        &page,
        &format!("Number(document.getElementById('live').dataset.updates||0) > {updates}"),
        ONE_REFRESH,
    )
    .await;
    let chart = |metric: &str| {
        format!("Number(document.querySelector('div[data-charts=wf] figure[data-metric={metric}]').dataset.now)")
    };
    assert_eq!(b.eval(&page, &chart("held")).await, held(&m));
    assert_eq!(b.eval(&page, &chart("takeovers")).await, takeovers(&m));
    assert_eq!(b.eval(&page, &chart("overdue")).await, 0.0);
    let row = "Array.from(document.querySelector('tr[data-namespace=wf]').children).map(c => c.textContent)";
    let cells = b.eval(&page, row).await;
    assert_eq!(cells[1], held(&m).to_string(), "held cell: {cells}");
    assert_eq!(cells[7], takeovers(&m).to_string(), "takeovers cell: {cells}");
    assert_eq!(
        b.eval(&page, "document.querySelectorAll('#incidents li').length").await,
        1,
        "one incident: the takeover"
    );

    // The key page agrees with the history API, owner redacted.
    let (_, _, hist) = s.get("/api/v1/locks/history?key=wf:lock:job").await;
    let hist: serde_json::Value = serde_json::from_str(&hist).unwrap();
    let api_rows = hist["transitions"].as_array().unwrap();
    b.wait_until(
        &key,
        &format!(
            "document.querySelectorAll('table.transitions tr[data-kind]').length === {}",
            api_rows.len()
        ),
        ONE_REFRESH,
    )
    .await;
    let last_owner = api_rows.last().unwrap()["owner_hash"].as_str().unwrap().to_string();
    let body = b.eval(&key, "document.getElementById('key-body').innerText").await;
    let body = body.as_str().unwrap();
    assert!(body.contains("<redacted>"), "{body}");
    assert!(
        body.contains(&last_owner),
        "current owner hash {last_owner} shown: {body}"
    );
    assert!(!body.contains("\nB\n"), "owner token not shown");
    assert_eq!(
        b.eval(
            &key,
            "document.querySelectorAll('svg.timeline.lifecycle rect.span').length"
        )
        .await,
        2,
        "two holds drawn: A's and B's"
    );
    assert_eq!(
        b.eval(&key, "[...document.querySelectorAll('svg.timeline.lifecycle g.event.deviation title')].filter(t => t.textContent.endsWith(': takeover')).length")
            .await,
        1
    );
    assert_eq!(
        b.eval(&key, "[...document.querySelectorAll('svg.timeline.lifecycle g.event.deviation title')].filter(t => t.textContent.endsWith(': expired')).length")
            .await,
        1
    );

    // The timeline's link leads to the key's page.
    let href = b
        .eval(&page, "document.querySelector('#incidents a.key').getAttribute('href')")
        .await;
    assert_eq!(href, "locks/wf?key=wf%3Alock%3Ajob");

    let dir = artifacts();
    for (tab, name) in [(&page, "status-page"), (&key, "status-key-page")] {
        for width in [1280, 390] {
            for scheme in ["light", "dark"] {
                b.screenshot(tab, &dir.join(format!("{name}-{width}-{scheme}.png")), width, scheme)
                    .await;
            }
        }
    }
    let overflow = b
        .eval(&page, "document.documentElement.scrollWidth <= window.innerWidth + 1")
        .await;
    b.screenshot(&page, &dir.join("status-page-390-light.png"), 390, "light")
        .await;
    let narrow = b
        .eval(&page, "document.documentElement.scrollWidth <= window.innerWidth + 1")
        .await;
    assert_eq!(
        (overflow, narrow),
        (true.into(), true.into()),
        "no sideways scrolling of the page"
    );
    no_errors_and_local_only(&b, &page).await;
    no_errors_and_local_only(&b, &key).await;

    // JavaScript off: the numbers, charts and timeline are in the served page.
    let off = b.tab().await;
    b.call(
        Some(&off),
        "Emulation.setScriptExecutionDisabled",
        serde_json::json!({"value": true}),
    )
    .await;
    b.navigate(&off, &base).await;
    let html = b.html(&off).await;
    let m = s.metrics().await;
    assert!(
        html.contains(&format!(r#"data-metric="takeovers" data-now="{}""#, takeovers(&m))),
        "{html}"
    );
    assert!(
        html.contains(&format!(r#"data-metric="held" data-now="{}""#, held(&m))),
        "{html}"
    );
    assert!(html.contains(r#"data-kind="takeover""#), "{html}");
    assert!(html.contains(r#"<tr data-namespace="wf"><td>wf "#), "{html}");
    b.navigate(&off, &format!("{base}locks/wf?key=wf%3Alock%3Ajob")).await;
    let html = b.html(&off).await;
    assert!(html.contains(r#"data-takeover="1""#), "{html}");
    assert!(!html.contains(r#"data-updates"#), "the script did not run");

    // Under a path prefix: every request stays under it, the live script and links work.
    let (proxy, outside) = prefix_proxy(s.addr).await;
    let pre = b.tab().await;
    b.navigate(&pre, &format!("http://{proxy}/lw/?refresh=1")).await;
    b.wait_until(
        &pre,
        "Number(document.getElementById('live').dataset.updates||0) >= 1",
        ONE_REFRESH,
    )
    .await;
    b.eval(&pre, "document.querySelector('#incidents a.key').click()").await;
    b.wait_until(&pre, "location.pathname === '/lw/locks/wf'", Duration::from_secs(5))
        .await;
    b.wait_until(
        &pre,
        "!!document.getElementById('key-body') && document.readyState === 'complete'",
        Duration::from_secs(5),
    )
    .await;
    // The key page's own live script, under the prefix.
    let here = b.eval(&pre, "location.href").await;
    b.navigate(&pre, &format!("{}&refresh=1", here.as_str().unwrap())).await;
    b.wait_until(
        &pre,
        "Number(document.getElementById('key-body').dataset.updates||0) >= 1",
        ONE_REFRESH,
    )
    .await;
    assert!(
        outside.lock().unwrap().is_empty(),
        "requests outside the prefix: {:?}",
        outside.lock().unwrap()
    );
    no_errors_and_local_only(&b, &pre).await;
    s.stop().await;
}

#[tokio::test]
async fn the_key_page_names_bad_input_and_a_lock_without_ttl_is_an_incident() {
    let r = redis(&[]);
    let s = Served::start(config(&r, &cfg())).await;
    let (status, _, body) = s.get("/locks/nope?key=wf:lock:a").await;
    assert_eq!(
        (status, body.contains("unknown namespace `nope`")),
        (404, true),
        "{body}"
    );
    let (status, _, body) = s.get("/locks/wf").await;
    assert_eq!((status, body.contains("missing `key`")), (400, true), "{body}");
    let long = "wf:lock:".to_string() + &"x".repeat(2000);
    let (status, _, body) = s.get(&format!("/locks/wf?key={long}")).await;
    assert_eq!(
        (status, body.contains("over the maximum of 1024")),
        (400, true),
        "{body}"
    );
    let (status, _, body) = s.get("/locks/wf?key=other:1").await;
    assert_eq!((status, body.contains("does not match")), (400, true), "{body}");
    // A lock without TTL appearing: an incident with its key (the only one), in the JSON.
    let _: () = redis::cmd("SET")
        .arg("wf:lock:forever")
        .arg("X")
        .query(&mut conn(&r))
        .unwrap();
    let started = std::time::Instant::now();
    let v = loop {
        let (status, _, body) = s.get("/api/v1/status").await;
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        if v["incidents"].as_array().is_some_and(|a| !a.is_empty()) {
            break v;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "no incident: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(v["targets"][0]["namespaces"][0]["name"], "wf");
    assert_eq!(v["targets"][0]["namespaces"][0]["without_ttl"], 1);
    let i = &v["incidents"][0];
    assert_eq!(
        (&i["kind"], &i["namespace"], &i["count"], &i["key"], &i["link"]),
        (
            &"without_ttl".into(),
            &"wf".into(),
            &1.into(),
            &"wf:lock:forever".into(),
            &"locks/wf?key=wf%3Alock%3Aforever".into()
        ),
        "{v}"
    );
    // Every URL in the page is relative: it works behind a path prefix.
    let (_, _, page) = s.get("/").await;
    for attr in ["href=\"/", "src=\"/", "fetch('/", "action=\"/", "http://", "https://"] {
        assert!(!page.contains(attr), "absolute URL `{attr}` in the page");
    }
    s.stop().await;
}

/// The demo's incidents: 273 in its first ten minutes when its workers' busy acquisitions
/// still counted as failures (158 failure bursts, 82 takeovers, 32 overdue episodes, the
/// orphan without TTL), 114 since contention is told apart (83 takeovers, 30 overdue
/// episodes, the orphan, no burst: measured 2026-11-26); a target's log keeps 200 and the
/// intake's 200. The test fills the target's log past its cap with real
/// takeovers (three namespaces, 25 keys each, expiring and taken by a new owner round after
/// round), adds a failure burst per namespace through the push API and locks without TTL,
/// and then asks that the summary stand above the fold at 1280×800.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_minutes_of_demo_incidents_leave_the_summary_above_the_fold() {
    use base64::Engine as _;
    let r = redis(&["--notify-keyspace-events", "KEA"]);
    let namespaces = ["orders", "payments", "reports"];
    let mut toml = "[[target]]\nname = \"main\"\nurl = \"{url}\"\nsample_interval = \"250ms\"\n".to_string();
    for ns in namespaces {
        toml.push_str(&format!(
            "[[namespace]]\nname = \"{ns}\"\npattern = \"{ns}:lock:*\"\nttl = \"5s\"\n"
        ));
    }
    let s = Served::start(config(&r, &toml)).await;
    s.wait_for(Duration::from_secs(10), "subscribed", |m| {
        m.get("lockwatch_notifications_connected", &[("target", "main")]) == Some(1.0)
    })
    .await;
    let mut c = conn(&r);
    let rounds = 5;
    for round in 0..rounds {
        let mut p = redis::pipe();
        for ns in namespaces {
            for k in 0..25 {
                p.cmd("SET")
                    .arg(format!("{ns}:lock:{k}"))
                    .arg(format!("worker-{round}"))
                    .arg("PX")
                    .arg(150)
                    .ignore();
            }
        }
        let _: () = p.query(&mut c).unwrap();
        for ns in namespaces {
            for k in 0..25 {
                wait_gone(&mut c, &format!("{ns}:lock:{k}")).await;
            }
        }
    }
    let takeovers = |m: &Metrics| -> f64 {
        namespaces
            .iter()
            .map(|ns| {
                m.get("lockwatch_lock_expiry_takeovers_total", &[("namespace", ns)])
                    .unwrap_or(0.0)
            })
            .sum()
    };
    s.wait_for(Duration::from_secs(10), "the takeovers", |m| takeovers(m) >= 250.0)
        .await;
    for (i, ns) in namespaces.iter().enumerate() {
        let line = format!("{{\"namespace\":\"{ns}\",\"op\":\"release\",\"outcome\":\"not_owned\"}}\n");
        let pushed = reqwest::Client::new()
            .post(format!("http://{}/api/v1/events", s.addr))
            .header("content-type", "application/x-ndjson")
            .body(line.repeat(6 + i))
            .send()
            .await
            .unwrap();
        assert_eq!(pushed.status().as_u16(), 200);
        let _: () = redis::cmd("SET")
            .arg(format!("{ns}:lock:forever"))
            .arg("X")
            .query(&mut c)
            .unwrap();
    }
    let started = std::time::Instant::now();
    let status = loop {
        let (_, _, body) = s.get("/api/v1/status").await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let kinds = |k: &str| {
            v["incidents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["kind"] == k)
                .count()
        };
        if kinds("without_ttl") >= 3 && kinds("failure_burst") >= 3 {
            break v;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let incidents = status["incidents"].as_array().unwrap().len();
    assert!(
        incidents >= 200,
        "{incidents} incidents: fewer than ten minutes of the demo"
    );

    let mut b = Browser::launch().await;
    let page = b.tab().await;
    b.call(
        Some(&page),
        "Emulation.setDeviceMetricsOverride",
        serde_json::json!({"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    b.navigate(&page, &format!("http://{}/", s.addr)).await;
    let lines = b.eval(&page, "document.querySelectorAll('#summary li').length").await;
    assert_eq!(lines, 4, "one line for the target and one per namespace");
    let bottom = b
        .eval(
            &page,
            "document.querySelector('#summary').getBoundingClientRect().bottom",
        )
        .await;
    assert!(
        bottom.as_f64().unwrap() <= 800.0,
        "the summary ends at {bottom} px, below the fold"
    );
    let states = b
        .eval(
            &page,
            "Array.from(document.querySelectorAll('#summary li')).map(l => l.dataset.state).join(' ')",
        )
        .await;
    assert_eq!(
        states, "bad bad bad ok",
        "the namespaces (takeovers, locks without TTL) first"
    );
    let groups = b.eval(&page, "document.querySelectorAll('#incidents li').length").await;
    assert_eq!(groups, 9, "three kinds of incident in three namespaces, one line each");
    let most = b
        .eval(
            &page,
            "Math.max(...Array.from(document.querySelectorAll('#incidents li')).map(l => Number(l.dataset.times)))",
        )
        .await;
    assert!(most.as_f64().unwrap() >= 50.0, "repeats counted on one line: {most}");
    // The keys are a click away.
    assert_eq!(
        b.eval(&page, "getComputedStyle(document.querySelector('#incidents li[data-kind=takeover] .keys a.key')).display === 'inline' && document.querySelector('#incidents li[data-kind=takeover] details').open").await,
        false
    );
    b.eval(
        &page,
        "document.querySelector('#incidents li[data-kind=takeover] summary').click()",
    )
    .await;
    let shown = b
        .eval(&page, "document.querySelector('#incidents li[data-kind=takeover] .keys a.key').getBoundingClientRect().height > 0")
        .await;
    assert_eq!(shown, true);
    b.eval(
        &page,
        "document.querySelector('#incidents li[data-kind=takeover] summary').click()",
    )
    .await;

    let dir = artifacts();
    let shot = b
        .call(
            Some(&page),
            "Page.captureScreenshot",
            serde_json::json!({"format": "png", "clip": {"x": 0, "y": 0, "width": 1280, "height": 800, "scale": 1}}),
        )
        .await;
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().unwrap())
        .unwrap();
    std::fs::write(dir.join("status-page-incidents-1280x800.png"), png).unwrap();
    for width in [1280, 390] {
        b.screenshot(
            &page,
            &dir.join(format!("status-page-incidents-{width}.png")),
            width,
            "light",
        )
        .await;
    }
    let narrow = b
        .eval(&page, "document.documentElement.scrollWidth <= window.innerWidth + 1")
        .await;
    assert_eq!(narrow, true, "no sideways scrolling at 390 px");
    // Close-ups to look at: the first screen of a phone, a namespace's charts at both widths.
    clip(
        &mut b,
        &page,
        "body",
        390,
        844,
        &dir.join("status-page-incidents-390x844.png"),
    )
    .await;
    for width in [1280, 390] {
        clip(
            &mut b,
            &page,
            "div[data-charts=orders]",
            width,
            0,
            &dir.join(format!("status-page-charts-{width}.png")),
        )
        .await;
    }
    // Readable charts: as wide as the phone allows, as tall as 64 px, not a sliver.
    let svg = b
        .eval(&page, "(r => [r.width, r.height])(document.querySelector('figure[data-metric=takeovers] svg').getBoundingClientRect())")
        .await;
    assert!(
        svg[0].as_f64().unwrap() >= 250.0 && svg[1].as_f64().unwrap() >= 60.0,
        "chart {svg}"
    );
    let bar = b
        .eval(
            &page,
            "document.querySelector('figure[data-metric=takeovers] rect').getBoundingClientRect().width",
        )
        .await;
    assert!(bar.as_f64().unwrap() >= 3.0, "bars {bar} px wide at 390 px");
    no_errors_and_local_only(&b, &page).await;
    s.stop().await;
}

/// A screenshot of `selector` at `width` px (its top `height` px when not 0).
async fn clip(b: &mut Browser, tab: &Tab, selector: &str, width: u32, height: u32, path: &Path) {
    b.call(
        Some(tab),
        "Emulation.setDeviceMetricsOverride",
        serde_json::json!({"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600}),
    )
    .await;
    let r = b
        .eval(
            tab,
            &format!("(r => [r.x, r.y + window.scrollY, r.width, r.height])(document.querySelector('{selector}').getBoundingClientRect())"),
        )
        .await;
    let f = |i: usize| r[i].as_f64().unwrap();
    let h = if height > 0 { f64::from(height) } else { f(3) };
    let shot = b
        .call(
            Some(tab),
            "Page.captureScreenshot",
            serde_json::json!({"format": "png", "captureBeyondViewport": true,
                "clip": {"x": f(0), "y": f(1), "width": f(2), "height": h, "scale": 1}}),
        )
        .await;
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().unwrap())
        .unwrap();
    std::fs::write(path, png).unwrap();
}

/// Push NDJSON events to `/api/v1/events`; all of them accepted.
async fn push_events(addr: std::net::SocketAddr, lines: &[String]) {
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/events"))
        .header("content-type", "application/x-ndjson")
        .body(lines.join("\n"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["accepted"], lines.len(), "{v}");
}

/// `/api/v1/status`, and namespace wf's view and summary line in it.
async fn wf_status(s: &Served) -> (serde_json::Value, serde_json::Value, serde_json::Value) {
    let (status, _, body) = s.get("/api/v1/status").await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let ns = v["targets"][0]["namespaces"][0].clone();
    assert_eq!(ns["name"], "wf");
    let line = v["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["namespace"] == "wf")
        .cloned()
        .unwrap_or_else(|| panic!("no line for wf: {v}"));
    (v, ns, line)
}

/// Contention is the lock working: 30 busy and 10 timed-out acquisitions pushed, nothing
/// else, are counted as ever but leave namespace wf ok, said in their own words in
/// `/api/v1/status`, on the status page and on a key's page, with no incident; one release
/// of a lock no longer owned then turns it warn, the contention still said apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_alone_leaves_a_namespace_ok_and_one_not_owned_release_warns() {
    let r = redis(&[]);
    let s = Served::start(config(&r, &cfg())).await;
    let event = |op: &str, outcome: &str, key: Option<&str>| {
        let key = key.map(|k| format!(",\"key\":\"{k}\"")).unwrap_or_default();
        format!("{{\"namespace\":\"wf\",\"op\":\"{op}\",\"outcome\":\"{outcome}\"{key}}}")
    };
    let mut lines: Vec<String> = (0..30)
        .map(|i| event("acquire", "busy", (i < 2).then_some("wf:lock:job")))
        .collect();
    lines.extend((0..10).map(|i| event("acquire", "timeout", (i < 1).then_some("wf:lock:job"))));
    push_events(s.addr, &lines).await;

    let m = s.metrics().await;
    let events = |outcome: &str| {
        m.val(
            "lockwatch_lock_events_total",
            &[("namespace", "wf"), ("op", "acquire"), ("outcome", outcome)],
        )
    };
    assert_eq!((events("busy"), events("timeout")), (30.0, 10.0), "counted as ever");

    let (v, ns, line) = wf_status(&s).await;
    assert_eq!(
        (&ns["state"], &ns["failures_hour"], &ns["contention_hour"]),
        (&"ok".into(), &0.into(), &40.into()),
        "{ns}"
    );
    assert_eq!(line["state"], "ok", "{line}");
    let parts = line["parts"].to_string();
    assert!(
        parts.contains(">40 acquisitions waited or gave up in the last hour<"),
        "{parts}"
    );
    assert!(!parts.contains("lock failures"), "{parts}");
    assert_eq!(v["incidents"], serde_json::json!([]), "contention is no incident: {v}");
    let charts = ns["charts_html"].as_str().unwrap();
    assert!(
        charts.contains(r#"data-metric="contention" data-now="40""#)
            && charts.contains(r#"data-metric="failures" data-now="0""#),
        "{charts}"
    );
    assert!(
        charts.contains("<span>acquisitions waited or gave up</span>"),
        "{charts}"
    );

    // The page says the same, server-rendered.
    let (_, _, page) = s.get("/").await;
    let summary_line = page
        .split("<li ")
        .find(|l| l.contains(r#"data-ns="wf""#))
        .unwrap_or_else(|| panic!("no summary line for wf: {page}"));
    assert!(summary_line.contains(r#"data-state="ok""#), "{summary_line}");
    assert!(
        summary_line.contains("40 acquisitions waited or gave up in the last hour"),
        "{summary_line}"
    );
    assert!(
        page.contains(r#"<tr data-events="wf"><td>wf</td><td>0</td><td>0</td><td>0</td><td>0</td><td data-contention>40</td></tr>"#),
        "failures 0, contention 40: {page}"
    );
    assert!(page.contains("no incidents since lockwatch started"), "{page}");

    // The key's page and the history API tell its events apart.
    let (_, _, key) = s.get("/locks/wf?key=wf:lock:job&format=json").await;
    let key: serde_json::Value = serde_json::from_str(&key).unwrap();
    let classes: Vec<&str> = key["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["class"].as_str().unwrap())
        .collect();
    assert_eq!(classes, ["contention"; 3], "{key}");
    let html = key["html"].as_str().unwrap();
    assert_eq!(html.matches(r#"data-class="contention""#).count(), 3, "{html}");
    assert!(
        html.contains("contention: waited or gave up") && !html.contains("lock failure"),
        "{html}"
    );

    // One release of a lock no longer owned is a failure: warn, as ever.
    push_events(s.addr, &[event("release", "not_owned", Some("wf:lock:job"))]).await;
    let (_, ns, line) = wf_status(&s).await;
    assert_eq!(
        (&ns["state"], &ns["failures_hour"], &ns["contention_hour"]),
        (&"warn".into(), &1.into(), &40.into()),
        "{ns}"
    );
    let parts = line["parts"].as_array().unwrap();
    assert_eq!(parts[0], "1 lock failures reported in the last hour", "{line}");
    assert!(
        parts[1].as_str().unwrap().contains("40 acquisitions waited or gave up"),
        "{line}"
    );
    let (_, _, key) = s.get("/api/v1/locks/history?key=wf:lock:job").await;
    let key: serde_json::Value = serde_json::from_str(&key).unwrap();
    assert_eq!(key["events"][3]["class"], "failure", "{key}");
    s.stop().await;
}
