# o2o — the two set-up commands are `make demo` and `make test`; both install what is missing.
# Everything that installs anything is in scripts/setup.sh.
SHELL := /bin/bash
.DEFAULT_GOAL := build
O2O := target/release/o2o
VENV := $(or $(O2O_HOME),$(HOME)/.cache/o2o)/venv

.PHONY: setup build test bench demo

setup:
	@bash scripts/setup.sh

build: setup
	cargo build --release --workspace

# Tests run in the release profile: they share every compiled dependency with `make build`
# (one copy of libtorch bindings and the ~400 Rerun crates instead of two), and env-stepping
# and learning tests need optimized code anyway. --no-fail-fast: one run reports every failing
# test binary, not only the first.
# Then the Python package's tests (python/tests) with the venv's python, whatever the Rust tests
# gave, so one run reports both; the target fails when either fails.
test: build
	cargo fmt --all --check
	rc=0; cargo test --release --workspace --no-fail-fast || rc=$$?; \
	$(VENV)/bin/python -m pytest python/tests -q || rc=$$?; \
	exit $$rc

# The main job: WSRL end to end on the small halfcheetah dataset shipped in data/halfcheetah-small
# (pretrain → warm-up → fine-tune → evaluation, ≤ 10 min on 2 cores), ending with a table of
# the score at each phase and where its Rerun recording is. A second `make demo` prints the
# finished run's table again; delete runs/demo to run it afresh.
demo: build
	$(O2O) run --preset wsrl-halfcheetah-small --runs-dir runs/demo --reuse --threads 1

bench: build
	$(O2O) bench env HalfCheetah-v5
	$(O2O) bench data
	$(O2O) bench update
