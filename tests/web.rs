//! The exporter's web security from a Prometheus exporter-toolkit web config file made here
//! (a private CA and certificates from `openssl`, a bcrypt hash from the `bcrypt` crate):
//! the Debian `prometheus` scrapes `/metrics` over TLS with a client certificate and basic
//! auth, and is refused with a wrong password (401) or without a certificate (handshake);
//! the same checks from a TLS client of our own, each client auth type, the TLS version
//! floor, basic auth over plain HTTP next to the push token, scrapes answered while
//! unfinished handshakes are held past `max_connections`, and the one-sentence errors
//! (exit 2) of a bad web config.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::Served;
use common::pki::Pki;
use common::prometheus::Prometheus;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
const USER: &str = "prometheus";
const PASSWORD: &str = "scrape-me-please";

/// A bcrypt hash of `password` in the `$2y$` form `htpasswd -B` writes.
fn bcrypt_hash(password: &str) -> String {
    bcrypt::hash_with_result(password, 10)
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY)
}

/// A web config with TLS (the PKI's `server` certificate, its CA for clients) and one user.
fn tls_web_config(auth_type: &str, extra_tls: &str) -> String {
    format!(
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_ca_file: ca.pem\n  \
         client_auth_type: {auth_type}\n{extra_tls}\
         http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n\
         basic_auth_users:\n  {USER}: {}\n",
        bcrypt_hash(PASSWORD)
    )
}

/// lockwatch with `[server] web_config_file` = `web` written into the PKI's directory.
async fn serve_with(pki: &Pki, r: &lockwatch::access::child::RedisChild, web: &str, server_extra: &str) -> Served {
    std::fs::write(pki.dir().join("web.yml"), web).unwrap();
    let text = format!(
        "[server]\nweb_config_file = \"{}\"\n{server_extra}\n[[target]]\nname = \"main\"\nurl = \"{{url}}\"\nsample_interval = \"200ms\"\n",
        pki.path("web.yml")
    );
    Served::start(common::config(r, &text)).await
}

/// What a client sends: a certificate of the PKI or none, credentials or none, the TLS versions.
struct Client<'a> {
    cert: Option<&'a str>,
    auth: Option<(&'a str, &'a str)>,
    tls12_only: bool,
}

const NO_CERT: Client = Client {
    cert: None,
    auth: None,
    tls12_only: false,
};

fn client_config(pki: &Pki, c: &Client) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(pki.path("ca.pem")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let versions: &[&rustls::SupportedProtocolVersion] = if c.tls12_only {
        &[&rustls::version::TLS12]
    } else {
        rustls::DEFAULT_VERSIONS
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    match c.cert {
        Some(name) => {
            let chain = CertificateDer::pem_file_iter(pki.path(&format!("{name}.pem")))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let key = PrivateKeyDer::from_pem_file(pki.path(&format!("{name}.key"))).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    }
}

/// One request over `stream`: (status, head, body), or the error that ended it.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &str,
) -> Result<(u16, String, String), String> {
    stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP answer: {text:?}"))?;
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, head.to_ascii_lowercase(), body.to_string()))
}

fn get_request(path: &str, auth: Option<(&str, &str)>) -> String {
    use base64::Engine as _;
    let auth = auth
        .map(|(u, p)| {
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
            format!("Authorization: Basic {token}\r\n")
        })
        .unwrap_or_default();
    format!("GET {path} HTTP/1.1\r\nHost: lockwatch\r\n{auth}Connection: close\r\n\r\n")
}

