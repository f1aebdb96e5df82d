package cpu

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// fakeBLAS stands in for OpenBLAS: it runs own until set, runs what set asks for (or runs
// instead, where that is not empty) and fails the check with checkErr.
type fakeBLAS struct {
	own, running, runs string
	checkErr           error
	asked              []string
	checked            bool
}

func (f *fakeBLAS) ops() blasOps {
	f.running = f.own
	return blasOps{
		core: func() string { return f.running },
		set: func(want string) string {
			f.asked = append(f.asked, want)
			f.running = want
			if f.runs != "" {
				f.running = f.runs
			}
			return f.running
		},
		own:   func() string { f.running = f.own; return f.own },
		check: func() error { f.checked = true; return f.checkErr },
	}
}

var (
	zen4      = cpuFeatures{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512DQ: true, AVX512VL: true, AVX512BF16: true}
	skylakeSP = cpuFeatures{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512DQ: true, AVX512VL: true}
	knl       = cpuFeatures{AVX2: true, FMA: true, AVX512F: true} // AVX-512 F without BW, DQ, VL
	avx2FMA   = cpuFeatures{AVX2: true, FMA: true}
	avx2Only  = cpuFeatures{AVX2: true}
	sse       = cpuFeatures{}
)

// TestBLASFamilyForFeatures: the family each processor class gets, by its features and
// OpenBLAS's own choice; a family of the right class that OpenBLAS chose stays, without a
// switch or a check.
func TestBLASFamilyForFeatures(t *testing.T) {
	for _, c := range []struct {
		name   string
		f      cpuFeatures
		capped bool
		own    string
		want   string
		source blasSource
	}{
		{"Emerald Rapids, OpenBLAS 0.3.21 falls back to Prescott", zen4, false, "Prescott", "Cooperlake", blasFeatures},
		{"Zen 4, OpenBLAS chose Cooperlake", zen4, false, "Cooperlake", "Cooperlake", blasOwn},
		{"AVX-512 BF16, OpenBLAS chose Haswell", zen4, false, "Haswell", "Cooperlake", blasFeatures},
		{"AVX-512 BF16, OpenBLAS chose Zen", zen4, false, "Zen", "Cooperlake", blasFeatures},
		{"AVX-512 BF16, OpenBLAS chose SkylakeX", zen4, false, "SkylakeX", "Cooperlake", blasFeatures},
		{"AVX-512 BF16, OpenBLAS chose SapphireRapids", zen4, false, "SapphireRapids", "SapphireRapids", blasOwn},
		{"Skylake-SP, OpenBLAS chose SkylakeX", skylakeSP, false, "SkylakeX", "SkylakeX", blasOwn},
		{"AVX-512, OpenBLAS falls back to Prescott", skylakeSP, false, "Prescott", "SkylakeX", blasFeatures},
		{"AVX-512, OpenBLAS chose Haswell", skylakeSP, false, "Haswell", "SkylakeX", blasFeatures},
		{"AVX-512 F alone is AVX2's class", knl, false, "Haswell", "Haswell", blasOwn},
		{"AVX2 and FMA, OpenBLAS chose Haswell", avx2FMA, false, "Haswell", "Haswell", blasOwn},
		{"Zen 2/3, OpenBLAS chose Zen", avx2FMA, false, "Zen", "Zen", blasOwn},
		{"AVX2 and FMA, OpenBLAS falls back to Prescott", avx2FMA, false, "Prescott", "Haswell", blasFeatures},
		{"AVX2 and FMA, OpenBLAS chose Sandybridge", avx2FMA, false, "Sandybridge", "Haswell", blasFeatures},
		{"AVX2 without FMA", avx2Only, false, "Sandybridge", "Sandybridge", blasOwn},
		{"SSE only", sse, false, "Nehalem", "Nehalem", blasOwn},
		{"capped, OpenBLAS chose Cooperlake", zen4, true, "Cooperlake", "Haswell", blasFeatures},
		{"capped, OpenBLAS chose SapphireRapids", zen4, true, "SapphireRapids", "Haswell", blasFeatures},
		{"capped, OpenBLAS chose SkylakeX", skylakeSP, true, "SkylakeX", "Haswell", blasFeatures},
		{"capped, OpenBLAS falls back to Prescott", zen4, true, "Prescott", "Haswell", blasFeatures},
		{"capped, OpenBLAS chose Haswell", zen4, true, "Haswell", "Haswell", blasOwn},
		{"capped, OpenBLAS chose Zen", zen4, true, "Zen", "Zen", blasOwn},
	} {
		t.Run(c.name, func(t *testing.T) {
			fb := &fakeBLAS{own: c.own}
			got := chooseBLASCore("", false, c.f, c.capped, fb.ops())
			if got.core != c.want || got.source != c.source || fb.running != c.want {
				t.Fatalf("core %s (OpenBLAS runs %s), source %d; want %s, source %d (%s)", got.core, fb.running, got.source, c.want, c.source, got.reason())
			}
			if switched := c.source == blasFeatures; switched != (len(fb.asked) == 1) || switched != fb.checked {
				t.Fatalf("asked OpenBLAS for %v, checked %v; a switch asks once and checks", fb.asked, fb.checked)
			}
		})
	}
}

