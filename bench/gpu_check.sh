#!/usr/bin/env bash
# The GPU check: everything a first run on a real GPU must show, prepared in advance so that it
# runs in one go on a machine that has no Go toolchain and no package registry (docs/CUDA.md,
# "The GPU check").
#
#   bench/gpu_check.sh build   here (Go, the CUDA headers): the -tags cuda binaries, the parity
#                              test binary and the OpenBLAS they load, packed into
#                              bin/gpu-check.tar.gz (cuBLAS is not packed: the backend loads the
#                              GPU machine's own, libcublas.so.13, .12 or .11, at run time)
#   bench/gpu_check.sh run     on the GPU machine, from the repository root: unpacks the bundle,
#                              runs the parity suite against the CPU backend, the rookscript
#                              command end to end, and rookbench's GPU sections (each timing
#                              beside its roofline floor; the host's CPU profile of it beside the
#                              report), then compute-sanitizer's memcheck, racecheck and synccheck;
#                              writes one report, $OUT/gpu-check.txt (bin/gpu-check-out/ when OUT
#                              is unset)
#
# Without a GPU, run does every step that needs none (the bundle's libraries, the kernels under
# the CPU emulator when Go is here) and lists what it skipped. 'make gpu-check' is build + run.
set -u
cd "$(dirname "$0")/.."
BUNDLE=bin/gpu-check.tar.gz

