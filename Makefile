# lockwatch — two commands on a fresh machine: `make demo` and `make test`.
# Each installs the Debian packages it needs first (scripts/setup.sh).

CARGO ?= cargo

.PHONY: demo test bench lint fmt deb setup-test setup-demo setup-bench

demo: setup-demo
	$(CARGO) run --release --locked -- demo

test: setup-test
	$(CARGO) test --locked

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

bench: setup-bench
	scripts/bench.sh

setup-test:
	scripts/setup.sh test

setup-demo:
	scripts/setup.sh demo

setup-bench:
	scripts/setup.sh bench
