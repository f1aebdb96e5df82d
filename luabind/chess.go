package luabind

import (
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"
	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/atomicfile"
	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/dist"
	"github.com/rookscript/rookscript/engine/rollout"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/engine/sft"
	"github.com/rookscript/rookscript/engine/stockfish"
	"github.com/rookscript/rookscript/internal/procmem"
)

const (
	stockfishType = "rook.stockfish"
	positionsType = "rook.positions"
	gameType      = "rook.game"
)

// registerChess adds Stockfish pools, position sources, chess rewards and evaluation.
func (e *Env) registerChess(L *lua.LState, mod, reward *lua.LTable) {
	mod.RawSetString("stockfish", L.NewFunction(e.luaStockfish))
	mod.RawSetString("positions", L.NewFunction(e.luaPositions))
	mod.RawSetString("eval", L.NewFunction(e.luaEval))
	reward.RawSetString("chess", L.NewFunction(luaRewardChess))
	ch := L.NewTable()
	L.SetFuncs(ch, map[string]lua.LGFunction{
		"step": luaChessStep,
		"game": luaChessGame,
		"policy_prompt": func(L *lua.LState) int {
			L.Push(lua.LString(rookworld.PolicyPrompt(L.CheckString(1), L.OptBool(2, true))))
			return 1
		},
		"dataset": e.luaDataset,
		"score":   luaChessScore,
	})
	mod.RawSetString("chess", ch)
	registerType(L, stockfishType, stockfishMethods, nil)
	registerType(L, positionsType, positionsMethods, nil)
	registerType(L, gameType, gameMethods, nil)
}

// stockfishPool is the Lua type rook.stockfish: a pool of Stockfish processes.
type stockfishPool struct{ p *stockfish.Pool }

func (g *stockfishPool) String() string {
	c := g.p.Config()
	return fmt.Sprintf("rook.stockfish(%s, depth %d, MultiPV %d, %d workers)", c.Path, c.Depth, c.MultiPV, c.Workers)
}

func (g *stockfishPool) Close() error { return g.p.Close() }

func checkStockfish(L *lua.LState, n int) *stockfishPool {
	return check[*stockfishPool](L, n, stockfishType)
}

// rook.stockfish{depth=10, workers=1, multipv=5, path=, timeout=30, hash_mb=16, retries=2,
// threads=1, cache_file=, cache_size=0} → a rook.stockfish, or nil, err when the engine
// cannot start (a missing engine says how to install one). An out-of-range setting is an
// error naming it; path "" finds stockfish on PATH, then /usr/games/stockfish. The settings
// are stockfish.Config's, as a table or a recipe's stockfish section.
func (e *Env) luaStockfish(L *lua.LState) int {
	cfg := settingsArg[stockfish.Config](L, 1, "stockfish", "rook.stockfish")
	if a := e.access; a != nil && cfg.Path != "" && !slices.Contains(a.named, cfg.Path) {
		// The pool runs the binary and writes to its stdin: only the user may choose it.
		L.RaiseError("rook.stockfish: the engine binary %s was not named on the command line (stockfish.path=%s); a confined recipe runs the stockfish on PATH; %s",
			cfg.Path, cfg.Path, ErrConfined.Error())
	}
	if cfg.CacheFile != "" {
		e.mustPath(L, "write", cfg.CacheFile)
	}
	p, err := stockfish.NewPool(L.Context(), cfg)
	if err != nil {
		return pushErr(L, err)
	}
	g := &stockfishPool{p: p}
	e.addCloser(g)
	L.Push(newUserData(L, stockfishType, g))
	return 1
}