build() {
	set -e
	local dir=bin/gpu-check
	rm -rf "$dir" && mkdir -p "$dir/lib"
	local flags=(-tags cuda -trimpath -ldflags=-s\ -w)
	go build "${flags[@]}" -o "$dir/rookscript" ./cmd/rookscript
	go build "${flags[@]}" -o "$dir/rookbench" ./cmd/rookbench
	go test "${flags[@]}" -c -o "$dir/cuda.test" ./engine/backend/cuda
	go test "${flags[@]}" -c -o "$dir/device.test" ./engine/device
	# The libraries the binaries need besides the driver's libcuda and the C library: Debian's
	# OpenBLAS and its Fortran runtime, which the GPU machine's image does not have.
	local lib
	for lib in $(ldd "$dir/cuda.test" | awk '/=>/ {print $1}'); do
		case "$lib" in
		libopenblas* | libgfortran* | libquadmath*) cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')" "$dir/lib/$lib" ;;
		esac
	done
	if ldd "$dir/cuda.test" "$dir/rookscript" | grep -q cublas; then
		echo "gpu_check: a binary links cuBLAS; it must load it at run time (engine/backend/cuda/cublas.go)" >&2
		exit 1
	fi
	tar -C bin -czf "$BUNDLE" gpu-check
	echo "gpu_check: $BUNDLE, $(du -h "$BUNDLE" | cut -f1) (the device tool carries at most 64 MiB with the tree):"
	(cd "$dir" && du -h rookscript rookbench cuda.test device.test lib/*)
}

# --- run -------------------------------------------------------------------------------------

OUTDIR=${OUT:-bin/gpu-check-out}
REPORT=$OUTDIR/gpu-check.txt
declare -a SUMMARY

say() { echo "$*" | tee -a "$REPORT"; }
# stage NAME LIMIT CMD...: runs CMD under a time limit, its output into the report, and notes
# PASS/FAIL with the time taken in the summary.
stage() {
	local name=$1 limit=$2
	shift 2
	say ""
	say "== $name ($(date -u +%H:%M:%S), limit ${limit}s): $*"
	local t0=$SECONDS rc
	timeout -k 10 "$limit" "$@" >>"$REPORT" 2>&1
	rc=$?
	local verdict=PASS
	if [ $rc = 124 ] || [ $rc = 137 ]; then verdict="FAIL (timed out after ${limit}s)"; elif [ $rc != 0 ]; then verdict="FAIL (exit $rc)"; fi
	say "-- $name: $verdict in $((SECONDS - t0)) s"
	SUMMARY+=("$(printf '%-40s %s, %d s' "$name" "$verdict" $((SECONDS - t0)))")
}
skip() {
	say ""
	say "== $1: SKIPPED, $2"
	SUMMARY+=("$(printf '%-40s SKIPPED: %s' "$1" "$2")")
}

# find_cublas prints the newest libcublas.so.N on this machine: pip's nvidia packages first
# (the image's PyTorch brings them), then the loader's cache.
find_cublas() {
	local py
	for py in python3 /usr/bin/python3; do
		command -v "$py" >/dev/null || continue
		"$py" - <<'EOF' 2>/dev/null && return
import glob, os, site, sys
dirs = site.getsitepackages() + [site.getusersitepackages()]
found = [p for d in dirs for p in glob.glob(os.path.join(d, "nvidia", "**", "libcublas.so.[0-9]*"), recursive=True)]
found.sort(key=lambda p: int(p.rsplit(".so.", 1)[1].split(".")[0]), reverse=True)
if not found:
    sys.exit(1)
print(found[0])
EOF
	done
	ldconfig -p | awk '$1 ~ /^libcublas\.so\.[0-9]+$/ {print $NF}' | sort -V | tail -1
}

run() {
	mkdir -p "$OUTDIR"
	: >"$REPORT"
	local gpu=""
	if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
		gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
	fi
	say "rookscript GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	say "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, $(uname -sr)"
	if [ -n "$gpu" ]; then
		nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv >>"$REPORT" 2>&1
		say "GPU: $gpu"
	else
		say "GPU: none (nvidia-smi found no device)"
	fi

	if [ ! -f "$BUNDLE" ]; then
		say "no $BUNDLE: run 'bench/gpu_check.sh build' (or make gpu-check) on a machine with Go first"
		exit 1
	fi
	local dir
	dir=$(mktemp -d /tmp/rookscript-gpu.XXXXXX)
	tar -C "$dir" -xzf "$BUNDLE"
	dir=$dir/gpu-check
	export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	# The driver's libcuda where an image keeps it outside the loader's cache.
	local d
	for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
		[ -e "$d/libcuda.so.1" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
	done
	local cublas
	cublas=$(find_cublas)
	if [ -n "$cublas" ]; then
		export ROOKSCRIPT_CUBLAS=$cublas
		LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$cublas")" # its libcublasLt beside it
	fi
	say "cuBLAS: ${cublas:-not found}"
	say "libraries of the test binary (a 'not found' here stops everything below):"
	ldd "$dir/cuda.test" >>"$REPORT" 2>&1
	grep -q 'not found' <(ldd "$dir/cuda.test" 2>&1) && say "WARNING: unresolved libraries, above"

	if [ -n "$gpu" ]; then
		stage "parity: GPU against the CPU backend" 150 "$dir/cuda.test" -test.v -test.count=1
		stage "device.Open(cuda)" 30 "$dir/device.test" -test.v -test.count=1
		stage "rookscript end to end on the GPU" 90 "$dir/rookscript" bench/gpu_smoke.lua device=cuda
		stage "rookbench: timings beside their floors" 200 "$dir/rookbench" -device cuda -runs 5 -warmup 1 -gen-runs 3 -batch 16 -seq 128 \
			-cpuprofile "$OUTDIR/rookbench-host.pprof"
		if command -v compute-sanitizer >/dev/null; then
			# memcheck over every check; racecheck (shared-memory races, which the emulator's
			# interleavings may miss) and synccheck (barriers in divergent code) over the kernels.
			local kernels='TestParity/(Memory|Elementwise|GELU|Rows|Encoder|LayerNorm|MatMul|Attention|AttentionDecode|LogProbs|Softmax|AdamW|SumSquares|Determinism)$'
			stage "compute-sanitizer memcheck, all checks" 120 compute-sanitizer --tool memcheck --error-exitcode 3 "$dir/cuda.test" -test.count=1
			stage "compute-sanitizer racecheck, kernels" 120 compute-sanitizer --tool racecheck --error-exitcode 3 "$dir/cuda.test" -test.count=1 -test.run "$kernels"
			stage "compute-sanitizer synccheck, kernels" 90 compute-sanitizer --tool synccheck --error-exitcode 3 "$dir/cuda.test" -test.count=1 -test.run "$kernels"
		else
			skip "compute-sanitizer" "compute-sanitizer is not on the PATH"
		fi
	else
		for s in "parity: GPU against the CPU backend" "device.Open(cuda)" "rookscript end to end on the GPU" \
			"rookbench: timings beside their floors" "compute-sanitizer"; do
			skip "$s" "no GPU on this machine"
		done
		if command -v go >/dev/null; then
			stage "kernels under the CPU emulator" 300 go test -count=1 ./engine/backend/cuda/...
		else
			skip "kernels under the CPU emulator" "no Go toolchain here"
		fi
	fi

	say ""
	say "== summary (full output above in $REPORT)"
	for line in "${SUMMARY[@]}"; do say "$line"; done
	! printf '%s\n' "${SUMMARY[@]}" | grep -q FAIL
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
	echo "usage: bench/gpu_check.sh build|run" >&2
	exit 2
	;;
esac