/// GET over TLS as `client`; an error when the handshake (or the connection) is refused.
async fn https_get(
    addr: SocketAddr,
    pki: &Pki,
    client: &Client<'_>,
    path: &str,
) -> Result<(u16, String, String), String> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(pki, client)));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector.connect(name, tcp).await.map_err(|e| e.to_string())?;
    exchange(tls, &get_request(path, client.auth)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_over_tls_with_basic_auth_and_is_refused_without_password_or_certificate() {
    let pki = Pki::new();
    let r = common::redis(&[]);
    let s = serve_with(&pki, &r, &tls_web_config("RequireAndVerifyClientCert", ""), "").await;
    let read = |f: &str| std::fs::read(pki.dir().join(f)).unwrap();
    let (ca, cert, key) = (read("ca.pem"), read("client.pem"), read("client.key"));
    let job = |name: &str, password_file: &str, client_cert: bool| {
        let cert = if client_cert {
            "      cert_file: client.pem\n      key_file: client.key\n"
        } else {
            ""
        };
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: ca.pem\n{cert}\
             \x20   basic_auth:\n      username: {USER}\n      password_file: {password_file}\n\
             \x20   static_configs:\n      - targets: ['{}']\n",
            s.addr
        )
    };
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{}{}{}",
        job("good", "password", true),
        job("wrong-password", "wrong", true),
        job("no-certificate", "password", false),
    );
    let files: [(&str, &[u8]); 5] = [
        ("ca.pem", &ca),
        ("client.pem", &cert),
        ("client.key", &key),
        ("password", PASSWORD.as_bytes()),
        ("wrong", b"not-the-password"),
    ];
    let prom = Prometheus::start(&config, &files);
    // Paths in Prometheus's config are relative to its config file.
    let targets = prom.scraped_targets(3, Duration::from_secs(60)).await;
    let good = &targets["good"];
    assert_eq!(good["health"], "up", "{good}");
    let wrong = &targets["wrong-password"];
    assert_eq!(wrong["health"], "down", "{wrong}");
    assert!(
        wrong["lastError"].as_str().unwrap().contains("HTTP status 401"),
        "{wrong}"
    );
    let refused = &targets["no-certificate"];
    assert_eq!(refused["health"], "down", "{refused}");
    let error = refused["lastError"].as_str().unwrap();
    assert!(
        // Not "401" alone: the port in the error's URL may hold those digits.
        error.contains("tls") && error.contains("certificate") && !error.contains("HTTP status 401"),
        "the handshake must be refused: {refused}"
    );
    // What Prometheus stored over TLS is lockwatch's exposition.
    let v = prom
        .json("/api/v1/query", &[("query", "lockwatch_build_info{job=\"good\"}")])
        .await
        .unwrap();
    let result = v["data"]["result"].as_array().unwrap();
    assert_eq!(result.len(), 1, "{v}");
    assert_eq!(result[0]["value"][1], "1", "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_answers_401_without_the_password_and_refuses_a_handshake_without_a_client_certificate() {
    let pki = Pki::new();
    let r = common::redis(&[]);
    let s = serve_with(&pki, &r, &tls_web_config("RequireAndVerifyClientCert", ""), "").await;
    let with = |auth| Client {
        cert: Some("client"),
        auth,
        tls12_only: false,
    };
    let (status, head, body) = https_get(s.addr, &pki, &with(Some((USER, PASSWORD))), "/metrics")
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("lockwatch_build_info"), "{body}");
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");
    for (auth, what) in [
        (Some((USER, "wrong")), "a wrong password"),
        (Some(("nobody", PASSWORD)), "an unknown user"),
        (None, "no credentials"),
    ] {
        for path in ["/metrics", "/", "/readyz", "/api/v1/locks"] {
            let (status, head, _) = https_get(s.addr, &pki, &with(auth), path).await.unwrap();
            assert_eq!(status, 401, "{path} with {what}");
            assert!(head.contains("www-authenticate: basic"), "{head}");
            assert!(head.contains("x-content-type-options: nosniff"), "{head}");
        }
    }
    // The liveness probe stays open (still over TLS).
    let (status, _, body) = https_get(s.addr, &pki, &with(None), "/healthz").await.unwrap();
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    // The right password again: answered from the cache, as fast as the first was slow.
    let (status, _, _) = https_get(s.addr, &pki, &with(Some((USER, PASSWORD))), "/metrics")
        .await
        .unwrap();
    assert_eq!(status, 200);

    // No certificate, or one from a CA the server does not trust: the handshake is refused,
    // no HTTP status ever comes back.
    let anonymous = Client {
        auth: Some((USER, PASSWORD)),
        ..NO_CERT
    };
    let stranger = Client {
        cert: Some("stranger"),
        ..anonymous
    };
    for (client, alert) in [(&anonymous, "CertificateRequired"), (&stranger, "UnknownCA")] {
        let e = https_get(s.addr, &pki, client, "/healthz").await.unwrap_err();
        assert!(e.contains(alert), "{e}");
    }
    // Plain HTTP on the TLS port gets no HTTP answer.
    let tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    assert!(exchange(tcp, &get_request("/healthz", None)).await.is_err());
    // The server is still serving after all that.
    let (status, _, _) = https_get(s.addr, &pki, &with(Some((USER, PASSWORD))), "/metrics")
        .await
        .unwrap();
    assert_eq!(status, 200);
    s.stop().await;
}

