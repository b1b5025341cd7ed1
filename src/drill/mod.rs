//! `lockwatch drill`: the guided staging rehearsal of the stale-holder incident. Worker A
//! (a real child process) takes a lock with a fencing token and is SIGSTOPped past the TTL;
//! B takes the expired lock and writes; A wakes and its renew, release and fenced write must
//! all be refused, and lockwatch must have counted what happened.
//!
//! Keys: the lock `<prefix>drill-<run>-<n><suffix>` in the drill namespace, its fencing
//! counter by the namespace's `fence_pattern`, and the fenced resource
//! `lockwatch-drill:<run>:resource`. Rollback (always, Ctrl-C included) continues and ends
//! the worker and deletes exactly the keys of the run.

pub mod report;
pub mod worker;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use tokio::io::AsyncBufReadExt;

use self::report::{CounterCheck, Report, Step, SustainSummary};
use self::worker::{Request, Scripts, Worker, WorkerError};
use crate::access::scripts::{FENCED_WRITE, SAFE_RELEASE, SAFE_RENEW};
use crate::config::{Config, NamespaceConfig, TargetConfig};

/// How long past the TTL the drill waits for Redis to expire the key. B acquires as soon
/// as the key is gone, so the takeover falls inside the namespace's TTL window.
const EXPIRY_MARGIN: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct Options {
    pub config_path: PathBuf,
    pub namespace: String,
    pub target: Option<String>,
    pub exporter: Option<String>,
    pub prometheus: Option<String>,
    pub interactive: bool,
    pub release_script: Option<PathBuf>,
    pub renew_script: Option<PathBuf>,
    pub sustain: Option<Duration>,
    /// Cycles per minute in sustained mode.
    pub rate: u32,
    pub allow_production: bool,
    /// Redraw a countdown during the pause (a terminal); else one line.
    pub live_progress: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    /// Exit 2: the drill cannot run as asked.
    #[error("{0}")]
    Usage(String),
    #[error("target {target} is not reachable: {source}")]
    Unreachable { target: String, source: redis::RedisError },
    #[error("cannot read {path}: {source}")]
    Script { path: String, source: std::io::Error },
}

/// What the run touches.
struct Keys {
    lock: String,
    fence: String,
    resource: String,
}

struct Ctx<'a> {
    opts: &'a Options,
    target: &'a TargetConfig,
    ns: &'a NamespaceConfig,
    conn: MultiplexedConnection,
    worker: Option<Worker>,
    report: Report,
    started: Instant,
    http: reqwest::Client,
    /// Every key the run created, for the rollback.
    created: Vec<String>,
    scripts: Scripts,
    run_id: String,
}

/// Pre-flight checks that need no Redis: target, namespace, production guard, scripts.
fn choose<'a>(config: &'a Config, opts: &Options) -> Result<(&'a TargetConfig, &'a NamespaceConfig), DrillError> {
    let target = match &opts.target {
        Some(name) => config
            .targets
            .iter()
            .find(|t| &t.name == name)
            .ok_or_else(|| DrillError::Usage(format!("no target `{name}` in the config")))?,
        None if config.targets.len() == 1 => &config.targets[0],
        None => {
            return Err(DrillError::Usage(
                "the config has several targets: pick one with --target".into(),
            ));
        }
    };
    if target.environment.as_deref() == Some("production") && !opts.allow_production {
        return Err(DrillError::Usage(format!(
            "target {} is marked environment = \"production\": the drill pauses a lock holder and lets its lock expire; run it in staging, or pass --allow-production if you really mean it",
            target.name
        )));
    }
    let ns = config.namespace(&opts.namespace).ok_or_else(|| {
        DrillError::Usage(format!(
            "no namespace `{}` in the config: add one for the drill (e.g. pattern \"drill:lock:*\", fence_pattern \"drill:fence:*\", ttl \"3s\") or pass --namespace",
            opts.namespace
        ))
    })?;
    if ns.pattern.single_wildcard().is_none() {
        return Err(DrillError::Usage(format!(
            "namespace {}: the drill needs a pattern with one `*` (like \"drill:lock:*\") to put its keys under",
            ns.name
        )));
    }
    if ns.fence_pattern.as_ref().and_then(|f| f.single_wildcard()).is_none() {
        return Err(DrillError::Usage(format!(
            "namespace {} has no fence_pattern with one `*` (like \"drill:fence:*\"): the drill issues fencing tokens there, where lockwatch does not mistake them for locks",
            ns.name
        )));
    }
    if ns.ttl > Duration::from_secs(120) {
        return Err(DrillError::Usage(format!(
            "namespace {}: ttl {} would pause worker A for that long; use a drill namespace with a short ttl (a few seconds)",
            ns.name,
            crate::duration::format(ns.ttl)
        )));
    }
    Ok((target, ns))
}

