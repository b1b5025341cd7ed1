//! Records the git commit the binary is built from, for `lockwatch --version`.
//!
//! `LOCKWATCH_GIT_COMMIT` in the environment wins (a container build has no `.git`); else
//! `git rev-parse`; else `unknown`, so a build from a source tarball works the same.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=LOCKWATCH_GIT_COMMIT");
    let commit = std::env::var("LOCKWATCH_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    // Build again when HEAD moves: HEAD itself (a checkout) and the branch it points at (a
    // commit). Both live in the git directory, which a worktree keeps apart from the common one.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
    }
    if let (Some(common), Some(branch)) = (
        git(&["rev-parse", "--git-common-dir"]),
        git(&["symbolic-ref", "-q", "HEAD"]),
    ) {
        for path in [format!("{common}/{branch}"), format!("{common}/packed-refs")] {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    println!("cargo:rustc-env=LOCKWATCH_GIT_COMMIT={commit}");
}
