package rookworld

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
	"github.com/rookscript/rookscript/internal/editdist"
)

// PolicyWeights weight the policy components in the total.
type PolicyWeights struct {
	Format     float64 `json:"format"`
	MovesLegal float64 `json:"moves_legal"`
	BestRank   float64 `json:"best_rank"`
	Candidates float64 `json:"candidates"`
	Eval       float64 `json:"eval"`
}

// EnvWeights weight the environment components in the total.
type EnvWeights struct {
	Format      float64 `json:"format"`
	FEN         float64 `json:"fen"` // fen_exact, or fen_similarity with FENPartial
	Flags       float64 `json:"flags"`
	RewardField float64 `json:"reward_field"`
}

// Shaping names how the weighted mean t ∈ [0,1] of a well-formed answer becomes its total.
type Shaping string

// The shapings.
const (
	ShapeLinear   Shaping = "linear"   // t
	ShapeCentered Shaping = "centered" // 2t − 1
	ShapeStrict   Shaping = "strict"   // 1 if every weighted component is 1, else 0
)

// RewardConfig holds everything a recipe may tune. Each field's json tag is its name in Lua
// option tables and configs; alias lists older names still accepted. DefaultRewardConfig
// gives the values documented in doc.go.
type RewardConfig struct {
	Policy         PolicyWeights `json:"policy"`
	Env            EnvWeights    `json:"env"`
	MalformedFloor float64       `json:"malformed"`       // total for an answer that does not parse
	IllegalFloor   float64       `json:"illegal"`         // total for a policy answer whose B: is illegal
	RankCredit     []float64     `json:"rank_credit"`     // best_rank credit for MultiPV rank 1, 2, …
	LegalCredit    float64       `json:"legal_credit"`    // best_rank credit for a legal move outside the lines
	EvalClip       float64       `json:"eval_clip"`       // pawns; |E − Stockfish| beyond this scores 0
	FENPartial     bool          `json:"fen_partial"`     // FEN credit by similarity instead of exact match
	Shaping        Shaping       `json:"shaping"`         // ShapeLinear ("" too), ShapeCentered, ShapeStrict
	TruncatedFloor bool          `json:"truncated_floor"` // answers cut by max_new_tokens get MalformedFloor
	PartialCredit  bool          `json:"partial_credit"`  // answers that parse in part are graded below every well-formed total (PartialTotal)
	Depth          int           `json:"depth"`           // search depth; 0 = the pool's
	SoftOverlong   SoftOverlong  `json:"soft_overlong"`   // a penalty by a sampled completion's length (DAPO), added to its total
}

// DefaultRewardConfig returns the defaults: weights summing to one, malformed
// floor −0.3 (−1.0 drove NaNs in earlier systems), illegal floor −0.1, rank
// credit 1.0 / 0.7 / 0.7 / 0.5 / 0.5, legal credit 0.1, eval clip 2 pawns,
// exact FEN credit, linear shaping, truncated answers floored, answers that
// parse in part graded between the floor and every well-formed total, no soft
// overlong punishment.
func DefaultRewardConfig() RewardConfig {
	return RewardConfig{
		Policy:         PolicyWeights{Format: 0.05, MovesLegal: 0.1, BestRank: 0.45, Candidates: 0.2, Eval: 0.2},
		Env:            EnvWeights{Format: 0.1, FEN: 0.6, Flags: 0.15, RewardField: 0.15},
		MalformedFloor: -0.3,
		IllegalFloor:   -0.1,
		RankCredit:     []float64{1.0, 0.7, 0.7, 0.5, 0.5},
		LegalCredit:    0.1,
		EvalClip:       2.0,
		Shaping:        ShapeLinear,
		TruncatedFloor: true,
		PartialCredit:  true,
		SoftOverlong:   DefaultSoftOverlong(),
	}
}