fn load_script(path: &Option<PathBuf>, default: &str) -> Result<String, DrillError> {
    match path {
        None => Ok(default.to_string()),
        Some(p) => std::fs::read_to_string(p).map_err(|source| DrillError::Script {
            path: p.display().to_string(),
            source,
        }),
    }
}

/// Run the drill. `say` gets the live narration (stderr in the binary).
pub async fn run(config: &Config, opts: &Options, say: &mut (dyn std::io::Write + Send)) -> Result<Report, DrillError> {
    let (target, ns) = choose(config, opts)?;
    let scripts = Scripts {
        release: load_script(&opts.release_script, SAFE_RELEASE)?,
        renew: load_script(&opts.renew_script, SAFE_RENEW)?,
    };
    let conn = crate::access::connect::once(target)
        .await
        .map_err(|source| DrillError::Unreachable {
            target: target.name.clone(),
            source,
        })?;
    let run_id = format!("{:08x}", rand_id());
    let mut ctx = Ctx {
        opts,
        target,
        ns,
        conn,
        worker: None,
        report: Report {
            run_id: run_id.clone(),
            started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            target: target.name.clone(),
            namespace: ns.name.clone(),
            ..Report::default()
        },
        started: Instant::now(),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default(),
        created: Vec::new(),
        scripts,
        run_id,
    };
    preflight(&mut ctx, say).await;
    let outcome = tokio::select! {
        r = scenario(&mut ctx, say) => r,
        _ = tokio::signal::ctrl_c() => {
            let _ = writeln!(say, "\ninterrupted: rolling back");
            ctx.report.interrupted = true;
            Ok(())
        }
    };
    if let Err(e) = outcome {
        ctx.report.steps.push(Step {
            n: ctx.report.steps.len() + 1,
            title: "the drill itself".into(),
            at_ms: ctx.started.elapsed().as_millis() as u64,
            happened: e.to_string(),
            expected: "every step runs".into(),
            ok: false,
            check: vec![],
            consequence: Some("the scenario could not be completed".into()),
        });
    }
    rollback(&mut ctx, say).await;
    ctx.report.finish();
    Ok(ctx.report)
}

fn rand_id() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish() as u32
}

