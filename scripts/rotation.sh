#!/usr/bin/env bash
# The rotation table of docs/log-intake.md, measured: tests/rotation.rs's first test runs its
# four cases (late writes into a renamed file, copytruncate at 2,000 lines/s with 20
# truncations, an `olddir` rotation while lockwatch was stopped, a rotated file renamed
# again while stopped) with a real writer process and logrotate, at the default settings,
# and prints written / counted / held by the files per case — first for a base revision
# (LOCKWATCH_ROTATION_BASE, default 4758029, the last commit before rotated files were
# followed past 5 s), built once from `git archive` into target/rotation-base, then for this
# build, where it also asserts every record the files hold is counted once.
#   scripts/rotation.sh          base, then this build
#   scripts/rotation.sh --new    this build only
# Needs logrotate and python3 (scripts/setup.sh test installs them) and redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."

rev=${LOCKWATCH_ROTATION_BASE:-4758029}
table() { # [binary]: the test's table, from its output
  local out
  out="$(env ${1:+LOCKWATCH_ROTATION_BIN="$1"} cargo test --locked --test rotation the_issue_table -- --nocapture 2>&1)" \
    || { echo "$out" >&2; exit 1; }
  echo "$out" | sed -n '/^rotation table/,/^copytruncate:/p'
}

if [ "${1:-}" != "--new" ]; then
  dir="$(pwd)/target/rotation-base/$rev"
  if [ ! -x "$dir/debug/lockwatch" ]; then
    echo "building $rev (the base) from git archive…" >&2
    src="$(mktemp -d)"
    trap 'rm -rf "$src"' EXIT
    git archive "$rev" | tar -x -C "$src"
    LOCKWATCH_GIT_COMMIT="$rev" CARGO_TARGET_DIR="$dir" cargo build --locked --bin lockwatch \
      --manifest-path "$src/Cargo.toml" >&2
  fi
  table "$dir/debug/lockwatch"
  echo
fi
unset LOCKWATCH_ROTATION_BIN
table