// Validate checks the config; each error names the setting by its key.
func (c RewardConfig) Validate() error {
	var errs []error
	inRange := func(key string, v, lo, hi float64) {
		if math.IsNaN(v) || v < lo || v > hi {
			errs = append(errs, fmt.Errorf("%s must be in [%v, %v], got %v", key, lo, hi, v))
		}
	}
	for _, w := range []struct {
		key string
		v   float64
	}{
		{"policy.format", c.Policy.Format}, {"policy.moves_legal", c.Policy.MovesLegal},
		{"policy.best_rank", c.Policy.BestRank}, {"policy.candidates", c.Policy.Candidates},
		{"policy.eval", c.Policy.Eval}, {"env.format", c.Env.Format}, {"env.fen", c.Env.FEN},
		{"env.flags", c.Env.Flags}, {"env.reward_field", c.Env.RewardField},
	} {
		if !(w.v >= 0) || math.IsInf(w.v, 1) {
			errs = append(errs, fmt.Errorf("%s must be a finite weight ≥ 0, got %v", w.key, w.v))
		}
	}
	if c.Policy.Format+c.Policy.MovesLegal+c.Policy.BestRank+c.Policy.Candidates+c.Policy.Eval == 0 {
		errs = append(errs, errors.New("policy weights are all zero"))
	}
	if c.Env.Format+c.Env.FEN+c.Env.Flags+c.Env.RewardField == 0 {
		errs = append(errs, errors.New("env weights are all zero"))
	}
	inRange("malformed", c.MalformedFloor, -10, 10) // below every well-formed total with partial_credit (below)
	inRange("illegal", c.IllegalFloor, -10, 1)      // above 1 an illegal B: would outrank the best answer
	inRange("legal_credit", c.LegalCredit, 0, 1)
	for i, v := range c.RankCredit {
		inRange(fmt.Sprintf("rank_credit[%d]", i), v, 0, 1)
	}
	if !(c.EvalClip > 0) || math.IsInf(c.EvalClip, 1) {
		errs = append(errs, fmt.Errorf("eval_clip must be a finite number of pawns > 0, got %v", c.EvalClip))
	}
	switch c.Shaping {
	case "", ShapeLinear, ShapeCentered, ShapeStrict:
	default:
		errs = append(errs, fmt.Errorf("shaping must be %q, %q or %q, got %q", ShapeLinear, ShapeCentered, ShapeStrict, c.Shaping))
	}
	if c.Depth < 0 || c.Depth > 100 {
		errs = append(errs, fmt.Errorf("depth must be in [0, 100] (0: the pool's), got %d", c.Depth))
	}
	if err := c.SoftOverlong.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && c.PartialCredit {
		// The partial region lies between the floor and the worst well-formed answer: it must exist.
		for _, task := range []Task{TaskPolicy, TaskEnv} {
			if low := c.LowestWellFormed(task); !(c.MalformedFloor < low) {
				why := fmt.Sprintf("shaping %q", c.shaping())
				if task == TaskPolicy && low == c.IllegalFloor {
					why = "the illegal floor"
				}
				errs = append(errs, fmt.Errorf("partial_credit: malformed (%v) must be below the lowest total of a well-formed %s answer (%.4g, by %s), so that answers that parse in part can rank between them; lower malformed or set partial_credit = false",
					c.MalformedFloor, task, low, why))
			}
		}
	}
	return errors.Join(errs...)
}

// LowestWellFormed is a lower bound on the total of a well-formed answer of task: the total of
// one whose format is 1 (every well-formed answer's) and every other component 0, or for P:
// the illegal floor where that is lower. Shaping is monotone in the components, so no
// well-formed answer scores below it.
func (c RewardConfig) LowestWellFormed(task Task) float64 {
	if task == TaskEnv {
		w := c.Env
		return c.shape([][2]float64{{w.Format, 1}, {w.FEN, 0}, {w.Flags, 0}, {w.RewardField, 0}})
	}
	w := c.Policy
	return min(c.IllegalFloor, c.shape([][2]float64{{w.Format, 1}, {w.MovesLegal, 0}, {w.BestRank, 0}, {w.Candidates, 0}, {w.Eval, 0}}))
}

// PartialTotal is the total of an answer that parses in part (0 < format < 1) under
// PartialCredit: with F the malformed floor, L = LowestWellFormed(task) and t ∈ [0,1] the
// answer's weighted mean of components (unshaped; for A: the FEN weight on fen_ranks, since a
// FEN that is not a position cannot be exact),
//
//	F + (L − F)·(1 + t)/3
//
// which lies in [F + (L−F)/3, F + 2(L−F)/3]: strictly above every unparseable answer,
// strictly below every well-formed one, a third of the gap kept on either side.
func (c RewardConfig) PartialTotal(task Task, t float64) float64 {
	f, l := c.MalformedFloor, c.LowestWellFormed(task)
	return f + (l-f)*(1+t)/3
}

