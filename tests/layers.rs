//! The layering rule of ARCHITECTURE.md, checked against `src/`: every top-level module is
//! in exactly one layer, and a module uses only modules of lower layers — never one above
//! it, never one beside it, so no two top-level modules can import each other.
//!
//! The layers are read from ARCHITECTURE.md itself, so the drawing and the check agree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// `## Layers` of ARCHITECTURE.md: numbered lines, bottom first, modules in backticks.
fn layers(architecture: &str) -> BTreeMap<String, usize> {
    let section = architecture
        .split("\n## ")
        .find(|s| s.starts_with("Layers"))
        .expect("ARCHITECTURE.md has a `## Layers` section");
    let mut out = BTreeMap::new();
    for line in section.lines() {
        let Some((n, rest)) = line.split_once(". ") else {
            continue;
        };
        let Ok(n) = n.trim().parse::<usize>() else { continue };
        // Modules are the backticked words before the first ` — `.
        let names = rest.split(" — ").next().unwrap_or("");
        for name in names.split('`').skip(1).step_by(2) {
            assert!(
                out.insert(name.to_string(), n).is_none(),
                "ARCHITECTURE.md lists `{name}` in two layers"
            );
        }
    }
    out
}

/// The top-level modules of the crate: `src/x.rs` and `src/x/`, without the binary's `main`.
fn top_level_modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "lib" || name == "main" {
            continue;
        }
        let files = if path.is_dir() {
            rust_files(&path)
        } else if path.extension().is_some_and(|e| e == "rs") {
            vec![path.clone()]
        } else {
            continue;
        };
        out.entry(name).or_insert_with(Vec::new).extend(files);
    }
    out
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The top-level modules a source text names through `crate::` paths, including the
/// heads of `use crate::{a, b::c}` groups (over several lines too). Comments are skipped.
fn crate_uses(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `other_crate::`, not ours
        }
        let Some(group) = rest.strip_prefix('{') else {
            push_head(&mut out, rest);
            continue;
        };
        let mut depth = 0;
        let mut head = String::new();
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    push_head(&mut out, &head);
                    head.clear();
                }
                c if depth == 0 => head.push(c),
                _ => {}
            }
        }
        push_head(&mut out, &head);
    }
    out
}

fn push_head(out: &mut BTreeSet<String>, path: &str) {
    let head: String = path
        .trim()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if !head.is_empty() && head != "self" {
        out.insert(head);
    }
}

/// Every violation of the rule, as sentences.
fn violations(
    layer_of: &BTreeMap<String, usize>,
    modules: &BTreeMap<String, BTreeSet<(String, PathBuf)>>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (module, uses) in modules {
        let Some(&mine) = layer_of.get(module) else {
            out.push(format!(
                "module `{module}` is in no layer of ARCHITECTURE.md: add it to `## Layers`"
            ));
            continue;
        };
        for (used, file) in uses {
            if used == module {
                continue;
            }
            let Some(&theirs) = layer_of.get(used) else {
                continue; // not a module of ours (an extern path through `crate::`)
            };
            if theirs == mine {
                out.push(format!(
                    "{}: `{module}` uses `{used}`, a module of its own layer ({mine}); parts of one layer stay independent",
                    file.display()
                ));
            } else if theirs > mine {
                out.push(format!(
                    "{}: `{module}` (layer {mine}) uses `{used}` (layer {theirs}), a layer above it",
                    file.display()
                ));
            }
        }
    }
    for (a, uses) in modules {
        for (b, _) in uses {
            if a < b && modules.get(b).is_some_and(|u| u.iter().any(|(x, _)| x == a)) {
                out.push(format!("`{a}` and `{b}` import each other"));
            }
        }
    }
    out
}

fn uses_of(files: &[PathBuf]) -> BTreeSet<(String, PathBuf)> {
    let mut out = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        for used in crate_uses(&text) {
            out.insert((used, f.strip_prefix(ROOT).unwrap_or(f).to_path_buf()));
        }
    }
    out
}

#[test]
fn modules_use_only_lower_layers() {
    let architecture = std::fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md")).unwrap();
    let layer_of = layers(&architecture);
    let found = top_level_modules(&Path::new(ROOT).join("src"));
    assert!(found.len() > 10, "found only {found:?}");
    for listed in layer_of.keys() {
        assert!(
            found.contains_key(listed),
            "ARCHITECTURE.md lists `{listed}`, which is not a module in src/"
        );
    }
    let modules: BTreeMap<String, BTreeSet<(String, PathBuf)>> =
        found.iter().map(|(m, files)| (m.clone(), uses_of(files))).collect();
    let bad = violations(&layer_of, &modules);
    assert!(bad.is_empty(), "the layering rule is broken:\n{}", bad.join("\n"));
}

/// Small modules: no source file over 500 lines (unit-test files apart), `main.rs` thin.
#[test]
fn source_files_stay_small() {
    let src = Path::new(ROOT).join("src");
    let mut long = Vec::new();
    for f in rust_files(&src) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let lines = std::fs::read_to_string(&f).unwrap().lines().count();
        let limit = if name == "main.rs" && f.parent() == Some(src.as_path()) {
            80
        } else {
            500
        };
        if !name.contains("tests") && lines > limit {
            long.push(format!("{} has {lines} lines (at most {limit})", f.display()));
        }
    }
    assert!(long.is_empty(), "split these by what they own:\n{}", long.join("\n"));
}

#[test]
fn the_check_catches_upward_sideways_and_mutual_imports() {
    let layer_of = layers(
        "# x\n\n## Layers\n\n1. `words` — bottom\n2. `store` — below\n3. `a` `b` — parts\n4. `top` — edge\n\n## Next\n",
    );
    assert_eq!(layer_of.get("b"), Some(&3));
    let src = |text: &str| -> BTreeSet<(String, PathBuf)> {
        crate_uses(text)
            .into_iter()
            .map(|u| (u, PathBuf::from("f.rs")))
            .collect()
    };
    let modules = BTreeMap::from([
        ("words".to_string(), src("use crate::store::Thing; // upward")),
        ("store".to_string(), src("use crate::{words::W, self};")),
        ("a".to_string(), src("let x = crate::b::f();")),
        (
            "b".to_string(),
            src("use crate::{\n    a::g,\n};\nuse crate::{top::T};"),
        ),
        ("top".to_string(), src("use crate::{a, b::{c, d}};")),
        ("stray".to_string(), src("")),
    ]);
    let bad = violations(&layer_of, &modules).join("\n");
    assert!(bad.contains("`words` (layer 1) uses `store` (layer 2)"), "{bad}");
    assert!(bad.contains("`a` uses `b`, a module of its own layer"), "{bad}");
    assert!(bad.contains("`b` (layer 3) uses `top` (layer 4)"), "{bad}");
    assert!(bad.contains("`a` and `b` import each other"), "{bad}");
    assert!(bad.contains("`stray` is in no layer"), "{bad}");
    let from = |m: &str| bad.lines().filter(|l| l.starts_with(&format!("f.rs: `{m}`"))).count();
    assert_eq!(from("top"), 0, "the edge may use everything below: {bad}");
    assert_eq!(from("store"), 0, "a lower layer is fine: {bad}");
}