// TestBLASFamilyUserWins: OPENBLAS_CORETYPE set by the user (even empty) is left alone, under
// the cap too.
func TestBLASFamilyUserWins(t *testing.T) {
	for _, capped := range []bool{false, true} {
		for _, env := range []string{"Prescott", ""} {
			fb := &fakeBLAS{own: "Prescott"}
			got := chooseBLASCore(env, true, zen4, capped, fb.ops())
			if got.source != blasUser || got.core != "Prescott" || len(fb.asked) > 0 || fb.checked {
				t.Fatalf("OPENBLAS_CORETYPE=%q, capped %v: core %s, source %d, asked %v, checked %v", env, capped, got.core, got.source, fb.asked, fb.checked)
			}
		}
	}
}

// TestBLASFamilyFallback: where OpenBLAS does not run the family asked for, or it fails the
// self-check, OpenBLAS's own choice runs again and the reason says why.
func TestBLASFamilyFallback(t *testing.T) {
	errCheck := errors.New("injected wrong product")
	for _, fb := range []*fakeBLAS{
		{own: "Prescott", runs: "SkylakeX"},   // OpenBLAS knows the name but runs another family
		{own: "Prescott", checkErr: errCheck}, // the family's product is wrong
	} {
		got := chooseBLASCore("", false, zen4, false, fb.ops())
		if got.source != blasFallback || got.core != "Prescott" || fb.running != "Prescott" || got.err == nil {
			t.Fatalf("%+v: core %s (OpenBLAS runs %s), source %d, err %v", fb, got.core, fb.running, got.source, got.err)
		}
		if fb.checkErr != nil && !errors.Is(got.err, errCheck) {
			t.Fatalf("the self-check's error is not kept: %v", got.err)
		}
		if fb.runs != "" && fb.checked {
			t.Fatalf("the check ran on a family that was not asked for")
		}
	}
}

// TestCheckGEMMFails: the self-check passes OpenBLAS's product and one rounded a unit
// further, and fails one that drops a term or ignores a transpose.
func TestCheckGEMMFails(t *testing.T) {
	New(1)
	if err := checkSGEMM(); err != nil {
		t.Fatalf("OpenBLAS's %s kernels: %v", BLASCoreName(), err)
	}
	ulp := func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
		sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		for i := range m {
			for j := range n {
				c[i*ldc+j] = math.Nextafter32(c[i*ldc+j], float32(math.Inf(1)))
			}
		}
	}
	if err := checkGEMM(ulp); err != nil {
		t.Fatalf("a product one unit off fails the check: %v", err)
	}
	for name, g := range map[string]gemmFunc{
		"the last term dropped": func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
			sgemm(transA, transB, m, n, k-1, alpha, a, lda, b, ldb, beta, c, ldc)
		},
		"B's transpose ignored": func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
			if transB {
				sgemm(transA, false, m, n, min(k, n), alpha, a, lda, b, ldb, beta, c, ldc)
				return
			}
			sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		},
	} {
		if checkGEMM(g) == nil {
			t.Errorf("a product with %s passes the check", name)
		}
	}
}

// TestBLASFamilyOfTheProcessor: once a backend exists, OpenBLAS runs a family of the class
// the processor's features call for, unless the user chose it or the check refused it.
func TestBLASFamilyOfTheProcessor(t *testing.T) {
	New(1)
	class, why := featureClass(processorFeatures(), Capped())
	switch blasChosen.source {
	case blasUser:
		t.Skip("OPENBLAS_CORETYPE is set: the user chose the kernels OpenBLAS runs")
	case blasFallback:
		t.Fatalf("%s: %s", BLASCoreName(), BLASCoreReason())
	}
	if class != classOlder && classOf(BLASCoreName()) != class {
		t.Fatalf("OpenBLAS runs %s on a processor with %s (%s)", BLASCoreName(), why, BLASCoreReason())
	}
}

