package stockfish

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookscript/rookscript/engine/chess"
)

// ErrPoolClosed is returned by a Pool after Close.
var ErrPoolClosed = errors.New("stockfish: pool closed")

// Line is one MultiPV line: the move, its score for the side to move, and the
// principal variation it starts.
type Line struct {
	Move  string   `json:"move"`
	Score Score    `json:"score"`
	Depth int      `json:"depth"`
	PV    []string `json:"pv,omitempty"`
}

// Analysis is Stockfish's view of a position, lines in MultiPV order (best
// first). A position without legal moves is answered without the engine:
// Terminal is then Checkmate or Stalemate and Lines is empty.
type Analysis struct {
	FEN      string            `json:"fen"`
	Depth    int               `json:"depth"`
	MultiPV  int               `json:"multipv"`
	Engine   string            `json:"engine,omitempty"`
	Lines    []Line            `json:"lines"`
	Terminal chess.Termination `json:"terminal,omitempty"`
	Cached   bool              `json:"-"` // served from the cache
}

// Best is the engine's best move ("" for a terminal position).
func (a *Analysis) Best() string {
	if len(a.Lines) == 0 {
		return ""
	}
	return a.Lines[0].Move
}

// Moves lists the line moves in MultiPV order.
func (a *Analysis) Moves() []string {
	out := make([]string, len(a.Lines))
	for i, l := range a.Lines {
		out[i] = l.Move
	}
	return out
}

// Evals lists the line scores in pawns (E: units) in MultiPV order.
func (a *Analysis) Evals() []float64 {
	out := make([]float64, len(a.Lines))
	for i, l := range a.Lines {
		out[i] = l.Score.Pawns()
	}
	return out
}

// Rank is the 1-based MultiPV rank of move, 0 when it is not among the lines.
func (a *Analysis) Rank(move string) int {
	for i, l := range a.Lines {
		if l.Move == move {
			return i + 1
		}
	}
	return 0
}

// Score is the position's evaluation for the side to move.
func (a *Analysis) Score() Score {
	switch {
	case a.Terminal == chess.Checkmate:
		return Score{Mate: true, Value: 0}
	case len(a.Lines) == 0:
		return Score{}
	}
	return a.Lines[0].Score
}

func (a *Analysis) clone() *Analysis {
	c := *a
	c.Lines = make([]Line, len(a.Lines))
	for i, l := range a.Lines {
		l.PV = append([]string(nil), l.PV...)
		c.Lines[i] = l
	}
	return &c
}

// Request asks for one analysis; zero Depth or MultiPV take the pool's values.
type Request struct {
	FEN     string `json:"fen"`
	Depth   int    `json:"depth"`
	MultiPV int    `json:"multipv"`
}

// PoolStats counts what a pool has done.
type PoolStats struct {
	Requests    int64   `json:"requests"`     // Analyse calls
	CacheHits   int64   `json:"cache_hits"`   // answered from the cache
	Shared      int64   `json:"shared"`       // joined an identical search in flight
	Terminal    int64   `json:"terminal"`     // answered without the engine
	Searches    int64   `json:"searches"`     // completed engine searches
	Restarts    int64   `json:"restarts"`     // engines killed and replaced
	Abandoned   int64   `json:"abandoned"`    // killed engines that could not be reaped within the kill bound
	LostSeconds float64 `json:"lost_seconds"` // time spent in attempts that failed (a crashed, hung or dead engine)
	Failures    int64   `json:"failures"`     // requests that gave up
	CacheLoaded int64   `json:"cache_loaded"` // entries read from CacheFile
	CacheError  string  `json:"cache_error,omitempty"`
}

// WorkerInfo describes one engine worker.
type WorkerInfo struct {
	ID       int  `json:"id"`
	PID      int  `json:"pid"` // 0 while no process is running
	Busy     bool `json:"busy"`
	Restarts int  `json:"restarts"`
}

// Pool runs Stockfish processes and answers analysis requests concurrently:
// each worker owns one process; identical requests in flight share one
// search; results are cached by FEN, depth and MultiPV. A crashed or hung
// engine is killed, restarted, and the position retried up to Retries times.
type Pool struct {
	cfg     Config
	engine  string
	jobs    chan *job
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	workers []*worker
	cache   *cache
	closed  atomic.Bool

	mu       sync.Mutex
	inflight map[string]*call

	requests, hits, shared, terminal, searches, restarts, failures, abandoned atomic.Int64
	lost                                                                      atomic.Int64 // nanoseconds
}

