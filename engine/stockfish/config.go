package stockfish

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config configures a Pool. Each field's json tag is its name in Lua option tables
// (rook.stockfish{depth = 10}), a recipe's stockfish section and logs; the names recipes used
// before sections (stockfish_depth; stockfish for the binary) are refused with the new one
// (renamed). No field has a zero-means-default rule: start from DefaultConfig and set what
// differs; Validate refuses anything out of range.
type Config struct {
	Path            string  `json:"path"`             // engine binary; "" finds stockfish on PATH, then DefaultPath
	Workers         int     `json:"workers"`          // engine processes
	Depth           int     `json:"depth"`            // fixed search depth (what makes results deterministic)
	MultiPV         int     `json:"multipv"`          // lines per position
	Threads         int     `json:"threads"`          // threads per engine; more than 1 breaks determinism
	HashMB          int     `json:"hash_mb"`          // hash table per engine, MiB
	Timeout         float64 `json:"timeout"`          // seconds per search attempt (start-up gets at least 10)
	Retries         int     `json:"retries"`          // extra attempts after a crash or hang
	PositionTimeout float64 `json:"position_timeout"` // seconds for all attempts at a position together; 0 = (retries+1) × timeout
	CacheFile       string  `json:"cache_file"`       // optional JSONL cache that survives runs
	CacheSize       int     `json:"cache_size"`       // in-memory entries kept; 0 = unlimited
}

// DefaultConfig is one single-threaded engine searching to depth 10 with
// MultiPV 5, 16 MiB hash, 30 s per search and 2 retries, and no bound on a
// position beyond that: a hung engine costs it 3 × 30 s of searching (plus
// restarts, Config.MaxLoss) before the position fails.
func DefaultConfig() Config {
	return Config{Workers: 1, Depth: 10, MultiPV: 5, Threads: 1, HashMB: 16, Timeout: 30, Retries: 2}
}

// Validate checks every field; each error is a *ConfigError naming the setting as recipes
// know it ("stockfish: depth must be ≥ 1, got 0"), all of them joined.
func (c Config) Validate() error {
	var errs []error
	for _, r := range []struct {
		key       string
		v, lo, hi int
	}{
		{"workers", c.Workers, 1, 256}, {"depth", c.Depth, 1, 100}, {"multipv", c.MultiPV, 1, 256},
		{"threads", c.Threads, 1, 1024}, {"hash_mb", c.HashMB, 1, 1 << 20}, {"retries", c.Retries, 0, 100},
		{"cache_size", c.CacheSize, 0, 1 << 40},
	} {
		switch {
		case r.v < r.lo:
			errs = append(errs, &ConfigError{Key: r.key, Value: r.v, Reason: fmt.Sprintf("≥ %d", r.lo)})
		case r.v > r.hi:
			errs = append(errs, &ConfigError{Key: r.key, Value: r.v, Reason: fmt.Sprintf("≤ %d", r.hi)})
		}
	}
	if !(c.Timeout > 0) || math.IsInf(c.Timeout, 0) {
		errs = append(errs, &ConfigError{Key: "timeout", Value: c.Timeout, Reason: "a positive number of seconds"})
	}
	switch pt := c.PositionTimeout; {
	case !(pt >= 0) || math.IsInf(pt, 0):
		errs = append(errs, &ConfigError{Key: "position_timeout", Value: pt, Reason: "a number of seconds ≥ 0 (0: no bound but each attempt's)"})
	case pt > 0 && pt < c.Timeout:
		// It would cut every search short of its timeout: the smaller one is the setting.
		errs = append(errs, &ConfigError{Key: "position_timeout", Value: pt, Reason: fmt.Sprintf(
			"0 or ≥ timeout (%v): a shorter one leaves no search its timeout; lower timeout to at most %v instead", c.Timeout, pt)})
	}
	return errors.Join(errs...)
}

// positionTimeout is PositionTimeout as a Duration, 0 for none.
func (c Config) positionTimeout() time.Duration {
	return time.Duration(c.PositionTimeout * float64(time.Second))
}

// timeout is Timeout as a Duration.
func (c Config) timeout() time.Duration { return time.Duration(c.Timeout * float64(time.Second)) }

// startTimeout bounds an engine's start and handshake (loading its network
// takes a moment), independently of a short per-search Timeout.
func (c Config) startTimeout() time.Duration {
	return max(c.timeout(), 10*time.Second)
}

// MaxLoss bounds the time a failing engine can cost one position. Each of the Retries+1
// attempts is bounded: start-up (startTimeout), the search (Timeout, every write included),
// two kills (killWait each) and reading a dead engine's last words (stderrWait, at most
// twice per failure, start-up and search). A PositionTimeout bounds them together: the
// attempt it interrupts still has its kills and last words to finish.
func (c Config) MaxLoss() time.Duration {
	cleanup := 2*killWait + 4*stderrWait
	loss := time.Duration(c.Retries+1) * (c.startTimeout() + c.timeout() + cleanup)
	if pt := c.positionTimeout(); pt > 0 {
		loss = min(loss, pt+cleanup)
	}
	return loss
}
