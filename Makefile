# agentic-operator developer entry points. `make test` installs what it needs on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CACHE_DIR ?= $(HOME)/.cache/agentic-operator
export AGENTIC_CACHE_DIR := $(CACHE_DIR)

.PHONY: help
help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# Release binaries are position-dependent (non-PIE), as Go builds Kubernetes' own: 1.4 MB
# less resident memory, no startup relocations (docs/performance.md). RUSTFLAGS reach only
# the target's crates when --target is explicit, never build scripts or proc macros.
RELEASE_TARGET := $(shell rustc -vV | sed -n 's/^host: //p')
RELEASE_RUSTFLAGS := -C relocation-model=static
RELEASE_DIR = $${CARGO_TARGET_DIR:-target}/$(RELEASE_TARGET)/release

.PHONY: build
build: ## Build the release binary, exactly as the Dockerfile does (into target/<host triple>/release)
	RUSTFLAGS="$(RELEASE_RUSTFLAGS)" cargo build --release --locked --target $(RELEASE_TARGET) -p agentic-operator

.PHONY: testenv
testenv: ## Build (or reuse) the control plane's and the test node's binaries, helm and kubectl; print their directory last
	@hack/testenv-tools.sh

.PHONY: registry
registry: ## Install the OCI registry (Debian's docker-registry) when missing
	@hack/install-registry.sh

.PHONY: node-packages
node-packages: ## Install what the test node takes from Debian (runc, CNI plugins, busybox) when missing
	@hack/install-node-packages.sh

.PHONY: skills-ref
skills-ref: ## Install the reference skill validator (skills-ref) into a cached venv; print its command last
	@hack/install-skills-ref.sh

.PHONY: shellcheck
shellcheck: ## Install shellcheck (Debian) when missing
	@command -v shellcheck >/dev/null || { apt-get update -qq && apt-get install -y -qq shellcheck >/dev/null; }

.PHONY: run
run: ## Local control plane, registry and node, the sample skills and objects, the operator in the foreground
	@hack/run-local.sh

.PHONY: e2e-kind
e2e-kind: ## End-to-end test on kind (needs Docker, kind >= 0.33, kubectl, helm)
	hack/kind-e2e.sh

.PHONY: test
test: registry node-packages shellcheck ## Run every test: unit, CRD drift, differential validation, integration on a real control plane and node
	export AGENTIC_TESTENV_BIN="$$(hack/testenv-tools.sh | tail -n1)"; \
	export AGENTSKILLS_BIN="$$(hack/install-skills-ref.sh | tail -n1)"; \
	export GOOSE_BIN="$$(hack/install-goose.sh | tail -n1)"; \
	export GOOSE_PREVIOUS_BIN="$$(hack/install-goose.sh previous | tail -n1)"; \
	export COSIGN_BIN="$$(hack/install-cosign.sh | tail -n1)"; \
	export JAEGER_BIN="$$(hack/install-jaeger.sh | tail -n1)"; \
	cargo test --workspace --all-targets --all-features --locked

.PHONY: test-unit
test-unit: ## Run the fast tests alone: no tools to install, no control plane (plain `cargo test`)
	cargo test --locked

.PHONY: bench
bench: registry ## Throughput and footprint on the test control plane: N runs (BENCH_ARGS="--runs 1000", "--ceiling"); see docs/performance.md
	export AGENTIC_TESTENV_BIN="$$(hack/testenv-tools.sh | tail -n1)"; \
	RUSTFLAGS="$(RELEASE_RUSTFLAGS)" cargo build --release --locked --target $(RELEASE_TARGET) -p agentic-operator -p agentic-bench; \
	"$(RELEASE_DIR)/agentic-bench" --operator "$(RELEASE_DIR)/agentic-operator" $(BENCH_ARGS)

.PHONY: lint
lint: ## rustfmt, clippy and cargo-deny (licenses, bans, sources: deny.toml), as CI expects them
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
	"$$(hack/install-cargo-deny.sh | tail -n1)" --locked check licenses bans sources

.PHONY: chart-readme
chart-readme: ## Regenerate the values table of charts/agentic-operator/README.md from values.yaml
	AGENTIC_BLESS=1 cargo test --quiet --locked -p agentic-integration-tests --test integration -- chart_readme::

.PHONY: crds
crds: ## Regenerate the committed CRD manifests from the Rust types
	cargo run --quiet --locked -p agentic-operator -- crd --group konveyor.io > config/crd/bases/konveyor.io.yaml
	cargo run --quiet --locked -p agentic-operator -- crd --group trust.agentic-operator.io > config/crd/bases/trust.agentic-operator.io.yaml
	cp config/crd/bases/konveyor.io.yaml config/crd/bases/trust.agentic-operator.io.yaml charts/agentic-operator/files/crds/
