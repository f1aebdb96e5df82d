package stockfish

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/rookscript/rookscript/engine/chess"
)

func cacheKey(fen string, depth, multipv int) string {
	return fen + "|" + strconv.Itoa(depth) + "|" + strconv.Itoa(multipv)
}

// cache holds analyses in memory (FIFO-bounded when max > 0) and, when a path
// is given, appends each new analysis to a JSONL file read back on the next
// start. Entries written by a different engine are ignored on load: their
// numbers would differ.
type cache struct {
	mu     sync.RWMutex
	m      map[string]*Analysis
	order  []string // insertion order, for eviction
	head   int
	max    int
	engine string

	file    *os.File
	path    string
	loaded  int64
	skipped int64
	werr    error // first write error
}

func openCache(path, engine string, max int) (*cache, error) {
	c := &cache{m: map[string]*Analysis{}, max: max, engine: engine, path: path}
	if path == "" {
		return c, nil
	}
	if err := c.load(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("stockfish cache: %w", err)
	}
	c.file = f
	return c, nil
}

// load reads the JSONL file; any line that does not hold a valid analysis is
// refused with its file:line, so a damaged cache never feeds rewards.
func (c *cache) load() error {
	f, err := os.Open(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stockfish cache: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(b) > 0 {
			if b[len(b)-1] != '\n' {
				return &CacheError{File: c.path, Line: line, Reason: "incomplete last line (interrupted write?); remove it to continue"}
			}
			if len(bytes.TrimSpace(b)) > 0 {
				a, ce := decodeCacheEntry(b)
				if ce != nil {
					ce.File, ce.Line = c.path, line
					return ce
				}
				if a.Engine != c.engine {
					c.skipped++
				} else {
					c.insert(cacheKey(a.FEN, a.Depth, a.MultiPV), a)
					c.loaded++
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &CacheError{File: c.path, Line: line, Err: err}
		}
	}
}

// decodeCacheEntry checks one line; its error is for load to place.
func decodeCacheEntry(b []byte) (*Analysis, *CacheError) {
	bad := func(field string, err error, format string, a ...any) (*Analysis, *CacheError) {
		return nil, &CacheError{Field: field, Reason: fmt.Sprintf(format, a...), Err: err}
	}
	var a Analysis
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return bad("", err, "invalid JSON")
	}
	pos, err := chess.ParseFEN(a.FEN)
	if err != nil {
		return bad("fen", err, "")
	}
	if pos.FEN() != a.FEN {
		return bad("fen", nil, "%q is not in canonical form %q", a.FEN, pos.FEN())
	}
	if err := pos.Valid(); err != nil {
		return bad("fen", err, "")
	}
	switch {
	case a.Depth < 1:
		return bad("depth", nil, "%d < 1", a.Depth)
	case a.MultiPV < 1:
		return bad("multipv", nil, "%d < 1", a.MultiPV)
	case a.Terminal != chess.NotOver:
		return bad("terminal", nil, "terminal positions are never cached")
	case len(a.Lines) != min(a.MultiPV, pos.NumLegalMoves()):
		return bad("lines", nil, "%d lines, want %d", len(a.Lines), min(a.MultiPV, pos.NumLegalMoves()))
	}
	seen := map[string]bool{}
	for i := range a.Lines {
		l := &a.Lines[i]
		switch {
		case !pos.IsLegal(l.Move):
			return bad(fmt.Sprintf("lines[%d].move", i), nil, "%q is not legal", l.Move)
		case seen[l.Move]:
			return bad(fmt.Sprintf("lines[%d].move", i), nil, "%q appears twice", l.Move)
		case l.Depth < 1:
			return bad(fmt.Sprintf("lines[%d].depth", i), nil, "%d < 1", l.Depth)
		case len(l.PV) > 0 && l.PV[0] != l.Move:
			return bad(fmt.Sprintf("lines[%d].pv", i), nil, "starts with %q, not the move", l.PV[0])
		}
		seen[l.Move] = true
		if len(l.PV) == 0 {
			l.PV = nil
		}
	}
	return &a, nil
}

func (c *cache) get(key string) *Analysis {
	c.mu.RLock()
	a := c.m[key]
	c.mu.RUnlock()
	if a == nil {
		return nil
	}
	return a.clone()
}

func (c *cache) put(key string, a *Analysis) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		return
	}
	c.insert(key, a.clone())
	if c.file == nil || c.werr != nil {
		return
	}
	b, err := json.Marshal(a)
	if err == nil {
		// One write call per line with O_APPEND: lines from concurrent
		// writers (even other processes) never interleave.
		_, err = c.file.Write(append(b, '\n'))
	}
	if err != nil {
		c.werr = fmt.Errorf("stockfish cache %s: write: %w", c.path, err)
	}
}

// insert adds an entry, evicting the oldest beyond max. Caller holds mu.
func (c *cache) insert(key string, a *Analysis) {
	if _, ok := c.m[key]; ok {
		c.m[key] = a
		return
	}
	c.m[key] = a
	c.order = append(c.order, key)
	for c.max > 0 && len(c.m) > c.max {
		delete(c.m, c.order[c.head])
		c.head++
	}
	if c.head > 1024 && c.head*2 > len(c.order) {
		c.order = append([]string(nil), c.order[c.head:]...)
		c.head = 0
	}
}

func (c *cache) status() (loaded int64, werr string) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.werr != nil {
		werr = c.werr.Error()
	}
	return c.loaded, werr
}

func (c *cache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file == nil {
		return nil
	}
	err := c.file.Close()
	c.file = nil
	if c.werr != nil {
		return c.werr
	}
	return err
}
