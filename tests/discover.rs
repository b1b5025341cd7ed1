//! `lockwatch discover` (the binary) against real redis-servers: a keyspace of cache
//! entries, sessions, counters and locks written by real clients (redis-py's `Lock`, npm
//! `redlock`, Redisson's own acquire script by EVAL) judged pattern by pattern, never a value
//! printed, nothing but reads sent, the config it prints accepted by `check-config`; a
//! 1,000,000-key keyspace walked within the stated budget; exit codes.
//!
//! The clients come from `scripts/setup.sh test` (target/test-tools); without them the test
//! fails saying so.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{conn, output_text, redis};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");

fn tools() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-tools")
}

fn discover(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("discover")
        .args(args)
        .env_remove("LOCKWATCH_REDIS_PASSWORD")
        .output()
        .unwrap()
}

/// The lock clients' TTLs set again just before a sample: a slow machine between their
/// writes and the sample must not shave a second off the estimate (29s for 30s, seen on a
/// loaded machine).
fn refresh_ttls(c: &mut redis::Connection) {
    for (pattern, ttl) in [
        ("billing:lock:*", 30_000),
        ("payments:{acct:*}:lock", 30_000),
        ("inventory:lock:sku-*", 20_000),
    ] {
        let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(c).unwrap();
        for k in keys {
            let _: i64 = redis::cmd("PEXPIRE").arg(&k).arg(ttl).query(c).unwrap();
        }
    }
}

fn run_client(mut cmd: Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{what}: {e}: run `scripts/setup.sh test` (or `make test`) to install the lock clients")
    });
    assert!(out.status.success(), "{what}: {}", output_text(&out));
}

/// redis-py's `Lock` (tokens: uuid1 hex), held with a 30 s timeout, fencing counters beside.
const PYTHON: &str = r#"
import sys, redis
r = redis.Redis.from_url(sys.argv[1])
for i in range(40):
    assert r.lock(f"billing:lock:{i}", timeout=30).acquire(blocking=False)
    r.incr(f"billing:fence:{i}")
for i in range(60):
    r.set(f"cache:product:{i}", '{"name": "widget", "price": 12.5}', ex=300)
    r.set(f"session:{i:04d}{'ab' * 14}", '{"user": %d, "cart": []}' % i, ex=1800)
    r.incr(f"ratelimit:user:{i}:29301"); r.expire(f"ratelimit:user:{i}:29301", 60)
    r.incr(f"stats:views:{i}")
"#;

/// npm redlock over ioredis: 25 locks of 20 s, left held.
const NODE: &str = r#"
const Redis = require('ioredis');
const { default: Redlock } = require('redlock');
(async () => {
  const client = new Redis(process.argv[1]);
  const rl = new Redlock([client], { retryCount: 0 });
  for (let i = 0; i < 25; i++) await rl.acquire([`inventory:lock:sku-${1000 + i}`], 20000);
  await client.quit();
})().catch((e) => { console.error(e); process.exit(1); });
"#;

/// Redisson's `RedissonLock.tryLockInnerAsync` script (3.x), as it sends it.
const REDISSON_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
    return redis.call('pttl', KEYS[1]);";

