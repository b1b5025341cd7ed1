//! Installing lockwatch: the Debian package that `make deb` builds (cargo-deb; here around
//! the test's own debug binary, `make deb` alone builds the release one), extracted with
//! `dpkg-deb -x` — its files, conffiles and maintainer scripts, the installed binary serving
//! a real redis-server with the shipped config, and the systemd unit through
//! `systemd-analyze verify`; the container image's Dockerfile checked for what matters;
//! `lockwatch --version`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::systemd::unit_values;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `make deb` packaging the binary this test runs (no release build: that is `make deb`'s
/// own job), into `out`; the path of the `.deb`.
fn make_deb(out: &Path) -> PathBuf {
    let bin = Path::new(BIN);
    assert!(
        bin.ends_with("debug/lockwatch"),
        "the tests package the dev build: {BIN}"
    );
    let flags = format!("--no-build --profile dev --fast --output {}/", out.display());
    let made = Command::new("make")
        .args(["--no-print-directory", "deb"])
        .arg(format!("DEB_FLAGS={flags}"))
        .current_dir(ROOT)
        .output()
        .unwrap_or_else(|e| panic!("cannot run make ({e}): install it with `sudo apt-get install make`"));
    let text = common::output_text(&made);
    assert!(made.status.success(), "make deb failed:\n{text}");
    let debs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    assert_eq!(debs.len(), 1, "{text}");
    assert!(
        debs[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&format!("lockwatch_{VERSION}-")),
        "{debs:?}"
    );
    debs[0].clone()
}

