//! Test harness: a real redis-server on a free port, the real exporter on port 0, a tiny
//! HTTP client, and a parser for the Prometheus text format. A missing binary fails the
//! test with the command that installs it; nothing is skipped.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod alertmanager;
pub mod cdp;
pub mod compat;
pub mod drill;
pub mod freeze;
pub mod headless;
pub mod managed;
pub mod pki;
pub mod prometheus;
pub mod systemd;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

pub mod logs;
pub mod rotation;
pub mod topo;
pub mod valkey;

use lockwatch::access::child::RedisChild;
use lockwatch::config::{Config, Overrides};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// Start redis-server, or fail the test saying how to install it.
pub fn redis(extra: &[&str]) -> RedisChild {
    RedisChild::start(None, extra).unwrap_or_else(|e| panic!("{e}"))
}

/// What the server build the tests start is and has, asked of one server started for the
/// purpose, once per test binary: `INFO server`, and which options it knows.
pub struct Build {
    pub server: lockwatch::access::server::Server,
    /// `enable-debug-command` (Redis 7.0 on; before, `DEBUG` needs no option).
    pub debug_command_option: bool,
}

pub fn build() -> &'static Build {
    static BUILD: std::sync::OnceLock<Build> = std::sync::OnceLock::new();
    BUILD.get_or_init(|| {
        let r = redis(&[]);
        let option: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("enable-debug-command")
            .query(&mut conn(&r))
            .unwrap();
        Build {
            server: server_of(&r),
            debug_command_option: !option.is_empty(),
        }
    })
}

/// The arguments that let a test send `DEBUG SLEEP` and the like to the server it starts.
pub fn debug_args() -> &'static [&'static str] {
    match build().debug_command_option {
        true => &["--enable-debug-command", "yes"],
        false => &[],
    }
}

/// The ACL rule that lets a user read the keys of `pattern` on the tests' server:
/// `%R~<pattern>`, or `~<pattern>` where key patterns cannot be read-only (before 7.0).
pub fn key_rule(pattern: &str) -> String {
    match build().server.read_only_key_patterns() {
        true => format!("%R~{pattern}"),
        false => format!("~{pattern}"),
    }
}

/// The one code line of docs/security.md (trimmed) that starts with `start` and contains
/// `containing`.
pub fn security_line(start: &str, containing: &str) -> String {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/security.md")).unwrap();
    let found: Vec<&str> = doc
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with(start) && l.contains(containing))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one docs/security.md line `{start}…{containing}…`: {found:?}"
    );
    found[0].to_string()
}

/// The documented read-only line (with `<pattern>` placeholders, or the sample config's
/// patterns for `containing = "cordum:wf:run:lock:*"`) for the tests' server: the Redis 7
/// line, or the Redis 6.2 one on a server without read-only key patterns.
pub fn read_only_line(containing: &str) -> String {
    match build().server.read_only_key_patterns() {
        true => security_line("ACL SETUSER lockwatch reset on >PASSWORD -@all", containing),
        false => security_line("ACL SETUSER lockwatch reset on >PASSWORD resetchannels", containing),
    }
}

/// Which server `r` is, as it says in `INFO server` (what a test asks before asserting
/// what that server supports).
pub fn server_of(r: &RedisChild) -> lockwatch::access::server::Server {
    let info: String = redis::cmd("INFO").arg("server").query(&mut conn(r)).unwrap();
    lockwatch::access::server::Server::from_info(&info)
}

/// The server build the tests start, as its binary's `--version` says (`Redis server
/// v=7.0.15 …`, `Valkey server v=9.1.2 …`): (`redis` or `valkey`, the version). Told apart
/// from `INFO`, so a test can check what lockwatch reads there.
pub fn server_build() -> (String, String) {
    let bin = lockwatch::access::child::find_redis_server(None).unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new(&bin).arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let family = text.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
    let version = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or_else(|| panic!("{}: no version in {text:?}", bin.display()));
    (family, version.to_string())
}

/// A synchronous connection for setting up keys.
pub fn conn(r: &RedisChild) -> redis::Connection {
    redis::Client::open(r.url()).unwrap().get_connection().unwrap()
}

/// `SET key owner NX PX px`: whether it took the lock.
pub fn acquire(c: &mut impl redis::ConnectionLike, key: &str, owner: &str, px: u64) -> bool {
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(owner)
        .arg("NX")
        .arg("PX")
        .arg(px)
        .query(c)
        .unwrap();
    set.is_some()
}

