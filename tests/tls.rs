//! TLS to Redis with a private CA and client certificates, against real `redis-server`s
//! with `--tls-auth-clients yes`: `serve` over `rediss://` (sampler and watcher), the one
//! sentence each TLS failure gives (wrong CA, no client certificate, expired or misnamed
//! server certificate) in `check-config --connect` and in `serve`, and the config errors;
//! the managed profile of TLS with a private CA and `CONFIG` renamed away (the harness of
//! tests/managed.rs). The certificates are made for each run with `openssl`. Every test
//! that needs a server built with TLS is in this file, which `make compat` skips on a
//! build without it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::output_text as text;

use std::process::{Command, Output};
use std::time::Duration;

use common::Served;
use common::pki::Pki;
use lockwatch::access::child::{RedisChild, free_port};
use lockwatch::config::{Config, Overrides};

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");

/// A redis-server with a plain port (for setting up keys and for `RedisChild`'s readiness
/// check) and a TLS port that requires a client certificate signed by the PKI's CA.
struct TlsRedis {
    child: RedisChild,
    tls_port: u16,
}

impl TlsRedis {
    fn start(pki: &Pki, cert: &str) -> TlsRedis {
        let tls_port = free_port().unwrap().to_string();
        let (pem, key, ca) = (
            pki.path(&format!("{cert}.pem")),
            pki.path(&format!("{cert}.key")),
            pki.path("ca.pem"),
        );
        let args = [
            "--tls-port",
            &tls_port,
            "--tls-cert-file",
            &pem,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            "yes",
            "--notify-keyspace-events",
            "KEA",
        ];
        let child = common::redis(&args);
        TlsRedis {
            child,
            tls_port: tls_port.parse().unwrap(),
        }
    }

    /// The TLS URL with `host` (an address or a name).
    fn url(&self, host: &str) -> String {
        format!("rediss://{host}:{}/0", self.tls_port)
    }
}

/// A config whose only target is `url` with the given `tls_*` lines (paths relative to the
/// PKI's directory, where the config file is written).
fn config_text(url: &str, tls: &str) -> String {
    format!(
        r#"
[[target]]
name = "main"
url = "{url}"
sample_interval = "1s"
sample_budget = "1s"
{tls}

[[namespace]]
name = "wf"
pattern = "wf:lock:*"
ttl = "30s"
"#
    )
}

