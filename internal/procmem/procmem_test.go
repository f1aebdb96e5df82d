package procmem

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// Excerpts of the real files (Linux 6.x).
const (
	meminfo = "MemTotal:        8131452 kB\nMemFree:          312448 kB\nMemAvailable:    5120044 kB\n" +
		"HugePages_Total:       0\nHugepagesize:       2048 kB\n"
	status = "Name:\trookscript\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t 2397772 kB\n" +
		"VmHWMx:\t      1 kB\nVmHWM:\t  812340 kB\nVmRSS:\t  770112 kB\nThreads:\t9\n"
)

func TestKBField(t *testing.T) {
	for _, c := range []struct {
		text, name string
		want       int64
		err        string // a part of the error; "" for none
	}{
		{meminfo, "MemTotal", 8131452 << 10, ""},
		{meminfo, "Hugepagesize", 2048 << 10, ""},
		{status, "VmHWM", 812340 << 10, ""}, // not VmHWMx, a longer name before it
		{status, "VmRSS", 770112 << 10, ""},
		{"VmHWM:\t      0 kB\n", "VmHWM", 0, ""},
		{"VmHWM: 12 kB", "VmHWM", 12 << 10, ""},                            // no final newline
		{meminfo, "HugePages_Total", 0, `cannot read HugePages_Total "0"`}, // a count, not kB
		{"VmHWM:\t12 MB\n", "VmHWM", 0, `cannot read VmHWM "12 MB"`},
		{"VmHWM:\tmany kB\n", "VmHWM", 0, `cannot read VmHWM "many kB"`},
		{status, "VmSwap", 0, "no VmSwap"},
		{"", "MemTotal", 0, "no MemTotal"},
	} {
		got, err := kBField(strings.NewReader(c.text), c.name)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: got %d, %v; want %d", c.name, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: got %d, %v; want an error with %q", c.name, got, err, c.err)
		}
	}
}

func TestFileFieldNamesTheFile(t *testing.T) {
	p := t.TempDir() + "/status"
	os.WriteFile(p, []byte(status), 0o644)
	if got, err := fileField(p, "VmRSS"); err != nil || got != 770112<<10 {
		t.Errorf("VmRSS: %d, %v", got, err)
	}
	if _, err := fileField(p, "VmSwap"); err == nil || !strings.HasPrefix(err.Error(), p+": ") {
		t.Errorf("a missing field: error %v, want one naming %s", err, p)
	}
	if _, err := fileField(p+"-missing", "VmRSS"); !os.IsNotExist(err) {
		t.Errorf("a missing file: error %v, want not-exist", err)
	}
}

// TestThisMachine reads the real files where there are some.
func TestThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("no /proc")
	}
	ram, err := RAM()
	if err != nil || ram < 64<<20 {
		t.Fatalf("RAM: %d, %v", ram, err)
	}
	peak, err := Peak()
	if err != nil || peak <= 0 || peak > ram {
		t.Fatalf("Peak: %d, %v (RAM %d)", peak, err, ram)
	}
	if p, err := PeakOf(os.Getpid()); err != nil || p < peak {
		t.Errorf("PeakOf(self): %d, %v; Peak was %d", p, err, peak)
	}
	if err := ResetPeak(); err != nil {
		t.Skipf("cannot reset the peak here: %v", err)
	}
	if after, err := Peak(); err != nil || after <= 0 || after > peak+(64<<20) {
		t.Errorf("Peak after ResetPeak: %d, %v; before %d", after, err, peak)
	}
}
