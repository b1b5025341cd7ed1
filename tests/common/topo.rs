//! Real topologies for tests: a Redis Cluster of 3 primaries and 3 replicas made with
//! `redis-cli --cluster create`, and a Sentinel group (1 primary, 1 replica, 3 sentinels).
//! The servers are `LOCKWATCH_REDIS_SERVER`'s (else Debian's); the sentinels
//! `LOCKWATCH_REDIS_SENTINEL`, else that server with `--sentinel`, else Debian's
//! `redis-sentinel`; `redis-cli` is `LOCKWATCH_REDIS_CLI`, else Debian's.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lockwatch::access::child::{RedisChild, free_port};

/// Keyspace notifications every node has, replicas included (a replica can become primary).
pub const NOTIFY: &[&str] = &["--notify-keyspace-events", "KEA"];

/// What makes a node a cluster node here: its config file, a short node timeout.
pub const CLUSTER_NODE: &[&str] = &[
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "2000",
];

pub struct Cluster {
    pub nodes: Vec<RedisChild>,
    /// The nodes' TLS ports, for a cluster that speaks TLS (`start_tls`).
    pub tls_ports: Vec<u16>,
}

fn cli(args: &[&str]) -> std::process::Output {
    let bin = super::require_override("LOCKWATCH_REDIS_CLI")
        .unwrap_or_else(|| super::require_binary("redis-cli", "redis-tools"));
    Command::new(bin).args(args).output().unwrap()
}

/// The sentinel command: `LOCKWATCH_REDIS_SENTINEL`; else the server the tests run
/// (`LOCKWATCH_REDIS_SERVER`) in sentinel mode, as a Valkey build, whose sentinel is
/// `valkey-server --sentinel`, needs; else Debian's `redis-sentinel`.
fn sentinel_command() -> (std::path::PathBuf, Option<&'static str>) {
    if let Some(bin) = super::require_override("LOCKWATCH_REDIS_SENTINEL") {
        return (bin, None);
    }
    match super::require_override("LOCKWATCH_REDIS_SERVER") {
        Some(server) => (server, Some("--sentinel")),
        None => (super::require_binary("redis-sentinel", "redis-sentinel"), None),
    }
}

/// `redis-cli -p port <args>`, its stdout.
pub fn cli_at(port: u16, args: &[&str]) -> String {
    let p = port.to_string();
    let mut all = vec!["-p", p.as_str()];
    all.extend_from_slice(args);
    let out = cli(&all);
    String::from_utf8_lossy(&out.stdout).to_string()
}

impl Cluster {
    /// 3 primaries with 1 replica each, every slot covered, the cluster state ok.
    pub fn start() -> Cluster {
        Cluster::start_with(None, 1)
    }

    /// 3 primaries and no replica: for resharding, whose every slot move Valkey 8+ makes
    /// wait for the replicas (`NOREPLICAS` after 2 s on a loaded machine).
    pub fn start_primaries() -> Cluster {
        Cluster::start_with(None, 0)
    }

    /// The same cluster speaking TLS everywhere (clients, cluster bus, replication) with
    /// `pki`'s `node` certificate, created over TLS; each node keeps a plain port for the
    /// harness's own checks.
    pub fn start_tls(pki: &super::pki::Pki) -> Cluster {
        Cluster::start_with(Some(pki), 1)
    }