fn write_config(pki: &Pki, name: &str, text: &str) -> String {
    let p = pki.dir().join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn check_connect(path: &str) -> Output {
    Command::new(BIN)
        .args(["check-config", "--connect", "-c", path])
        .env_remove("LOCKWATCH_CONFIG")
        .output()
        .unwrap()
}

/// The "cannot connect" line of a `check-config --connect` run that must fail with exit 1.
fn cannot_connect(pki: &Pki, name: &str, text_: &str) -> String {
    let path = write_config(pki, name, text_);
    let out = check_connect(&path);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{name}: {all}");
    let line = all
        .lines()
        .find(|l| l.contains("cannot connect"))
        .unwrap_or_else(|| panic!("{name}: no `cannot connect` line in: {all}"))
        .to_string();
    assert!(!all.contains("panicked"), "{all}");
    line
}

const CA_AND_CLIENT: &str = "tls_ca_file = \"ca.pem\"\ntls_cert_file = \"client.pem\"\ntls_key_file = \"client.key\"";

#[tokio::test]
async fn serve_over_rediss_with_a_private_ca_and_a_client_certificate() {
    let pki = Pki::new();
    let r = TlsRedis::start(&pki, "server");
    let mut c = common::conn(&r.child);
    let _: () = redis::cmd("SET")
        .arg("wf:lock:1")
        .arg("worker-1")
        .arg("PX")
        .arg(30_000)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("wf:lock:2")
        .arg("worker-2")
        .query(&mut c)
        .unwrap();
    let text_ = config_text(&r.url("127.0.0.1"), CA_AND_CLIENT);
    let cfg = Config::from_toml(&text_, "tls.toml", pki.dir(), &Overrides::default()).unwrap();
    let debug = format!("{cfg:?}");
    let key = std::fs::read_to_string(pki.dir().join("client.key")).unwrap();
    let body = key.lines().nth(1).unwrap();
    assert!(!debug.contains(body), "the client key is never in Debug output");
    assert!(!debug.contains("PRIVATE KEY"), "{debug}");

    let served = Served::start(cfg).await;
    let (main, wf) = (("target", "main"), ("namespace", "wf"));
    served
        .wait_for(
            Duration::from_secs(20),
            "a pass over TLS and the watcher subscribed",
            |m| {
                m.get("lockwatch_up", &[main]) == Some(1.0)
                    && m.get("lockwatch_locks_held", &[main, wf]) == Some(2.0)
                    && m.get("lockwatch_notifications_connected", &[main]) == Some(1.0)
            },
        )
        .await;
    let m = served.metrics().await;
    assert_eq!(m.val("lockwatch_locks_held", &[main, wf]), 2.0);
    assert_eq!(m.val("lockwatch_locks_without_ttl", &[main, wf]), 1.0);
    assert_eq!(m.val("lockwatch_sample_errors_total", &[main]), 0.0);
    // A lock taken now is seen through the TLS pub/sub connection.
    let _: () = redis::cmd("SET")
        .arg("wf:lock:3")
        .arg("worker-3")
        .arg("PX")
        .arg(30_000)
        .query(&mut c)
        .unwrap();
    served
        .wait_for(Duration::from_secs(10), "the acquisition seen over TLS", |m| {
            m.get("lockwatch_lock_transitions_total", &[main, wf, ("kind", "acquired")]) == Some(1.0)
                && m.get("lockwatch_locks_held", &[main, wf]) == Some(3.0)
        })
        .await;
    served.stop().await;

    // check-config --connect over the same TLS: healthy.
    let path = write_config(&pki, "ok.toml", &text_);
    let out = check_connect(&path);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("✓ target main: reachable"), "{}", text(&out));
}

/// `tls_insecure_skip_verify = true`: the server's certificate (signed by a CA nothing
/// trusts here) is not verified on any connection: the sampler's passes and the watcher's
/// subscription both work, and lockwatch says it is on; without it both refuse the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipping_verification_holds_for_the_sampler_and_the_watcher_alike() {
    let pki = Pki::new();
    let r = TlsRedis::start(&pki, "server");
    let mut c = common::conn(&r.child);
    let _: () = redis::cmd("SET")
        .arg("wf:lock:1")
        .arg("w1")
        .arg("PX")
        .arg(30_000)
        .query(&mut c)
        .unwrap();
    let client = "tls_cert_file = \"client.pem\"\ntls_key_file = \"client.key\"";
    let text_ = config_text(
        &r.url("127.0.0.1"),
        &format!("{client}\ntls_insecure_skip_verify = true"),
    );
    let cfg = Config::from_toml(&text_, "tls.toml", pki.dir(), &Overrides::default()).unwrap();
    assert!(cfg.targets[0].tls.insecure);
    let served = Served::start(cfg).await;
    let main = ("target", "main");
    served
        .wait_for(
            Duration::from_secs(20),
            "a pass and the subscription, unverified",
            |m| {
                m.get("lockwatch_up", &[main]) == Some(1.0)
                    && m.get("lockwatch_notifications_connected", &[main]) == Some(1.0)
            },
        )
        .await;
    let _: () = redis::cmd("SET")
        .arg("wf:lock:2")
        .arg("w2")
        .arg("PX")
        .arg(30_000)
        .query(&mut c)
        .unwrap();
    served
        .wait_for(
            Duration::from_secs(10),
            "the acquisition seen on the subscription",
            |m| {
                m.get(
                    "lockwatch_lock_transitions_total",
                    &[main, ("namespace", "wf"), ("kind", "acquired")],
                ) == Some(1.0)
            },
        )
        .await;
    assert_eq!(
        served.metrics().await.val("lockwatch_target_tls_unverified", &[main]),
        1.0
    );
    served.stop().await;
    // Without it, the same server is refused: the system does not trust the test's CA.
    let line = cannot_connect(&pki, "verified.toml", &config_text(&r.url("127.0.0.1"), client));
    assert!(line.contains("TLS:"), "{line}");
}

