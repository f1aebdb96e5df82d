package cpu

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// thpEligible reads THPeligible of the mapping that holds p from /proc/self/smaps.
func thpEligible(t *testing.T, p unsafe.Pointer) bool {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("needs /proc/self/smaps: %v", err)
	}
	defer f.Close()
	addr, in := uintptr(p), false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "THPeligible:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "THPeligible:")) == "1"
		}
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x, or it has no THPeligible line", addr)
	return false
}

func TestHostFloatsHugePages(t *testing.T) {
	mode := HugePageMode()
	if mode != "always" && mode != "madvise" {
		t.Skipf("transparent huge pages are %q on this system, not always or madvise", mode)
	}
	h := HostFloats(hugeMin / 4) // the smallest buffer advised
	if len(h) != hugeMin/4 || h[0] != 0 || h[len(h)-1] != 0 {
		t.Fatal("HostFloats must return n zeroed floats")
	}
	mid := unsafe.Pointer(&h[len(h)/2])
	if !thpEligible(t, mid) {
		t.Errorf("a buffer of hugeMin bytes is not eligible for huge pages (mode %s)", mode)
	}
	// The advice itself, on a fresh mapping of the process's own (the Go heap reuses advised
	// memory for other objects, so a plain make is no contrast): eligible after it, and in
	// madvise mode not before.
	m, err := syscall.Mmap(-1, 0, hugeMin+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	f := unsafe.Slice((*float32)(unsafe.Pointer(&m[0])), len(m)/4)
	at := unsafe.Pointer(&f[len(f)/2])
	if mode == "madvise" && thpEligible(t, at) {
		t.Fatal("a fresh mapping is eligible before any advice: the check cannot tell")
	}
	adviseHuge(f)
	if !thpEligible(t, at) {
		t.Errorf("adviseHuge left a mapping of hugeMin bytes ineligible for huge pages (mode %s)", mode)
	}
	// Below hugeMin nothing is advised.
	s, err := syscall.Mmap(-1, 0, hugeMin/2, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(s)
	sf := unsafe.Slice((*float32)(unsafe.Pointer(&s[0])), len(s)/4)
	adviseHuge(sf)
	if mode == "madvise" && thpEligible(t, unsafe.Pointer(&sf[len(sf)/2])) {
		t.Errorf("a buffer of hugeMin/2 bytes was advised")
	}
	if small := HostFloats(1000); len(small) != 1000 {
		t.Error("a small buffer keeps its length")
	}
}