var stockfishMethods = map[string]lua.LGFunction{
	// sf:analyse(fen [, depth]) → {best=, moves={...}, evals={...}} (pawns, side to move).
	"analyse": func(L *lua.LState) int {
		g := checkStockfish(L, 1)
		fen := L.CheckString(2)
		a, err := g.p.AnalyseWith(L.Context(), stockfish.Request{FEN: fen, Depth: L.OptInt(3, 0)})
		if err != nil {
			return pushErr(L, err)
		}
		L.Push(fromGo(L, map[string]any{"best": a.Best(), "moves": a.Moves(), "evals": a.Evals(), "depth": a.Depth}))
		return 1
	},
	"stats": func(L *lua.LState) int {
		b, _ := json.Marshal(checkStockfish(L, 1).p.Stats())
		var m map[string]any
		json.Unmarshal(b, &m)
		L.Push(fromGo(L, m))
		return 1
	},
	"close": func(L *lua.LState) int { checkStockfish(L, 1).p.Close(); return 0 },
}

// positions is a source of prompts for both RookWorld tasks.
type positions struct {
	src  rookworld.Source
	spec rookworld.SourceSpec
	mix  rookworld.Mix
	env  *Env
	said int64 // skipped records the log has told of
}

func (p *positions) String() string {
	return fmt.Sprintf("rook.positions(%s %s, task %s)", p.spec.Kind, p.spec.Path, p.mix.Task)
}

func (p *positions) Close() error { return p.src.Close() }

func checkPositions(L *lua.LState, n int) *positions { return check[*positions](L, n, positionsType) }

// positionsOptions are rook.positions's options: the source's, the prompts' task mix, and
// the generator's, whose engine is a rook.stockfish.
type positionsOptions struct {
	rookworld.SourceSpec
	Generator struct {
		rookworld.GeneratorOptions
		Engine *stockfishPool `json:"engine"`
	} `json:"generator"`
	Task        string  `json:"task"`
	EnvFraction float64 `json:"env_fraction"`
	Pad         bool    `json:"pad"`
	// A split's name or a list of them (SourceSpec.Split takes the list).
	Split lua.LValue `json:"split"`
}

// rook.positions(path | spec) → a position source. spec: {path=, kind=, loop=true, seed=,
// per_game=, min_ply=, max_ply=, skip_invalid=, split="train" | {...}, text_column="text",
// task="policy"|"env"|"mix", env_fraction=0.5, pad=true, generator={seed=, style=, min_ply=,
// max_ply=, engine=, guide_prob=, guide_depth=, guide_top=}}. "generator" (or
// kind="generator") plays seeded games; a .parquet, .jsonl or .jsonl.gz file or a directory
// of their shards is a data set (rookworld.DataSource).
func (e *Env) luaPositions(L *lua.LState) int {
	p := &positions{mix: rookworld.Mix{Task: rookworld.MixPolicy, EnvFraction: 0.5, Pad: true}, env: e}
	if s, ok := L.Get(1).(lua.LString); ok {
		p.spec = rookworld.SourceSpec{Path: string(s), Loop: true}
		if s == "generator" {
			p.spec = rookworld.SourceSpec{Kind: "generator"}
		}
	} else {
		o := positionsOptions{SourceSpec: rookworld.SourceSpec{Loop: true}, Task: p.mix.Task, EnvFraction: 0.5, Pad: true}
		options(L, 1, "rook.positions", &o)
		p.spec, p.mix.Task, p.mix.EnvFraction, p.mix.Pad = o.SourceSpec, o.Task, o.EnvFraction, o.Pad
		p.spec.Split = splitNames(L, o.Split)
		if g, ok := L.Get(1).(*lua.LTable); ok && g.RawGetString("generator") != lua.LNil {
			p.spec.Kind, p.spec.Generator = "generator", o.Generator.GeneratorOptions
			if o.Generator.Engine != nil {
				p.spec.Generator.Engine = o.Generator.Engine.p
			}
		}
	}
	switch p.mix.Task {
	case rookworld.MixPolicy, rookworld.MixEnv, rookworld.MixBoth:
	default:
		L.RaiseError("rook.positions: task %q is not policy, env or mix", p.mix.Task)
	}
	p.mix.Seed = p.spec.Seed ^ p.spec.Generator.Seed
	if p.spec.Path != "" {
		e.mustPath(L, "read", p.spec.Path)
	}
	src, err := rookworld.Open(p.spec)
	if err != nil {
		return pushErr(L, err)
	}
	p.src = src
	e.addCloser(p)
	L.Push(newUserData(L, positionsType, p))
	return 1
}