#[test]
fn a_ca_that_did_not_sign_the_server_is_named() {
    let pki = Pki::new();
    let r = TlsRedis::start(&pki, "server");
    let tls = "tls_ca_file = \"other-ca.pem\"\ntls_cert_file = \"client.pem\"\ntls_key_file = \"client.key\"";
    let line = cannot_connect(&pki, "wrong-ca.toml", &config_text(&r.url("127.0.0.1"), tls));
    let expected = format!(
        "✗ target main: cannot connect to {}: TLS: the server's certificate is not signed by a CA in tls_ca_file ({}): UnknownIssuer",
        r.url("127.0.0.1"),
        pki.path("other-ca.pem")
    );
    assert_eq!(line, expected);
}

#[test]
fn a_server_that_requires_a_client_certificate_says_so() {
    let pki = Pki::new();
    let r = TlsRedis::start(&pki, "server");
    let line = cannot_connect(
        &pki,
        "no-client.toml",
        &config_text(&r.url("127.0.0.1"), "tls_ca_file = \"ca.pem\""),
    );
    let expected = format!(
        "✗ target main: cannot connect to {}: TLS: the server requires a client certificate: set tls_cert_file and tls_key_file (received fatal alert: CertificateRequired)",
        r.url("127.0.0.1")
    );
    assert_eq!(line, expected);

    // A client certificate from a CA the server does not trust.
    let tls = "tls_ca_file = \"ca.pem\"\ntls_cert_file = \"stranger.pem\"\ntls_key_file = \"stranger.key\"";
    let line = cannot_connect(&pki, "stranger.toml", &config_text(&r.url("127.0.0.1"), tls));
    let expected = format!(
        "✗ target main: cannot connect to {}: TLS: the server refused the client certificate in tls_cert_file ({}): received fatal alert: ",
        r.url("127.0.0.1"),
        pki.path("stranger.pem")
    );
    assert!(line.starts_with(&expected), "{line}");
}

#[test]
fn an_expired_server_certificate_is_named() {
    let pki = Pki::new();
    let r = TlsRedis::start(&pki, "expired");
    let line = cannot_connect(&pki, "expired.toml", &config_text(&r.url("127.0.0.1"), CA_AND_CLIENT));
    let prefix = format!(
        "✗ target main: cannot connect to {}: TLS: the server's certificate has expired: ",
        r.url("127.0.0.1")
    );
    // rustls says `Expired`, or `certificate expired: verification time …` where it has the dates.
    let detail = line.strip_prefix(&prefix).unwrap_or_else(|| panic!("{line}"));
    assert!(
        detail == "Expired" || detail.starts_with("certificate expired: "),
        "{line}"
    );
}

#[test]
fn a_certificate_without_the_urls_host_is_named_and_tls_server_name_is_refused() {
    let pki = Pki::new();
    let r = TlsRedis::start(&pki, "named");
    let line = cannot_connect(&pki, "misnamed.toml", &config_text(&r.url("127.0.0.1"), CA_AND_CLIENT));
    let expected = format!(
        "✗ target main: cannot connect to {}: TLS: the server's certificate is not valid for the url's host `127.0.0.1`: \
         certificate not valid for name \"127.0.0.1\"; certificate is only valid for DnsName(\"redis.test\")",
        r.url("127.0.0.1")
    );
    assert_eq!(line, expected);

    // The redis crate verifies the url's host on every (re)connect, so a different
    // tls_server_name is refused at load rather than silently not checked.
    let tls = format!("{CA_AND_CLIENT}\ntls_server_name = \"redis.test\"");
    let path = write_config(&pki, "server-name.toml", &config_text(&r.url("127.0.0.1"), &tls));
    let out = check_connect(&path);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("line 10: target[0].tls_server_name: verifying the certificate against `redis.test` while connecting to `127.0.0.1` is not supported"),
        "{all}"
    );
}

