# Per-call cost of the controller, as ratios to a floor handler measured in the same run
# (docs/performance.md). Included by the Makefile.

BENCH_CALLS_COUNT ?= 6

.PHONY: bench-calls bench-http

bench-calls: ## in-process per-call cost: controller vs floor handler, first-seen token vs Ed25519 (medians)
	go test -run '^$$' -bench 'CallRatio' -count $(BENCH_CALLS_COUNT) ./examples/helloworld/hello | tee bench-calls.txt | go run ./scripts/benchratio

bench-http: ## requests/s over HTTP with wrk: controller vs floor handler
	go run ./scripts/bench-http
