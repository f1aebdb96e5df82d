package procmem

import (
	"bufio"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Available is the memory this process may use: the machine's RAM, or its control group's
// limit where that is lower (a container, a systemd slice, a CI runner). A budget of "half
// the RAM" inside a 3 GB cgroup on a 64 GB machine would otherwise be 32 GB, and the kernel
// would kill the run long before it got there.
func Available() (int64, error) {
	ram, err := RAM()
	if err != nil {
		return 0, err
	}
	if limit, ok := cgroupLimit("/proc/self/cgroup", "/sys/fs/cgroup"); ok && limit < ram {
		return limit, nil
	}
	return ram, nil
}

// cgroupLimit reads this process's memory limit: cgroup v2's memory.max of its group (and of
// every group above it: the lowest binds), else v1's memory.limit_in_bytes. ok is false when
// there is none ("max", v1's page-rounded 2^63, or no file).
func cgroupLimit(selfCgroup, root string) (int64, bool) {
	f, err := os.Open(selfCgroup)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	v2, v1 := parseCgroups(f)
	best, found := int64(math.MaxInt64), false
	if v2 != "" {
		for dir := filepath.Join(root, v2); ; dir = filepath.Dir(dir) {
			if n, ok := readLimit(filepath.Join(dir, "memory.max")); ok && n < best {
				best, found = n, true
			}
			if dir == root || !strings.HasPrefix(dir, root) {
				break
			}
		}
	}
	if !found && v1 != "" {
		for _, dir := range []string{filepath.Join(root, "memory", v1), filepath.Join(root, "memory")} {
			if n, ok := readLimit(filepath.Join(dir, "memory.limit_in_bytes")); ok && n < best {
				best, found = n, true
			}
		}
	}
	return best, found
}

// parseCgroups reads /proc/self/cgroup's lines "id:controllers:path": the v2 group (id 0,
// no controllers) and the v1 memory controller's group.
func parseCgroups(r io.Reader) (v2, v1 string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1 = parts[2]
			}
		}
	}
	return v2, v1
}

// readLimit reads a limit file: bytes, or "max" (none). v1 writes "no limit" as a huge
// number near 2^63, which is no limit either.
func readLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parseLimit(string(b))
}

func parseLimit(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) || err != nil || n <= 0 || n >= 1<<62 {
		return 0, false
	}
	return n, true
}
