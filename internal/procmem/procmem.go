package procmem

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// RAM is the machine's memory: MemTotal of /proc/meminfo.
func RAM() (int64, error) { return fileField("/proc/meminfo", "MemTotal") }

// Peak is this process's peak resident set: VmHWM of /proc/self/status.
func Peak() (int64, error) { return fileField("/proc/self/status", "VmHWM") }

// PeakOf is the peak resident set of process pid: VmHWM of /proc/<pid>/status. A parent reads
// its child's with it while the child runs (a child's rusage counts from the parent's peak).
func PeakOf(pid int) (int64, error) { return fileField(fmt.Sprintf("/proc/%d/status", pid), "VmHWM") }

// ResetPeak sets this process's peak resident set (VmHWM) back to its current resident set.
func ResetPeak() error {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("resetting the peak resident set: %w", err)
	}
	return nil
}

// fileField is kBField of the file at path, its errors naming the file.
func fileField(path, name string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := kBField(f, name)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// kBField reads the line "name:   N kB" of r and returns N kB in bytes.
func kBField(r io.Reader, name string) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != name {
			continue
		}
		num, ok := strings.CutSuffix(strings.TrimSpace(v), " kB")
		n, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil {
			return 0, fmt.Errorf("cannot read %s %q", name, strings.TrimSpace(v))
		}
		return n << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s", name)
}