#[tokio::test]
async fn serve_reports_the_tls_cause_in_up_and_the_status_page() {
    let pki = Pki::new();
    let r = TlsRedis::start(&pki, "server");
    let text_ = config_text(&r.url("127.0.0.1"), "tls_ca_file = \"other-ca.pem\"");
    let cfg = Config::from_toml(&text_, "tls.toml", pki.dir(), &Overrides::default()).unwrap();
    let served = Served::start(cfg).await;
    let main = ("target", "main");
    served
        .wait_for(Duration::from_secs(20), "a failed pass", |m| {
            m.get("lockwatch_sample_errors_total", &[main]).unwrap_or(0.0) >= 1.0
        })
        .await;
    let m = served.metrics().await;
    assert_eq!(m.val("lockwatch_up", &[main]), 0.0);
    let (status, _, page) = served.get("/").await;
    assert_eq!(status, 200);
    let expected = format!(
        "node 127.0.0.1:{}: TLS: the server&#39;s certificate is not signed by a CA in tls_ca_file ({}): UnknownIssuer",
        r.tls_port,
        pki.path("other-ca.pem")
    );
    assert!(page.contains(&expected), "expected `{expected}` in:\n{page}");
    served.stop().await;
}

#[test]
fn tls_config_errors_exit_2_naming_the_key() {
    let pki = Pki::new();
    std::fs::write(pki.dir().join("garbage.pem"), "this is not PEM\n").unwrap();
    let d = pki.dir().display().to_string();
    let plain = "redis://127.0.0.1:1/0";
    let tls_url = "rediss://127.0.0.1:1/0";
    let cases = [
        (
            "plain-url.toml",
            config_text(plain, "tls_ca_file = \"ca.pem\""),
            format!("line 7: target[0].tls_ca_file: TLS settings need a rediss:// url, and the url is {plain}"),
        ),
        (
            "cert-only.toml",
            config_text(tls_url, "tls_cert_file = \"client.pem\""),
            "line 7: target[0].tls_cert_file: tls_key_file is missing: a client certificate needs its private key (set both or neither)".to_string(),
        ),
        (
            "key-only.toml",
            config_text(tls_url, "tls_key_file = \"client.key\""),
            "line 7: target[0].tls_key_file: tls_cert_file is missing: a client key needs its certificate (set both or neither)".to_string(),
        ),
        (
            "garbage-ca.toml",
            config_text(tls_url, "tls_ca_file = \"garbage.pem\""),
            format!("line 7: target[0].tls_ca_file: {d}/garbage.pem holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
        ),
        (
            "unreadable-ca.toml",
            config_text(tls_url, "tls_ca_file = \"missing.pem\""),
            format!("line 7: target[0].tls_ca_file: cannot read {d}/missing.pem"),
        ),
        (
            "garbage-key.toml",
            config_text(tls_url, "tls_cert_file = \"client.pem\"\ntls_key_file = \"garbage.pem\""),
            format!("line 8: target[0].tls_key_file: {d}/garbage.pem: no PEM private key in it"),
        ),
        (
            "wrong-key.toml",
            config_text(tls_url, "tls_cert_file = \"client.pem\"\ntls_key_file = \"server.key\""),
            format!("line 8: target[0].tls_key_file: {d}/server.key is not the private key of the certificate in {d}/client.pem"),
        ),
        (
            "insecure-url.toml",
            config_text(&format!("{tls_url}#insecure"), ""),
            "line 4: target[0].url: `#insecure` in the url is not taken: set tls_insecure_skip_verify = true".to_string(),
        ),
        (
            "insecure-seed.toml",
            format!(
                "[[target]]\nname = \"main\"\nmode = \"cluster\"\nnodes = [\"{tls_url}\", \"{tls_url}#insecure\"]\n\
                 [[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n"
            ),
            "line 4: target[0].nodes[1]: `#insecure` in the url is not taken".to_string(),
        ),
        (
            "insecure-sentinel.toml",
            format!(
                "[[target]]\nname = \"main\"\nmode = \"sentinel\"\nurl = \"{tls_url}\"\nmaster_name = \"mymaster\"\n\
                 sentinels = [\"rediss://127.0.0.1:26379#insecure\"]\n\
                 [[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n"
            ),
            "target[0].sentinels[0]: `#insecure` in the url is not taken".to_string(),
        ),
        (
            "insecure-and-ca.toml",
            config_text(tls_url, "tls_insecure_skip_verify = true\ntls_ca_file = \"ca.pem\""),
            "line 8: target[0].tls_ca_file: not used with tls_insecure_skip_verify = true".to_string(),
        ),
        (
            "insecure-plain.toml",
            config_text(plain, "tls_insecure_skip_verify = true"),
            format!("line 7: target[0].tls_insecure_skip_verify: it needs a rediss:// url, and the url is {plain}"),
        ),
    ];
    let key = std::fs::read_to_string(pki.dir().join("server.key")).unwrap();
    let key_body = key.lines().nth(1).unwrap().to_string();
    for (name, text_, expected) in cases {
        let path = write_config(&pki, name, &text_);
        for args in [vec!["check-config", "-c", &path], vec!["serve", "-c", &path]] {
            let out = Command::new(BIN)
                .args(&args)
                .env_remove("LOCKWATCH_CONFIG")
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            assert_eq!(out.status.code(), Some(2), "{args:?} {name}: {err}");
            assert!(
                err.contains(&expected),
                "{args:?} {name}: expected `{expected}` in: {err}"
            );
            assert_eq!(err.trim().lines().count(), 1, "one sentence: {err}");
            assert!(!err.contains(&key_body), "no key material: {err}");
        }
    }
}

/// A Redis Cluster speaking TLS everywhere: `serve` finds it from one `rediss://` seed with
/// the private CA, and reads, watches and pings every node over TLS; `check-config` checks
/// each primary over TLS; a wrong CA is one sentence naming the target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_with_a_private_ca() {
    let pki = Pki::new();
    let cluster = common::topo::Cluster::start_tls(&pki);
    let mut c = cluster.client();
    for i in 0..40 {
        let _: () = redis::Commands::set_ex(&mut c, format!("wf:lock:{i}"), format!("o{i}"), 300).unwrap();
    }
    let seed = format!("rediss://127.0.0.1:{}", cluster.tls_ports[0]);
    let text_ = format!(
        "[[target]]\nname = \"main\"\nmode = \"cluster\"\nnodes = [\"{seed}\"]\nsample_interval = \"1s\"\n\
         tls_ca_file = \"ca.pem\"\n\n[[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n"
    );
    let path = write_config(&pki, "cluster.toml", &text_);
    let out = check_connect(&path);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(text(&out).matches(": reachable, ").count(), 3, "{}", text(&out));

    let cfg = Config::load(std::path::Path::new(&path), &Overrides::default()).unwrap();
    let served = Served::start(cfg).await;
    let t = [("target", "main")];
    served
        .wait_for(Duration::from_secs(20), "every node over TLS", |m| {
            m.val("lockwatch_locks_held", &[("target", "main"), ("namespace", "wf")]) == 40.0
                && m.val("lockwatch_up", &t) == 1.0
                && m.val("lockwatch_tracking_mode", &[("target", "main"), ("mode", "events")]) == 1.0
                && m.val("lockwatch_nodes", &[("target", "main"), ("role", "replica")]) == 3.0
        })
        .await;
    let m = served.metrics().await;
    for p in &cluster.tls_ports {
        let node = format!("127.0.0.1:{p}");
        assert_eq!(
            m.val("lockwatch_node_up", &[("target", "main"), ("node", &node)]),
            1.0,
            "{node}"
        );
    }
    served.stop().await;

    let wrong = text_.replace("tls_ca_file = \"ca.pem\"", "tls_ca_file = \"other-ca.pem\"");
    let line = cannot_connect(&pki, "wrong-ca.toml", &wrong);
    assert!(
        line.contains("target main") && line.contains("not signed by a CA in tls_ca_file"),
        "{line}"
    );
}

