package cpu

import (
	"fmt"
	"os"
	"strings"
)

// CapabilityEnv names the environment variable that caps the vector instructions of the CPU
// backend's kernels, as ATEN_CPU_CAPABILITY does torch's operators: "avx2" runs the AVX2
// kernels (and OpenBLAS's Haswell ones) on a processor with AVX-512, as a processor without
// it would; "avx512" or unset runs the widest the processor has. It is how a machine with
// AVX-512 measures, profiles and tests the path of one without
// (ROOKSCRIPT_CPU_CAPABILITY=avx2 make bench; make test runs the invariance tests so). The
// engine's kernels give the same bits on either path (the forward, the sampler, the
// optimizer); OpenBLAS's Haswell kernels sum the backward's GEMMs in another order than its
// AVX-512 ones, so the gradients differ, and a run resumed under another cap follows another
// trajectory from there, as on another machine (unless OPENBLAS_CORETYPE keeps OpenBLAS's
// kernels: TestCapabilitySameBits).
const CapabilityEnv = "ROOKSCRIPT_CPU_CAPABILITY"

// capability is the cap the environment asks for: "avx512" (none) or "avx2".
func capability() (string, error) {
	v := strings.ToLower(strings.TrimSpace(os.Getenv(CapabilityEnv)))
	switch v {
	case "", "avx512", "avx-512":
		return "avx512", nil
	case "avx2":
		return "avx2", nil
	}
	return "", fmt.Errorf("%s=%q: unknown capability (want avx2 or avx512)", CapabilityEnv, os.Getenv(CapabilityEnv))
}

// CheckCapability reports a value of ROOKSCRIPT_CPU_CAPABILITY that the backend does not know
// (device.Open refuses to open the CPU backend with it; cpu.New ignores it).
func CheckCapability() error {
	_, err := capability()
	return err
}

// capped is set by setupKernels when the environment held the kernels below the processor's.
var capped bool

// Capped reports whether ROOKSCRIPT_CPU_CAPABILITY holds the backend's kernels below what the
// processor has, once a backend exists.
func Capped() bool {
	blasCore.Do(setupKernels)
	return capped
}

// Capability names the widest vector instructions the backend's kernels run, once a backend
// exists: "AVX-512", "AVX2" (with " (capped by ROOKSCRIPT_CPU_CAPABILITY)" where the processor
// has more) or "none" (portable C).
func Capability() string {
	switch {
	case Capped():
		return "AVX2 (capped by " + CapabilityEnv + ")"
	case ntUse == ntAVX512:
		return "AVX-512"
	case ntUse == ntAVX2:
		return "AVX2"
	}
	return "none"
}

// setupKernels applies the environment's cap, then chooses OpenBLAS's kernel family
// (blasfamily.go); it runs once, before the first BLAS call.
func setupKernels() {
	if c, err := capability(); err == nil && c == "avx2" && hasAVX512() && hasAVX2FMA() {
		capped, ntUse = true, ntAVX2
		setAVX512(false)
		setDecode16(false)
	}
	env, set := os.LookupEnv("OPENBLAS_CORETYPE")
	blasChosen = chooseBLASCore(env, set, processorFeatures(), capped, openBLAS)
}
