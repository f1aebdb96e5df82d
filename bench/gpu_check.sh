#!/usr/bin/env bash
# The GPU check: everything a first run on a real GPU must show, prepared in advance so that it
# runs in one go on a machine that has no Go toolchain and no package registry (docs/CUDA.md,
# "The GPU check").
#
#   bench/gpu_check.sh build   here (Go, the CUDA headers): the -tags cuda binaries, the parity
#                              test binary and the shared libraries they load that a CUDA image
#                              lacks (OpenBLAS, Open MPI and theirs), packed into
#                              bin/gpu-check.tar.gz (cuBLAS and NCCL are not packed: the backend
#                              loads the GPU machine's own at run time)
#   bench/gpu_check.sh run     on the GPU machine, from the repository root: unpacks the bundle,
#                              runs the parity suite against the CPU backend, NCCL on a world of
#                              one, the rookscript command end to end, and rookbench's GPU
#                              sections (each timing beside its roofline floor; the host's CPU
#                              profile of it beside the report), then compute-sanitizer's
#                              memcheck, racecheck and synccheck; writes one report,
#                              $OUT/gpu-check.txt (bin/gpu-check-out/ when OUT is unset)
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
	local bins=(rookscript rookbench cuda.test device.test)
	# The libraries the binaries need that a CUDA or PyTorch image does not have: Debian's
	# OpenBLAS with its Fortran runtime, Open MPI (every build links it) and what they load. The
	# image has the C library, the driver's libcuda and the compilers' runtimes.
	local lib path
	(cd "$dir" && ldd "${bins[@]}") | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
		while read -r lib path; do
			if bundled "$lib"; then cp -L "$path" "$dir/lib/$lib"; fi
		done
	if (cd "$dir" && ldd "${bins[@]}") | grep -Eq 'cublas|nccl'; then
		echo "gpu_check: a binary links cuBLAS or NCCL; it must load them at run time (engine/backend/cuda)" >&2
		exit 1
	fi
	git rev-parse --short HEAD >"$dir/COMMIT" 2>/dev/null || echo unknown >"$dir/COMMIT"
	git diff --quiet HEAD 2>/dev/null || sed -i 's/$/ (with uncommitted changes)/' "$dir/COMMIT"
	tar -C bin -czf "$BUNDLE" gpu-check
	check_bundle
	echo "gpu_check: $BUNDLE, $(du -h "$BUNDLE" | cut -f1) (the device tool carries at most 64 MiB with the tree):"
	(cd "$dir" && du -h "${bins[@]}" lib/*)
}

# bundled LIB: whether the bundle carries LIB (a soname), i.e. it is none of the C library's,
# the driver's or the compilers' runtimes, which every CUDA image has.
bundled() {
	case "$1" in
	linux-vdso.so.* | ld-linux* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libresolv.so.* | \
		libcuda.so.* | libgcc_s.so.* | libstdc++.so.*) return 1 ;;
	esac
}

# check_bundle unpacks the bundle and checks that every library its binaries need, besides the
# ones an image has, resolves to the bundle's own copy.
check_bundle() {
	local tmp bad
	tmp=$(mktemp -d)
	tar -C "$tmp" -xzf "$BUNDLE"
	bad=$(cd "$tmp/gpu-check" && LD_LIBRARY_PATH="$PWD/lib" ldd rookscript rookbench cuda.test device.test |
		awk -v lib="$tmp/gpu-check/lib/" '
			/:$/ {bin = substr($1, 1, length($1) - 1); next}
			/not found/ {print bin, $1, "-", "missing"; next}
			$2 == "=>" {print bin, $1, $3, (index($3, lib) == 1 ? "bundled" : "system")}' |
		while read -r bin lib path where; do
			if [ "$where" = missing ]; then
				echo "$bin: $lib not found"
			elif [ "$where" = system ] && bundled "$lib"; then
				echo "$bin: $lib from the system, $path"
			fi
		done)
	rm -rf "$tmp"
	if [ -n "$bad" ]; then
		echo "gpu_check: the unpacked bundle does not resolve these itself:" >&2
		echo "$bad" >&2
		exit 1
	fi
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

# find_nccl prints NCCL's libnccl.so.2 on this machine: pip's nvidia-nccl first (the image's
# PyTorch brings it), then the loader's cache.
find_nccl() {
	local py
	for py in python3 /usr/bin/python3; do
		command -v "$py" >/dev/null || continue
		"$py" - <<'EOF' 2>/dev/null && return
import glob, os, site, sys
dirs = site.getsitepackages() + [site.getusersitepackages()]
found = [p for d in dirs for p in glob.glob(os.path.join(d, "nvidia", "**", "libnccl.so.2"), recursive=True)]
if not found:
    sys.exit(1)
print(sorted(found)[0])
EOF
	done
	ldconfig -p | awk '$1 == "libnccl.so.2" {print $NF; exit}'
}

run() {
	mkdir -p "$OUTDIR"
	: >"$REPORT"
	local gpu=""
	if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
		gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
	fi
	say "rookscript GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), binaries of commit $(tar -xzOf "$BUNDLE" gpu-check/COMMIT 2>/dev/null || echo unknown)"
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
	local nccl
	nccl=$(find_nccl)
	[ -n "$nccl" ] && export ROOKSCRIPT_NCCL=$nccl
	say "NCCL: ${nccl:-not found}"
	say "libraries of the binaries (a 'not found' here stops everything below):"
	(cd "$dir" && ldd rookscript rookbench cuda.test device.test) >>"$REPORT" 2>&1
	grep -q 'not found' <(cd "$dir" && ldd rookscript rookbench cuda.test device.test 2>&1) && say "WARNING: unresolved libraries, above"

	if [ -n "$gpu" ]; then
		stage "parity: GPU against the CPU backend" 150 "$dir/cuda.test" -test.v -test.count=1
		# Decoding again launch by launch: where the stage above fails in decode steps, this tells
		# whether the graphs (launch/graphs.go) are the cause.
		stage "parity of decoding without CUDA graphs" 60 env ROOKSCRIPT_CUDA_GRAPHS=0 "$dir/cuda.test" -test.v -test.count=1 \
			-test.run 'TestParity/(Decode|Sampler|TrainerStep)$'
		stage "device.Open(cuda)" 30 "$dir/device.test" -test.v -test.count=1
		stage "NCCL, world of one" 60 "$dir/cuda.test" -test.run TestNCCL -test.v -test.count=1
		stage "rookscript end to end on the GPU" 90 "$dir/rookscript" bench/gpu_smoke.lua device=cuda
		# TensorBoard's own reader over a run's event files: no build machine has the package.
		if python3 -c 'import tensorboard' 2>/dev/null; then
			stage "TensorBoard's EventAccumulator over a run's tb/" 60 \
				sh -c "'$dir/rookscript' --quiet bench/tb_check.lua run_dir='$OUTDIR/tb-run' && python3 bench/tb_check.py '$OUTDIR/tb-run'"
		else
			skip "TensorBoard's EventAccumulator over a run's tb/" "python3 has no tensorboard package"
		fi
		touch "$dir/before-rookbench"
		stage "rookbench: timings beside their floors" 200 "$dir/rookbench" -device cuda -runs 5 -warmup 1 -gen-runs 3 -batch 16 -seq 128 \
			-cpuprofile "$OUTDIR/rookbench-host.pprof"
		# The torch-CUDA peer on the same weights and shapes, set beside rookbench's figures in
		# bench/results/gpu.json (the image's python3 holds torch and transformers).
		local ours counts=() kv
		ours=$(find bench/results -name '*.json' ! -name gpu.json -newer "$dir/before-rookbench" | head -1)
		# The decode step's launches and copies, counted at the driver by the parity stage's
		# TestDecodeStepStructure.
		for kv in $(grep -o 'gpu.json: .*' "$REPORT" | tail -1 | cut -d' ' -f2-); do counts+=(--row "$kv"); done
		if python3 -c 'import torch, transformers; assert torch.cuda.is_available()' 2>/dev/null; then
			stage "export the timed weights (model:save)" 60 "$dir/rookscript" --quiet bench/export_model.lua out="$dir/hf-124m"
			stage "torch-CUDA peer (transformers GPT-2)" 180 python3 bench/torch_cuda.py --model "$dir/hf-124m" \
				--runs 3 --compile --budget-s 90 ${ours:+--ours "$ours"} "${counts[@]}" --out bench/results/gpu.json
		else
			skip "torch-CUDA peer (transformers GPT-2)" "python3 lacks torch with CUDA or transformers"
		fi
		# The run's result files come back with the report, to be committed under bench/results.
		cp ${ours:+"$ours"} bench/results/gpu.json "$OUTDIR/" 2>/dev/null || true
		if command -v compute-sanitizer >/dev/null; then
			# memcheck over every check; racecheck (shared-memory races, which the emulator's
			# interleavings may miss) and synccheck (barriers in divergent code) over the kernels.
			local kernels='TestParity/(Memory|Elementwise|GELU|Rows|Encoder|LayerNorm|MatMul|Attention|AttentionDecode|LogProbs|Softmax|Sample|AdamW|SumSquares|Determinism)$'
			# (the two rate measurements run the same kernels as the checks, 20 times over)
			# NCCL probes its kernel images for this GPU at start-up and handles the misses itself:
			# API errors there are NCCL's, so its check runs without them (memory errors still count).
			stage "compute-sanitizer memcheck, all checks" 120 compute-sanitizer --tool memcheck --error-exitcode 3 "$dir/cuda.test" -test.count=1 \
				-test.skip 'TestMatMulRate|TestCuBLASRowDependence|TestNCCL'
			stage "compute-sanitizer memcheck, NCCL" 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 "$dir/cuda.test" -test.count=1 -test.run TestNCCL
			stage "compute-sanitizer racecheck, kernels" 120 compute-sanitizer --tool racecheck --error-exitcode 3 "$dir/cuda.test" -test.count=1 -test.run "$kernels"
			stage "compute-sanitizer racecheck, the forward's product kernel" 90 compute-sanitizer --tool racecheck --error-exitcode 3 "$dir/cuda.test" -test.count=1 -test.run 'TestBatchInvariance'
			stage "compute-sanitizer synccheck, kernels" 90 compute-sanitizer --tool synccheck --error-exitcode 3 "$dir/cuda.test" -test.count=1 -test.run "$kernels"
		else
			skip "compute-sanitizer" "compute-sanitizer is not on the PATH"
		fi
	else
		for s in "parity: GPU against the CPU backend" "parity of decoding without CUDA graphs" "device.Open(cuda)" "NCCL, world of one" "rookscript end to end on the GPU" \
			"TensorBoard's EventAccumulator over a run's tb/" \
			"rookbench: timings beside their floors" "torch-CUDA peer (transformers GPT-2)" "compute-sanitizer"; do
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
