//! `/metrics` in OpenMetrics against a real redis-server and the running exporter: the
//! `Accept` negotiation, a pushed lock event's exemplar (its trace and span ids, taken by
//! the intake) on its series and nowhere else, the 0.0.4 format unchanged (and accepted by
//! `promtool check metrics`), the same series in both formats; and a real Prometheus with
//! exemplar storage scraping it, which stores the exemplar and the series (its own
//! OpenMetrics parser accepted the whole exposition).
//! Both scrapes are kept in `target/test-artifacts/metrics-{openmetrics,0.0.4}.txt`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Served;
use common::prometheus::Prometheus;
use lockwatch::metrics::{Registry, TraceContext};
use lockwatch::vocab::metric;

/// Prometheus 2.42's scrape `Accept` header.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; version=0.0.4";
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN: &str = "00f067aa0ba902b7";
/// The series the event counts in, as the intake labels it.
const SERIES: [(&str, &str); 3] = [("namespace", "wf"), ("op", "release"), ("outcome", "not_owned")];

const CONFIG: &str = r#"
[[target]]
name = "main"
url = "{url}"
sample_interval = "200ms"

[[namespace]]
name = "wf"
pattern = "wf:lock:*"
ttl = "30s"
renew_every = "10s"
"#;

/// The exporter on its own registry and one `release / not_owned` event pushed to
/// `/api/v1/events` with its trace and span ids, counted, and its exemplar recorded by the
/// intake; (redis, exporter, its registry, when the intake took the exemplar).
async fn served_with_exemplar() -> (lockwatch::access::child::RedisChild, Served, Registry, SystemTime) {
    let r = common::redis(&[]);
    let registry = Registry::new().unwrap();
    let served = Served::start_in(common::config(&r, CONFIG), registry.clone()).await;
    served
        .wait_for(Duration::from_secs(10), "first pass", |m| {
            m.val("lockwatch_sample_passes_total", &[("target", "main")]) >= 1.0
        })
        .await;
    let before = SystemTime::now();
    let event = format!(
        "{{\"namespace\":\"wf\",\"op\":\"release\",\"outcome\":\"not_owned\",\"trace_id\":\"{TRACE}\",\"span_id\":\"{SPAN}\"}}\n"
    );
    let resp = reqwest::Client::new()
        .post(format!("http://{}/api/v1/events", served.addr))
        .header("content-type", "application/x-ndjson")
        .body(event)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    served
        .wait_for(Duration::from_secs(5), "the event counted", |m| {
            m.val(metric::LOCK_EVENTS_TOTAL, &SERIES) == 1.0
        })
        .await;
    let exemplar = registry
        .exemplars()
        .get(metric::LOCK_EVENTS_TOTAL, &SERIES)
        .expect("the intake records the pushed event's exemplar");
    let want = TraceContext::new(TRACE, Some(SPAN)).unwrap();
    assert_eq!((&exemplar.trace, exemplar.value), (&want, 1.0));
    assert!(before <= exemplar.at && exemplar.at <= SystemTime::now());
    assert_eq!(registry.exemplars().len(), 1);
    (r, served, registry, exemplar.at)
}

/// `GET /metrics` with `accept` (reqwest's `*/*` when `None`): (content type, vary, body).
async fn scrape(served: &Served, accept: Option<&str>) -> (String, String, String) {
    let mut req = reqwest::Client::new().get(format!("http://{}/metrics", served.addr));
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let header = |h: &str| {
        resp.headers()
            .get(h)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let (ctype, vary) = (header("content-type"), header("vary"));
    (ctype, vary, resp.text().await.unwrap())
}

/// `# TYPE`, `# UNIT`, `# HELP` and samples checked family by family as the spec says: the
/// sample names each type allows, units that end the family name, `# EOF` once at the end,
/// no other comment; the number of samples.
fn check_structure(body: &str) -> usize {
    assert!(body.ends_with("\n# EOF\n"), "no final # EOF");
    let (mut family, mut kind, mut samples) = (String::new(), String::new(), 0);
    let mut families = BTreeSet::new();
    for line in body.lines().take(body.lines().count() - 1) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (f, k) = rest.split_once(' ').unwrap();
            (family, kind) = (f.to_string(), k.to_string());
            assert!(families.insert(family.clone()), "family {family} twice");
            assert_ne!(kind, "unknown", "{line}: every lockwatch family has its type");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# UNIT ") {
            let (f, unit) = rest.split_once(' ').unwrap();
            assert_eq!(f, family, "{line}");
            assert!(f.ends_with(&format!("_{unit}")), "{line}: the unit must end the name");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            assert_eq!(rest.split_once(' ').unwrap().0, family, "{line}");
            continue;
        }
        assert!(!line.starts_with('#'), "a comment OpenMetrics does not allow: {line}");
        let name = line.split(['{', ' ']).next().unwrap();
        let allowed: &[&str] = match kind.as_str() {
            "counter" => &["_total"],
            "gauge" => &[""],
            "histogram" => &["_bucket", "_count", "_sum"],
            other => panic!("unexpected type {other}"),
        };
        assert!(
            allowed.iter().any(|s| name == format!("{family}{s}")),
            "{name} in {kind} family {family}"
        );
        if line.contains(" # {") {
            assert_eq!(kind, "counter", "an exemplar outside a counter: {line}");
        }
        samples += 1;
    }
    samples
}

