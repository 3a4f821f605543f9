# AWS Lambda: the bootstrap build `sam build` runs, and the cold-start benchmark.
# Included by the Makefile; also usable alone: make -f mk/lambda.mk build-ControllerFunction ARTIFACTS_DIR=out
#
# template.yaml's ControllerFunction has `BuildMethod: makefile`, so `sam build` copies the
# source and runs `make build-ControllerFunction ARTIFACTS_DIR=<dir>`. SAM passes no
# architecture: the bootstrap is built for arm64 (the template's default) unless GOARCH says
# otherwise, e.g. `GOARCH=amd64 sam build --parameter-overrides Architecture=x86_64`.

# The program to build: its main must call platform.Main.
LAMBDA_MAIN ?= ./examples/helloworld
# The Lambda build leaves out what a function does not run: the RPC mode of aws-lambda-go
# (go1.x runtime only), the Cloud Run adapter, local mode's HTTP server (and what it mounts), the
# store backends other than DynamoDB and memory (a bbolt file does not survive an instance;
# PostgreSQL and Redis are for servers), and the AWS SDK's default credential chain (Lambda always
# gives static credentials).
LAMBDA_TAGS ?= lambda.norpc,svz_nocloudrun,svz_nolocal,svz_nobolt,svz_nopostgres,svz_noredis,svz_noawschain
LAMBDA_ARCH ?= $(or $(GOARCH),arm64)
LAMBDA_GO_BUILD = CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_ARCH) go build -trimpath -tags '$(LAMBDA_TAGS)' -ldflags='-s -w'

.PHONY: build-ControllerFunction bench-lambda

build-ControllerFunction: ## the Lambda bootstrap into $(ARTIFACTS_DIR), as sam build calls it
	@if [ -z "$(ARTIFACTS_DIR)" ]; then echo "ARTIFACTS_DIR is required (sam build sets it)" >&2; exit 1; fi
	$(LAMBDA_GO_BUILD) -o '$(ARTIFACTS_DIR)/bootstrap' $(LAMBDA_MAIN)

# bench-lambda builds our bootstrap and a minimal aws-lambda-go hello world the same way, for
# this machine, and measures both under the Runtime Interface Emulator.
BENCH_LAMBDA_DIR ?= $(or $(TMPDIR),/tmp)/svz-bench-lambda
BENCH_LAMBDA_RUNS ?= 30
RIE ?= $(or $(SVZ_TEST_RIE),$(shell command -v aws-lambda-rie),$(HOME)/go/bin/aws-lambda-rie)

bench-lambda: ## cold start, warm latency and size of the Lambda bootstrap vs an aws-lambda-go hello world
	$(MAKE) -f mk/lambda.mk build-ControllerFunction ARTIFACTS_DIR='$(BENCH_LAMBDA_DIR)/svz' GOARCH=$$(go env GOHOSTARCH)
	$(MAKE) -f mk/lambda.mk build-ControllerFunction ARTIFACTS_DIR='$(BENCH_LAMBDA_DIR)/hello' GOARCH=$$(go env GOHOSTARCH) LAMBDA_MAIN=./scripts/bench-lambda/hello LAMBDA_TAGS=lambda.norpc
	go run ./scripts/bench-lambda -rie '$(RIE)' -runs $(BENCH_LAMBDA_RUNS) \
	  -svz '$(BENCH_LAMBDA_DIR)/svz/bootstrap' -hello '$(BENCH_LAMBDA_DIR)/hello/bootstrap'