// TestBLASFamilyChoice: the choice a real process makes at its first backend, in child
// processes of this test binary: OPENBLAS_CORETYPE wins, with the cap too; the cap gets an
// AVX2 family; a failing self-check leaves OpenBLAS's own choice running; and OpenBLAS's
// products are right after each.
func TestBLASFamilyChoice(t *testing.T) {
	if c := os.Getenv("ROOKSCRIPT_BLAS_CHILD"); c != "" {
		load := blasCoreName()
		if c == "fail" {
			openBLAS.check = func() error { return errors.New("injected") }
		}
		New(1)
		// OpenBLAS's product after the choice, whichever ran: the fallback switches back.
		fmt.Printf("blas load=%s core=%s source=%d products=%v\n", load, BLASCoreName(), blasChosen.source, checkSGEMM() == nil)
		return
	}
	child := func(mode string, env ...string) (load, core string, source blasSource) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestBLASFamilyChoice$", "-test.count=1")
		cmd.Env = append([]string{"ROOKSCRIPT_BLAS_CHILD=" + mode}, env...)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "OPENBLAS_CORETYPE=") && !strings.HasPrefix(kv, CapabilityEnv+"=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		right := false
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "blas ") {
				fmt.Sscanf(line, "blas load=%s core=%s source=%d products=%t", &load, &core, &source, &right)
			}
		}
		if err != nil || core == "" || !right {
			t.Fatalf("child %s %v: %v\n%s", mode, env, err, out)
		}
		return load, core, source
	}
	// Prescott's kernels run on every x86-64 processor, and are no family's choice for AVX2.
	for _, env := range [][]string{{"OPENBLAS_CORETYPE=Prescott"}, {"OPENBLAS_CORETYPE=Prescott", CapabilityEnv + "=avx2"}} {
		if _, core, source := child("env", env...); core != "Prescott" || source != blasUser {
			t.Errorf("%v: OpenBLAS runs %s, source %d", env, core, source)
		}
	}
	if hasAVX512() && hasAVX2FMA() {
		if _, core, source := child("cap", CapabilityEnv+"=avx2"); classOf(core) != classAVX2 || source == blasFallback {
			t.Errorf("capped at AVX2: OpenBLAS runs %s, source %d", core, source)
		}
	}
	load, core, source := child("fail")
	switch source {
	case blasOwn:
		t.Logf("OpenBLAS's own choice, %s, is of the features' class: no switch, no check to fail", core)
	case blasFallback:
		if core != load {
			t.Errorf("the self-check failed: OpenBLAS runs %s, not its own choice %s", core, load)
		}
	default:
		t.Errorf("an injected check failure: OpenBLAS runs %s, source %d", core, source)
	}
}

// TestBLASFamilies: the families listed are one of each class up to the features' (capped),
// narrowest first, and OpenBLAS runs each when set to it, its products right; SetBLASCore to
// the family before undoes it.
func TestBLASFamilies(t *testing.T) {
	New(1)
	class, _ := featureClass(processorFeatures(), Capped())
	fams, was := BLASFamilies(), BLASCoreName()
	defer SetBLASCore(was)
	if class == classOlder && len(fams) > 0 || class > classOlder && len(fams) != int(class) {
		t.Fatalf("families %v for class %d", fams, class)
	}
	for i, f := range fams {
		if classOf(f) != classAVX2+blasClass(i) {
			t.Errorf("family %d is %s, of class %d", i, f, classOf(f))
		}
		if got := SetBLASCore(f); !strings.EqualFold(got, f) {
			t.Errorf("set to %s, OpenBLAS runs %s", f, got)
		} else if err := checkSGEMM(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if got := SetBLASCore(was); got != was {
		t.Errorf("set back to %s, OpenBLAS runs %s", was, got)
	}
	// A family that failed the self-check at start is not one to try.
	if len(fams) > 0 {
		saved, refused := blasChosen, fams[len(fams)-1]
		blasChosen = blasChoice{source: blasFallback, want: refused}
		if got := BLASFamilies(); slices.Contains(got, refused) || len(got) != len(fams)-1 {
			t.Errorf("%s failed the self-check, yet the families are %v", refused, got)
		}
		blasChosen = saved
	}
}