/// Over TLS as over HTTP: connections that never finish their handshake, more of them
/// than `max_connections`, give way to a scraper, which is answered within a second; a
/// silent one is closed after `header_timeout`, handshake included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_scrapes_are_answered_while_handshakes_are_held_past_the_limit() {
    let pki = Pki::new();
    let r = common::redis(&[]);
    let web = tls_web_config("RequireAndVerifyClientCert", "");
    let s = serve_with(&pki, &r, &web, "max_connections = 64\nheader_timeout = \"2s\"").await;
    let scraper = Client {
        cert: Some("client"),
        auth: Some((USER, PASSWORD)),
        tls12_only: false,
    };
    // The first scrape pays the bcrypt comparison; the verdict is cached for the rest.
    let (status, _, _) = https_get(s.addr, &pki, &scraper, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    let mut held = Vec::new();
    for _ in 0..100 {
        held.push(tokio::net::TcpStream::connect(s.addr).await.unwrap());
    }
    for _ in 0..3 {
        let asked = std::time::Instant::now();
        let (status, _, body) =
            tokio::time::timeout(Duration::from_secs(1), https_get(s.addr, &pki, &scraper, "/metrics"))
                .await
                .expect("no answer over TLS within 1 s")
                .unwrap();
        assert_eq!(status, 200, "{body}");
        eprintln!("answered over TLS in {:?}", asked.elapsed());
        assert!(
            body.contains("lockwatch_http_connections_closed_total{reason=\"evicted\"}"),
            "{body}"
        );
    }
    // The newest of the held connections is closed when its header time is up.
    let mut last = held.pop().unwrap();
    let mut buf = [0u8; 16];
    let ended = tokio::time::timeout(Duration::from_secs(3), last.read(&mut buf)).await;
    assert!(matches!(ended, Ok(Ok(0)) | Ok(Err(_))), "{ended:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_auth_type_and_the_tls_version_floor() {
    let pki = Pki::new();
    let r = common::redis(&[]);
    let auth = Some((USER, PASSWORD));
    let none = Client { auth, ..NO_CERT };
    let trusted = Client {
        cert: Some("client"),
        ..none
    };
    let stranger = Client {
        cert: Some("stranger"),
        ..none
    };
    // (client_auth_type, with client_ca_file, accepted: none, trusted, stranger)
    let cases = [
        ("NoClientCert", false, [true, true, true]),
        ("RequestClientCert", false, [true, true, true]),
        ("RequireAnyClientCert", false, [false, true, true]),
        ("VerifyClientCertIfGiven", true, [true, true, false]),
        ("RequireAndVerifyClientCert", true, [false, true, false]),
    ];
    for (auth_type, with_ca, expected) in cases {
        let web = tls_web_config(auth_type, "");
        let web = if with_ca {
            web
        } else {
            web.replace("  client_ca_file: ca.pem\n", "")
        };
        let s = serve_with(&pki, &r, &web, "").await;
        for (client, accepted, who) in [
            (&none, expected[0], "no certificate"),
            (&trusted, expected[1], "a trusted certificate"),
            (&stranger, expected[2], "an untrusted certificate"),
        ] {
            let result = https_get(s.addr, &pki, client, "/metrics").await;
            match accepted {
                true => assert_eq!(result.map(|r| r.0), Ok(200), "{auth_type}: {who}"),
                false => assert!(result.is_err(), "{auth_type}: {who} must be refused"),
            }
        }
        s.stop().await;
    }
    // min_version TLS13 refuses a client that speaks only TLS 1.2; the default takes it.
    for (extra, accepted) in [("  min_version: TLS13\n", false), ("", true)] {
        let s = serve_with(&pki, &r, &tls_web_config("RequireAndVerifyClientCert", extra), "").await;
        let old = Client {
            tls12_only: true,
            ..trusted
        };
        let result = https_get(s.addr, &pki, &old, "/metrics").await;
        assert_eq!(result.is_ok(), accepted, "{extra:?}: {result:?}");
        s.stop().await;
    }
}

/// Poll `https_get` of `/healthz` until `pred` holds of its result, or fail after 10 s.
async fn until(
    addr: SocketAddr,
    pki: &Pki,
    client: &Client<'_>,
    what: &str,
    pred: impl Fn(&Result<(u16, String, String), String>) -> bool,
) {
    let started = std::time::Instant::now();
    loop {
        let result = https_get(addr, pki, client, "/healthz").await;
        if pred(&result) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{what}: {result:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_is_served_without_a_restart() {
    let pki = Pki::new();
    let r = common::redis(&[]);
    let live = pki.dir().join("live");
    std::fs::create_dir(&live).unwrap();
    let install = |cert: &str, key: &str| {
        std::fs::copy(pki.dir().join(format!("{cert}.pem")), live.join("tls.crt")).unwrap();
        std::fs::copy(pki.dir().join(format!("{key}.key")), live.join("tls.key")).unwrap();
    };
    install("server", "server");
    let web = tls_web_config("NoClientCert", "")
        .replace("cert_file: server.pem", "cert_file: live/tls.crt")
        .replace("key_file: server.key", "key_file: live/tls.key")
        .replace("  client_ca_file: ca.pem\n", "");
    let s = serve_with(&pki, &r, &web, "").await;
    let client = NO_CERT;
    let ok = |r: &Result<(u16, String, String), String>| matches!(r, Ok((200, _, _)));
    let wrong_name =
        |r: &Result<(u16, String, String), String>| matches!(r, Err(e) if e.contains("not valid for name"));
    until(s.addr, &pki, &client, "the first certificate", ok).await;
    // A certificate for another name replaces it: clients of 127.0.0.1 now refuse the server.
    install("named", "named");
    until(s.addr, &pki, &client, "the renewed certificate", wrong_name).await;
    // A certificate with a key that is not its own does not load: the last good one stays.
    install("server", "named");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    until(s.addr, &pki, &client, "the previous certificate kept", wrong_name).await;
    install("server", "server");
    until(s.addr, &pki, &client, "the certificate renewed again", ok).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_over_plain_http_leaves_the_event_push_to_its_token() {
    let pki = Pki::new();
    let r = common::redis(&[]);
    std::fs::write(pki.dir().join("push-token"), "push-secret\n").unwrap();
    let web = format!("basic_auth_users:\n  {USER}: {}\n", bcrypt_hash(PASSWORD));
    let server = format!("push_token_file = \"{}\"", pki.path("push-token"));
    let s = serve_with(&pki, &r, &web, &server).await;
    let http = |request: String| async move {
        let tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        exchange(tcp, &request).await.unwrap()
    };
    assert_eq!(http(get_request("/metrics", None)).await.0, 401);
    assert_eq!(http(get_request("/metrics", Some((USER, PASSWORD)))).await.0, 200);
    assert_eq!(http(get_request("/healthz", None)).await.0, 200);
    let push = |auth: &str| {
        let body = "{\"namespace\":\"unknown\",\"op\":\"release\",\"outcome\":\"not_owned\"}\n";
        format!(
            "POST /api/v1/events HTTP/1.1\r\nHost: lockwatch\r\n{auth}Content-Type: application/x-ndjson\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    // The push token, not basic auth, guards the push.
    let (status, _, body) = http(push("Authorization: Bearer push-secret\r\n")).await;
    assert_eq!(status, 200, "{body}");
    let (status, head, _) = http(push("")).await;
    assert_eq!(status, 401);
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    s.stop().await;
}

/// `check-config` on a config whose `[server] web_config_file` is `web` (written next to it).
fn check(dir: &Path, web: &str) -> (i32, String) {
    std::fs::write(dir.join("web.yml"), web).unwrap();
    std::fs::write(
        dir.join("lockwatch.toml"),
        "[server]\nweb_config_file = \"web.yml\"\n[[target]]\nname = \"main\"\nurl = \"redis://127.0.0.1:1/0\"\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["check-config", "-c", "lockwatch.toml"])
        .current_dir(dir)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), common::output_text(&out))
}

#[test]
fn a_bad_web_config_is_one_sentence_naming_file_and_key_and_exits_2() {
    let pki = Pki::new();
    let d = pki.dir();
    let good = tls_web_config("RequireAndVerifyClientCert", "");
    let (code, out) = check(d, &good);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("web.yml: HTTPS, client certificates RequireAndVerifyClientCert, 1 basic auth user(s)"),
        "{out}"
    );
    // An empty file is no TLS and no auth, as in the toolkit.
    assert_eq!(check(d, "# nothing yet\n").0, 0);
    let auth = "client_auth_type: RequireAndVerifyClientCert";
    // (text replaced in the good file, by what, the key the error names, words it says)
    #[rustfmt::skip]
    let edits = [
        (auth, "client_auth_type: Always", "tls_server_config.client_auth_type", "RequireAndVerifyClientCert"),
        (auth, "client_auth_type: NoClientCert", "tls_server_config.client_auth_type", "client CA"),
        ("  client_ca_file: ca.pem\n", "", "tls_server_config.client_ca_file", "missing"),
        ("cert_file: server.pem", "cert_file: nowhere.pem", "tls_server_config.cert_file", "nowhere.pem"),
        ("  cert_file: server.pem\n", "", "tls_server_config.cert_file", "missing"),
        ("key_file: server.key", "key_file: client.key", "tls_server_config.key_file", "private key"),
        ("client_ca_file: ca.pem", "client_ca_file: server.key", "tls_server_config.client_ca_file", "no PEM certificate"),
        (auth, "client_auth_type: RequireAndVerifyClientCert\n  min_version: TLS11", "tls_server_config.min_version", "TLS12 or TLS13"),
        (auth, "client_auth_type: RequireAndVerifyClientCert\n  cipher_suites: [TLS_AES_128_GCM_SHA256]", "tls_server_config.cipher_suites", "not supported"),
        ("cert_file:", "certfile:", "tls_server_config", "unknown field `certfile`"),
    ];
    let mut cases: Vec<(String, &str, &str)> = edits.iter().map(|(a, b, k, w)| (good.replace(a, b), *k, *w)).collect();
    #[rustfmt::skip]
    cases.extend([
        (format!("{USER}: [\n"), "line 2", "syntax"),
        (format!("basic_auth_users:\n  {USER}: plain-text-password\n"), "basic_auth_users.prometheus", "bcrypt"),
        (format!("basic_auth_users:\n  \"a:b\": {}\n", bcrypt_hash("x")), "basic_auth_users.a:b", "`:`"),
        ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n".to_string(), "http_server_config.headers.X-Frame-Options", "deny or sameorigin"),
        ("http_server_config:\n  headers:\n    Server: lockwatch\n".to_string(), "http_server_config.headers.Server", "cannot be configured"),
        ("rate_limit:\n  interval: 1s\n  burst: 5\n".to_string(), "rate_limit", "not supported"),
    ]);
    for (web, key, words) in cases {
        let (code, out) = check(d, &web);
        assert_eq!(code, 2, "{web}\n{out}");
        assert_eq!(out.trim().lines().count(), 1, "one sentence: {out}");
        assert!(
            out.contains("web.yml") && out.contains(key) && out.contains(words),
            "{key} / {words}: {out}"
        );
    }
    // The flag wins over the file's key, relative to the working directory (check-config
    // takes it too); a missing file is the same kind of error.
    std::fs::write(d.join("flag.yml"), &good).unwrap();
    std::fs::write(d.join("web.yml"), "nonsense: 1\n").unwrap();
    let out = Command::new(BIN)
        .args(["check-config", "-c", "lockwatch.toml", "--web.config.file", "flag.yml"])
        .current_dir(d)
        .output()
        .unwrap();
    let text = common::output_text(&out);
    assert!(
        out.status.success() && text.contains("web config flag.yml: HTTPS"),
        "{text}"
    );
    let out = Command::new(BIN)
        .args(["serve", "-c", "lockwatch.toml", "--web.config.file", "missing.yml"])
        .current_dir(d)
        .output()
        .unwrap();
    let text = common::output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("missing.yml") && text.contains("cannot read"), "{text}");
}