/// The URL of a user who may do anything but `CONFIG` (as on a managed Redis), created on `r`.
pub fn user_without_config(r: &RedisChild) -> String {
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "managed", "on", ">pw", "~*", "&*", "+@all", "-config"])
        .query(&mut conn(r))
        .unwrap();
    format!("redis://managed:pw@127.0.0.1:{}/0", r.port())
}

/// A validated config from TOML text, `{url}` replaced by the server's URL.
pub fn config(r: &RedisChild, toml: &str) -> Config {
    let text = toml.replace("{url}", &r.url());
    Config::from_toml(&text, "test.toml", Path::new("."), &Overrides::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// The exporter, running on 127.0.0.1:0 until dropped.
pub struct Served {
    pub addr: SocketAddr,
    token: CancellationToken,
    handle: Option<tokio::task::JoinHandle<()>>,
}

impl Served {
    pub async fn start(config: Config) -> Served {
        Served::start_in(config, lockwatch::metrics::Registry::new().unwrap()).await
    }

    /// The exporter with its families in `registry` (the test keeps a clone).
    pub async fn start_in(config: Config, registry: lockwatch::metrics::Registry) -> Served {
        // `LOCKWATCH_TEST_LOG=debug cargo test …` shows the in-process exporter's log.
        if let Ok(filter) = std::env::var("LOCKWATCH_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let token = CancellationToken::new();
        let t = token.clone();
        let handle = tokio::spawn(async move {
            lockwatch::serve::run_in(listener, config, Default::default(), registry, t)
                .await
                .unwrap();
        });
        Served {
            addr,
            token,
            handle: Some(handle),
        }
    }

    pub async fn get(&self, path: &str) -> (u16, String, String) {
        http_get(self.addr, path).await
    }

    /// `/metrics`, parsed.
    pub async fn metrics(&self) -> Metrics {
        let (status, _, body) = self.get("/metrics").await;
        assert_eq!(status, 200, "{body}");
        Metrics(body)
    }

    /// Poll `/metrics` until `pred` holds, or fail after `limit` with the last body.
    pub async fn wait_for(&self, limit: Duration, what: &str, pred: impl Fn(&Metrics) -> bool) -> Duration {
        let started = Instant::now();
        loop {
            let m = self.metrics().await;
            if pred(&m) {
                return started.elapsed();
            }
            if started.elapsed() > limit {
                panic!("timed out after {limit:?} waiting for {what}; last /metrics:\n{}", m.0);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn stop(mut self) {
        self.token.cancel();
        if let Some(h) = self.handle.take() {
            tokio::time::timeout(Duration::from_secs(10), h)
                .await
                .expect("exporter did not stop")
                .unwrap();
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// GET over a fresh connection: (status, content-type, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: lockwatch\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut raw))
        .await
        .expect("HTTP response timed out")
        .unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let ctype = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    // Bodies here are small: axum sends them with content-length; decode chunked if not.
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, ctype, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

/// A Prometheus text exposition, queried by name and labels.
pub struct Metrics(pub String);

impl Metrics {
    /// Value of the one sample `name{labels…}` whose labels include all of `labels`.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let found: Vec<f64> = lockwatch::exposition::samples(&self.0)
            .filter(|s| s.name == name && s.has_labels(labels))
            .map(|s| s.value)
            .collect();
        assert!(found.len() <= 1, "more than one series matches {name}{labels:?}");
        found.first().copied()
    }

    /// Like `get`, failing the test when the series is missing.
    pub fn val(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no series {name}{labels:?} in:\n{}", self.0))
    }

    /// `lockwatch_locks_held` of a target's namespace.
    pub fn held(&self, target: &str, namespace: &str) -> f64 {
        self.val("lockwatch_locks_held", &[("target", target), ("namespace", namespace)])
    }

    /// `lockwatch_lock_transitions_total` of a target's namespace, of one kind.
    pub fn transitions(&self, target: &str, namespace: &str, kind: &str) -> f64 {
        self.val(
            "lockwatch_lock_transitions_total",
            &[("target", target), ("namespace", namespace), ("kind", kind)],
        )
    }
}

/// Path of a binary the tests need, or fail saying how to install it.
pub fn require_binary(name: &str, package: &str) -> std::path::PathBuf {
    for dir in ["/usr/bin", "/usr/local/bin", "/usr/sbin"] {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("{name} not found: install it with `sudo apt-get install {package}` (or run `make test`, which does)");
}

/// `promtool check metrics` (the real one) on `text`: fails the test on a parse error or
/// any lint finding.
pub fn promtool_check_metrics(text: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let promtool = require_binary("promtool", "prometheus");
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "promtool check metrics: {}", output_text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "",
        "promtool lint findings"
    );
}

/// The binary an environment variable names (`LOCKWATCH_REDIS_CLI=/path/redis-cli`), or
/// `None` when it is unset; a path that is no file fails the test naming the variable.
pub fn require_override(var: &str) -> Option<std::path::PathBuf> {
    let path = std::path::PathBuf::from(std::env::var_os(var)?);
    assert!(
        path.is_file(),
        "{var}={} is not a file: point it at the binary, or unset it (`make compat` sets it: scripts/setup.sh compat installs the servers)",
        path.display()
    );
    Some(path)
}

/// Metric names a PromQL expression selects, or the parser's complaint.
pub fn promql_metric_names(expr: &str) -> Result<Vec<String>, String> {
    use promql_parser::parser::Expr;
    use promql_parser::util::{ExprVisitor, walk_expr};
    struct Names(Vec<String>);
    impl ExprVisitor for Names {
        type Error = String;
        fn pre_visit(&mut self, e: &Expr) -> Result<bool, String> {
            let vs = match e {
                Expr::VectorSelector(vs) => Some(vs),
                Expr::MatrixSelector(ms) => Some(&ms.vs),
                _ => None,
            };
            if let Some(name) = vs.and_then(|vs| vs.name.clone()) {
                self.0.push(name);
            }
            Ok(true)
        }
    }
    let parsed = promql_parser::parser::parse(expr)?;
    let mut names = Names(Vec::new());
    walk_expr(&mut names, &parsed)?;
    Ok(names.0)
}

impl Metrics {
    /// Every metric name exported, histogram and summary series included
    /// (`x_bucket`, `x_sum`, `x_count`).
    pub fn names(&self) -> std::collections::BTreeSet<String> {
        lockwatch::exposition::names(&self.0)
    }
}

/// A panel query of a shipped dashboard.
#[derive(Debug, Clone)]
pub struct PanelQuery {
    pub dashboard: String,
    pub panel: String,
    pub expr: String,
}

/// Every panel query of `dashboards/*.json` (rows' nested panels included).
pub fn dashboard_queries() -> Vec<PanelQuery> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards");
    let mut out = Vec::new();
    for name in ["lockwatch-overview.json", "lockwatch-namespace.json"] {
        let d: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap())
            .unwrap_or_else(|e| panic!("dashboards/{name}: {e}"));
        for p in all_panels(&d) {
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = t["expr"].as_str() {
                    out.push(PanelQuery {
                        dashboard: name.to_string(),
                        panel: p["title"].as_str().unwrap_or("?").to_string(),
                        expr: expr.to_string(),
                    });
                }
            }
        }
    }
    out
}

/// The panels of a dashboard, those nested in collapsed rows included.
pub fn all_panels(d: &serde_json::Value) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().into_iter().flatten() {
        out.push(p.clone());
        for inner in p["panels"].as_array().into_iter().flatten() {
            out.push(inner.clone());
        }
    }
    out
}

/// A dashboard query with Grafana's variables filled in: `namespace` for `$namespace`,
/// any job, instance and target, 15 s rate windows (Prometheus scrapes every second in
/// the tests), 10 minutes for `$__range`.
pub fn fill_variables(expr: &str, namespace: &str) -> String {
    expr.replace("${datasource}", "")
        .replace("$__rate_interval", "15s")
        .replace("$__range", "10m")
        .replace("$__interval", "5s")
        .replace("$job", ".+")
        .replace("$instance", ".+")
        .replace("$target", ".+")
        .replace("$namespace", namespace)
}

/// Metric names on a live `/metrics` of `lockwatch serve` with every family exported:
/// keyspace notifications on, a fence pattern, a log source, a drill's freeze live.
pub async fn exported_metric_names() -> std::collections::BTreeSet<String> {
    let r = redis(&["--notify-keyspace-events", "KEA"]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &r,
        &format!(
            "[[target]]\nname = \"main\"\nurl = \"{{url}}\"\nsample_interval = \"200ms\"\n\
             [[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\nrenew_every = \"10s\"\nmax_hold = \"1m\"\nfence_pattern = \"wf:fence:*\"\n\
             [[logs]]\nname = \"app\"\npath = \"{}/*.log\"\n",
            dir.path().display()
        ),
    );
    let s = Served::start(cfg).await;
    // A pass, and the topology follower's first answers (node health, which server): on a
    // loaded machine the pass can come first.
    s.wait_for(Duration::from_secs(10), "a pass and the node's first answers", |m| {
        let names = m.names();
        m.get("lockwatch_sample_passes_total", &[]).unwrap_or(0.0) >= 1.0
            && names.contains("lockwatch_node_up")
            && names.contains("lockwatch_target_info")
    })
    .await;
    post_freeze(
        s.addr,
        &freeze_record("exported", "main", "wf", "frozen", wall_ms(), 8000),
    )
    .await;
    post_drill_result(s.addr, &drill_result("exported", "main", "wf", "r1", "safe")).await;
    let names = s.metrics().await.names();
    s.stop().await;
    names
}

/// Wall-clock ms now.
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A drill's record of freeze `id` (`pid:4242`, the thaw by hand named), as JSON.
pub fn freeze_record(id: &str, target: &str, namespace: &str, state: &str, since_ms: u64, for_ms: u64) -> String {
    serde_json::json!({
        "id": id, "target": target, "namespace": namespace, "state": state,
        "frozen": "pid:4242", "what": "process 4242 (python3 worker.py)",
        "since_ms": since_ms, "for_ms": for_ms, "at_ms": wall_ms(), "by": "drill",
        "thaw_by_hand": "lockwatch drill --thaw pid:4242",
    })
    .to_string()
}

/// `POST /api/v1/drills/freezes` of `body` as JSON, asserting the 204.
pub async fn post_freeze(addr: SocketAddr, body: &str) {
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/drills/freezes"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    assert_eq!(status, 204, "{}", resp.text().await.unwrap());
}

/// A drill's result record (`POST /api/v1/drills`) of drill `name`, run `run`, as JSON: a
/// freeze drill's, `verdict` and its document with only a title and a badge.
pub fn drill_result(name: &str, target: &str, namespace: &str, run: &str, verdict: &str) -> serde_json::Value {
    serde_json::json!({
        "name": name, "kind": "freeze", "target": target, "namespace": namespace,
        "run": run, "verdict": verdict, "ended_ms": wall_ms(), "exposure_ms": 0,
        "summary": "lock:payout:1: safe: noticed and stopped at once",
        "report": {"target": target, "namespace": namespace, "verdict": verdict},
        "document": {"title": "Freeze drill", "badge": {"word": verdict, "class": verdict},
            "lead": verdict, "facts": [], "sections": [], "tab": "Freeze drill"},
    })
}

/// `POST /api/v1/drills` of `body`, asserting the 201.
pub async fn post_drill_result(addr: SocketAddr, body: &serde_json::Value) {
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/drills"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    assert_eq!(status, 201, "{}", resp.text().await.unwrap());
}

/// A duration as lockwatch writes and reads them (`1s500ms`), read the way the config does.
pub fn duration(text: &str) -> Duration {
    let toml = format!(
        "[[target]]\nname = \"t\"\nurl = \"redis://127.0.0.1:1\"\n[[namespace]]\nname = \"n\"\npattern = \"n:*\"\nttl = \"{text}\"\n"
    );
    Config::from_toml(&toml, "t.toml", Path::new("."), &Overrides::default())
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .namespaces[0]
        .ttl
}

/// A finished command's stdout and stderr, one after the other.
pub fn output_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Each bucket of histogram `name` with `labels`: (le, count), in the exported order.
pub fn buckets(m: &Metrics, name: &str, labels: &[(&str, &str)]) -> Vec<(f64, f64)> {
    let bucket = format!("{name}_bucket");
    let found: Vec<(f64, f64)> = lockwatch::exposition::samples(&m.0)
        .filter(|s| s.name == bucket && s.has_labels(labels))
        .map(|s| {
            let le = s.label("le").unwrap();
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            (le, s.value)
        })
        .collect();
    assert!(found.len() > 10, "no buckets of {name}{labels:?} in:\n{}", m.0);
    found
}

/// The buckets `observed` (seconds) fill: for each exported bound, how many are at most it.
pub fn expected_buckets(bounds: &[(f64, f64)], observed: &[f64]) -> Vec<(f64, f64)> {
    bounds
        .iter()
        .map(|&(le, _)| (le, observed.iter().filter(|v| **v <= le).count() as f64))
        .collect()
}
