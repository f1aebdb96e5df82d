# rookscript — build, test and benchmark.
#
#   make setup    install the Debian packages the project needs (idempotent, needs root or sudo)
#   make run      build and run the main job (GRPO on the embedded default model)
#   make test     vet + the whole test suite (what CI runs)
#   make bench    benchmarks against PyTorch CPU run in the same command

GO      ?= go
PYTHON  ?= /usr/bin/python3
BIN     := bin/rookscript
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Runtime and test dependencies: OpenBLAS for CPU GEMMs (cgo), Stockfish for rewards.
APT_PACKAGES       := build-essential pkg-config libopenblas-dev stockfish ca-certificates
# Only the benchmarks and the fixture generator need PyTorch.
APT_BENCH_PACKAGES := python3 python3-torch python3-numpy

.PHONY: setup setup-bench build run test bench fixtures fmt vet clean

setup:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	else echo "system packages present"; fi
	$(GO) mod download

setup-bench: setup
	@missing=$$(for p in $(APT_BENCH_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	fi

build:
	$(GO) build -o $(BIN) ./cmd/rookscript

run: build
	$(BIN) recipes/grpo_stable.lua

vet:
	$(GO) vet ./...

test: vet
	$(GO) test -count=1 -timeout 15m ./...

bench: setup-bench build
	$(GO) run ./cmd/rookbench

fixtures: setup-bench
	$(PYTHON) engine/gpt2/testdata/gen_fixtures.py

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
