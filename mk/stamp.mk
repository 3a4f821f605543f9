# Version stamps of the Makefile's builds and mk/lambda.mk's: `svz version` and the controller's
# "controller ready" log line print them (package internal/buildinfo). They come from git when the
# source is a checkout, and are empty otherwise (sam build copies the source without .git): the
# binaries then show what Go recorded. Override with e.g. `make build SVZ_VERSION=v0.4.1`.
ifndef SVZ_STAMP
SVZ_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
SVZ_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
SVZ_STAMP := -X github.com/supervaize/svz/internal/buildinfo.version=$(SVZ_VERSION) -X github.com/supervaize/svz/internal/buildinfo.revision=$(SVZ_REVISION)
endif