fn dpkg_deb(args: &[&str]) -> String {
    let bin = common::require_binary("dpkg-deb", "dpkg");
    let out = Command::new(bin).args(args).output().unwrap();
    assert!(out.status.success(), "dpkg-deb {args:?}: {}", common::output_text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The files under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_debian_package_installs_a_working_exporter_and_a_hardened_unit() {
    let work = tempfile::tempdir().unwrap();
    let deb = make_deb(work.path());
    let deb = deb.to_str().unwrap();

    // Control data: conffiles, the unit enabled and started by the maintainer scripts.
    let control = dpkg_deb(&["--field", deb, "Package", "Version", "Depends"]);
    assert!(
        control.contains("Package: lockwatch") && control.contains(&format!("Version: {VERSION}")),
        "{control}"
    );
    let meta = work.path().join("DEBIAN");
    dpkg_deb(&["--control", deb, meta.to_str().unwrap()]);
    let conffiles = std::fs::read_to_string(meta.join("conffiles")).unwrap();
    let mut conffiles: Vec<&str> = conffiles.lines().collect();
    conffiles.sort();
    assert_eq!(conffiles, ["/etc/default/lockwatch", "/etc/lockwatch/lockwatch.toml"]);
    let postinst = std::fs::read_to_string(meta.join("postinst")).unwrap();
    assert!(
        postinst.contains("deb-systemd-helper enable lockwatch.service"),
        "{postinst}"
    );

    // The files, as `dpkg -i` would lay them out.
    let root = work.path().join("root");
    dpkg_deb(&["-x", deb, root.to_str().unwrap()]);
    let installed = root.join("usr/bin/lockwatch");
    for dir in ["alerts", "dashboards", "runbooks"] {
        let shipped = root.join("usr/share/lockwatch").join(dir);
        assert_eq!(files(&shipped), files(&Path::new(ROOT).join(dir)), "{dir}");
        for f in files(&shipped) {
            assert_eq!(
                std::fs::read(shipped.join(&f)).unwrap(),
                std::fs::read(Path::new(ROOT).join(dir).join(&f)).unwrap(),
                "{dir}/{f}"
            );
        }
    }
    let defaults = std::fs::read_to_string(root.join("etc/default/lockwatch")).unwrap();
    assert!(defaults.contains("\nARGS=\"\"\n"), "{defaults}");

    // The installed binary: its version, the shipped config as it is, then serving a real
    // redis-server with that config pointed at it.
    let out = Command::new(&installed).arg("--version").output().unwrap();
    assert!(common::output_text(&out).contains(&format!("lockwatch {VERSION} (commit ")));
    let conffile = root.join("etc/lockwatch/lockwatch.toml");
    let out = Command::new(&installed)
        .args(["check-config", "-c", conffile.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::output_text(&out));
    let r = common::redis(&[]);
    let port = lockwatch::access::child::free_port().unwrap();
    let state = work.path().join("state");
    let text = std::fs::read_to_string(&conffile)
        .unwrap()
        .replace("\"0.0.0.0:9747\"", &format!("\"127.0.0.1:{port}\""))
        .replace("\"redis://127.0.0.1:6379/0\"", &format!("\"{}\"", r.url()))
        .replace("\"/var/lib/lockwatch\"", &format!("\"{}\"", state.display()));
    let config = work.path().join("lockwatch.toml");
    std::fs::write(&config, text).unwrap();
    let mut child = Command::new(&installed)
        .args(["serve", "--config", config.to_str().unwrap()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let started = Instant::now();
    loop {
        if std::net::TcpStream::connect(addr).is_ok() {
            let (status, _, body) = common::http_get(addr, "/metrics").await;
            let m = common::Metrics(body);
            if status == 200 && m.get("lockwatch_up", &[("target", "main")]) == Some(1.0) {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the installed lockwatch did not report lockwatch_up 1"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(state.is_dir(), "state.dir is created");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));

    // The unit: hardened, restarted on failure but not on a config error, and valid for
    // systemd (ExecStart pointed at the extracted binary, which is not in /usr/bin here).
    let unit = std::fs::read_to_string(root.join("usr/lib/systemd/system/lockwatch.service")).unwrap();
    for (key, value) in [
        ("DynamicUser", "yes"),
        ("StateDirectory", "lockwatch"),
        ("ProtectSystem", "strict"),
        ("NoNewPrivileges", "yes"),
        ("CapabilityBoundingSet", ""),
        ("AmbientCapabilities", ""),
        ("Restart", "on-failure"),
        ("RestartPreventExitStatus", "2"),
        ("EnvironmentFile", "-/etc/default/lockwatch"),
    ] {
        assert_eq!(unit_values(&unit, key), [value], "{key}");
    }
    let exec = unit_values(&unit, "ExecStart");
    assert_eq!(
        exec,
        ["/usr/bin/lockwatch serve --config /etc/lockwatch/lockwatch.toml $ARGS"]
    );
    let copy = work.path().join("lockwatch.service");
    std::fs::write(&copy, unit.replace("/usr/bin/lockwatch", installed.to_str().unwrap())).unwrap();
    let (passed, text) = common::systemd::verify(&[&copy], work.path());
    assert!(passed && text.trim().is_empty(), "systemd-analyze verify:\n{text}");
}

#[test]
fn version_names_the_commit() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(ROOT)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    assert_eq!(text.trim(), format!("lockwatch {VERSION} (commit {commit})"));
}

/// Dockerfile instructions, continuation lines joined, comments dropped.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                let (op, args) = current.split_once(' ').unwrap_or((&current, ""));
                out.push((op.to_ascii_uppercase(), args.trim().to_string()));
                current.clear();
            }
        }
    }
    out
}

#[test]
fn the_dockerfile_builds_locked_runs_unprivileged_and_bakes_in_no_secret() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("Dockerfile")).unwrap();
    let all = instructions(&text);
    let stages: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, (op, _))| op == "FROM")
        .map(|(i, _)| i)
        .collect();
    assert!(stages.len() >= 2, "a multi-stage build");
    let (build, runtime) = (&all[..stages[stages.len() - 1]], &all[stages[stages.len() - 1]..]);
    let builds: Vec<&String> = build
        .iter()
        .filter(|(op, args)| op == "RUN" && args.contains("cargo build"))
        .map(|(_, args)| args)
        .collect();
    assert!(!builds.is_empty(), "the build stage runs cargo build");
    for b in &builds {
        assert!(b.contains("--locked") && b.contains("--release"), "{b}");
    }
    // The runtime stage: no toolchain, a non-root user, the port, the volumes.
    assert!(
        !runtime[0].1.contains("rust"),
        "the runtime image is not the build image: {}",
        runtime[0].1
    );
    let user: Vec<&String> = runtime.iter().filter(|(op, _)| op == "USER").map(|(_, a)| a).collect();
    let last_user = user.last().expect("the runtime stage sets USER");
    let name = last_user.split(':').next().unwrap();
    assert!(!["root", "0", ""].contains(&name), "USER {last_user}");
    assert!(
        runtime
            .iter()
            .any(|(op, a)| op == "EXPOSE" && a.split_whitespace().any(|p| p == "9747"))
    );
    let volumes: String = runtime
        .iter()
        .filter(|(op, _)| op == "VOLUME")
        .map(|(_, a)| a.as_str())
        .collect();
    for v in ["/etc/lockwatch", "/var/lib/lockwatch"] {
        assert!(volumes.contains(&format!("\"{v}\"")), "VOLUME {v}: {volumes}");
    }
    let cmd: String = runtime
        .iter()
        .filter(|(op, _)| op == "CMD")
        .map(|(_, a)| a.as_str())
        .collect();
    assert!(
        cmd.contains("/etc/lockwatch/lockwatch.toml"),
        "the config is read from the config volume: {cmd}"
    );
    // No secret baked in: no secret-named ARG/ENV, no key or password file copied, and a
    // build context without them (or the repository's history).
    let secretish = ["PASSWORD", "TOKEN", "SECRET", "KEY", "CREDENTIAL"];
    for (op, args) in &all {
        let upper = args.to_ascii_uppercase();
        if op == "ARG" || op == "ENV" {
            assert!(!secretish.iter().any(|s| upper.contains(s)), "{op} {args}");
        }
        if op == "COPY" || op == "ADD" {
            for s in [".PEM", ".KEY", "PASSWORD", "SECRET", ".ENV"] {
                assert!(!upper.contains(s), "{op} {args}");
            }
        }
    }
    let ignore = std::fs::read_to_string(Path::new(ROOT).join(".dockerignore")).unwrap();
    let ignored: Vec<&str> = ignore.lines().filter(|l| !l.starts_with('#')).collect();
    for pattern in [".git", "target/", "**/*.key", "**/*.pem"] {
        assert!(ignored.contains(&pattern), ".dockerignore lacks {pattern}");
    }
}
