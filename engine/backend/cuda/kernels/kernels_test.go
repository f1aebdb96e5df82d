package kernels

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cuda/internal/ptxsrc"
)

// TestPTXMatchesSources: each committed PTX file was generated from the .cu sources as they
// are now (its header records their hash). 'make ptx-check' goes further and recompiles with
// nvcc; this test needs no toolkit.
func TestPTXMatchesSources(t *testing.T) {
	hash, err := ptxsrc.SourceHash(Sources)
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range ptxsrc.Arches {
		ptx, ok := Source(arch)
		if !ok {
			t.Fatalf("no embedded PTX for %s", arch)
		}
		if !strings.HasPrefix(ptx, ptxsrc.Header(arch, hash)) {
			t.Errorf("%s.ptx was not generated from the current kernel sources: run 'make ptx' (go generate ./engine/backend/cuda/kernels) and commit it", arch)
		}
		if !strings.Contains(ptx, ".target "+arch+"\n") {
			t.Errorf("%s.ptx does not target %s", arch, arch)
		}
	}
}

// TestPTXEntries: the PTX defines exactly the kernels of All, with parameters of the sizes
// and kinds their signatures say (pointers and long long are 64-bit, int 32-bit, float f32).
func TestPTXEntries(t *testing.T) {
	entry := regexp.MustCompile(`\.visible \.entry (\w+)\(([^)]*)\)`)
	param := regexp.MustCompile(`\.param \.(\w+) `)
	want := map[byte]string{'F': "u64", 'I': "u64", 'L': "u64", 'D': "u64", 'l': "u64", 'i': "u32", 'f': "f32"}
	for _, arch := range ptxsrc.Arches {
		ptx, _ := Source(arch)
		found := map[string]string{}
		for _, m := range entry.FindAllStringSubmatch(ptx, -1) {
			var kinds []string
			for _, p := range param.FindAllStringSubmatch(m[2], -1) {
				kinds = append(kinds, p[1])
			}
			found[m[1]] = strings.Join(kinds, ",")
		}
		var names []string
		for _, k := range All {
			names = append(names, k.Name)
			got, ok := found[k.Name]
			if !ok {
				t.Errorf("%s: no kernel %s", arch, k.Name)
				continue
			}
			var exp []string
			for i := range len(k.Sig) {
				exp = append(exp, want[k.Sig[i]])
			}
			if got != strings.Join(exp, ",") {
				t.Errorf("%s: %s takes (%s), the table says %s (%s)", arch, k.Name, got, k.Sig, strings.Join(exp, ","))
			}
		}
		for n := range found {
			if !slices.Contains(names, n) {
				t.Errorf("%s: kernel %s is missing from kernels.All", arch, n)
			}
		}
	}
}

func TestPTXForCapability(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		arch         string
	}{{8, 0, "sm_80"}, {8, 6, "sm_80"}, {8, 9, "sm_80"}, {9, 0, "sm_80"}, {10, 0, "sm_80"}, {12, 0, "sm_80"}} {
		if _, arch, err := PTX(c.major, c.minor); err != nil || arch != c.arch {
			t.Errorf("PTX(%d.%d) = %s, %v; want %s", c.major, c.minor, arch, err, c.arch)
		}
	}
	if _, _, err := PTX(7, 5); err == nil || !strings.Contains(err.Error(), "sm_80") {
		t.Errorf("PTX(7.5): %v", err)
	}
}
