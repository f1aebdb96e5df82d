# rookscript — build, test and benchmark.
#
#   make setup    install the Debian packages the project needs (idempotent, needs root or sudo)
#   make run      build and run the main job (GRPO on the embedded default model)
#   make test     vet + the whole test suite (what CI runs)
#   make bench    benchmarks against PyTorch CPU run in the same command
#
# CUDA (see docs/CUDA.md):
#   make setup-cuda  install the CUDA toolkit, cuBLAS headers and driver stub (Debian non-free)
#   make build-cuda  build the binary with the CUDA backend (-tags cuda)
#   make test-cuda   GPU parity tests against the CPU backend (needs a GPU)
#   make check-cuda  vet and build with -tags cuda, and ptx-check (no GPU needed; CI runs it)
#   make gpu-check   build the GPU check's bundle, then run it: on a GPU, parity + end to end +
#                    timings beside their floors + memcheck; without one, what needs none
#   make ptx         regenerate the committed PTX from engine/backend/cuda/kernels/*.cu (nvcc)
#   make ptx-check   fail if the committed PTX is not what nvcc makes from the sources

GO      ?= go
PYTHON  ?= /usr/bin/python3
BIN     := bin/rookscript
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Runtime and test dependencies: OpenBLAS for CPU GEMMs (cgo), Stockfish for rewards, OpenMPI
# for data-parallel ranks (linked, so that one binary runs alone or under mpirun).
APT_PACKAGES       := build-essential pkg-config libopenblas-dev stockfish ca-certificates libopenmpi-dev openmpi-bin
# Only the benchmarks and the fixture generator need PyTorch.
APT_BENCH_PACKAGES := python3 python3-torch python3-numpy
# The CUDA build: nvcc + cuBLAS headers/libraries + libcuda (the driver API library). They
# live in Debian's non-free component, added in a file of its own.
APT_CUDA_PACKAGES  := nvidia-cuda-dev nvidia-cuda-toolkit libcuda1
CUDA_APT_SOURCES   := /etc/apt/sources.list.d/rookscript-cuda.sources
CUDA_PKG           := ./engine/backend/cuda

.PHONY: setup setup-bench build run test bench fixtures fmt vet clean \
        setup-cuda build-cuda test-cuda check-cuda gpu-check ptx ptx-check

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

setup-cuda:
	@missing=$$(for p in $(APT_CUDA_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  if [ ! -f $(CUDA_APT_SOURCES) ]; then \
	    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' \
	      'Suites: bookworm bookworm-updates' 'Components: contrib non-free' \
	      'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | $(SUDO) tee $(CUDA_APT_SOURCES) >/dev/null; \
	  fi; \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	else echo "CUDA packages present"; fi

build:
	$(GO) build -o $(BIN) ./cmd/rookscript

# The main job. Run again, it resumes runs/grpo_stable: an interrupted run goes on, a finished
# one trains nothing and prints its table again. For a new run: rm -r runs/grpo_stable.
run: build
	@if [ -f runs/grpo_stable/checkpoints/LATEST ]; then \
		echo "$(BIN) recipes/grpo_stable.lua resume=runs/grpo_stable"; \
		$(BIN) recipes/grpo_stable.lua resume=runs/grpo_stable; \
	else \
		echo "$(BIN) recipes/grpo_stable.lua"; \
		$(BIN) recipes/grpo_stable.lua; \
	fi

vet:
	$(GO) vet ./...

test: vet
	$(GO) test -count=1 -timeout 15m ./...
	# The AVX2 path, as a processor without AVX-512 runs it, keeps DESIGN §6.1 too.
	ROOKSCRIPT_CPU_CAPABILITY=avx2 $(GO) test -count=1 -run 'Invariance|RecordedLogProbs' ./engine/backend/cpu ./engine/gpt2 ./engine/rollout ./engine/grpo

build-cuda:
	$(GO) build -tags cuda -o $(BIN) ./cmd/rookscript

test-cuda:
	$(GO) test -tags cuda -count=1 -timeout 20m -v $(CUDA_PKG) ./engine/device

check-cuda: ptx-check
	$(GO) vet -tags cuda ./...
	$(GO) build -tags cuda ./...

# bench/gpu_check.sh run is the command for a GPU machine without Go: it reads the bundle.
gpu-check:
	bench/gpu_check.sh build
	bench/gpu_check.sh run

ptx:
	$(GO) generate $(CUDA_PKG)/kernels

ptx-check:
	$(GO) run $(CUDA_PKG)/internal/ptxgen -check

# The harness prints one table. A run of every section writes bench/results/<machine>.json and
# renders bench/RESULTS.md and the README's table from all result files; a subset writes none:
# make bench BENCH_FLAGS='-runs 3 -only gemm,engine' (rookbench -h lists the flags;
# LLMC_DIR=<llm.c checkout with train_gpt2 built> adds llm.c).
BENCH_BIN   := bin/rookbench
BENCH_FLAGS ?=

bench: setup-bench build
	$(GO) build -o $(BENCH_BIN) ./cmd/rookbench
	PYTHON=$(PYTHON) $(BENCH_BIN) $(BENCH_FLAGS)

fixtures: setup-bench
	$(PYTHON) engine/gpt2/testdata/gen_fixtures.py
	$(PYTHON) engine/grpo/testdata/gen_trl_fixture.py

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
