package stockfish

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name  string
		mod   func(*Config)
		key   string // "" = valid
		value any    // NaN: any NaN
	}{
		{"defaults", func(*Config) {}, "", nil},
		{"depth 0 is not the default depth", func(c *Config) { c.Depth = 0 }, "depth", 0},
		{"depth too deep", func(c *Config) { c.Depth = 101 }, "depth", 101},
		{"no workers", func(c *Config) { c.Workers = 0 }, "workers", 0},
		{"negative workers", func(c *Config) { c.Workers = -2 }, "workers", -2},
		{"multipv 0", func(c *Config) { c.MultiPV = 0 }, "multipv", 0},
		{"hash 0", func(c *Config) { c.HashMB = 0 }, "hash_mb", 0},
		{"negative retries", func(c *Config) { c.Retries = -1 }, "retries", -1},
		{"no retries is allowed", func(c *Config) { c.Retries = 0 }, "", nil},
		{"timeout 0", func(c *Config) { c.Timeout = 0 }, "timeout", 0.0},
		{"timeout NaN", func(c *Config) { c.Timeout = math.NaN() }, "timeout", nan},
		{"timeout +Inf", func(c *Config) { c.Timeout = math.Inf(1) }, "timeout", math.Inf(1)},
		{"no position bound", func(c *Config) { c.PositionTimeout = 0 }, "", nil},
		{"a position bound of two searches", func(c *Config) { c.PositionTimeout = 60 }, "", nil},
		{"a position bound of one search", func(c *Config) { c.PositionTimeout = c.Timeout }, "", nil},
		{"a position bound below the timeout", func(c *Config) { c.PositionTimeout = 10 }, "position_timeout", 10.0},
		{"negative position bound", func(c *Config) { c.PositionTimeout = -1 }, "position_timeout", -1.0},
		{"position bound NaN", func(c *Config) { c.PositionTimeout = math.NaN() }, "position_timeout", nan},
		{"position bound +Inf", func(c *Config) { c.PositionTimeout = math.Inf(1) }, "position_timeout", math.Inf(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if tc.key == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ce *ConfigError
			isNaN := func(v any) bool { f, ok := v.(float64); return ok && math.IsNaN(f) }
			if !errors.As(err, &ce) || ce.Key != tc.key || (ce.Value != tc.value && !(isNaN(ce.Value) && isNaN(tc.value))) {
				t.Fatalf("Validate() = %v, want a *ConfigError for %s = %v", err, tc.key, tc.value)
			}
		})
	}
}

// A zero depth or worker count reaches NewPool as an error before any engine starts; it used to
// become depth 10 and one worker without a word.
func TestNewPoolRefusesZeroSettings(t *testing.T) {
	for key, mod := range map[string]func(*Config){
		"depth":   func(c *Config) { c.Depth = 0 },
		"workers": func(c *Config) { c.Workers = 0 },
	} {
		c := DefaultConfig()
		c.Path = "/nonexistent/stockfish" // would fail differently if it got that far
		mod(&c)
		p, err := NewPool(context.Background(), c)
		if err == nil {
			p.Close()
			t.Fatalf("%s = 0 accepted", key)
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || *ce != (ConfigError{Key: key, Value: 0, Reason: "≥ 1"}) {
			t.Errorf("%s = 0: err = %v", key, err)
		}
	}
}

// writeExecutable writes a shell script and makes it executable.
func writeExecutable(t *testing.T, path, script string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFindEngine(t *testing.T) {
	dir := t.TempDir()
	onPath := filepath.Join(dir, "bin")
	if err := os.Mkdir(onPath, 0o755); err != nil {
		t.Fatal(err)
	}
	sf := writeExecutable(t, filepath.Join(onPath, "stockfish"), "#!/bin/sh\n")
	other := writeExecutable(t, filepath.Join(onPath, "sf-dev"), "#!/bin/sh\n")
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fallback := writeExecutable(t, filepath.Join(dir, "fallback"), "#!/bin/sh\n")
	empty := t.TempDir()

	tests := []struct {
		name, path, fallback, pathEnv string
		want                          string // the path found, or with wantErr the path the error names
		wantErr, notFound             bool
	}{
		{"stockfish on PATH first", "", fallback, onPath, sf, false, false},
		{"Debian's path when PATH has none", "", fallback, empty, fallback, false, false},
		{"neither", "", filepath.Join(dir, "nope"), empty, "stockfish", true, true},
		{"a bare name is looked up on PATH", "sf-dev", fallback, onPath, other, false, false},
		{"a bare name not on PATH", "sf-missing", fallback, onPath, "sf-missing", true, true},
		{"an explicit path", sf, fallback, empty, sf, false, false},
		{"an explicit path that does not exist", filepath.Join(dir, "gone"), fallback, onPath, filepath.Join(dir, "gone"), true, true},
		{"a directory", dir, fallback, onPath, dir, true, false},
		{"not executable", plain, fallback, onPath, plain, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", tc.pathEnv)
			got, err := findEngine(tc.path, tc.fallback)
			if !tc.wantErr {
				if err != nil || got != tc.want {
					t.Fatalf("findEngine(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
				}
				return
			}
			var pe *PathError
			if !errors.As(err, &pe) || pe.Path != tc.want {
				t.Fatalf("findEngine(%q) err = %v, want a *PathError naming %q", tc.path, err, tc.want)
			}
			if errors.Is(err, ErrNotFound) != tc.notFound {
				t.Errorf("errors.Is(err, ErrNotFound) = %v, want %v", !tc.notFound, tc.notFound)
			}
		})
	}
}

// A missing engine is one message, not one per worker, and it says how to install one.
func TestNewPoolMissingEngineIsOneMessage(t *testing.T) {
	c := DefaultConfig()
	c.Path, c.Workers = "/nonexistent/dir/stockfish", 3
	_, err := NewPool(context.Background(), c)
	if err == nil || !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	msg := err.Error()
	if n := strings.Count(msg, "/nonexistent/dir/stockfish"); n != 1 || strings.Count(msg, "make setup") != 1 {
		t.Errorf("err = %q: want the path and the install hint once each", msg)
	}
}

// With no path configured, the pool runs the stockfish found on PATH.
func TestNewPoolFindsEngineOnPath(t *testing.T) {
	requireStockfish(t)
	real, err := FindEngine("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "stockfish")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	p := newTestPool(t, Config{})
	if got := p.Config().Path; got != link {
		t.Errorf("pool runs %q, want the one on PATH %q", got, link)
	}
}