var positionsMethods = map[string]lua.LGFunction{
	"next":    positionsNext,
	"cursor":  positionsCursor,
	"restore": positionsRestore,
	"stats":   positionsStats,
}

// splitNames reads rook.positions's split: a name, or a list of names in order of preference.
func splitNames(L *lua.LState, v lua.LValue) []string {
	switch x := v.(type) {
	case nil, *lua.LNilType:
		return nil
	case lua.LString:
		return []string{string(x)}
	case *lua.LTable:
		var out []string
		for i := 1; i <= x.Len(); i++ {
			s, ok := x.RawGetInt(i).(lua.LString)
			if !ok {
				break
			}
			out = append(out, string(s))
		}
		if len(out) > 0 && len(out) == x.Len() {
			return out
		}
	}
	L.RaiseError("rook.positions: option \"split\": want a split's name or a list of names, got %s", shownLua(v))
	return nil
}

// skipCounter is a source that can skip bad records (skip_invalid) and counts them.
type skipCounter interface{ Skipped() int64 }

// data:stats() → {items=, epoch=, skipped=}: the items drawn so far (over the run, when the
// cursor was restored), the passes completed, and the bad records skip_invalid skipped in this
// process.
func positionsStats(L *lua.LState) int {
	p := checkPositions(L, 1)
	c := p.src.Cursor()
	t := L.CreateTable(0, 3)
	t.RawSetString("items", lua.LNumber(c.Count))
	t.RawSetString("epoch", lua.LNumber(c.Epoch))
	var skipped int64
	if sc, ok := p.src.(skipCounter); ok {
		skipped = sc.Skipped()
	}
	t.RawSetString("skipped", lua.LNumber(skipped))
	L.Push(t)
	return 1
}

// noteSkips tells the log of the records skip_invalid skipped: the first, with why, then
// the count at each power of ten.
func (p *positions) noteSkips() {
	sc, ok := p.src.(skipCounter)
	if !ok || sc.Skipped() == p.said {
		return
	}
	n := sc.Skipped()
	if p.said == 0 {
		why := ""
		if f, ok := p.src.(interface{ FirstSkipped() error }); ok && f.FirstSkipped() != nil {
			why = ": " + f.FirstSkipped().Error()
		}
		p.env.say(fmt.Sprintf("rook.positions %s: skipped a bad record (skip_invalid)%s", p.spec.Path, why))
	}
	for power := int64(10); power <= n; power *= 10 {
		if p.said < power {
			p.env.say(fmt.Sprintf("rook.positions %s: %d bad records skipped so far (skip_invalid)", p.spec.Path, n))
			break
		}
	}
	p.said = n
}

// data:next(n [, {task=}]) → list of n prompts as item tables {prompt=, task="P"|"A", fen=,
// move= (A:), target= (training-string sources), origin=, start_fen=, history=}. The list is
// shorter at the end of a source that does not loop. n items must fit the process's memory
// (about 3 kB each). An A: prompt whose answer needs its game's history (a fivefold
// repetition; PGN and generator sources know it) carries that game on its table (start_fen,
// history), for the scorers that judge it (item.go).
func positionsNext(L *lua.LState) int {
	p := checkPositions(L, 1)
	n := L.OptInt(2, 1)
	if avail, err := procmem.Available(); err == nil && float64(n)*sft.HostDocBytes > float64(avail) {
		L.ArgError(2, fmt.Sprintf("%d items of about %s each are more than the %s this process may use", n,
			humanize.Bytes(sft.HostDocBytes), humanize.Bytes(uint64(avail))))
	}
	o := struct {
		Task string `json:"task"`
	}{Task: p.mix.Task}
	options(L, 3, "positions:next", &o)
	task := o.Task
	out := L.CreateTable(min(n, 1<<12), 0)
	for range n {
		index := p.src.Cursor().Count
		it, err := p.src.Next(L.Context())
		if err == io.EOF {
			break
		}
		if err != nil {
			L.RaiseError("%s", err.Error())
		}
		out.Append(itemTable(L, p, it, index, task))
	}
	p.noteSkips()
	L.Push(out)
	return 1
}