impl Ctx<'_> {
    fn keys(&self, n: u64) -> Keys {
        let (p, s) = self.ns.pattern.single_wildcard().unwrap_or_default();
        let id = format!("drill-{}-{n}", self.run_id);
        let lock = format!("{}{id}{}", String::from_utf8_lossy(&p), String::from_utf8_lossy(&s));
        let fence = self
            .ns
            .fence_map()
            .key_for(lock.as_bytes())
            .map(|k| String::from_utf8_lossy(&k).into_owned())
            .unwrap_or_else(|| format!("{lock}:fence"));
        Keys {
            resource: format!("lockwatch-drill:{}:{n}:resource", self.run_id),
            lock,
            fence,
        }
    }

    fn step(&mut self, say: &mut (dyn std::io::Write + Send), step: Step) {
        let _ = writeln!(
            say,
            "{} step {}: {}\n    happened: {}\n    expected: {}",
            if step.ok { "✓" } else { "✗" },
            step.n,
            step.title,
            step.happened,
            step.expected
        );
        if let Some(c) = &step.consequence {
            let _ = writeln!(say, "    DEVIATION: {c}");
        }
        for c in &step.check {
            let _ = writeln!(say, "    see it yourself: {c}");
        }
        self.report.steps.push(step);
    }

    fn new_step(&self, title: &str) -> Step {
        Step {
            n: self.report.steps.len() + 1,
            title: title.into(),
            at_ms: self.started.elapsed().as_millis() as u64,
            happened: String::new(),
            expected: String::new(),
            ok: true,
            check: vec![],
            consequence: None,
        }
    }

    fn cli(&self, args: &str) -> String {
        let host = self.target.display_url.as_str();
        format!("redis-cli -u '{host}' {args}")
    }

    /// In interactive mode: explain, then wait for Enter.
    async fn gate(&self, say: &mut (dyn std::io::Write + Send), explain: &str) {
        if !self.opts.interactive {
            return;
        }
        let _ = write!(say, "\nnext: {explain}\npress Enter to run it… ");
        let _ = say.flush();
        let mut line = String::new();
        let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
        let _ = stdin.read_line(&mut line).await;
    }
}

