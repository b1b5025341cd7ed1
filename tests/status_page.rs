//! The status page in real headless Chromium (DevTools protocol, `common::cdp`) against a
//! real redis-server and the exporter: a scripted expiry takeover shows on the timeline and
//! on the key's page within one refresh of the live script; charts and numbers agree with
//! `/metrics` and the history API; no console error, no request leaving 127.0.0.1; numbers
//! present with JavaScript off; the page works under a proxy path prefix; screenshots in
//! light and dark at 1280 and 390 px kept in `target/test-artifacts/`.
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
ttl = "1s"
"#
    .to_string()
}

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn set_px(c: &mut redis::Connection, key: &str, owner: &str, px: u64) {
    let ok: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(owner)
        .arg("NX")
        .arg("PX")
        .arg(px)
        .query(c)
        .unwrap();
    assert_eq!(ok.as_deref(), Some("OK"), "SET NX {key}");
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
    let mut c = conn(&r);
    set_px(&mut c, "wf:lock:other", "X", 600_000);
    set_px(&mut c, "wf:lock:job", "A", 800);
    s.wait_for(Duration::from_secs(5), "two held", |m| held(m) == 2.0).await;

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
        b.eval(&key, "document.querySelectorAll('svg.lifecycle rect.hold').length")
            .await,
        2,
        "two holds drawn: A's and B's"
    );
    assert_eq!(
        b.eval(&key, "document.querySelectorAll('svg.lifecycle text.takeover').length")
            .await,
        1
    );
    assert_eq!(
        b.eval(&key, "document.querySelectorAll('svg.lifecycle text.expiry').length")
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