func itemTable(L *lua.LState, p *positions, it rookworld.Item, index int64, task string) *lua.LTable {
	return promptItem(it, p.mix.Prompt(it, index, task)).table(L)
}

// data:cursor() → a table saving the source's position (for checkpoints).
func positionsCursor(L *lua.LState) int {
	b, err := json.Marshal(checkPositions(L, 1).src.Cursor())
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	var v any
	json.Unmarshal(b, &v)
	L.Push(fromGo(L, v))
	return 1
}

// data:restore(cursor) continues from a saved cursor.
func positionsRestore(L *lua.LState) int {
	p := checkPositions(L, 1)
	v, err := toGo(L.CheckTable(2))
	if err != nil {
		L.ArgError(2, err.Error())
	}
	b, _ := json.Marshal(v)
	var c rookworld.Cursor
	if err := json.Unmarshal(b, &c); err != nil {
		L.ArgError(2, "not a cursor: "+err.Error())
	}
	if err := p.src.Restore(c); err != nil {
		L.RaiseError("%s", err.Error())
	}
	return 0
}

// scorer builds the scorer of argument n, the reward settings (a table or a reward
// section), with the engine of argument n+1 (a rook.stockfish, or nil), raising an error that
// starts with what.
func scorer(L *lua.LState, n int, what string) *rookworld.Scorer {
	c := settingsArg[rookworld.RewardConfig](L, n, "reward", what)
	s, err := rookworld.NewScorer(optEngine(L, n+1, what), c)
	if err != nil {
		L.RaiseError("%s: %s", what, err.Error())
	}
	return s
}

// overlongFits is rook.config's check of a reward section's soft_overlong against the rollout
// section's max_new_tokens (each a resolved section, or nil where the config has none): a
// length no completion reaches is a *ConfigError naming it, before any work.
func overlongFits(reward, roll any) error {
	rw, ok := reward.(*rookworld.RewardConfig)
	r, both := roll.(*rollout.Config)
	var oe *rookworld.OverlongError
	if !ok || !both || !errors.As(rw.SoftOverlong.Fits(r.MaxNewTokens), &oe) {
		return nil
	}
	return &ConfigError{Key: "reward." + oe.Key, Value: oe.Value, Reason: fmt.Sprintf(
		"must be ≤ rollout.max_new_tokens (%d): no completion is longer, got %d", oe.MaxNewTokens, oe.Value)}
}

// optEngine reads argument n of call: nil, or a rook.stockfish.
func optEngine(L *lua.LState, n int, call string) *stockfish.Pool {
	if L.Get(n) == lua.LNil {
		return nil
	}
	if ud, ok := L.Get(n).(*lua.LUserData); ok {
		if g, ok := ud.Value.(*stockfishPool); ok {
			return g.p
		}
	}
	L.RaiseError("%s: the engine (argument %d) must be a %s, got %s", call, n, stockfishType, describe(L.Get(n)))
	return nil
}

// rook.reward.chess(batch [, settings [, engine]]) scores every completion with the RookWorld
// rewards (settings: rookworld.RewardConfig's, a table or a reward section; engine: the
// rook.stockfish that judges P: answers), each by its prompt's item on the batch and its
// length within the batch's max_new_tokens (soft_overlong), sets the batch's rewards and
// components (policy/<name>, env/<name>, malformed, partial, illegal, and overlong where
// soft_overlong is on) and returns {mean=, p_count=, a_count=, malformed=,
// components={name = mean}}.
func luaRewardChess(L *lua.LState) int {
	b := checkBatch(L, 1)
	s := scorer(L, 2, "rook.reward.chess")
	overlong := s.Config().SoftOverlong
	if err := overlong.Fits(b.b.MaxNewTokens); err != nil { // once for the batch, before any scoring
		L.RaiseError("rook.reward.chess: reward.%s", err.Error())
	}
	ins := make([]rookworld.Input, len(b.b.Completions))
	for i, c := range b.b.Completions {
		ins[i] = b.items[c.Prompt].input(c.Text, c.Truncated)
		ins[i].Tokens, ins[i].MaxNewTokens = len(c.Tokens), b.b.MaxNewTokens
	}
	res, err := s.ScoreBatch(L.Context(), ins)
	if err != nil {
		L.RaiseError("rook.reward.chess: %s", err.Error())
	}
	setChessRewards(b.b, res, overlong.On())
	L.Push(rewardSummary(L, b.b, res))
	return 1
}