/// Each sample's name and labels, `le` read as a number (`1` and `1.0` are one bound).
fn series(body: &str) -> BTreeSet<String> {
    lockwatch::exposition::samples(body)
        .map(|s| {
            let labels: Vec<String> = s
                .labels
                .iter()
                .map(|(k, v)| match k.as_str() {
                    "le" => format!("le={}", v.replace("+Inf", "inf").parse::<f64>().unwrap()),
                    _ => format!("{k}={v}"),
                })
                .collect();
            format!("{}{{{}}}", s.name, labels.join(","))
        })
        .collect()
}

/// The lines of a 0.0.4 exposition with each sample's value cut off (values move between
/// two scrapes; names, labels, order and comments do not).
fn shape(body: &str) -> Vec<String> {
    body.lines()
        .map(|l| match l.starts_with('#') {
            true => l.to_string(),
            false => l.rsplit_once(' ').unwrap().0.to_string(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_picks_the_format_and_only_openmetrics_carries_the_exemplar() {
    let (_r, served, registry, at) = served_with_exemplar().await;

    let (ctype, vary, om) = scrape(&served, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!((ctype.as_str(), vary.as_str()), (OPENMETRICS, "Accept"));
    let samples = check_structure(&om);
    assert!(samples > 100, "{samples} samples");
    let since = at.duration_since(UNIX_EPOCH).unwrap();
    let line = format!(
        "lockwatch_lock_events_total{{namespace=\"wf\",op=\"release\",outcome=\"not_owned\"}} 1 # {{trace_id=\"{TRACE}\",span_id=\"{SPAN}\"}} 1 {}.{:03}",
        since.as_secs(),
        since.subsec_millis()
    );
    assert!(om.lines().any(|l| l == line), "no line\n{line}\nin:\n{om}");
    assert_eq!(om.matches(" # {").count(), 1, "one exemplar, on its series only");
    assert!(om.contains("# TYPE lockwatch_lock_events counter\n"));
    assert!(om.contains("# TYPE process_cpu_seconds counter\n# UNIT process_cpu_seconds seconds\n"));

    for accept in [
        Some("application/openmetrics-text"),
        Some("application/openmetrics-text; version=0.0.1"),
        Some("text/plain;q=0.2,application/openmetrics-text;version=1.0.0;q=0.9"),
    ] {
        let (ctype, _, body) = scrape(&served, accept).await;
        assert_eq!(ctype, OPENMETRICS, "{accept:?}");
        assert!(body.contains(&line), "{accept:?}");
    }

    // The 0.0.4 format: without Accept, for browsers and curl's */*, for text/plain, and
    // when OpenMetrics is refused or only liked less.
    let (status, ctype, text) = common::http_get(served.addr, "/metrics").await;
    assert_eq!((status, ctype.as_str()), (200, TEXT));
    for accept in [
        None,
        Some("text/plain; version=0.0.4"),
        Some("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
        Some("application/openmetrics-text;q=0"),
        Some("application/openmetrics-text;q=0.4,text/plain;q=0.5"),
        Some("application/openmetrics-text;version=2.0.0"),
    ] {
        let (ctype, vary, body) = scrape(&served, accept).await;
        assert_eq!((ctype.as_str(), vary.as_str()), (TEXT, "Accept"), "{accept:?}");
        assert_eq!(shape(&body), shape(&text), "{accept:?}");
    }
    for absent in [" # {", "# EOF", "# UNIT", TRACE] {
        assert!(!text.contains(absent), "the 0.0.4 format has no {absent:?}");
    }
    // What `prometheus::TextEncoder` writes of the registry, as before.
    assert_eq!(shape(&registry.encode().unwrap()), shape(&text));
    assert!(text.contains("# HELP lockwatch_lock_events_total "));
    assert!(text.contains("# TYPE lockwatch_lock_events_total counter\n"));

    // Both formats have the same series.
    assert_eq!(series(&om), series(&text));
    let artifacts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::write(artifacts.join("metrics-openmetrics.txt"), &om).unwrap();
    std::fs::write(artifacts.join("metrics-0.0.4.txt"), &text).unwrap();

    // promtool, the real one, accepts the 0.0.4 exposition with no lint finding. (Its
    // `check metrics` reads the 0.0.4 format only: OpenMetrics is checked by Prometheus
    // itself in the next test.)
    common::promtool_check_metrics(&text);
    served.stop().await;
}

/// Poll Prometheus's `path` until `pick` finds what it waits for, or fail with its log.
async fn poll<T>(
    p: &Prometheus,
    path: &str,
    query: &[(&str, &str)],
    what: &str,
    pick: impl Fn(&serde_json::Value) -> Option<T>,
) -> T {
    let started = Instant::now();
    let mut last = serde_json::Value::Null;
    loop {
        if let Some(v) = p.json(path, query).await {
            if let Some(found) = pick(&v) {
                return found;
            }
            last = v;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let log = std::fs::read_to_string(p.dir().join("prometheus.log")).unwrap_or_default();
            panic!("Prometheus: no {what} within 60 s; last answer {last}\nits log:\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_stores_the_exemplar_and_the_whole_exposition() {
    let (_r, served, _registry, at) = served_with_exemplar().await;
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: lockwatch\n    static_configs:\n      - targets: ['{}']\n",
        served.addr
    );
    let p = Prometheus::start_with(&config, &[], &["--enable-feature=exemplar-storage"]);
    let targets = p.scraped_targets(1, Duration::from_secs(60)).await;
    let target = &targets["lockwatch"];
    assert_eq!(target["health"], "up", "{target}");
    assert_eq!(target["lastError"], "", "{target}");

    let selector = "lockwatch_lock_events_total{namespace=\"wf\",op=\"release\",outcome=\"not_owned\"}";
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let (start, end) = ((now - 600).to_string(), (now + 600).to_string());
    let exemplars = poll(
        &p,
        "/api/v1/query_exemplars",
        &[("query", selector), ("start", &start), ("end", &end)],
        "exemplar",
        |v| {
            let series = v["data"].as_array()?.first()?.clone();
            (!series["exemplars"].as_array()?.is_empty()).then_some(series)
        },
    )
    .await;
    assert_eq!(exemplars["seriesLabels"]["job"], "lockwatch");
    let e = &exemplars["exemplars"][0];
    assert_eq!(e["labels"]["trace_id"], TRACE, "{exemplars}");
    assert_eq!(e["labels"]["span_id"], SPAN, "{exemplars}");
    assert_eq!(e["value"], "1", "{exemplars}");
    let want = at.duration_since(UNIX_EPOCH).unwrap().as_millis() as f64 / 1000.0;
    assert!(
        (e["timestamp"].as_f64().unwrap() - want).abs() < 0.001,
        "{exemplars} against {want}"
    );
    assert_eq!(
        exemplars["exemplars"].as_array().unwrap().len(),
        1,
        "one exemplar, however many scrapes"
    );

    let value = poll(&p, "/api/v1/query", &[("query", selector)], "series", |v| {
        v["data"]["result"][0]["value"][1].as_str().map(str::to_string)
    })
    .await;
    assert_eq!(value, "1");

    // The whole exposition stored: as many samples as an OpenMetrics scrape has (the
    // exporter is quiet, so the count holds between two scrapes), and metadata only the
    // OpenMetrics parser gives (a unit; the counter under its family name).
    let (_, _, om) = scrape(&served, Some(PROMETHEUS_ACCEPT)).await;
    let samples = check_structure(&om).to_string();
    let scraped = poll(
        &p,
        "/api/v1/query",
        &[("query", "scrape_samples_scraped{job=\"lockwatch\"}")],
        "scrape_samples_scraped",
        |v| {
            let n = v["data"]["result"][0]["value"][1].as_str()?;
            (n == samples).then(|| n.to_string())
        },
    )
    .await;
    assert_eq!(scraped, samples);
    let metadata = |metric: &'static str| {
        let p = &p;
        async move {
            poll(p, "/api/v1/targets/metadata", &[("metric", metric)], "metadata", |v| {
                v["data"].as_array()?.first().cloned()
            })
            .await
        }
    };
    let gauge = metadata("lockwatch_sample_duration_seconds").await;
    assert_eq!(
        (&gauge["type"], &gauge["unit"]),
        (&"gauge".into(), &"seconds".into()),
        "{gauge}"
    );
    let counter = metadata("lockwatch_lock_events").await;
    assert_eq!(counter["type"], "counter", "{counter}");
    served.stop().await;
}