// Components are the reward components, each in [0,1]. Policy answers use the
// first six, environment answers Format and the last four.
type Components struct {
	Format        float64 `json:"format"`
	MovesLegal    float64 `json:"moves_legal"`
	BestLegal     float64 `json:"best_legal"`
	BestRank      float64 `json:"best_rank"`
	Candidates    float64 `json:"candidates"`
	Eval          float64 `json:"eval"`
	FENExact      float64 `json:"fen_exact"`
	FENSimilarity float64 `json:"fen_similarity"`
	FENRanks      float64 `json:"fen_ranks"`
	Flags         float64 `json:"flags"`
	RewardField   float64 `json:"reward_field"`
}

// Component names per task, in a fixed order.
var (
	PolicyComponentNames = []string{"format", "moves_legal", "best_legal", "best_rank", "candidates", "eval"}
	EnvComponentNames    = []string{"format", "fen_exact", "fen_similarity", "fen_ranks", "flags", "reward_field"}
)

// Map returns the task's components by name.
func (c Components) Map(task Task) map[string]float64 {
	if task == TaskEnv {
		return map[string]float64{"format": c.Format, "fen_exact": c.FENExact,
			"fen_similarity": c.FENSimilarity, "fen_ranks": c.FENRanks, "flags": c.Flags, "reward_field": c.RewardField}
	}
	return map[string]float64{"format": c.Format, "moves_legal": c.MovesLegal, "best_legal": c.BestLegal,
		"best_rank": c.BestRank, "candidates": c.Candidates, "eval": c.Eval}
}

// Result is the scored answer to one prompt.
type Result struct {
	Task       Task       `json:"task"`
	Total      float64    `json:"total"`
	Components Components `json:"components"`
	Malformed  bool       `json:"malformed"` // the answer does not fully parse (or was cut, with TruncatedFloor)
	Partial    bool       `json:"partial"`   // malformed but parsed in part, and graded so (PartialCredit)
	Illegal    bool       `json:"illegal"`   // policy: B: is not a legal move
	Truncated  bool       `json:"truncated"`
	Overlong   float64    `json:"overlong,omitempty"` // the soft overlong penalty (≤ 0) Total includes
	Problems   []string   `json:"problems,omitempty"`
	// Policy: what the answer was judged against.
	EngineBest  string   `json:"engine_best,omitempty"`
	EngineMoves []string `json:"engine_moves,omitempty"`
	Detail      Detail   `json:"detail"`
	// Env: the expected completion.
	Expected string `json:"expected,omitempty"`
	// Error is set when the answer could not be scored (bad prompt, engine
	// failure); Total is then 0 and the batch call returns an error too.
	Error string `json:"error,omitempty"`
}

// Detail carries the counts the evaluation metrics need.
type Detail struct {
	Candidates    int  `json:"candidates"`     // distinct M: moves
	LegalDistinct int  `json:"legal_distinct"` // distinct legal M: moves
	LegalInPos    int  `json:"legal_in_pos"`   // legal moves in the position
	TopOverlap    int  `json:"top_overlap"`    // distinct M: moves among the engine's lines
	TopCount      int  `json:"top_count"`      // engine lines (min(MultiPV, legal moves))
	BestIsTop     bool `json:"best_is_top"`    // B: equals the engine's best move
	FlagsBoth     bool `json:"flags_both"`     // env: both flags right
}

// Input is one (prompt, completion) pair. Truncated marks a completion cut by
// max_new_tokens rather than ended by the stop token or a stop. For an A: prompt,
// StartFEN and History may give the game that led to the prompt's position
// (as Item has them; HistoryFor gives them where the answer needs them), which
// then judges repetition; without them the bare FEN is judged. A sampled
// completion gives its length and budget (Tokens, MaxNewTokens), which
// SoftOverlong punishes; with MaxNewTokens 0 the text alone is judged. The input
// carries all its judgement needs: the scorer keeps no memory of prompts.
type Input struct {
	Prompt       string   `json:"prompt"`
	Completion   string   `json:"completion"`
	Truncated    bool     `json:"truncated"`
	StartFEN     string   `json:"start_fen,omitempty"`
	History      []string `json:"history,omitempty"`
	Tokens       int      `json:"tokens,omitempty"`         // the completion's tokens, the stop token included
	MaxNewTokens int      `json:"max_new_tokens,omitempty"` // the budget it was sampled under; 0: not a sampled completion
}

