# Logist — the two commands a new user needs are `make demo` and `make test`.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X github.com/logist/logist/internal/daemon.Version=$(VERSION) \
            -X github.com/logist/logist/internal/daemon.Revision=$(REVISION) \
            -X github.com/logist/logist/internal/cli.Version=$(VERSION)
# A count, not a duration: duration-bounded fuzzing can fail with "context
# deadline exceeded" at the end of the budget in go1.26 (golang/go#75804).
FUZZTIME ?= 20000x

.PHONY: all build demo test test-unit test-tools test-postgres cluster-chaos test-chromium test-alerts test-agents agents agents-ci clean-agents fuzz vet lint bench clean

all: build

# logist-sandbox is linked statically (no cgo): it starts twice per
# sandboxed call (launcher and in-sandbox helper), and the dynamic loader
# and cgo's start cost each start about 1 ms of CPU (docs/performance.md).
build:
	@echo "building bin/logistd, bin/logist-sandbox and bin/logist (a first build compiles every dependency: it can take a few minutes)…"
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/logistd ./cmd/logistd
	CGO_ENABLED=0 $(GO) build -o bin/logist-sandbox ./internal/sandbox/logist-sandbox
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/logist ./cmd/logist

# Runs the example jobs in jobs/ on the built-in scripted agent, in a
# scratch copy (the checkout stays clean), and prints what became of them.
demo: build
	@sh scripts/demo.sh

# The whole suite, with the race detector, plus a short run of every fuzzer.
# It runs the real agent CLIs of the CI set (AGENTS_CI) against the model stub.
test: vet lint test-tools test-postgres test-alerts test-chromium agents-ci test-unit fuzz

# The real agent CLIs (testbed/agentcli) take minutes under -race; Go's
# default 10-minute limit per package was hit on a loaded machine.
test-unit:
	$(GO) test -race -count=1 -timeout 30m ./...

# Agent CLIs from npm at the versions pinned in scripts/agent-versions.txt,
# installed once into .cache/agents (this Makefile's folder; `make clean-agents`).
AGENTS_CI ?= claude-code codex opencode
agents-ci:
	@sh scripts/install-agents.sh $(AGENTS_CI)

agents:
	@sh scripts/install-agents.sh

# Every agent preset end to end against the model stub (the CI set runs in
# `make test` too).
test-agents: agents
	LOGIST_TEST_AGENTS=all $(GO) test -race -count=1 -v -run . ./internal/testbed/agentcli

clean-agents:
	rm -rf .cache/agents

# Outside programs the tests use (prometheus, zsh, fish), from Debian's packages.
test-tools:
	@sh scripts/test-tools.sh

# PostgreSQL for the cluster tests (internal/pgtest starts throwaway servers):
# installs Debian's postgresql when missing and the user logist-test they run as.
test-postgres:
	@sh scripts/postgres.sh

# Cluster mode under chaos, full size: 3 logistd nodes on a throwaway
# PostgreSQL, 100+ jobs, 30 SIGKILLs, 5 pauses past the lease, 3 cuts from
# the database; the last line is the figures (go test runs a short form).
cluster-chaos: test-postgres
	@sh scripts/cluster-chaos.sh

# Debian's chromium for the console's browser test (internal/console).
test-chromium:
	@sh scripts/chromium.sh

# promtool check + unit tests of the alert rules (installs Debian's prometheus).
test-alerts:
	@sh scripts/promtool.sh

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l cmd internal schemas); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# golangci-lint (.golangci.yml), pinned. Built from the Go module proxy into
# .cache/bin the first time and whenever the pin changes (a minute or two of
# compiling; CI should keep .cache/bin between runs), then reused.
GOLANGCI_LINT_VERSION := 2.15.0
GOLANGCI_LINT         := .cache/bin/golangci-lint
lint:
	@if ! $(GOLANGCI_LINT) version 2>/dev/null | grep -q "version v\{0,1\}$(GOLANGCI_LINT_VERSION) "; then \
		echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into .cache/bin"; \
		GOBIN="$(CURDIR)/.cache/bin" $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$(GOLANGCI_LINT_VERSION) || exit 1; \
	fi
	$(GOLANGCI_LINT) run ./...

# Each fuzz target for FUZZTIME executions (go test -fuzz takes one target at a time).
fuzz:
	@sh scripts/fuzz.sh $(FUZZTIME)

# Every benchmark (BenchmarkAppend: one fsync'd append to histories of 10,
# 1,000 and 10,000 records), a fixed number of iterations each.
BENCHTIME ?= 200x
# Then logist-bench: whole-process scenarios against baselines measured in the
# same run, written to docs/benchmarks.md (generated) and docs/benchmarks.json.
# BENCH_FLAGS=-quick: reduced sizes, a smoke test (written to a temp folder).
BENCH_FLAGS ?=
bench: build
	@command -v inotifywait >/dev/null 2>&1 || apt-get install -y inotify-tools >/dev/null 2>&1 || echo "inotify-tools not installed: the pickup baseline will be reported unavailable"
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) $$(grep -rl --include='*_test.go' '^func Benchmark' cmd internal | xargs -n1 dirname | sort -u | sed 's|^|./|')
	$(GO) run ./internal/testbed/bench/logist-bench $(BENCH_FLAGS)

clean:
	rm -rf bin