// setChessRewards stores totals and per-task components (NaN where a component does not
// apply to a completion's task, so their means cover only their own task), and with overlong
// each completion's soft overlong penalty.
func setChessRewards(b *rollout.Batch, res []rookworld.Result, overlong bool) {
	n := len(res)
	b.Rewards = make([]float64, n)
	b.Components = map[string][]float64{}
	comp := func(name string) []float64 {
		v, ok := b.Components[name]
		if !ok {
			v = make([]float64, n)
			for i := range v {
				v[i] = math.NaN()
			}
			b.Components[name] = v
		}
		return v
	}
	for i, r := range res {
		b.Rewards[i] = r.Total
		prefix := "policy/"
		if r.Task == rookworld.TaskEnv {
			prefix = "env/"
		}
		for k, v := range r.Components.Map(r.Task) {
			comp(prefix + k)[i] = v
		}
		comp("malformed")[i] = boolNum(r.Malformed)
		comp("partial")[i] = boolNum(r.Partial)
		comp("illegal")[i] = boolNum(r.Illegal)
		if overlong {
			comp("overlong")[i] = r.Overlong
		}
	}
}

func boolNum(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func rewardSummary(L *lua.LState, b *rollout.Batch, res []rookworld.Result) *lua.LTable {
	out := map[string]any{}
	sum, pn, an := 0.0, 0, 0
	for _, r := range res {
		sum += r.Total
		if r.Task == rookworld.TaskEnv {
			an++
		} else {
			pn++
		}
	}
	if len(res) > 0 {
		out["mean"] = sum / float64(len(res))
	}
	out["p_count"], out["a_count"] = pn, an
	comps := map[string]any{}
	for name, v := range b.Components {
		s, k := 0.0, 0
		for _, x := range v {
			if !math.IsNaN(x) {
				s, k = s+x, k+1
			}
		}
		if k > 0 {
			comps[name] = s / float64(k)
		}
	}
	out["components"] = comps
	return fromGo(L, out).(*lua.LTable)
}

// evalOptions are rook.eval's settings: how it decodes (one greedy completion per prompt by
// default; the names are rollout.Config's) and how it scores.
type evalOptions struct {
	MaxNewTokens int                    `json:"max_new_tokens"`
	Temperature  float32                `json:"temperature"`
	Greedy       bool                   `json:"greedy"`
	Seed         uint64                 `json:"seed"`
	Stop         []string               `json:"stop"`      // stop strings, as rollout's
	StopRule     string                 `json:"stop_rule"` // "rookworld": where the task's answer ends, as rollout's
	Reward       rookworld.RewardConfig `json:"reward"`
}

func (o evalOptions) rollout() rollout.Config {
	c := rollout.Config{Group: 1, MaxNewTokens: o.MaxNewTokens, Temperature: o.Temperature, Seed: o.Seed,
		Stop: o.Stop, StopRule: o.StopRule}
	c.Greedy = o.Greedy
	return c
}

// rook.eval(model, prompts [, settings [, engine]]) → the DESIGN evaluation metrics
// (p_format, p_legal_best, p_best_acc, p_top5_legal, p_top5_overlap, a_format, a_fen_exact,
// a_flags_acc, a_reward_acc), counts, reward_mean, and answers: one table per prompt, in
// prompt order, {task="policy"|"env", reward=, and its task's metrics for that answer alone} —
// what paired intervals resample. settings: evalOptions's (one greedy completion of at most
// 144 tokens per prompt by default, and reward = {...} or a reward section), a table or an
// eval section.
func (e *Env) luaEval(L *lua.LState) int {
	m := checkModel(L, 1)
	items := promptsArg(L, 2)
	e.checkPrompts(texts(items))
	o := settingsArg[evalOptions](L, 3, "eval", "rook.eval")
	s, err := rookworld.NewScorer(optEngine(L, 4, "rook.eval"), o.Reward)
	if err != nil {
		L.RaiseError("rook.eval: %s", err.Error())
	}
	cfg := o.rollout()
	// In a data-parallel run each rank answers its share of the prompts (prompt i on rank
	// i mod size) and every rank gets every answer's result, so that all print one table.
	c := e.world()
	var share []item
	var at []int
	for i, it := range items {
		if i%c.Size() == c.Rank() {
			share, at = append(share, it), append(at, i)
		}
	}
	decoding := e.startPhase(fmt.Sprintf("eval: decoding %d prompts", len(items)), cfg.MaxNewTokens)
	cfg.Progress = decoding.update
	b := m.generate(L, texts(share), cfg)
	decoding.done()
	scoring := e.startPhase(fmt.Sprintf("eval: scoring %d answers", len(b.Completions)), len(b.Completions))
	s.Progress = scoring.update
	defer scoring.done()
	ins := make([]rookworld.Input, len(b.Completions))
	for i, c := range b.Completions {
		// No length or budget: soft_overlong shapes training rewards, not the answers' scores.
		ins[i] = share[c.Prompt].input(c.Text, c.Truncated)
	}
	mine, err := s.ScoreBatch(L.Context(), ins)
	if err := e.agree(err); err != nil {
		L.RaiseError("rook.eval: %s", err.Error())
	}
	res, err := gatherResults(c, mine, at, len(items))
	if err != nil {
		L.RaiseError("rook.eval: %s", err.Error())
	}
	metrics := rookworld.ComputeMetrics(res)
	out := map[string]any{}
	for k, v := range metrics.Map() {
		out[k] = v
	}
	sum := 0.0
	answers := make([]any, len(items))
	for i, r := range res {
		sum += r.Total
		answers[i] = answerMetrics(r)
	}
	if len(res) > 0 {
		out["reward_mean"] = sum / float64(len(res))
	}
	out["answers"] = answers
	L.Push(fromGo(L, out))
	return 1
}

// gatherResults puts every rank's results (theirs[k] the result of prompt at[k]) in prompt
// order, on every rank.
func gatherResults(c dist.Comm, theirs []rookworld.Result, at []int, n int) ([]rookworld.Result, error) {
	if c.Size() == 1 {
		return theirs, nil
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(struct {
		At  []int
		Res []rookworld.Result
	}{at, theirs}); err != nil {
		return nil, err
	}
	all, err := dist.Gather(c, buf.Bytes())
	if err != nil {
		return nil, err
	}
	out := make([]rookworld.Result, n)
	for _, b := range all {
		var part struct {
			At  []int
			Res []rookworld.Result
		}
		if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&part); err != nil {
			return nil, err
		}
		for k, i := range part.At {
			out[i] = part.Res[k]
		}
	}
	return out, nil
}

// answerMetrics is one answer's reward and its task's metrics, by the same definitions as the
// aggregate (ComputeMetrics over that answer alone).
func answerMetrics(r rookworld.Result) map[string]any {
	a := map[string]any{"task": string(r.Task), "reward": r.Total}
	prefix := "p_"
	if r.Task == rookworld.TaskEnv {
		prefix = "a_"
	}
	for k, v := range rookworld.ComputeMetrics([]rookworld.Result{r}).Map() {
		if strings.HasPrefix(k, prefix) && !strings.HasSuffix(k, "_count") {
			a[k] = v
		}
	}
	return a
}

// rook.chess.step(fen, uci) → the rules' answer to an A: prompt: {fen=, reward=, terminated=,
// truncated=, legal=, completion=}; nil, err for a bad FEN or an illegal position (an illegal
// move is part of the answer).
func luaChessStep(L *lua.LState) int {
	r, err := rookworld.EnvStep(L.CheckString(1), L.CheckString(2))
	if err != nil {
		return pushErr(L, err)
	}
	L.Push(envResultTable(L, r))
	return 1
}

func envResultTable(L *lua.LState, r rookworld.EnvResult) lua.LValue {
	return fromGo(L, map[string]any{"fen": r.NewFEN, "reward": r.Reward, "terminated": r.Terminated,
		"truncated": r.Truncated, "legal": r.Legal, "completion": r.Completion()})
}

// game is the Lua type rook.game: a chess game that keeps its history, so that it sees
// repetitions.
type game struct{ g *chess.Game }

func (g *game) String() string {
	return fmt.Sprintf("rook.game(%s, %d moves)", g.g.Position().FEN(), g.g.Ply())
}

func checkGame(L *lua.LState, n int) *game { return check[*game](L, n, gameType) }

// rook.chess.game([fen]) → a rook.game starting at fen (the standard start by default); nil, err
// for a bad FEN or a position that cannot arise in a legal game.
func luaChessGame(L *lua.LState) int {
	g, err := rookworld.NewGame(L.OptString(1, chess.StartFEN))
	if err != nil {
		return pushErr(L, err)
	}
	L.Push(newUserData(L, gameType, &game{g}))
	return 1
}

var gameMethods = map[string]lua.LGFunction{
	// game:push(uci) → the step's result, as rook.chess.step's; nil, err for an illegal move.
	"push": func(L *lua.LState) int {
		r, err := rookworld.Play(checkGame(L, 1).g, L.CheckString(2))
		if err != nil {
			return pushErr(L, err)
		}
		L.Push(envResultTable(L, r))
		return 1
	},
	"fen": func(L *lua.LState) int {
		L.Push(lua.LString(checkGame(L, 1).g.Position().FEN()))
		return 1
	},
	"repetitions": func(L *lua.LState) int {
		L.Push(lua.LNumber(checkGame(L, 1).g.Repetitions()))
		return 1
	},
	// game:outcome() → nil while the game goes on, else {result="1-0"|"0-1"|"1/2-1/2", reason=}.
	"outcome": func(L *lua.LState) int {
		o := checkGame(L, 1).g.Outcome()
		if !o.Over() {
			L.Push(lua.LNil)
			return 1
		}
		result := "1/2-1/2"
		switch o.Winner {
		case chess.White:
			result = "1-0"
		case chess.Black:
			result = "0-1"
		}
		L.Push(fromGo(L, map[string]any{"result": result, "reason": string(o.Termination)}))
		return 1
	},
	"moves": func(L *lua.LState) int {
		L.Push(fromGo(L, checkGame(L, 1).g.Moves()))
		return 1
	},
}

// rook.chess.score(prompt, completion [, settings [, engine]]) → the scored answer: {total=,
// task=, components={...}, malformed=, partial=, illegal=, problems={...}}; prompt a string or an item
// table (judged with the game it carries), settings and engine as rook.reward.chess takes them.
func luaChessScore(L *lua.LState) int {
	it, completion := promptArg(L, 1), L.CheckString(2)
	s := scorer(L, 3, "rook.chess.score")
	r, err := s.Score(L.Context(), it.input(completion, false))
	if err != nil {
		return pushErr(L, err)
	}
	comps := map[string]any{}
	for k, v := range r.Components.Map(r.Task) {
		comps[k] = v
	}
	L.Push(fromGo(L, map[string]any{"total": r.Total, "task": string(r.Task), "components": comps,
		"malformed": r.Malformed, "partial": r.Partial, "illegal": r.Illegal, "problems": r.Problems, "engine_best": r.EngineBest,
		"expected": r.Expected}))
	return 1
}

// rook.chess.dataset(positions, engine, path, {rows=, env_fraction=, seed=, depth=, jsonl=,
// public_best_quirk=, shuffle_candidates=, illegal_fraction=}) writes RookWorld training text
// (P: rows labelled by Stockfish, A: rows by the rules) and returns its counts. With path nil
// the positions must be a generator's (unguided): the text is a built artefact, kept in the
// cache under a name that its settings and the engine determine, built once and found after;
// the counts then also give its path and whether it was cached. A confined recipe, which
// cannot write the cache, builds its data this way: what the cache holds depends on nothing
// else it chose.
func (e *Env) luaDataset(L *lua.LState) int {
	p := checkPositions(L, 1)
	g := checkStockfish(L, 2)
	if L.Get(3) == lua.LNil {
		return e.cachedDataset(L, p, g)
	}
	path := L.CheckString(3)
	e.mustPath(L, "write", path)
	opt := rookworld.DatasetOptions{EnvFraction: 0.5}
	options(L, 4, "rook.chess.dataset", &opt)
	st, err := e.buildDataset(L, p.src, g, path, opt)
	if err != nil {
		return pushErr(L, err)
	}
	L.Push(fromGo(L, datasetCounts(st)))
	return 1
}

func (e *Env) buildDataset(L *lua.LState, src rookworld.Source, g *stockfishPool, path string, opt rookworld.DatasetOptions) (rookworld.DatasetStats, error) {
	var st rookworld.DatasetStats
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return st, err
	}
	ph := e.startPhase("rows for "+filepath.Base(path), opt.Rows)
	opt.Progress = func(rows int) { ph.update(rows, opt.Rows) }
	err := atomicfile.Write(path, func(w io.Writer) (err error) {
		st, err = rookworld.BuildDataset(L.Context(), src, g.p, w, opt)
		return err
	})
	ph.done()
	return st, err
}