    fn start_with(pki: Option<&super::pki::Pki>, replicas: usize) -> Cluster {
        let mut nodes = Vec::new();
        let mut tls_ports = Vec::new();
        let files = pki.map(|p| (p.path("node.pem"), p.path("node.key"), p.path("ca.pem")));
        for _ in 0..3 * (1 + replicas) {
            let tls_port = free_port().unwrap().to_string();
            let mut args = CLUSTER_NODE.to_vec();
            args.extend(["--cluster-require-full-coverage", "no"]);
            args.extend_from_slice(NOTIFY);
            if let Some((pem, key, ca)) = &files {
                args.extend(["--tls-port", &tls_port, "--tls-cert-file", pem, "--tls-key-file", key]);
                args.extend(["--tls-ca-cert-file", ca, "--tls-auth-clients", "no"]);
                args.extend(["--tls-cluster", "yes", "--tls-replication", "yes"]);
                tls_ports.push(tls_port.parse::<u16>().unwrap());
            }
            nodes.push(super::redis(&args));
        }
        let ports: Vec<u16> = match files {
            Some(_) => tls_ports.clone(),
            None => nodes.iter().map(RedisChild::port).collect(),
        };
        let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let mut args: Vec<&str> = Vec::new();
        if let Some((_, _, ca)) = &files {
            args.extend(["--tls", "--cacert", ca]);
        }
        args.extend(["--cluster", "create"]);
        args.extend(addrs.iter().map(String::as_str));
        let per_primary = replicas.to_string();
        args.extend(["--cluster-replicas", per_primary.as_str(), "--cluster-yes"]);
        let out = cli(&args);
        assert!(out.status.success(), "cluster create: {}", super::output_text(&out));
        let c = Cluster { nodes, tls_ports };
        c.wait_ok(Duration::from_secs(30));
        c
    }

    /// Whether the nodes answer `CLUSTER SHARDS` (Redis 7.0 on, Valkey); before, lockwatch
    /// reads `CLUSTER SLOTS`, which lists no failed node.
    pub fn has_shards(&self) -> bool {
        let n = self.nodes.iter().find(|n| n.pid().is_some()).unwrap();
        let answer = cli_at(n.port(), &["cluster", "shards"]);
        !answer.trim().is_empty() && !answer.starts_with("ERR")
    }

    pub fn seed(&self) -> String {
        self.nodes[0].url()
    }

