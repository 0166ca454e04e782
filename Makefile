# Logist — the two commands a new user needs are `make demo` and `make test`.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X github.com/logist/logist/internal/daemon.Version=$(VERSION) \
            -X github.com/logist/logist/internal/daemon.Revision=$(REVISION) \
            -X github.com/logist/logist/internal/cli.Version=$(VERSION)
FUZZTIME ?= 10s

.PHONY: all build demo test test-unit test-alerts fuzz vet bench clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/logistd ./cmd/logistd
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/logist ./cmd/logist

# Runs the example jobs in jobs/ on the built-in scripted agent, in a
# scratch copy (the checkout stays clean), and prints what became of them.
demo: build
	@sh scripts/demo.sh

# The whole suite, with the race detector, plus a short run of every fuzzer.
test: vet test-alerts test-unit fuzz

test-unit:
	$(GO) test -race -count=1 ./...

# promtool check + unit tests of the alert rules (installs Debian's prometheus).
test-alerts:
	@sh scripts/promtool.sh

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l cmd internal schemas); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Each fuzz target for FUZZTIME (go test -fuzz takes one target at a time).
fuzz:
	@sh scripts/fuzz.sh $(FUZZTIME)

# Every benchmark (BenchmarkAppend: one fsync'd append to histories of 10,
# 1,000 and 10,000 records), a fixed number of iterations each.
BENCHTIME ?= 200x
bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) $$(grep -rl --include='*_test.go' '^func Benchmark' cmd internal | xargs -n1 dirname | sort -u | sed 's|^|./|')

clean:
	rm -rf bin