type job struct {
	ctx     context.Context
	pos     *chess.Position
	depth   int
	multipv int
	reply   chan jobResult
}

type jobResult struct {
	lines []Line
	err   error
}

type call struct {
	done chan struct{}
	a    *Analysis
	err  error
}

type worker struct {
	id       int
	mu       sync.Mutex
	eng      *engineProc
	busy     bool
	restarts int
}

// NewPool validates cfg, finds the engine (FindEngine: a missing binary is one
// error naming the path and the way to install it), starts cfg.Workers
// engines and loads the cache file if one is configured. ctx bounds start-up
// only; the pool lives until Close.
func NewPool(ctx context.Context, cfg Config) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	path, err := FindEngine(cfg.Path)
	if err != nil {
		return nil, err
	}
	cfg.Path = path
	p := &Pool{cfg: cfg, jobs: make(chan *job), inflight: map[string]*call{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	startCtx, cancel := context.WithTimeout(ctx, cfg.startTimeout())
	defer cancel()
	engines := make([]*engineProc, cfg.Workers)
	errs := make([]error, cfg.Workers)
	var wg sync.WaitGroup
	for i := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			engines[i], errs[i] = startEngine(startCtx, cfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, e := range engines {
			if e != nil {
				e.kill()
			}
		}
		p.cancel()
		return nil, err
	}
	p.engine = engines[0].name
	p.cache, err = openCache(cfg.CacheFile, p.engine, cfg.CacheSize)
	if err != nil {
		for _, e := range engines {
			e.kill()
		}
		p.cancel()
		return nil, err
	}
	for i, e := range engines {
		w := &worker{id: i, eng: e}
		p.workers = append(p.workers, w)
		p.wg.Add(1)
		go p.serve(w)
	}
	return p, nil
}

// Config returns the pool's configuration, Path resolved.
func (p *Pool) Config() Config { return p.cfg }

// Engine is the engine's "id name", e.g. "Stockfish 15.1".
func (p *Pool) Engine() string { return p.engine }

// Analyse searches fen at the pool's depth and MultiPV.
func (p *Pool) Analyse(ctx context.Context, fen string) (*Analysis, error) {
	return p.AnalyseWith(ctx, Request{FEN: fen})
}

// AnalyseWith answers one request. The returned Analysis is the caller's own
// copy.
func (p *Pool) AnalyseWith(ctx context.Context, r Request) (*Analysis, error) {
	if p.closed.Load() {
		return nil, ErrPoolClosed
	}
	p.requests.Add(1)
	pos, err := chess.ParseFEN(r.FEN)
	if err != nil {
		return nil, fmt.Errorf("stockfish: %w", err)
	}
	depth, multipv := r.Depth, r.MultiPV
	if depth == 0 {
		depth = p.cfg.Depth
	}
	if multipv == 0 {
		multipv = p.cfg.MultiPV
	}
	if depth < 1 || depth > 100 || multipv < 1 || multipv > 256 {
		return nil, fmt.Errorf("stockfish: request depth %d, multipv %d out of range", depth, multipv)
	}
	fen := pos.FEN()
	if err := pos.Valid(); err != nil {
		// An engine may crash on such a position; refuse it up front.
		return nil, fmt.Errorf("stockfish: %s: %w", fen, err)
	}
	if pos.NumLegalMoves() == 0 {
		p.terminal.Add(1)
		return &Analysis{FEN: fen, Depth: depth, MultiPV: multipv, Engine: p.engine,
			Lines: []Line{}, Terminal: pos.Outcome().Termination}, nil
	}
	key := cacheKey(fen, depth, multipv)
	for {
		// Checked under mu: a leader caches its result before it leaves
		// inflight, so a request never misses both and searches twice.
		p.mu.Lock()
		if a := p.cache.get(key); a != nil {
			p.mu.Unlock()
			p.hits.Add(1)
			a.Cached = true
			return a, nil
		}
		if c := p.inflight[key]; c != nil {
			p.mu.Unlock()
			p.shared.Add(1)
			select {
			case <-c.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if c.err != nil && isContextErr(c.err) && ctx.Err() == nil {
				continue // the leader gave up, not us: try again
			}
			if c.err != nil {
				return nil, c.err
			}
			return c.a.clone(), nil
		}
		c := &call{done: make(chan struct{})}
		p.inflight[key] = c
		p.mu.Unlock()

		lines, err := p.submit(ctx, pos, depth, multipv)
		if err == nil {
			c.a = &Analysis{FEN: fen, Depth: depth, MultiPV: multipv, Engine: p.engine, Lines: lines}
			p.cache.put(key, c.a)
		}
		c.err = err
		p.mu.Lock()
		delete(p.inflight, key)
		p.mu.Unlock()
		close(c.done)
		if err != nil {
			return nil, err
		}
		return c.a.clone(), nil
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func (p *Pool) submit(ctx context.Context, pos *chess.Position, depth, multipv int) ([]Line, error) {
	j := &job{ctx: ctx, pos: pos, depth: depth, multipv: multipv, reply: make(chan jobResult, 1)}
	select {
	case p.jobs <- j:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.ctx.Done():
		return nil, ErrPoolClosed
	}
	select {
	case r := <-j.reply:
		return r.lines, r.err
	case <-p.ctx.Done():
		return nil, ErrPoolClosed
	}
}

// AnalyseBatch answers all requests in parallel. The slice always has one
// entry per request (nil where it failed); the error joins every failure,
// each naming its index and FEN.
func (p *Pool) AnalyseBatch(ctx context.Context, reqs []Request) ([]*Analysis, error) {
	out := make([]*Analysis, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := p.AnalyseWith(ctx, r)
			if err != nil {
				errs[i] = fmt.Errorf("request %d (%s): %w", i, r.FEN, err)
			}
			out[i] = a
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// MoveScores evaluates each legal move of moves for the side to move in fen,
// in pawn-convertible Scores. Moves among the root's MultiPV lines take that
// line's score; any other legal move is scored by searching the position after
// it one ply shallower (MultiPV 1) and flipping the result. Illegal or
// malformed moves are left out of the map. depth 0 means the pool's depth.
func (p *Pool) MoveScores(ctx context.Context, fen string, depth int, moves []string) (map[string]Score, *Analysis, error) {
	root, err := p.AnalyseWith(ctx, Request{FEN: fen, Depth: depth})
	if err != nil {
		return nil, nil, err
	}
	pos, err := chess.ParseFEN(fen)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]Score{}
	var pending []string
	for _, m := range moves {
		if _, seen := out[m]; seen || !pos.IsLegal(m) {
			continue
		}
		if r := root.Rank(m); r > 0 {
			out[m] = root.Lines[r-1].Score
			continue
		}
		out[m] = Score{} // filled in below
		pending = append(pending, m)
	}
	scores := make([]Score, len(pending))
	errs := make([]error, len(pending))
	var wg sync.WaitGroup
	for i, m := range pending {
		wg.Add(1)
		go func() {
			defer wg.Done()
			child, _ := pos.Play(m)
			switch child.Outcome().Termination {
			case chess.Checkmate:
				scores[i] = Score{Mate: true, Value: 1}
			case chess.Stalemate:
				scores[i] = Score{}
			default:
				a, err := p.AnalyseWith(ctx, Request{FEN: child.FEN(), Depth: max(root.Depth-1, 1), MultiPV: 1})
				if err != nil {
					errs[i] = fmt.Errorf("move %s: %w", m, err)
					return
				}
				scores[i] = parentScore(a.Score())
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	for i, m := range pending {
		out[m] = scores[i]
	}
	return out, root, nil
}

// serve is a worker's loop.
func (p *Pool) serve(w *worker) {
	defer p.wg.Done()
	defer w.killEngine(false)
	for {
		select {
		case <-p.ctx.Done():
			return
		case j := <-p.jobs:
			w.setBusy(true)
			lines, err := p.run(w, j)
			w.setBusy(false)
			if err != nil {
				p.failures.Add(1)
			} else {
				p.searches.Add(1)
			}
			j.reply <- jobResult{lines, err}
		}
	}
}

// run performs one job with restarts and bounded retries. Every attempt is bounded, and all
// of them together by PositionTimeout when it is set (Config.MaxLoss), so a failing engine
// costs a position a bounded time; what it did cost is added to PoolStats.LostSeconds and
// named in the error when the pool gives up.
func (p *Pool) run(w *worker, j *job) ([]Line, error) {
	var lastErr error
	var lost time.Duration
	attempts := p.cfg.Retries + 1
	// pos is the caller's context with the position's deadline, if it has one; what ends
	// the attempts is told apart below: the caller's leaving is returned as such.
	pos, deadline := j.ctx, time.Time{}
	if pt := p.cfg.positionTimeout(); pt > 0 {
		deadline = time.Now().Add(pt)
		var cancel context.CancelFunc
		pos, cancel = context.WithDeadline(j.ctx, deadline)
		defer cancel()
	}
	a := 0
	for ; a < attempts && pos.Err() == nil; a++ {
		start := time.Now()
		eng, err := w.engine(p, deadline)
		if err == nil {
			ctx, cancel := context.WithTimeout(pos, p.cfg.timeout())
			stop := context.AfterFunc(p.ctx, cancel)
			var lines []Line
			lines, err = eng.analyse(ctx, j.pos, j.depth, j.multipv)
			stop()
			cancel()
			if err == nil {
				return lines, nil
			}
			// The engine is in an unknown state (dead, hung, or mid-search for a
			// caller that left): replace it.
			if !w.killEngine(true) {
				p.abandoned.Add(1)
			}
			p.restarts.Add(1)
		}
		if p.ctx.Err() != nil {
			return nil, ErrPoolClosed
		}
		if err := j.ctx.Err(); err != nil {
			return nil, err
		}
		d := time.Since(start)
		lost += d
		p.lost.Add(int64(d))
		lastErr = err
	}
	if err := j.ctx.Err(); err != nil {
		return nil, err
	}
	g := &GiveUpError{FEN: j.pos.FEN(), Depth: j.depth, Attempts: a, Lost: lost, MaxLoss: p.cfg.MaxLoss(), Err: lastErr}
	if pos.Err() != nil {
		g.PositionTimeout = p.cfg.PositionTimeout
	}
	return nil, g
}

// engine returns the worker's engine, starting one if it has none; the start is bounded by
// deadline too, when it is not zero.
func (w *worker) engine(p *Pool, deadline time.Time) (*engineProc, error) {
	w.mu.Lock()
	e := w.eng
	w.mu.Unlock()
	if e != nil {
		return e, nil
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.startTimeout())
	defer cancel()
	if !deadline.IsZero() {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, deadline)
		defer stop()
	}
	e, err := startEngine(ctx, p.cfg)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.eng = e
	w.mu.Unlock()
	return e, nil
}

// killEngine stops the worker's process; restart counts it as a replacement. It reports
// false when the process could not be reaped within the kill bound.
func (w *worker) killEngine(restart bool) bool {
	w.mu.Lock()
	e := w.eng
	if e != nil {
		w.eng = nil
		if restart {
			w.restarts++
		}
	}
	w.mu.Unlock()
	if e == nil {
		return true
	}
	return e.kill()
}

func (w *worker) setBusy(b bool) {
	w.mu.Lock()
	w.busy = b
	w.mu.Unlock()
}

// Workers reports each worker's process and state.
func (p *Pool) Workers() []WorkerInfo {
	out := make([]WorkerInfo, len(p.workers))
	for i, w := range p.workers {
		w.mu.Lock()
		out[i] = WorkerInfo{ID: w.id, Busy: w.busy, Restarts: w.restarts}
		if w.eng != nil {
			out[i].PID = w.eng.pid()
		}
		w.mu.Unlock()
	}
	return out
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	s := PoolStats{
		Requests: p.requests.Load(), CacheHits: p.hits.Load(), Shared: p.shared.Load(),
		Terminal: p.terminal.Load(), Searches: p.searches.Load(), Restarts: p.restarts.Load(),
		Failures: p.failures.Load(), Abandoned: p.abandoned.Load(),
		LostSeconds: time.Duration(p.lost.Load()).Seconds(),
	}
	s.CacheLoaded, s.CacheError = p.cache.status()
	return s
}

// Close kills every engine process and closes the cache file. Requests in
// flight fail with ErrPoolClosed. Close is idempotent.
func (p *Pool) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.cancel()
	p.wg.Wait()
	return p.cache.close()
}
