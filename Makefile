# lockwatch — two commands on a fresh machine: `make demo` and `make test`.
# Each installs the Debian packages it needs first (scripts/setup.sh).

CARGO ?= cargo

.PHONY: demo test compat bench lint fmt deb setup-test setup-compat setup-demo setup-bench

demo: setup-demo
	$(CARGO) run --release --locked -- demo

test: setup-test
	$(CARGO) test --locked

# The server matrix: every server-facing integration test file (serve, target_info,
# tracking, lifecycle, sampler, headroom, stall, cluster, sentinel, managed, discover, inspect, cli,
# reload, many_targets, advise, keyed_events, the drills, freeze_workers, acl, tls; the list
# is scripts/compat.sh's) against Redis 6.2.5,
# Redis 8.2.3 and Valkey 9.1.2, pinned builds installed into target/servers/ (scripts/setup.sh
# compat), one server after the other; a table of passed/failed per file and server at the
# end. Debian's redis-server 7.0.15, the fourth, is what `make test` runs every file on.
# A build without TLS skips tests/tls.rs alone, and says so. No file is left out: the three
# servers take about 3 × the files' time on Debian's (see docs/development.md).
compat: setup-test setup-compat
	scripts/compat.sh

# The Debian package (release build, LTO) in target/debian/, made by cargo-deb, which is
# installed from crates.io when missing. DEB_FLAGS passes more options to `cargo deb`
# (the tests package their debug binary: DEB_FLAGS="--no-build --profile dev --fast -o DIR").
CARGO_DEB_VERSION ?= 3.8.0
DEB_FLAGS ?=
deb:
	@command -v cargo-deb >/dev/null 2>&1 || $(CARGO) install cargo-deb --locked --version $(CARGO_DEB_VERSION)
	$(CARGO) deb --locked $(DEB_FLAGS)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# The benchmarks (scripts/bench/, Python): every section, or some (SECTIONS="intake classify");
# BENCH_FLAGS=--quick for a smoke run of the harness itself. Results in bench-results/;
# `python3 scripts/bench render` puts them into the docs (see docs/development.md).
SECTIONS ?=
BENCH_FLAGS ?=
bench: setup-bench
	python3 scripts/bench $(BENCH_FLAGS) $(SECTIONS)

setup-test:
	scripts/setup.sh test

setup-compat: setup-test
	scripts/setup.sh compat

setup-demo:
	scripts/setup.sh demo

setup-bench:
	scripts/setup.sh bench
