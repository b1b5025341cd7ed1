//! The docs kept true by the code: the configuration reference lists exactly the keys the
//! config parser accepts (asked of the parser itself, with an unknown key in each section);
//! the metrics reference lists exactly the families a live `/metrics` exports; every
//! relative link of the README and `docs/` points at a file that exists.
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
