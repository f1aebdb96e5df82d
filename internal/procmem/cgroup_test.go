package procmem

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupLimit: a v2 group's memory.max binds (the lowest of it and its parents), "max" is
// no limit, v1's memory.limit_in_bytes is read where there is no v2 limit, and its "no limit"
// (about 2^63) is none.
func TestCgroupLimit(t *testing.T) {
	write := func(root, rel, text string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, self string
		files      map[string]string
		want       int64
		ok         bool
	}{
		{"v2 own limit", "0::/job/run\n", map[string]string{"job/run/memory.max": "3221225472\n", "job/memory.max": "max\n"}, 3 << 30, true},
		{"v2 parent binds", "0::/job/run\n", map[string]string{"job/run/memory.max": "max\n", "job/memory.max": "1073741824\n"}, 1 << 30, true},
		{"v2 no limit", "0::/job\n", map[string]string{"job/memory.max": "max\n"}, 0, false},
		{"v1", "4:memory:/docker/abc\n0::/\n", map[string]string{"memory/docker/abc/memory.limit_in_bytes": "2147483648\n"}, 2 << 30, true},
		{"v1 no limit", "4:memory:/x\n", map[string]string{"memory/x/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		{"no cgroup files", "0::/\n", nil, 0, false},
	} {
		root := t.TempDir()
		write(root, "self", c.self)
		for rel, text := range c.files {
			write(root, filepath.Join("fs", rel), text)
		}
		got, ok := cgroupLimit(filepath.Join(root, "self"), filepath.Join(root, "fs"))
		if got != c.want && ok || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestAvailable(t *testing.T) {
	ram, err := RAM()
	if err != nil {
		t.Skipf("this system does not say how much memory it has: %v", err)
	}
	if a, err := Available(); err != nil || a <= 0 || a > ram {
		t.Errorf("Available: %d, %v (RAM %d)", a, err, ram)
	}
}