/// A Sentinel group speaking TLS: lockwatch asks the sentinels over `rediss://` and reads
/// the primary they name over TLS, with the private CA; a planned failover is followed and
/// loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_sentinel_group_is_followed_through_a_failover() {
    let pki = Pki::new();
    let g = common::topo::SentinelGroup::start_tls(&pki);
    let mut c = common::conn(&g.primary);
    for i in 0..25 {
        let _: () = redis::Commands::set_ex(&mut c, format!("wf:lock:{i}"), format!("o{i}"), 300).unwrap();
    }
    let _: i64 = redis::cmd("WAIT").arg(1).arg(2000).query(&mut c).unwrap();
    let sentinels: Vec<String> = g.sentinel_tls_urls().iter().map(|u| format!("\"{u}\"")).collect();
    let text_ = format!(
        "[[target]]\nname = \"main\"\nmode = \"sentinel\"\nsentinels = [{}]\nmaster_name = \"{}\"\n\
         url = \"rediss://127.0.0.1/0\"\nsample_interval = \"1s\"\ntls_ca_file = \"ca.pem\"\n\n\
         [[namespace]]\nname = \"wf\"\npattern = \"wf:lock:*\"\nttl = \"30s\"\n",
        sentinels.join(", "),
        common::topo::MASTER
    );
    let path = write_config(&pki, "sentinel.toml", &text_);
    let out = check_connect(&path);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let cfg = Config::load(std::path::Path::new(&path), &Overrides::default()).unwrap();
    let served = Served::start(cfg).await;
    let t = [("target", "main")];
    let held = [("target", "main"), ("namespace", "wf")];
    served
        .wait_for(
            Duration::from_secs(20),
            "the primary over TLS, named by TLS sentinels",
            |m| {
                m.val("lockwatch_locks_held", &held) == 25.0
                    && m.val("lockwatch_up", &t) == 1.0
                    && m.val("lockwatch_tracking_mode", &[("target", "main"), ("mode", "events")]) == 1.0
                    && m.val("lockwatch_nodes", &[("target", "main"), ("role", "replica")]) == 1.0
            },
        )
        .await;
    let (_, replica_tls) = g.tls_ports.unwrap();
    let out = common::topo::cli_at(g.sentinels[0].port, &["sentinel", "failover", common::topo::MASTER]);
    assert!(out.contains("OK"), "{out}");
    let new = format!("127.0.0.1:{replica_tls}");
    served
        .wait_for(Duration::from_secs(30), "the planned failover followed", |m| {
            m.val("lockwatch_failovers_total", &t) == 1.0
                && m.val("lockwatch_up", &t) == 1.0
                && m.val("lockwatch_node_up", &[("target", "main"), ("node", &new)]) == 1.0
                && m.val("lockwatch_notifications_connected", &t) == 1.0
        })
        .await;
    let m = served.metrics().await;
    assert_eq!(m.val("lockwatch_locks_lost_in_failover_total", &held), 0.0);
    assert_eq!(m.val("lockwatch_locks_held", &held), 25.0);
    served.stop().await;
}

/// A managed Redis's profile: TLS with a private CA (no client certificate), `CONFIG`
/// renamed away, the flags set in the console — verified by the canary, events mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_tls_with_a_private_ca_and_config_renamed() {
    use common::managed::{Profile, profile, renamed_config, run};
    run(Profile {
        tls: true,
        ..profile("TLS, private CA, CONFIG unknown, KEA", renamed_config("KEA"), None)
    })
    .await;
}