// Scorer computes rewards. Policy answers need the pool; environment answers
// are judged by the rules alone. A Scorer is safe for concurrent use.
type Scorer struct {
	pool *stockfish.Pool
	cfg  RewardConfig

	// Progress, if set, is told by ScoreBatch how many answers are scored (one call at a time).
	Progress func(done, total int)
}

// NewScorer validates cfg. pool may be nil when only A: prompts are scored.
func NewScorer(pool *stockfish.Pool, cfg RewardConfig) (*Scorer, error) {
	if cfg.Shaping == "" {
		cfg.Shaping = ShapeLinear
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.RankCredit = append([]float64(nil), cfg.RankCredit...)
	return &Scorer{pool: pool, cfg: cfg}, nil
}

// Config returns the scorer's configuration.
func (s *Scorer) Config() RewardConfig { return s.cfg }

// Score scores one answer; the task comes from the prompt's prefix.
func (s *Scorer) Score(ctx context.Context, in Input) (Result, error) {
	task, err := DetectTask(in.Prompt)
	if err != nil {
		return Result{Error: err.Error()}, err
	}
	o := s.cfg.SoftOverlong
	sampled := in.MaxNewTokens > 0 // its length is judged too
	if sampled {
		err = o.Fits(in.MaxNewTokens)
	}
	var r Result
	switch {
	case err != nil:
	case task == TaskEnv:
		r, err = s.scoreEnv(in)
	default:
		r, err = s.scorePolicy(ctx, in)
	}
	if err != nil {
		return Result{Task: task, Error: err.Error()}, err
	}
	if sampled && o.On() { // off, a total is left exactly as it was
		r.Overlong = o.Penalty(in.Tokens, in.MaxNewTokens)
		r.Total += r.Overlong
	}
	return r, nil
}

// ScoreBatch scores many answers, policy ones in parallel through the pool.
// The result has one entry per input, in order; an empty batch gives an empty
// result. The error joins the failures (each naming its index); failed entries
// carry Error and Total 0.
func (s *Scorer) ScoreBatch(ctx context.Context, ins []Input) ([]Result, error) {
	out := make([]Result, len(ins))
	errs := make([]error, len(ins))
	limit := 8
	if s.pool != nil {
		limit = 4 * s.pool.Config().Workers
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for i, in := range ins {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, err := s.Score(ctx, in)
			if err != nil {
				errs[i] = fmt.Errorf("answer %d: %w", i, err)
			}
			out[i] = r
			if s.Progress != nil {
				mu.Lock()
				done++
				s.Progress(done, len(ins))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// ScoreStrings is ScoreBatch for parallel prompt and completion lists.
func (s *Scorer) ScoreStrings(ctx context.Context, prompts, completions []string) ([]Result, error) {
	if len(prompts) != len(completions) {
		return nil, fmt.Errorf("score: %d prompts but %d completions", len(prompts), len(completions))
	}
	ins := make([]Input, len(prompts))
	for i := range prompts {
		ins[i] = Input{Prompt: prompts[i], Completion: completions[i]}
	}
	return s.ScoreBatch(ctx, ins)
}

func (s *Scorer) scorePolicy(ctx context.Context, in Input) (Result, error) {
	r := Result{Task: TaskPolicy, Truncated: in.Truncated}
	if s.pool == nil {
		return r, errors.New("policy rewards need a Stockfish pool")
	}
	fen, tail, err := PolicyPromptFields(in.Prompt)
	if err != nil {
		return r, err
	}
	pos, _ := chess.ParseFEN(fen)
	if pos.NumLegalMoves() == 0 {
		return r, fmt.Errorf("policy prompt %s: no legal moves to choose from", pos.FEN())
	}
	out := ParsePolicyCompletion(tail + in.Completion)
	r.Problems = out.Problems
	c := &r.Components
	c.Format = out.FormatScore()

	// Engine: lines for the position and a score for every legal candidate.
	toScore := []string{}
	if out.EvalsOK {
		toScore = out.Moves
	}
	scores, root, err := s.pool.MoveScores(ctx, fen, s.cfg.Depth, toScore)
	if err != nil {
		return r, err
	}
	r.EngineBest, r.EngineMoves = root.Best(), root.Moves()

	d := &r.Detail
	d.LegalInPos, d.TopCount = pos.NumLegalMoves(), len(root.Lines)
	distinct := map[string]bool{}
	legalTokens := 0
	for _, m := range out.Moves {
		legal := pos.IsLegal(m)
		if legal {
			legalTokens++
		}
		if distinct[m] {
			continue
		}
		distinct[m] = true
		d.Candidates++
		if legal {
			d.LegalDistinct++
		}
		if root.Rank(m) > 0 {
			d.TopOverlap++
		}
	}
	if len(out.Moves) > 0 {
		c.MovesLegal = float64(legalTokens) / float64(len(out.Moves))
	}
	if d.TopCount > 0 {
		c.Candidates = float64(d.TopOverlap) / float64(d.TopCount)
	}
	bestLegal := out.BestOK && pos.IsLegal(out.Best)
	if bestLegal {
		c.BestLegal = 1
		c.BestRank = s.cfg.LegalCredit
		if k := root.Rank(out.Best); k > 0 && k <= len(s.cfg.RankCredit) {
			c.BestRank = s.cfg.RankCredit[k-1]
		}
		d.BestIsTop = out.Best == root.Best()
	}
	if out.MovesOK && out.EvalsOK {
		var errSum float64
		for i, m := range out.Moves {
			e := 1.0 // an illegal candidate has no engine value: full error
			if sc, ok := scores[m]; ok {
				e = math.Min(math.Abs(out.Evals[i]-sc.Pawns()), s.cfg.EvalClip) / s.cfg.EvalClip
			}
			errSum += e
		}
		c.Eval = 1 - errSum/float64(len(out.Moves))
	}

	w := s.cfg.Policy
	weighted := [][2]float64{{w.Format, c.Format}, {w.MovesLegal, c.MovesLegal},
		{w.BestRank, c.BestRank}, {w.Candidates, c.Candidates}, {w.Eval, c.Eval}}
	r.Malformed = !out.WellFormed() || (in.Truncated && s.cfg.TruncatedFloor)
	r.Illegal = out.BestOK && !bestLegal
	r.Partial = s.cfg.partlyParsed(c.Format, in.Truncated)
	switch {
	case r.Partial:
		r.Total = s.cfg.PartialTotal(TaskPolicy, weightedMean(weighted))
	case r.Malformed:
		r.Total = s.cfg.MalformedFloor
	case r.Illegal:
		r.Total = s.cfg.IllegalFloor
	default:
		r.Total = s.cfg.shape(weighted)
	}
	return r, nil
}

func (s *Scorer) scoreEnv(in Input) (Result, error) {
	r := Result{Task: TaskEnv, Truncated: in.Truncated}
	p, err := ParseEnvPrompt(in.Prompt)
	if err != nil {
		return r, err
	}
	want, err := EnvStepAfter(in.StartFEN, in.History, p.FEN, p.Move)
	if err != nil {
		return r, err
	}
	r.Expected = want.Completion()
	out := ParseEnvCompletion(in.Completion)
	r.Problems = out.Problems
	c := &r.Components
	c.Format = out.FormatScore()
	if out.FEN != "" {
		if want.FENMatches(out.FEN) {
			c.FENExact = 1
		}
		c.FENRanks = RankShape(out.FEN)
		c.FENSimilarity = Similarity(out.FEN, want.NewFEN)
		if std := want.StandardFEN(); std != "" {
			c.FENSimilarity = max(c.FENSimilarity, Similarity(out.FEN, std))
		}
	}
	term := out.TerminatedOK && out.Terminated == want.Terminated
	trunc := out.TruncatedOK && out.Truncated == want.Truncated
	c.Flags = (b2f(term) + b2f(trunc)) / 2
	r.Detail.FlagsBoth = term && trunc
	if out.RewardOK && math.Abs(out.Reward-want.Reward) < 1e-9 {
		c.RewardField = 1
	}
	fen := c.FENExact
	if s.cfg.FENPartial {
		fen = c.FENSimilarity
	}
	w := s.cfg.Env
	weighted := [][2]float64{{w.Format, c.Format}, {w.FEN, fen}, {w.Flags, c.Flags}, {w.RewardField, c.RewardField}}
	r.Malformed = !out.WellFormed() || (in.Truncated && s.cfg.TruncatedFloor)
	r.Partial = s.cfg.partlyParsed(c.Format, in.Truncated)
	switch {
	case r.Partial:
		// A FEN that is not a position cannot be exact: its shape, how near it is to being a
		// position, grades it. Its similarity to the right FEN, tried first, rose under GRPO
		// while the shape got worse, and no answer became well-formed (DESIGN §4).
		weighted[1][1] = c.FENRanks
		r.Total = s.cfg.PartialTotal(TaskEnv, weightedMean(weighted))
	case r.Malformed:
		r.Total = s.cfg.MalformedFloor
	default:
		r.Total = s.cfg.shape(weighted)
	}
	return r, nil
}

// weightedMean is t, the weighted mean of (weight, value) pairs.
func weightedMean(wv [][2]float64) float64 {
	var sum, wsum float64
	for _, p := range wv {
		sum += p[0] * p[1]
		wsum += p[0]
	}
	return sum / wsum
}

// shaping is the shaping in force ("" is linear).
func (c RewardConfig) shaping() Shaping {
	if c.Shaping == "" {
		return ShapeLinear
	}
	return c.Shaping
}

// shape combines (weight, value) pairs into the total of a well-formed answer.
func (c RewardConfig) shape(wv [][2]float64) float64 {
	t := weightedMean(wv)
	switch c.shaping() {
	case ShapeCentered:
		return 2*t - 1
	case ShapeStrict:
		for _, p := range wv {
			if p[0] > 0 && p[1] < 1 {
				return 0
			}
		}
		return 1
	}
	return t
}

// partlyParsed reports whether an answer whose fields parse to the share format, truncated
// or not, is graded by PartialTotal: some of its fields parse but not all, and it was not cut
// by max_new_tokens while TruncatedFloor floors such answers.
func (c RewardConfig) partlyParsed(format float64, truncated bool) bool {
	return c.PartialCredit && format > 0 && format < 1 && !(truncated && c.TruncatedFloor)
}

// RankShape is the share of a FEN's board that has the shape of one: of the ranks before its
// first space, those among the first eight that hold exactly eight squares (each a piece
// letter or a digit 1–8 counting that many), over max(8, the number of ranks). It is 1 for
// every board ParseFEN reads, and below 1 for a board of the wrong shape, the way a weak model
// most often fails: "rnbqkbnr/pppppp/8/…".
func RankShape(fen string) float64 {
	board, _, _ := strings.Cut(strings.TrimSpace(fen), " ")
	ranks := strings.Split(board, "/")
	good := 0
	for i, r := range ranks {
		if i >= 8 {
			break
		}
		n := 0
		for _, ch := range r {
			switch {
			case ch >= '1' && ch <= '8':
				n += int(ch - '0')
			case strings.ContainsRune("pnbrqkPNBRQK", ch):
				n++
			default:
				n = -100
			}
		}
		if n == 8 {
			good++
		}
	}
	return float64(good) / float64(max(8, len(ranks)))
}

// Similarity is the normalised Levenshtein similarity 1 − d(a,b)/max(|a|,|b|)
// over bytes; 1 for two empty strings.
func Similarity(a, b string) float64 {
	if a == b {
		return 1
	}
	n := max(len(a), len(b))
	return 1 - float64(editdist.Levenshtein(a, b))/float64(n)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// FormatComponents renders a result's components as "name=value" pairs in the
// task's fixed order, for logs and examples.
func FormatComponents(r Result) string {
	names := PolicyComponentNames
	if r.Task == TaskEnv {
		names = EnvComponentNames
	}
	m := r.Components.Map(r.Task)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%.4g", n, m[n]))
	}
	return strings.Join(parts, " ")
}
