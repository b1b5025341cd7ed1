//! The docs kept true by the code: the configuration reference lists exactly the keys the
//! config parser accepts (asked of the parser itself, with an unknown key in each section);
//! the metrics reference lists exactly the families a live `/metrics` exports; every
//! relative link of the README and `docs/` points at a file that exists; the server matrix
//! a whole `make compat` run wrote still counts the tests the files have.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use lockwatch::config::{Config, Overrides};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A valid config with `extra` placed per `at`: `top` before everything, else inside the
/// first table of that name.
fn config_with(at: &str, extra: &str) -> String {
    let mut sections = [
        ("server", "[server]\n".to_string()),
        (
            "target",
            "[[target]]\nname = \"t\"\nurl = \"redis://127.0.0.1:6379/0\"\n".to_string(),
        ),
        (
            "namespace",
            "[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"30s\"\n".to_string(),
        ),
        ("namespace.alerts", "[namespace.alerts]\n".to_string()),
        (
            "logs",
            "[[logs]]\nname = \"l\"\npath = \"/tmp/none-*.log\"\n".to_string(),
        ),
        (
            "rule",
            "[[rule]]\nmatch = \"x\"\nop = \"release\"\noutcome = \"not_owned\"\n".to_string(),
        ),
        ("state", "[state]\n".to_string()),
        ("alerts", "[alerts]\n".to_string()),
    ];
    let mut out = String::new();
    if at == "top" {
        out.push_str(extra);
    }
    for (name, text) in sections.iter_mut() {
        if *name == at {
            text.push_str(extra);
        }
        out.push_str(text);
    }
    out
}

/// The keys the parser accepts in section `at`, as its unknown-key error lists them.
fn accepted(at: &str) -> BTreeSet<String> {
    let text = config_with(at, "zzz_not_a_key = 1\n");
    let err = Config::from_toml(&text, "docs.toml", Path::new("."), &Overrides::default())
        .expect_err("an unknown key is refused")
        .to_string();
    let expected = err
        .split_once("expected")
        .unwrap_or_else(|| panic!("{at}: no list of keys in: {err}"))
        .1;
    expected.split('`').skip(1).step_by(2).map(String::from).collect()
}

/// The keys a section of the configuration reference lists: the first column of the table
/// under the heading that names `[section]` or `[[section]]`.
fn documented(reference: &str, section: &str) -> BTreeSet<String> {
    let heading = |h: &str| h.contains(&format!("`[{section}]`")) || h.contains(&format!("`[[{section}]]`"));
    let part = reference
        .split("\n## ")
        .find(|p| heading(p.lines().next().unwrap_or("")))
        .unwrap_or_else(|| panic!("docs/configuration.md has no heading for [{section}]"));
    part.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(k, _)| k.to_string())
        .collect()
}

#[test]
fn the_configuration_reference_lists_exactly_the_keys_the_parser_accepts() {
    let reference = read("docs/configuration.md");
    let tops: BTreeSet<String> = accepted("top");
    for section in &tops {
        let keys = accepted(section);
        let listed = documented(&reference, section);
        let undocumented: Vec<_> = keys.difference(&listed).collect();
        let refused: Vec<_> = listed.difference(&keys).collect();
        assert!(
            undocumented.is_empty(),
            "[{section}]: the parser accepts keys the configuration reference lacks: {undocumented:?}"
        );
        assert!(
            refused.is_empty(),
            "[{section}]: the configuration reference names keys the parser refuses: {refused:?}"
        );
    }
    // `[namespace.alerts]` takes the thresholds of `[alerts]`, as the reference says.
    let per_namespace = accepted("namespace.alerts");
    let alerts = documented(&reference, "alerts");
    assert!(per_namespace.is_subset(&alerts), "{per_namespace:?} ⊄ {alerts:?}");
    assert!(
        reference.contains("[namespace.alerts]"),
        "the reference mentions [namespace.alerts]"
    );
}

