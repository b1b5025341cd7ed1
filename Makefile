# lockwatch — two commands on a fresh machine: `make demo` and `make test`.
# Each installs the Debian packages it needs first (scripts/setup.sh).

CARGO ?= cargo

.PHONY: demo test bench lint fmt setup-test setup-demo setup-bench

demo: setup-demo
	$(CARGO) run --release --locked -- demo

test: setup-test
	$(CARGO) test --locked

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