async fn preflight(ctx: &mut Ctx<'_>, say: &mut (dyn std::io::Write + Send)) {
    let mut found = vec![(
        "target".to_string(),
        format!(
            "{} ({}), environment {}",
            ctx.target.name,
            ctx.target.display_url,
            ctx.target.environment.as_deref().unwrap_or("not set")
        ),
    )];
    let notify: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query_async(&mut ctx.conn)
        .await;
    found.push((
        "keyspace notifications".into(),
        match notify {
            Ok(v) => {
                let flags = v.get(1).cloned().unwrap_or_default();
                let missing = crate::access::notify::missing_flags(
                    &flags,
                    &crate::access::notify::needed_flags(std::slice::from_ref(ctx.ns)),
                );
                if missing.is_empty() {
                    format!("on (\"{flags}\"): transitions and takeovers will be counted")
                } else {
                    format!("\"{flags}\" lacks {missing}: lockwatch will count no transitions or takeovers")
                }
            }
            Err(e) => format!("unknown ({e})"),
        },
    ));
    if let Some(url) = &ctx.opts.exporter {
        let ok = ctx
            .http
            .get(format!("{}/healthz", url.trim_end_matches('/')))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        found.push((
            "exporter".into(),
            if ok {
                format!("{url} answers: counters will be checked")
            } else {
                format!("{url} does not answer: counters cannot be checked")
            },
        ));
    }
    if let Some(url) = &ctx.opts.prometheus {
        let firing = lock_alerts(ctx, url).await;
        found.push((
            "prometheus".into(),
            match firing {
                Ok(a) if a.is_empty() => format!("{url} answers; no lock alert is pending or firing"),
                Ok(a) => format!(
                    "{url} answers; already active: {}",
                    a.iter()
                        .map(|(n, s)| format!("{n} ({s})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Err(e) => format!("{url}: {e}"),
            },
        ));
    }
    let keys = ctx.keys(1);
    ctx.report.lock_key = keys.lock.clone();
    let _ = writeln!(say, "lockwatch drill {}: stale holder", ctx.run_id);
    for (k, v) in &found {
        let _ = writeln!(say, "  {k}: {v}");
    }
    let ttl = crate::duration::format(ctx.ns.ttl);
    let _ = writeln!(
        say,
        "plan (namespace {ns}, ttl {ttl}, lock {lock}, fence {fence}, resource {res}):
  1. worker A (a child process) acquires with a fencing token
  2. B's acquire is refused while A holds
  3. A is frozen with SIGSTOP past the TTL; the key expires
  4. B acquires with a higher token   5. B writes to the fenced resource
  6-8. A is resumed (SIGCONT) and tries to renew, release and write with its old token: all must be refused
  9. B's lock and write are intact   then: lockwatch's counters, alert states, rollback",
        ns = ctx.ns.name,
        lock = keys.lock,
        fence = keys.fence,
        res = keys.resource
    );
    ctx.report.preflight = found;
}

/// Lock alerts pending or firing in Prometheus: (name, state).
async fn lock_alerts(ctx: &Ctx<'_>, url: &str) -> Result<Vec<(String, String)>, String> {
    let v: serde_json::Value = ctx
        .http
        .get(format!("{}/api/v1/alerts", url.trim_end_matches('/')))
        .send()
        .await
        .map_err(|e| format!("does not answer ({e})"))?
        .json()
        .await
        .map_err(|e| format!("bad answer ({e})"))?;
    let mut out: Vec<(String, String)> = v["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| {
            let name = a["labels"]["alertname"].as_str()?;
            name.starts_with("Lock")
                .then(|| (name.to_string(), a["state"].as_str().unwrap_or("").to_string()))
        })
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// The counters the scenario must move, and by how much.
fn expected_moves(ctx: &Ctx<'_>, takeovers: bool) -> Vec<(String, f64)> {
    let (ns, t) = (&ctx.ns.name, &ctx.target.name);
    let mut v = vec![
        (
            format!(r#"lockwatch_lock_events_total{{namespace="{ns}",op="renew",outcome="not_owned"}}"#),
            1.0,
        ),
        (
            format!(r#"lockwatch_lock_events_total{{namespace="{ns}",op="release",outcome="not_owned"}}"#),
            1.0,
        ),
        (
            format!(r#"lockwatch_lock_events_total{{namespace="{ns}",op="write",outcome="stale_fence"}}"#),
            1.0,
        ),
    ];
    if takeovers {
        v.push((
            format!(r#"lockwatch_lock_expiry_takeovers_total{{namespace="{ns}",target="{t}"}}"#),
            1.0,
        ));
        v.push((
            format!(r#"lockwatch_lock_transitions_total{{kind="acquired",namespace="{ns}",target="{t}"}}"#),
            2.0,
        ));
        v.push((
            format!(r#"lockwatch_lock_transitions_total{{kind="expired",namespace="{ns}",target="{t}"}}"#),
            1.0,
        ));
    }
    v
}

/// The value of `series` (name and labels as in the exposition, labels sorted) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

async fn scrape(ctx: &Ctx<'_>) -> Option<String> {
    let url = ctx.opts.exporter.as_ref()?;
    ctx.http
        .get(format!("{}/metrics", url.trim_end_matches('/')))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()
}

async fn scenario(ctx: &mut Ctx<'_>, say: &mut (dyn std::io::Write + Send)) -> Result<(), WorkerError> {
    let before = scrape(ctx).await;
    let watched = before
        .as_deref()
        .is_some_and(|t| t.contains("lockwatch_lock_expiry_takeovers_total{"));
    let mut args = vec![
        "-c".to_string(),
        ctx.opts.config_path.display().to_string(),
        "--target".into(),
        ctx.target.name.clone(),
        "--namespace".into(),
        ctx.ns.name.clone(),
    ];
    if let Some(e) = &ctx.opts.exporter {
        args.extend(["--exporter".into(), e.clone()]);
    }
    ctx.worker = Some(Worker::spawn(&args, &ctx.scripts).await?);
    stale_holder(ctx, say, 1, true).await?;
    if let Some(before) = before {
        let expected = expected_moves(ctx, watched);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut checks: Vec<CounterCheck>;
        loop {
            let now = scrape(ctx).await.unwrap_or_default();
            checks = expected
                .iter()
                .map(|(series, want)| {
                    let moved = sample(&now, series).unwrap_or(0.0) - sample(&before, series).unwrap_or(0.0);
                    CounterCheck {
                        series: series.clone(),
                        expected: *want,
                        moved,
                        ok: (moved - want).abs() < 1e-9,
                    }
                })
                .collect();
            if checks.iter().all(|c| c.ok) || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        for c in &checks {
            let _ = writeln!(
                say,
                "{} {} moved by {} (expected {})",
                if c.ok { "✓" } else { "✗" },
                c.series,
                c.moved,
                c.expected
            );
        }
        if !watched {
            let _ = writeln!(
                say,
                "  (transitions and takeovers not checked: the exporter does not watch this target's notifications)"
            );
        }
        ctx.report.counters = checks;
    }
    if let Some(d) = ctx.opts.sustain {
        sustain(ctx, say, d).await?;
    }
    if let Some(url) = ctx.opts.prometheus.clone() {
        match lock_alerts(ctx, &url).await {
            Ok(a) => {
                for (n, s) in &a {
                    let _ = writeln!(say, "alert {n}: {s}");
                }
                if a.is_empty() {
                    let _ = writeln!(
                        say,
                        "no lock alert pending or firing (one run is not a sustained ratio)"
                    );
                }
                ctx.report.alerts = a;
            }
            Err(e) => ctx.report.alerts = vec![("prometheus".into(), e)],
        }
    }
    Ok(())
}

/// One stale-holder cycle on the keys of `n`. With `narrate`, each step is recorded.
async fn stale_holder(
    ctx: &mut Ctx<'_>,
    say: &mut (dyn std::io::Write + Send),
    n: u64,
    narrate: bool,
) -> Result<(), WorkerError> {
    let keys = ctx.keys(n);
    let ttl_ms = ctx.ns.ttl.as_millis() as u64;
    let mut quiet = std::io::sink();
    macro_rules! record {
        ($step:expr) => {
            if narrate {
                ctx.step(say, $step)
            } else if !$step.ok {
                ctx.step(&mut quiet, $step)
            }
        };
    }
    for k in [&keys.lock, &keys.fence, &keys.resource] {
        ctx.created.push(k.clone());
    }
    if narrate {
        ctx.gate(
            say,
            "worker A takes the lock with SET NX PX and a fencing token from INCR",
        )
        .await;
    }
    let acquire = Request::Acquire {
        key: keys.lock.clone(),
        fence_key: keys.fence.clone(),
        owner: format!("A-{}", ctx.run_id),
        ttl_ms,
    };
    let a = worker(ctx)?.call(&acquire).await?;
    let token_a = a.token.clone().unwrap_or_default();
    let fence_a = a.fence.unwrap_or(0);
    let mut s = ctx.new_step("worker A acquires");
    s.happened = if a.ok {
        format!("A holds {} with fencing token {fence_a}", keys.lock)
    } else {
        format!("A's SET NX was refused ({})", a.error.unwrap_or_default())
    };
    s.expected = "SET NX PX succeeds: the lock was free".into();
    s.ok = a.ok;
    s.check = vec![
        ctx.cli(&format!("GET {}", keys.lock)),
        ctx.cli(&format!("PTTL {}", keys.lock)),
    ];
    record!(s);

    if narrate {
        ctx.gate(say, "B tries the same SET NX while A holds the lock").await;
    }
    let b_token_early = format!("B-{}-early", ctx.run_id);
    let refused: Option<String> = redis::cmd("SET")
        .arg(&keys.lock)
        .arg(&b_token_early)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms)
        .query_async(&mut ctx.conn)
        .await?;
    let mut s = ctx.new_step("B is refused while A holds");
    s.ok = refused.is_none();
    s.happened = if s.ok {
        "B's SET NX returned nil".into()
    } else {
        "B's SET NX succeeded while A held the lock".into()
    };
    s.expected = "nil: mutual exclusion holds".into();
    if !s.ok {
        s.consequence = Some("two holders at once without any stall: the lock is not exclusive".into());
    }
    record!(s);

    if narrate {
        ctx.gate(
            say,
            "A is frozen with SIGSTOP, as by a long GC pause, and stays frozen past the TTL",
        )
        .await;
    }
    worker(ctx)?.pause().await?;
    let until = Instant::now() + ctx.ns.ttl;
    if narrate && !ctx.opts.live_progress {
        let pid = worker(ctx)?.pid;
        let _ = writeln!(
            say,
            "    A paused (pid {pid}): the lock expires in {:.1}s",
            ctx.ns.ttl.as_secs_f64()
        );
    }
    while Instant::now() < until {
        if narrate && ctx.opts.live_progress {
            let left = until.saturating_duration_since(Instant::now());
            let _ = write!(
                say,
                "\r    A paused (pid {}): the lock expires in {:>5.1}s ",
                worker(ctx)?.pid,
                left.as_secs_f64()
            );
            let _ = say.flush();
        }
        tokio::time::sleep(Duration::from_millis(100).min(until.saturating_duration_since(Instant::now()))).await;
    }
    if narrate && ctx.opts.live_progress {
        let _ = writeln!(say);
    }
    // Redis expires a key at its deadline or a little after: wait for it to be gone.
    let give_up = Instant::now() + EXPIRY_MARGIN;
    let pttl = loop {
        let pttl: i64 = redis::cmd("PTTL").arg(&keys.lock).query_async(&mut ctx.conn).await?;
        if pttl == -2 || Instant::now() > give_up {
            break pttl;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let mut s = ctx.new_step("A is paused past the TTL; the key expires");
    s.ok = pttl == -2;
    s.happened = if s.ok {
        "PTTL is -2: Redis expired the key while A was frozen".into()
    } else {
        format!("PTTL is {pttl}: the key is still there")
    };
    s.expected = "PTTL -2 (no key)".into();
    s.check = vec![ctx.cli(&format!("PTTL {}", keys.lock))];
    if !s.ok {
        s.consequence = Some("the lock outlived its TTL: something renewed it, or it has no expiry".into());
    }
    record!(s);

    if narrate {
        ctx.gate(say, "B takes the expired lock with a new fencing token").await;
    }
    let fence_b: i64 = redis::cmd("INCR").arg(&keys.fence).query_async(&mut ctx.conn).await?;
    let token_b = format!("B-{}:{fence_b}", ctx.run_id);
    let got: Option<String> = redis::cmd("SET")
        .arg(&keys.lock)
        .arg(&token_b)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms * 4)
        .query_async(&mut ctx.conn)
        .await?;
    let mut s = ctx.new_step("B acquires with a higher token");
    s.ok = got.is_some() && fence_b > fence_a;
    s.happened = format!(
        "B's SET NX {}; fencing token {fence_b} (A had {fence_a})",
        if got.is_some() { "succeeded" } else { "was refused" }
    );
    s.expected = "B holds the lock with a higher token".into();
    s.check = vec![
        ctx.cli(&format!("GET {}", keys.lock)),
        ctx.cli(&format!("GET {}", keys.fence)),
    ];
    record!(s);

    let b_value = format!("written by B with token {fence_b}");
    let wrote: i64 = redis::Script::new(FENCED_WRITE)
        .key(&keys.resource)
        .arg(fence_b)
        .arg(&b_value)
        .invoke_async(&mut ctx.conn)
        .await?;
    let mut s = ctx.new_step("B writes to the fenced resource");
    s.ok = wrote == 1;
    s.happened = format!(
        "compare-token write with {fence_b}: {}",
        if s.ok { "accepted" } else { "refused" }
    );
    s.expected = "accepted".into();
    s.check = vec![ctx.cli(&format!("HGETALL {}", keys.resource))];
    record!(s);

    if narrate {
        ctx.gate(
            say,
            "A is resumed with SIGCONT; it still believes it holds the lock and tries to renew it",
        )
        .await;
    }
    worker(ctx)?.resume()?;
    let renew = Request::Renew {
        key: keys.lock.clone(),
        token: token_a.clone(),
        ttl_ms,
    };
    let s = refused_step(
        ctx,
        &renew,
        "A wakes and tries to renew",
        "renewal",
        "refused: A no longer owns the lock".into(),
        "the renew script extends a lock it does not own (a PEXPIRE without an owner check): B's lock now expires on A's schedule, and A goes on believing it holds it",
    )
    .await?;
    record!(s);
    let release = Request::Release {
        key: keys.lock.clone(),
        token: token_a.clone(),
    };
    let s = refused_step(
        ctx,
        &release,
        "A tries to release",
        "release",
        "refused: compare-and-delete sees B's token".into(),
        "the release script deletes a lock it does not own (a plain DEL, no token comparison): B's lock is gone while B works, and a third worker can take it",
    )
    .await?;
    record!(s);
    let write = Request::Write {
        resource: keys.resource.clone(),
        fence: fence_a,
        value: format!("written by A with token {fence_a}"),
    };
    let s = refused_step(
        ctx,
        &write,
        "A writes with its old token",
        "write",
        format!("refused: the resource has seen token {fence_b} > {fence_a}"),
        "the resource accepted a stale token: fencing is not enforced",
    )
    .await?;
    record!(s);

    let holder: Option<String> = redis::cmd("GET").arg(&keys.lock).query_async(&mut ctx.conn).await?;
    let pttl: i64 = redis::cmd("PTTL").arg(&keys.lock).query_async(&mut ctx.conn).await?;
    let value: Option<String> = redis::cmd("HGET")
        .arg(&keys.resource)
        .arg("value")
        .query_async(&mut ctx.conn)
        .await?;
    let mut s = ctx.new_step("B's lock and write are intact");
    s.ok = holder.as_deref() == Some(token_b.as_str()) && pttl > 0 && value.as_deref() == Some(b_value.as_str());
    s.happened = format!(
        "lock holder {}, PTTL {pttl} ms, resource \"{}\"",
        if holder.as_deref() == Some(token_b.as_str()) {
            "is B"
        } else if holder.is_none() {
            "NONE"
        } else {
            "is not B"
        },
        value.unwrap_or_default()
    );
    s.expected = "B holds the lock with time left, and the resource has B's write".into();
    s.check = vec![
        ctx.cli(&format!("GET {}", keys.lock)),
        ctx.cli(&format!("HGETALL {}", keys.resource)),
    ];
    if !s.ok {
        s.consequence = Some("the stale holder damaged the new holder's lock or data".into());
    }
    record!(s);
    // B is done: it releases its lock the safe way.
    let _: i64 = redis::Script::new(SAFE_RELEASE)
        .key(&keys.lock)
        .arg(&token_b)
        .invoke_async(&mut ctx.conn)
        .await?;
    Ok(())
}

/// One of A's stale operations, which Redis must refuse.
async fn refused_step(
    ctx: &mut Ctx<'_>,
    req: &Request,
    title: &str,
    what: &str,
    expected: String,
    consequence: &str,
) -> Result<Step, WorkerError> {
    let reply = worker(ctx)?.call(req).await?;
    let mut s = ctx.new_step(title);
    s.ok = !reply.ok && reply.error.is_none();
    s.happened = match (&reply.error, reply.ok) {
        (Some(e), _) => format!("A's {what} failed to run: {e}"),
        (None, true) => format!("A's {what} was ACCEPTED"),
        (None, false) => format!("refused{}", reported(&reply.reported)),
    };
    s.expected = expected;
    if reply.ok {
        s.consequence = Some(consequence.into());
    }
    Ok(s)
}

fn reported(r: &Option<String>) -> String {
    r.as_ref()
        .map(|r| format!("; A reported {r} to the exporter"))
        .unwrap_or_default()
}

fn worker<'w>(ctx: &'w mut Ctx<'_>) -> Result<&'w mut Worker, WorkerError> {
    ctx.worker
        .as_mut()
        .ok_or_else(|| WorkerError::Reply("worker A is not running".into()))
}

/// Repeat stale-holder cycles for `d` at `rate` per minute, watching the ratio alert.
async fn sustain(ctx: &mut Ctx<'_>, say: &mut (dyn std::io::Write + Send), d: Duration) -> Result<(), WorkerError> {
    let started = Instant::now();
    let every = Duration::from_secs(60) / ctx.opts.rate.max(1);
    let mut summary = SustainSummary::default();
    let mut n = 1;
    while started.elapsed() < d {
        let cycle = Instant::now();
        n += 1;
        stale_holder(ctx, say, n, false).await?;
        summary.cycles += 1;
        if let Some(url) = ctx.opts.prometheus.clone()
            && let Ok(alerts) = lock_alerts(ctx, &url).await
        {
            let at = started.elapsed().as_secs_f64();
            for (_, state) in alerts.iter().filter(|(a, _)| a == "LockNotOwnedRatioHigh") {
                if summary.pending_after_s.is_none() {
                    summary.pending_after_s = Some(at);
                }
                if state == "firing" && summary.firing_after_s.is_none() {
                    summary.firing_after_s = Some(at);
                }
            }
        }
        if ctx.opts.live_progress {
            let _ = write!(
                say,
                "\r  sustained: {} cycles in {:.0}s of {:.0}s ",
                summary.cycles,
                started.elapsed().as_secs_f64(),
                d.as_secs_f64()
            );
            let _ = say.flush();
        }
        tokio::time::sleep(every.saturating_sub(cycle.elapsed())).await;
    }
    let _ = writeln!(
        say,
        "\n  sustained: {} cycles in {:.0}s",
        summary.cycles,
        started.elapsed().as_secs_f64()
    );
    summary.seconds = started.elapsed().as_secs_f64();
    ctx.report.cycles = Some(summary);
    Ok(())
}

/// Continue and end worker A, delete exactly the run's keys. Runs whatever happened.
async fn rollback(ctx: &mut Ctx<'_>, say: &mut (dyn std::io::Write + Send)) {
    if let Some(w) = ctx.worker.take() {
        let pid = w.pid;
        let ended = w.end().await;
        ctx.report.rollback.push(match ended {
            Ok(()) => format!("worker A (pid {pid}) continued and ended"),
            Err(e) => format!("worker A (pid {pid}): {e}"),
        });
    }
    let mut keys = std::mem::take(&mut ctx.created);
    keys.sort();
    keys.dedup();
    if !keys.is_empty() {
        let deleted: redis::RedisResult<i64> = redis::cmd("DEL").arg(&keys).query_async(&mut ctx.conn).await;
        ctx.report.rollback.push(match deleted {
            Ok(n) => format!(
                "deleted {n} of the run's {} keys (the others were gone already)",
                keys.len()
            ),
            Err(e) => format!("could not delete the run's keys ({e}): {}", keys.join(" ")),
        });
    }
    for r in &ctx.report.rollback {
        let _ = writeln!(say, "rollback: {r}");
    }
}

/// `lockwatch drill-worker`: the child side, until stdin closes.
pub async fn worker_main(
    config: &Config,
    target: &str,
    namespace: String,
    exporter: Option<String>,
) -> std::io::Result<()> {
    let t = config
        .targets
        .iter()
        .find(|t| t.name == target)
        .ok_or_else(|| std::io::Error::other(format!("no target {target}")))?;
    let conn = crate::access::connect::once(t).await.map_err(std::io::Error::other)?;
    let token = config.server.push_token.as_ref().map(|t| t.expose().to_string());
    worker::serve(conn, namespace, exporter, token).await
}
