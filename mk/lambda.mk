# AWS Lambda: the bootstrap build `sam build` runs, a local invocation without Docker, and the
# cold-start benchmark.
# Included by the Makefile; also usable alone: make -f mk/lambda.mk build-ControllerFunction (into bin/)
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
# PostgreSQL and Redis are for servers), the AWS SDK's default credential chain (Lambda always
# gives static credentials), and the Studio client (the template gives the function no Studio
# account; svz deploy builds its Lambda images with it). OpenTelemetry's SDK and OTLP exporters
# (about 8 MB) are left out too (svz_nootel) unless LAMBDA_OTEL=1: a function that exports
# traces and metrics (OTEL_* settings, docs/observability.md) is built with LAMBDA_OTEL=1.
LAMBDA_TAGS ?= lambda.norpc,svz_nocloudrun,svz_nolocal,svz_nobolt,svz_nopostgres,svz_noredis,svz_noawschain,svz_nostudio,svz_nootel
comma := ,
ifneq ($(LAMBDA_OTEL),)
LAMBDA_TAGS := $(subst $(comma)svz_nootel,,$(LAMBDA_TAGS))
endif
LAMBDA_ARCH ?= $(or $(GOARCH),arm64)
include mk/stamp.mk
LAMBDA_GO_BUILD = CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_ARCH) go build -trimpath -tags '$(LAMBDA_TAGS)' -ldflags='-s -w $(SVZ_STAMP)'

.PHONY: build-ControllerFunction rie invoke bench-lambda

# sam build sets ARTIFACTS_DIR; by hand the bootstrap lands in bin/.
ARTIFACTS_DIR ?= bin
build-ControllerFunction: ## the Lambda bootstrap into bin/, or into ARTIFACTS_DIR (sam build sets it)
	@if [ -z "$(ARTIFACTS_DIR)" ]; then echo "ARTIFACTS_DIR is empty: unset it for bin/, or give the output directory (sam build sets it)" >&2; exit 1; fi
	$(LAMBDA_GO_BUILD) -o '$(ARTIFACTS_DIR)/bootstrap' $(LAMBDA_MAIN)

# The AWS Lambda Runtime Interface Emulator: the one scripts/with-services installs, found on PATH,
# or installed by `make rie` into the Go bin directory.
RIE_VERSION ?= $(shell sed -n 's/^RIE_VERSION=//p' scripts/with-services)
GO_BIN_DIR := $(or $(shell go env GOBIN),$(firstword $(subst :, ,$(shell go env GOPATH)))/bin)
RIE ?= $(or $(SVZ_TEST_RIE),$(shell command -v aws-lambda-rie),$(GO_BIN_DIR)/aws-lambda-rie)

rie: ## install the Lambda Runtime Interface Emulator (go install) unless $(RIE) exists
	@if [ ! -x '$(RIE)' ]; then \
	  echo "installing aws-lambda-rie@$(RIE_VERSION) into $(GO_BIN_DIR)"; \
	  go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION); \
	fi

# invoke is `sam local invoke` without Docker (nor QEMU for arm64): the bootstrap built as sam
# build builds it, for this machine, run once under the emulator with EVENT and the environment of
# ENV_VARS (a SAM --env-vars file). The response goes to stdout, the logs to stderr. The default
# ENV_VARS turns local mode on, which refuses (403) an event whose Host is not loopback: the
# samples under events/ name 127.0.0.1:3000.
INVOKE_DIR ?= $(or $(TMPDIR),/tmp)/svz-invoke
ENV_VARS ?= events/env.json

invoke: rie ## run the bootstrap under the Lambda emulator with EVENT=events/… (sam local invoke without Docker)
	@if [ -z '$(EVENT)' ]; then echo "EVENT is required, e.g. make invoke EVENT=events/function-url-health.json" >&2; exit 2; fi
	@$(MAKE) --no-print-directory -f mk/lambda.mk build-ControllerFunction ARTIFACTS_DIR='$(INVOKE_DIR)' GOARCH=$$(go env GOHOSTARCH) >&2
	@go run ./scripts/lambda-invoke -rie '$(RIE)' -bootstrap '$(INVOKE_DIR)/bootstrap' -env-vars '$(ENV_VARS)' -event '$(EVENT)'

# bench-lambda builds our bootstrap and a minimal aws-lambda-go hello world the same way, for
# this machine, and measures both under the Runtime Interface Emulator.
BENCH_LAMBDA_DIR ?= $(or $(TMPDIR),/tmp)/svz-bench-lambda
BENCH_LAMBDA_RUNS ?= 30

bench-lambda: ## cold start, warm latency and size of the Lambda bootstrap vs an aws-lambda-go hello world
	$(MAKE) -f mk/lambda.mk build-ControllerFunction ARTIFACTS_DIR='$(BENCH_LAMBDA_DIR)/svz' GOARCH=$$(go env GOHOSTARCH)
	$(MAKE) -f mk/lambda.mk build-ControllerFunction ARTIFACTS_DIR='$(BENCH_LAMBDA_DIR)/hello' GOARCH=$$(go env GOHOSTARCH) LAMBDA_MAIN=./scripts/bench-lambda/hello LAMBDA_TAGS=lambda.norpc
	go run ./scripts/bench-lambda -rie '$(RIE)' -runs $(BENCH_LAMBDA_RUNS) \
	  -svz '$(BENCH_LAMBDA_DIR)/svz/bootstrap' -hello '$(BENCH_LAMBDA_DIR)/hello/bootstrap'
