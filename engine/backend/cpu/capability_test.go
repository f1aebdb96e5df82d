package cpu

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCapabilityCap: a process started with ROOKSCRIPT_CPU_CAPABILITY=avx2 runs the AVX2
// product kernel, kernels.c's and decode attention's AVX2 paths and (where OpenBLAS chose
// AVX-512 kernels) OpenBLAS's Haswell ones; the cap is applied once, at the first backend, so
// the check runs in a child process of this test binary.
func TestCapabilityCap(t *testing.T) {
	if os.Getenv("ROOKSCRIPT_CAPABILITY_CHILD") == "1" {
		New(1)
		want := "AVX2"
		if hasAVX512() {
			want = "AVX2 (capped by ROOKSCRIPT_CPU_CAPABILITY)"
		}
		if got := Capability(); got != want || Capped() != hasAVX512() || ntUse != ntAVX2 || hasDecode16() || avx512On() {
			t.Fatalf("capped at avx2: Capability() = %q (want %q), Capped() %v, product kernel %v, decode16 %v, kernels.c AVX-512 %v",
				got, want, Capped(), ntUse, hasDecode16(), avx512On())
		}
		if core := BLASCoreName(); strings.EqualFold(core, "skylakex") || strings.EqualFold(core, "cooperlake") {
			t.Fatalf("capped at avx2, OpenBLAS still runs its %s kernels", core)
		}
		return
	}
	if !hasAVX2() || !hasAVX2FMA() {
		t.Skip("processor without AVX2 and FMA: there is no AVX2 path to cap at")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCapabilityCap$", "-test.count=1")
	env := []string{"ROOKSCRIPT_CAPABILITY_CHILD=1", "ROOKSCRIPT_CPU_CAPABILITY=avx2"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENBLAS_CORETYPE=") && !strings.HasPrefix(kv, "ROOKSCRIPT_CPU_CAPABILITY=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") || strings.Contains(string(out), "no tests to run") {
		t.Fatalf("child with ROOKSCRIPT_CPU_CAPABILITY=avx2: %v\n%s", err, out)
	}
	if Capped() || hasAVX512() && Capability() != "AVX-512" {
		t.Fatalf("uncapped: Capped() %v, Capability() = %q", Capped(), Capability())
	}
}