    /// Wait until every running node says `cluster_state:ok` and sees 3 primaries serving
    /// slots and a replica for each of them that runs.
    pub fn wait_ok(&self, limit: Duration) {
        let started = Instant::now();
        let running = self.nodes.iter().filter(|n| n.pid().is_some()).count();
        loop {
            let ok = self.nodes.iter().filter(|n| n.pid().is_some()).all(|n| {
                let nodes = cli_at(n.port(), &["cluster", "nodes"]);
                let replicas = nodes
                    .lines()
                    .filter(|l| l.contains("slave") && !l.contains("fail"))
                    .count();
                cli_at(n.port(), &["cluster", "info"]).contains("cluster_state:ok") && replicas == running - 3
            });
            if ok && self.primaries().len() == 3 {
                return;
            }
            assert!(started.elapsed() < limit, "cluster not ok after {limit:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Ports of the primaries that serve slots, as a running node sees them.
    pub fn primaries(&self) -> Vec<u16> {
        self.lines()
            .iter()
            .filter(|l| l[2].contains("master") && !l[2].contains("fail") && l.len() > 8)
            .map(|l| port_of(&l[1]))
            .collect()
    }

    /// Ports of the replicas, with the port of their primary.
    pub fn replicas(&self) -> Vec<(u16, u16)> {
        let lines = self.lines();
        lines
            .iter()
            .filter(|l| l[2].contains("slave") && !l[2].contains("fail"))
            .filter_map(|l| {
                let primary = lines.iter().find(|p| p[0] == l[3])?;
                Some((port_of(&l[1]), port_of(&primary[1])))
            })
            .collect()
    }

    /// The node id of the node on `port`.
    pub fn id(&self, port: u16) -> String {
        self.lines().iter().find(|l| port_of(&l[1]) == port).unwrap()[0].clone()
    }

    fn lines(&self) -> Vec<Vec<String>> {
        let n = self.nodes.iter().find(|n| n.pid().is_some()).unwrap();
        cli_at(n.port(), &["cluster", "nodes"])
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
            .filter(|l| l.len() >= 8)
            .collect()
    }

    pub fn node(&mut self, port: u16) -> &mut RedisChild {
        self.nodes.iter_mut().find(|n| n.port() == port).unwrap()
    }

    /// A client that follows the cluster's redirections.
    pub fn client(&self) -> redis::cluster::ClusterConnection {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.pid().is_some())
            .map(|n| n.url())
            .collect();
        redis::cluster::ClusterClient::new(seeds)
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// Every node's `cluster-node-timeout` set to `ms`: a test that loads the machine keeps
    /// its primaries (the 2 s of `CLUSTER_NODE` are for the failover tests).
    pub fn node_timeout(&self, ms: u32) {
        let ms = ms.to_string();
        for n in self.nodes.iter().filter(|n| n.pid().is_some()) {
            let said = cli_at(n.port(), &["config", "set", "cluster-node-timeout", &ms]);
            assert_eq!(said.trim(), "OK", "CONFIG SET cluster-node-timeout on {}", n.port());
        }
    }

    /// `redis-cli --cluster reshard`: move `slots` slots from `from` to `to` (node ports),
    /// once the nodes agree about the slots and none is open (after a reshard, gossip takes
    /// a moment; before, redis-cli refuses). Valkey 8+ waits for the replicas to take each
    /// slot's new owner and answers `NOREPLICAS` after 2 s (a loaded machine): the slot left
    /// open is closed with `redis-cli --cluster fix` and the rest moved, up to 3 times.
    pub fn reshard(&self, from: u16, to: u16, slots: u32) -> std::process::Output {
        let (from_id, to_id) = (self.id(from), self.id(to));
        let had = self.slots_of(&to_id);
        let mut attempt = 0;
        loop {
            self.settle(from);
            let moved = self.slots_of(&to_id).saturating_sub(had);
            let n = slots.saturating_sub(moved).to_string();
            let seed = format!("127.0.0.1:{from}");
            let out = cli(&[
                "--cluster",
                "reshard",
                &seed,
                "--cluster-from",
                &from_id,
                "--cluster-to",
                &to_id,
                "--cluster-slots",
                &n,
                "--cluster-yes",
                "--cluster-pipeline",
                "10",
            ]);
            attempt += 1;
            let said = super::output_text(&out);
            let open = said.contains("NOREPLICAS") || said.contains("fix your cluster problems");
            if out.status.success() || attempt == 3 || !open {
                return out;
            }
            eprintln!("reshard: a slot was left open (NOREPLICAS); fixing the cluster and moving the rest");
            let fixed = cli(&["--cluster", "fix", &seed, "--cluster-yes"]);
            eprintln!("reshard: --cluster fix: {}", fixed.status);
        }
    }

    /// Wait (up to 15 s) until the nodes agree about the slots and none is open (a source
    /// still marked migrating until the target's ownership reaches it).
    fn settle(&self, port: u16) {
        let seed = format!("127.0.0.1:{port}");
        let started = Instant::now();
        loop {
            let check = String::from_utf8_lossy(&cli(&["--cluster", "check", &seed]).stdout).into_owned();
            if !check.contains("[ERR]") && !check.contains("slots are open") {
                return;
            }
            if started.elapsed() > Duration::from_secs(15) {
                eprintln!("reshard: the cluster did not settle in 15 s:\n{check}");
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How many slots the node `id` serves.
    fn slots_of(&self, id: &str) -> u32 {
        let lines = self.lines();
        let Some(l) = lines.iter().find(|l| l[0] == id) else {
            return 0;
        };
        l.iter()
            .skip(8)
            .filter(|r| !r.starts_with('['))
            .map(|r| match r.split_once('-') {
                Some((a, b)) => b.parse::<u32>().unwrap() - a.parse::<u32>().unwrap() + 1,
                None => 1,
            })
            .sum()
    }
}

/// The port of a `CLUSTER NODES` address (`host:port@cport`).
pub fn port_of(addr: &str) -> u16 {
    // host:port@cport
    addr.split('@')
        .next()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// One sentinel process.
pub struct SentinelChild {
    pub port: u16,
    /// Its TLS port (used only in a TLS group).
    pub tls_port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for SentinelChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A primary, a replica and three sentinels watching them as `mymaster` (quorum 2,
/// down after 1 s).
pub struct SentinelGroup {
    pub primary: RedisChild,
    pub replica: RedisChild,
    pub sentinels: Vec<SentinelChild>,
    /// A TLS group: the TLS ports of the primary and the replica.
    pub tls_ports: Option<(u16, u16)>,
}

pub const MASTER: &str = "mymaster";

impl SentinelGroup {
    pub fn start() -> SentinelGroup {
        SentinelGroup::start_with(None)
    }

    /// The same group speaking TLS (clients, replication, sentinels to the servers) with
    /// `pki`'s `node` certificate; every process keeps a plain port for the harness.
    pub fn start_tls(pki: &super::pki::Pki) -> SentinelGroup {
        SentinelGroup::start_with(Some(pki))
    }

    fn start_with(pki: Option<&super::pki::Pki>) -> SentinelGroup {
        let (bin, mode) = sentinel_command();
        let files = pki.map(|p| (p.path("node.pem"), p.path("node.key"), p.path("ca.pem")));
        let tls_args = |port: &str| -> Vec<String> {
            match &files {
                None => Vec::new(),
                Some((pem, key, ca)) => [
                    "--tls-port",
                    port,
                    "--tls-cert-file",
                    pem,
                    "--tls-key-file",
                    key,
                    "--tls-ca-cert-file",
                    ca,
                    "--tls-auth-clients",
                    "no",
                    "--tls-replication",
                    "yes",
                ]
                .map(String::from)
                .to_vec(),
            }
        };
        let (primary_tls, replica_tls) = (free_port().unwrap(), free_port().unwrap());
        let mut args: Vec<String> = NOTIFY.iter().map(|s| s.to_string()).collect();
        args.extend(tls_args(&primary_tls.to_string()));
        let primary = super::redis(&args.iter().map(String::as_str).collect::<Vec<_>>());
        // The address the replica and the sentinels use: the TLS port when there is one.
        let primary_port = if files.is_some() { primary_tls } else { primary.port() };
        let p = primary_port.to_string();
        let mut args: Vec<String> = ["--replicaof", "127.0.0.1", p.as_str()].map(String::from).to_vec();
        args.extend(NOTIFY.iter().map(|s| s.to_string()));
        args.extend(tls_args(&replica_tls.to_string()));
        let replica = super::redis(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            let (port, tls_port) = (free_port().unwrap(), free_port().unwrap());
            let dir = tempfile::tempdir().unwrap();
            let conf = dir.path().join("sentinel.conf");
            let tls = match &files {
                None => String::new(),
                Some((pem, key, ca)) => format!(
                    "tls-port {tls_port}\ntls-cert-file {pem}\ntls-key-file {key}\ntls-ca-cert-file {ca}\n\
                     tls-auth-clients no\ntls-replication yes\n"
                ),
            };
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {}\n{tls}sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n\
                     sentinel down-after-milliseconds {MASTER} 1000\nsentinel failover-timeout {MASTER} 4000\n\
                     sentinel parallel-syncs {MASTER} 1\n",
                    dir.path().display(),
                ),
            )
            .unwrap();
            let child = Command::new(&bin)
                .arg(&conf)
                .args(mode)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            sentinels.push(SentinelChild {
                port,
                tls_port,
                child,
                _dir: dir,
            });
        }
        let g = SentinelGroup {
            primary,
            replica,
            sentinels,
            tls_ports: files.map(|_| (primary_tls, replica_tls)),
        };
        g.wait_synced(Duration::from_secs(20));
        g
    }

    /// The sentinels' `rediss://` URLs (a TLS group).
    pub fn sentinel_tls_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("rediss://127.0.0.1:{}", s.tls_port))
            .collect()
    }

    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("redis://127.0.0.1:{}", s.port))
            .collect()
    }

    /// Wait until the replica is in sync and every sentinel knows the replica.
    pub fn wait_synced(&self, limit: Duration) {
        let started = Instant::now();
        loop {
            let synced = cli_at(self.replica.port(), &["info", "replication"]).contains("master_link_status:up");
            let known = self
                .sentinels
                .iter()
                .all(|s| cli_at(s.port, &["sentinel", "replicas", MASTER]).contains(&self.replica_port().to_string()));
            if synced && known {
                return;
            }
            assert!(started.elapsed() < limit, "sentinel group not ready after {limit:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The replica's port as the sentinels know it (its TLS port in a TLS group).
    pub fn replica_port(&self) -> u16 {
        self.tls_ports.map_or(self.replica.port(), |(_, r)| r)
    }

    /// The port the first sentinel answering names as primary.
    pub fn primary_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let out = cli_at(s.port, &["sentinel", "get-master-addr-by-name", MASTER]);
            out.lines().nth(1)?.trim().parse().ok()
        })
    }
}

/// Send `signal` (e.g. "STOP", "CONT") to `pid`.
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}