#[test]
fn finds_the_locks_real_clients_wrote_and_says_why_the_rest_are_not() {
    let r = redis(&[]);
    let url = r.url();
    // The TTL discover tells is the longest PTTL seen, rounded up to the second: the
    // locks must be read within a second of being taken. node starts slowly on a busy
    // machine, python quickly: node's locks first, so neither waits for the other's start.
    let mut node = Command::new("node");
    node.args(["-e", NODE, &url])
        .env("NODE_PATH", tools().join("node/node_modules"));
    run_client(node, "redlock (npm redlock and ioredis in target/test-tools/node)");
    let python = tools().join("venv/bin/python");
    let mut py = Command::new(&python);
    py.args(["-c", PYTHON, &url]);
    run_client(py, "redis-py (PyPI redis in target/test-tools/venv)");
    let mut c = conn(&r);
    for i in 0..30 {
        let _: Option<i64> = redis::cmd("EVAL")
            .arg(REDISSON_LOCK)
            .arg(1)
            .arg(format!("payments:{{acct:{i}}}:lock"))
            .arg(30_000)
            .arg(format!("8743c9c0-0795-4907-87fd-6c719a6b4586:{}", 40 + i))
            .query(&mut c)
            .unwrap();
    }
    let values: Vec<String> = [
        "billing:lock:3",
        "inventory:lock:sku-1003",
        "session:0003abababababababababababababab",
    ]
    .iter()
    .map(|k| redis::cmd("GET").arg(k).query::<String>(&mut c).unwrap())
    .collect();
    refresh_ttls(&mut c);
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();

    let out = discover(&["--url", &url, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let patterns = report["patterns"].as_array().unwrap();
    let find = |p: &str| {
        patterns
            .iter()
            .find(|x| x["pattern"] == p)
            .unwrap_or_else(|| panic!("no {p}: {report:#}"))
    };
    let locks: Vec<&str> = patterns
        .iter()
        .filter(|p| p["verdict"] == "lock")
        .map(|p| p["pattern"].as_str().unwrap())
        .collect();
    assert_eq!(
        locks,
        ["billing:lock:*", "payments:{acct:*}:lock", "inventory:lock:sku-*"],
        "{report:#}"
    );
    let ns = |p: &str| find(p)["namespace"].clone();
    assert_eq!(ns("billing:lock:*")["ttl"], "30s");
    assert_eq!(ns("billing:lock:*")["fence_pattern"], "billing:fence:*");
    assert_eq!(find("billing:lock:*")["shapes"][0]["shape"], "hex");
    assert_eq!(ns("inventory:lock:sku-*")["ttl"], "20s");
    assert_eq!(ns("payments:{acct:*}:lock")["value"], "redisson");
    assert_eq!(ns("payments:{acct:*}:lock")["ttl"], "30s");
    assert_eq!(find("billing:fence:*")["verdict"], "fence_counter");
    for (p, why) in [
        ("cache:product:*", "cache entries"),
        ("session:*", "sessions"),
        ("ratelimit:user:*:*", "rate-limit"),
        ("stats:views:*", "counters"),
    ] {
        assert_eq!(find(p)["verdict"], "not_a_lock", "{p}");
        assert!(
            find(p)["reason"].as_str().unwrap().contains(why),
            "{p}: {}",
            find(p)["reason"]
        );
    }
    assert_eq!(report["walked"]["keys_read"], 40 * 2 + 60 * 4 + 25 + 30);
    assert_eq!(report["walked"]["complete"], true);

    // Read-only, and no KEYS: only these commands reached the server.
    let stats: String = redis::cmd("INFO").arg("commandstats").query(&mut c).unwrap();
    // Before 7.0 the stats name commands without their subcommands: the test's own CONFIG
    // RESETSTAT is `config`, the client library's CLIENT SETINFO `client`.
    let whole = !stats.contains("cmdstat_config|resetstat");
    let ours: &[&str] = if whole {
        &["config", "info"]
    } else {
        &["config|resetstat", "info"]
    };
    let sent: Vec<&str> = stats
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_")?.split(':').next())
        .filter(|cmd| !ours.contains(cmd))
        .collect();
    let setinfo = if whole { "client" } else { "client|setinfo" };
    let reads = [
        "scan", "dbsize", "type", "pttl", "getrange", "hlen", "hscan", "exists", setinfo, "hello", "ping",
    ];
    assert!(sent.iter().all(|s| reads.contains(s)), "sent {sent:?}");

    // Text: every pattern with its reason, no value; the TOML alone is a config part.
    refresh_ttls(&mut c);
    let text = discover(&["--url", &url]);
    let shown = String::from_utf8(text.stdout).unwrap();
    for expect in [
        "Locks",
        "Fencing counters",
        "Not locks",
        "sessions",
        "fence_pattern = \"billing:fence:*\"",
    ] {
        assert!(shown.contains(expect), "{expect} missing:\n{shown}");
    }
    for v in &values {
        assert!(
            !shown.contains(v.as_str()) && !String::from_utf8_lossy(&out.stdout).contains(v.as_str()),
            "a value was printed"
        );
    }
    refresh_ttls(&mut c);
    let toml = discover(&["--url", &url, "--format", "toml"]);
    let toml = String::from_utf8(toml.stdout).unwrap();
    assert_eq!(toml.matches("[[namespace]]").count(), 3, "{toml}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lockwatch.toml");
    std::fs::write(&file, format!("[[target]]\nname = \"main\"\nurl = \"{url}\"\n{toml}")).unwrap();
    let checked = Command::new(BIN)
        .args(["check-config", "-c"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(checked.status.code(), Some(0), "{}\n{toml}", output_text(&checked));

    // The documented read-only ACL is enough (`~*` on 6.2, which has no `%R~`).
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "finder",
            "on",
            ">pw",
            "resetkeys",
            &common::key_rule("*"),
            "-@all",
        ])
        .arg(&[
            "+scan",
            "+dbsize",
            "+type",
            "+pttl",
            "+getrange",
            "+hlen",
            "+hscan",
            "+exists",
        ])
        .query(&mut c)
        .unwrap();
    refresh_ttls(&mut c);
    let limited = discover(&[
        "--url",
        &format!("redis://finder:pw@127.0.0.1:{}/0", r.port()),
        "--format",
        "toml",
    ]);
    assert_eq!(
        String::from_utf8(limited.stdout).unwrap(),
        toml,
        "{}",
        String::from_utf8_lossy(&limited.stderr)
    );

    // The same through -c and --target.
    refresh_ttls(&mut c);
    let by_config = discover(&["-c", file.to_str().unwrap(), "--target", "main", "--format", "toml"]);
    assert_eq!(String::from_utf8(by_config.stdout).unwrap(), toml);
}

#[test]
fn a_million_keys_walked_within_the_budget() {
    let r = redis(common::debug_args());
    let mut c = conn(&r);
    let _: () = redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(1_000_000)
        .arg("item")
        .query(&mut c)
        .unwrap();
    for i in 0..2000 {
        let _: () = redis::cmd("SET")
            .arg(format!("jobs:lock:{i}"))
            .arg(format!("{:032x}", i * 7919))
            .arg("PX")
            .arg(60_000)
            .query(&mut c)
            .unwrap();
    }
    // A sample under a budget well below what the walk can do: 40,000 keys at 10,000
    // keys/s take 4 s, never less (the budget); the upper bound only catches a walk that
    // stalls, with room for a loaded CI machine.
    let started = Instant::now();
    let out = discover(&[
        "--url",
        &r.url(),
        "--rate",
        "10000",
        "--max-keys",
        "40000",
        "--format",
        "json",
    ]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let walked = &report["walked"];
    let scanned = walked["keys_scanned"].as_u64().unwrap();
    assert!((40_000..40_000 + 500).contains(&scanned), "{walked}");
    assert_eq!(walked["complete"], false);
    eprintln!("sample: {scanned} keys in {took:?} at a budget of 10,000 keys/s");
    assert!(took >= Duration::from_secs(4), "{took:?}: faster than 10,000 keys/s");
    assert!(took < Duration::from_secs(20), "{took:?}");
    // The whole keyspace at 250,000 keys/s: at least 4 s; the lock family found.
    let started = Instant::now();
    let out = discover(&[
        "--url",
        &r.url(),
        "--rate",
        "250000",
        "--max-keys",
        "2000000",
        "--format",
        "json",
    ]);
    let took = started.elapsed();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let walked = &report["walked"];
    assert_eq!(walked["complete"], true, "{walked}");
    let scanned = walked["keys_scanned"].as_u64().unwrap();
    assert!(scanned >= 1_002_000, "{walked}");
    let rate = scanned as f64 / took.as_secs_f64();
    eprintln!("1,002,000 keys: {scanned} scanned in {took:?}: {rate:.0} keys/s (budget 250,000 keys/s)");
    assert!(rate <= 250_000.0 * 1.01, "{rate} keys/s");
    assert!(took < Duration::from_secs(60), "{took:?}");
    let lock = report["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pattern"] == "jobs:lock:*")
        .unwrap();
    assert_eq!(
        (lock["verdict"].as_str(), lock["keys"].as_u64()),
        (Some("lock"), Some(2000))
    );
    let item = report["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pattern"] == "item:*")
        .unwrap();
    assert_eq!(item["verdict"], "not_a_lock");
}

#[test]
fn errors_are_one_sentence_with_their_exit_code() {
    let bad = discover(&["--url", "http://example.com"]);
    assert_eq!(bad.status.code(), Some(2), "{}", output_text(&bad));
    let port = lockwatch::access::child::free_port().unwrap();
    let refused = discover(&["--url", &format!("redis://127.0.0.1:{port}")]);
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8(refused.stderr).unwrap();
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(
        said.contains("cannot read Redis at") && said.contains("refused"),
        "{said}"
    );
    let r = redis(&["--requirepass", "s3cret"]);
    let denied = discover(&["--url", &format!("redis://:wrong@127.0.0.1:{}", r.port())]);
    assert_eq!(denied.status.code(), Some(1));
    let said = String::from_utf8(denied.stderr).unwrap();
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(!said.contains("wrong"), "the password was printed: {said}");
    let neither = discover(&[]);
    assert_eq!(neither.status.code(), Some(2));
}

/// A real 3 + 3 Redis Cluster through `-c` and `--target`: every primary walked, the
/// total budget shared among them.
#[test]
fn a_cluster_is_walked_on_every_primary() {
    let cluster = common::topo::Cluster::start();
    let mut c = cluster.client();
    for i in 0..90 {
        let _: () = redis::cmd("SET")
            .arg(format!("orders:lock:{i}"))
            .arg(format!("{:032x}", i * 104_729))
            .arg("PX")
            .arg(30_000)
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(format!("cache:page:{i}"))
            .arg("<html>a cached page</html>")
            .arg("EX")
            .arg(600)
            .query(&mut c)
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    let text = format!(
        "[[target]]\nname = \"other\"\nurl = \"redis://127.0.0.1:1\"\n[[target]]\nname = \"c\"\nmode = \"cluster\"\nnodes = [\"{}\"]\n",
        cluster.seed()
    );
    std::fs::write(&file, text).unwrap();
    let cfg = file.to_str().unwrap();
    let out = discover(&["-c", cfg, "--target", "c", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["walked"]["primaries"], 3, "{report:#}");
    assert_eq!(report["walked"]["keys_read"], 180);
    let lock = report["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pattern"] == "orders:lock:*")
        .unwrap();
    assert_eq!(
        (&lock["verdict"], &lock["keys"], &lock["namespace"]["ttl"]),
        (&"lock".into(), &90.into(), &"30s".into())
    );
    let sample = discover(&["-c", cfg, "--target", "c", "--max-keys", "60", "--format", "json"]);
    let report: Value = serde_json::from_slice(&sample.stdout).unwrap();
    let scanned = report["walked"]["keys_scanned"].as_u64().unwrap();
    assert!((60..=75).contains(&scanned), "{report:#}");
    let which = discover(&["-c", cfg]);
    assert_eq!(which.status.code(), Some(2), "two targets and no --target");
}