/// The metric families a reference page lists: backticked `lockwatch_…` and `process_…`
/// names in the first column of its tables.
fn families_in(reference: &str) -> BTreeSet<String> {
    reference
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(name, _)| name.to_string())
        .filter(|n| n.starts_with("lockwatch_") || n.starts_with("process_"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_reference_lists_exactly_the_families_a_live_exporter_has() {
    // Sample names to families: a histogram's `_bucket`, `_count` and `_sum` are one.
    let samples: BTreeSet<String> = common::exported_metric_names().await;
    let live: BTreeSet<String> = samples
        .iter()
        .map(|n| {
            ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|suffix| {
                    n.strip_suffix(suffix)
                        .filter(|base| samples.contains(&format!("{base}_bucket")))
                })
                .unwrap_or(n)
                .to_string()
        })
        .collect();
    let listed = families_in(&read("docs/metrics.md"));
    let undocumented: Vec<_> = live.difference(&listed).collect();
    let absent: Vec<_> = listed.difference(&live).collect();
    assert!(
        undocumented.is_empty(),
        "a live /metrics has families the metrics reference lacks: {undocumented:?}"
    );
    assert!(
        absent.is_empty(),
        "the metrics reference names families a live /metrics lacks: {absent:?}"
    );
}

#[test]
fn every_relative_link_of_the_docs_points_at_a_file() {
    let mut pages = vec!["README.md".to_string()];
    for e in std::fs::read_dir(Path::new(ROOT).join("docs")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = read(page);
        let dir = Path::new(page).parent().unwrap();
        for link in text
            .split("](")
            .skip(1)
            .filter_map(|s| s.split_once(')'))
            .map(|(l, _)| l)
        {
            let target = link.split('#').next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if !Path::new(ROOT).join(dir).join(target).exists() {
                broken.push(format!("{page}: {link}"));
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing: {broken:#?}");
    for page in &pages[1..] {
        assert!(
            read("README.md").contains(page.as_str()),
            "README.md does not link {page}"
        );
    }
}

/// The test functions of `tests/<file>.rs`.
fn tests_in(file: &str) -> usize {
    read(&format!("tests/{file}.rs"))
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("#[test]") || l.starts_with("#[tokio::test")
        })
        .count()
}

/// `docs/compat-matrix.md` is what a whole `make compat` run wrote (`scripts/compat_matrix.py`),
/// and still true: a row per file `scripts/compat.sh` runs, in its order, each server's
/// passed and failed adding up to the file's tests now, none failed; `tls` skipped only where
/// the build has no TLS.
#[test]
fn the_server_matrix_in_the_docs_counts_the_tests_the_files_have() {
    let script = read("scripts/compat.sh");
    let list = script
        .split_once("all_files=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .expect("all_files in scripts/compat.sh")
        .0;
    let files: Vec<&str> = list.split_whitespace().collect();
    let doc = read("docs/compat-matrix.md");
    let rerun = "run `make compat` again and commit docs/compat-matrix.md";
    let header = doc
        .lines()
        .find(|l| l.starts_with("| test file |"))
        .expect("the table's header");
    let servers: Vec<&str> = header
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .skip(1)
        .collect();
    assert_eq!(servers, ["redis-6.2.5", "redis-8.2.3", "valkey-9.1.2"], "{rerun}");
    let rows: Vec<Vec<&str>> = doc
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.split('|').map(str::trim).filter(|c| !c.is_empty()).collect())
        .collect();
    let named: Vec<&str> = rows.iter().map(|r| r[0].trim_matches('`')).collect();
    assert_eq!(named, files, "the matrix's files are not compat.sh's: {rerun}");
    for row in &rows {
        let file = row[0].trim_matches('`');
        let want = tests_in(file);
        assert!(want > 0, "tests/{file}.rs has no tests");
        for (server, cell) in servers.iter().zip(&row[1..]) {
            if cell.starts_with("skipped") {
                assert_eq!(file, "tls", "{file} skipped on {server}: {rerun}");
                continue;
            }
            let (passed, failed) = cell
                .split_once(" / ")
                .map(|(p, f)| (p.parse::<usize>().unwrap(), f.parse::<usize>().unwrap()))
                .unwrap_or_else(|| panic!("{file} on {server}: {cell:?}"));
            assert_eq!(failed, 0, "{file} failed on {server}: {rerun}");
            assert_eq!(
                passed, want,
                "tests/{file}.rs has {want} tests, the matrix counts {passed} on {server}: {rerun}"
            );
        }
    }
    for server in &servers {
        assert!(doc.contains(&format!("- **{server}** lacks: ")), "{server}: {rerun}");
    }
}