func datasetCounts(st rookworld.DatasetStats) map[string]any {
	b, _ := json.Marshal(st)
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

// cachedDataset is rook.chess.dataset with no path: the text of a fresh generator source,
// built in the cache under the hash of everything it depends on.
func (e *Env) cachedDataset(L *lua.LState, p *positions, g *stockfishPool) int {
	opt := rookworld.DatasetOptions{EnvFraction: 0.5}
	options(L, 4, "rook.chess.dataset", &opt)
	if p.spec.Kind != "generator" || p.spec.Generator.Engine != nil {
		L.ArgError(1, "a dataset kept in the cache (path nil) is built from a generator's positions, not guided by an engine")
	}
	c := g.p.Config()
	key, _ := json.Marshal(struct {
		Generator rookworld.GeneratorOptions
		Spec      rookworld.SourceSpec
		Options   rookworld.DatasetOptions
		Engine    string
		Depth     int
		MultiPV   int
	}{p.spec.Generator, p.spec, opt, g.p.Engine(), c.Depth, c.MultiPV})
	sum := sha256.Sum256(key)
	ext := ".txt"
	if opt.JSONL {
		ext = ".jsonl"
	}
	path := filepath.Join(cacheDir(), "datasets", hex.EncodeToString(sum[:12])+ext)
	out := map[string]any{"path": path, "cached": true}
	if fileExists(path) {
		if err := checkFileHash(path); err != nil {
			return pushErr(L, err)
		}
	} else {
		src, err := rookworld.Open(p.spec) // from its start, whatever the recipe drew from p
		if err != nil {
			return pushErr(L, err)
		}
		defer src.Close()
		st, err := e.buildDataset(L, src, g, path, opt)
		if err != nil {
			return pushErr(L, err)
		}
		if err := recordFileHash(path); err != nil {
			return pushErr(L, err)
		}
		out = datasetCounts(st)
		out["path"], out["cached"] = path, false
	}
	L.Push(fromGo(L, out))
	return 1
}

// recordFileHash writes path's SHA-256 beside it (path.sha256), for checkFileHash.
func recordFileHash(path string) error {
	sum, err := fileSHA256(path)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path+".sha256", []byte(sum+"\n"))
}

// checkFileHash refuses a built artefact of the cache whose bytes are not those its build
// recorded: something changed it after it was built.
func checkFileHash(path string) error {
	want, err := os.ReadFile(path + ".sha256")
	if err != nil {
		return fmt.Errorf("%s has no record of its build (%s.sha256): remove it to build it again", path, path)
	}
	got, err := fileSHA256(path)
	if err != nil {
		return err
	}
	if got != strings.TrimSpace(string(want)) {
		return fmt.Errorf("%s is not the file its build wrote (sha256 %s, recorded %s): remove it to build it again", path, got[:12], strings.TrimSpace(string(want)))
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
