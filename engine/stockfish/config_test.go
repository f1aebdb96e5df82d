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
	tests := []struct {
		name string
		mod  func(*Config)
		want string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"depth 0 is not the default depth", func(c *Config) { c.Depth = 0 }, "stockfish: depth must be ≥ 1, got 0"},
		{"depth too deep", func(c *Config) { c.Depth = 101 }, "stockfish: depth must be ≤ 100, got 101"},
		{"no workers", func(c *Config) { c.Workers = 0 }, "stockfish: workers must be ≥ 1, got 0"},
		{"negative workers", func(c *Config) { c.Workers = -2 }, "stockfish: workers must be ≥ 1, got -2"},
		{"multipv 0", func(c *Config) { c.MultiPV = 0 }, "stockfish: multipv must be ≥ 1, got 0"},
		{"hash 0", func(c *Config) { c.HashMB = 0 }, "stockfish: hash_mb must be ≥ 1, got 0"},
		{"negative retries", func(c *Config) { c.Retries = -1 }, "stockfish: retries must be ≥ 0, got -1"},
		{"no retries is allowed", func(c *Config) { c.Retries = 0 }, ""},
		{"timeout 0", func(c *Config) { c.Timeout = 0 }, "stockfish: timeout must be a positive number of seconds, got 0"},
		{"timeout NaN", func(c *Config) { c.Timeout = math.NaN() }, "stockfish: timeout must be a positive number of seconds, got NaN"},
		{"timeout +Inf", func(c *Config) { c.Timeout = math.Inf(1) }, "stockfish: timeout"},
		{"no position bound", func(c *Config) { c.PositionTimeout = 0 }, ""},
		{"a position bound of two searches", func(c *Config) { c.PositionTimeout = 60 }, ""},
		{"a position bound of one search", func(c *Config) { c.PositionTimeout = c.Timeout }, ""},
		{"a position bound below the timeout", func(c *Config) { c.PositionTimeout = 10 },
			"stockfish: position_timeout 10 is shorter than timeout 30, so no search could use its timeout; lower timeout to at most 10"},
		{"negative position bound", func(c *Config) { c.PositionTimeout = -1 }, "stockfish: position_timeout must be a number of seconds ≥ 0 (0: no bound but each attempt's), got -1"},
		{"position bound NaN", func(c *Config) { c.PositionTimeout = math.NaN() }, "stockfish: position_timeout must be a number of seconds ≥ 0 (0: no bound but each attempt's), got NaN"},
		{"position bound +Inf", func(c *Config) { c.PositionTimeout = math.Inf(1) }, "stockfish: position_timeout must be"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// A zero depth or worker count reaches NewPool as an error before any engine starts; it used to
// become depth 10 and one worker without a word.
func TestNewPoolRefusesZeroSettings(t *testing.T) {
	for key, mod := range map[string]func(*Config){
		"stockfish: depth":   func(c *Config) { c.Depth = 0 },
		"stockfish: workers": func(c *Config) { c.Workers = 0 },
	} {
		c := DefaultConfig()
		c.Path = "/nonexistent/stockfish" // would fail differently if it got that far
		mod(&c)
		p, err := NewPool(context.Background(), c)
		if err == nil {
			p.Close()
			t.Fatalf("%s = 0 accepted", key)
		}
		if !strings.Contains(err.Error(), key+" must be ≥ 1, got 0") {
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
		want                          string // the path found, or with wantErr a piece of the error
		wantErr, notFound             bool
	}{
		{"stockfish on PATH first", "", fallback, onPath, sf, false, false},
		{"Debian's path when PATH has none", "", fallback, empty, fallback, false, false},
		{"neither", "", filepath.Join(dir, "nope"), empty, `no "stockfish" on PATH and no ` + filepath.Join(dir, "nope"), true, true},
		{"a bare name is looked up on PATH", "sf-dev", fallback, onPath, other, false, false},
		{"a bare name not on PATH", "sf-missing", fallback, onPath, `no "sf-missing" on PATH`, true, true},
		{"an explicit path", sf, fallback, empty, sf, false, false},
		{"an explicit path that does not exist", filepath.Join(dir, "gone"), fallback, onPath, `"` + filepath.Join(dir, "gone") + `" does not exist`, true, true},
		{"a directory", dir, fallback, onPath, "is a directory", true, false},
		{"not executable", plain, fallback, onPath, "is not executable", true, false},
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
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("findEngine(%q) err = %v, want %q", tc.path, err, tc.want)
			}
			if errors.Is(err, ErrNotFound) != tc.notFound {
				t.Errorf("errors.Is(err, ErrNotFound) = %v, want %v", !tc.notFound, tc.notFound)
			}
			if tc.notFound && !strings.Contains(err.Error(), `"make setup"`) {
				t.Errorf("err = %v, want the install hint", err)
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
