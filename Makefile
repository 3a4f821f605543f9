# svz — run `make help` for the targets.
SHELL := /usr/bin/env bash
export GOTOOLCHAIN := local

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GO_TEST_FLAGS ?= -race -count=1 -timeout 20m

.PHONY: help build run test lint unit bench fuzz bench-controller bench-http bench-grant bench-store bench-bill bench-adapters bench-jobs sizes example-lines workbench-screenshots mutate

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-24s %s\n", $$1, $$2}'

BIN_DIR ?= bin
build: ## svz and cmd/local into $(BIN_DIR), stamped with the version and revision (svz version; mk/stamp.mk)
	go build -ldflags '$(SVZ_STAMP)' -o '$(BIN_DIR)/' ./cmd/svz ./cmd/local

run: ## serve Hello World in local mode on 127.0.0.1:8000
	go run ./cmd/local

test: lint ## lint, then every test against real servers (scripts/with-services starts them)
	scripts/with-services go test $(GO_TEST_FLAGS) ./...
	go test $(GO_TEST_FLAGS) -tags svz_nootel ./core/telemetry ./core/store/traced

lint: ## gofmt, go vet and staticcheck must be clean
	@out=$$(gofmt -l .); if [[ -n $$out ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	go run $(STATICCHECK) ./...

unit: ## the tests that need no server (the others skip)
	go test -race ./...

bench: ## benchmarks (compare runs with benchstat)
	scripts/with-services go test -run '^$$' -bench . -benchmem -count 6 ./... | tee bench.txt

# The figures of docs/: each is reproduced by one of these (see docs/performance.md).
BENCH_COUNT ?= 8
BENCH_ROUNDS ?= 5
bench-controller: ## per-call cost in-process: ratios to a floor handler, first-seen token vs Ed25519 (docs/performance.md)
	go test -run '^$$' -bench 'CallRatio' -count 6 ./examples/helloworld/hello | tee bench-controller.txt | go run ./scripts/benchratio

bench-http: ## requests/s over HTTP (wrk): the controller vs a floor handler (docs/performance.md)
	go run ./scripts/bench-http

bench-grant: ## workspace-grant token verification (docs/grants.md#cost)
	go test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) ./core/grant

bench-store: ## every store backend and the idempotency gate, against real servers (docs/state.md#performance)
	scripts/with-services go test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) ./core/store/... ./core/idempotency

bench-bill: ## store requests, DynamoDB units and dollars per call kind, against moto (docs/performance.md#the-bill-per-call)
	scripts/with-services go test -count=1 -run '^$$' -bench Bill -benchtime 1x ./internal/bill

bench-adapters: ## the Lambda adapter against aws-lambda-go-api-proxy (docs/platforms.md#measured-figures)
	go test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) ./adapters/lambda

bench-jobs: ## background jobs: writes per step, fan-out, restarts, limits, timers on Lambda, beside DBOS Transact; PostgreSQL with fsync on (docs/performance.md)
	SVZ_POSTGRES_FSYNC=on BENCH_COUNT=$(BENCH_COUNT) BENCH_ROUNDS=$(BENCH_ROUNDS) scripts/with-services scripts/bench-jobs

bench-events-rss: ## resident memory of 100 non-reading replaying streams over 300 events of 130 KB (docs/events.md#memory)
	go run ./internal/eventsrss

sizes: ## binary sizes per build tag and per store backend (docs/platforms.md, docs/state.md)
	scripts/sizes
	core/store/storeenv/sizes.sh

example-lines: ## non-test Go lines of examples/leadgen: all, then code only (docs/agents.md)
	@find examples/leadgen -name '*.go' ! -name '*_test.go' | xargs cat | wc -l
	@find examples/leadgen -name '*.go' ! -name '*_test.go' | xargs cat | grep -cvE '^\s*($$|//)'

workbench-screenshots: ## the workbench's screenshots in docs/images (docs/workbench.md), from its browser tests
	SVZ_TEST_CHROMIUM=$${SVZ_TEST_CHROMIUM:-$$(command -v chromium)} go test -count=1 -run '^TestBrowser' ./adapters/platform/workbench -args -screenshots '$(CURDIR)/docs/images'

# Mutation testing, a tool for development (not part of test or CI): docs/development.md.
PKGS ?=
mutate: ## mutation-test PKGS (default: those changed since BASE, origin/main or main) on the lines changed since BASE (BASE=all: every line)
	BASE='$(BASE)' RUN='$(RUN)' SKIP='$(SKIP)' scripts/mutate $(PKGS)

FUZZTIME ?= 30s
fuzz: ## run every fuzz target for FUZZTIME each
	@for pkg in $$(go list ./...); do \
	  for f in $$(go test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

-include mk/*.mk
