package luabind

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/atomicfile"
	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/rollout"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/engine/tokenizer"
)

const modelType = "rook.model"

// model is a policy or a frozen reference. Its source identity (where its weights came from
// and their hash then) and its current weights are kept apart: a policy resumed from a
// checkpoint holds trained weights but still comes from its source.
type model struct {
	m          *gpt2.Model
	source     gpt2.Source
	sourceHash string // content hash of the weights the source loads to
	hash       string // a reference's current content hash (exact: it changes only by a sync); "" for a policy
	frozen     bool   // a reference: never trained, changes only by an explicit sync
	run        *run   // the open run this model is the policy or the KL reference of
	announce   string // the "model: …" line, held back while a resume may replace the weights
	syncs      []syncRecord
	sampler    *rollout.Sampler
	trainer    *trainerState
	faultNaN   bool // inject a NaN gradient into the next GRPO step (rook.debug.inject_nan)
	device     string
	draws      uint64 // sampling calls without an explicit seed, to vary their default seed
}

type syncRecord struct {
	Step int
	Hash string
}

func (m *model) String() string {
	kind := "model"
	if m.frozen {
		kind = "reference"
	}
	c := m.m.Config
	return fmt.Sprintf("rook.%s(%s; %d layers, %d heads, d=%d, %s params)", kind, m.label(), c.NumLayers, c.NumHeads, c.Channels, humanCount(m.m.Layout.Total))
}

// label names where a model's weights come from: its source, and for a reference that does
// not hold its source's weights (a copy of a trained or resumed policy, a synced one), that it
// is a trained copy. source.Path stays the path the weights load from.
func (m *model) label() string {
	if m.frozen && m.hash != m.sourceHash {
		return fmt.Sprintf("%s (trained copy %s)", m.source.Path, short(m.hash))
	}
	return m.source.Path
}

// setParams replaces a reference's weights with params, whose content hash is hash.
func (m *model) setParams(params []float32, hash string) error {
	if err := m.m.SetParams(params); err != nil {
		return err
	}
	m.hash = hash
	return nil
}

func checkModel(L *lua.LState, n int) *model { return check[*model](L, n, modelType) }

// rook.load(source [, {device=, threads=, engine=}]) → model, or nil, err when the weights
// cannot be read. Random weights only by explicit name ("random:tiny"), and said loudly in
// the log. "default" is the embedded default model (scripts/defaultmodel.lua), built on first
// use (engine: a rook.stockfish to label its training rows with). While a run is being
// resumed, the "model:" line waits for rook.run, which says whose weights the policy holds.
func (e *Env) luaLoad(L *lua.LState) int {
	src := L.CheckString(1)
	o := struct {
		Device  string         `json:"device"`
		Threads int            `json:"threads"`
		Engine  *stockfishPool `json:"engine"`
	}{Device: "cpu"}
	options(L, 2, "rook.load", &o)
	dev, threads := o.Device, o.Threads
	var defaultVersion string
	var fresh bool
	if src == "default" {
		var engine lua.LValue = lua.LNil
		if t, ok := L.Get(2).(*lua.LTable); ok {
			engine = realTable(t).RawGetString("engine")
		}
		src, defaultVersion, fresh = e.defaultModel(L, engine)
	} else if !strings.HasPrefix(src, "random:") {
		e.mustPath(L, "read", src)
		src = runPolicy(src)
	}
	cfg, params, source, err := gpt2.Load(src)
	if err != nil {
		return pushErr(L, err)
	}
	hash := gpt2.ParamsHash(cfg, params)
	if defaultVersion != "" {
		if err := checkDefault(src, defaultVersion, hash, fresh); err != nil {
			return pushErr(L, err)
		}
	}
	b, err := e.backend(dev, threads)
	if err != nil {
		return pushErr(L, err)
	}
	gm, err := gpt2.New(b, cfg, params)
	if err != nil {
		return pushErr(L, err)
	}
	m := &model{m: gm, source: source, sourceHash: hash, device: dev,
		announce: "model: " + source.Description}
	if e.resume == nil || e.resume.applied {
		e.announce(m)
	} else {
		e.pending = append(e.pending, m)
	}
	L.Push(newUserData(L, modelType, m))
	return 1
}

// runPolicy is the policy of a run directory's newest checkpoint (DIR/checkpoints/<LATEST>/model)
// when dir is a run, and dir itself otherwise: model=runs/x evaluates where a run got to.
func runPolicy(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "checkpoints", "LATEST")); err != nil {
		return dir
	}
	r, err := checkpoint.OpenReadOnly(dir)
	if err != nil {
		return dir
	}
	defer r.Close()
	name, err := r.LatestName()
	if err != nil {
		return dir
	}
	return filepath.Join(dir, "checkpoints", name, "model")
}

// defaultModelHashes are the weights (gpt2.ParamsHash) each version of the default model's
// build gives: its bytes are the same on every processor the engine runs (AVX-512 or AVX2,
// AMD or Intel), so the binary knows them and nothing a recipe writes can change them.
var defaultModelHashes = map[string]string{
	"v2": "2238a4ff90cffdfcd8a3bd354e308a54125dc6f7670b3717f0777f1f9730f8da",
}

// defaultBuild is the record a build of the default model leaves beside it (build.json): the
// weights it made. A processor whose arithmetic gives other weights than defaultModelHashes'
// finds its own build by it. Only trusted code writes the cache.
type defaultBuild struct {
	Version string `json:"version"`
	Hash    string `json:"hash"`
}

// defaultModel builds (or finds cached) the embedded default model and returns its path and
// version. The build runs trusted, in an environment of its own: it writes the cache, which
// a confined recipe may not.
func (e *Env) defaultModel(L *lua.LState, engine lua.LValue) (path, version string, fresh bool) {
	child, err := newEnv(Options{Stdout: e.out, Stderr: e.opts.Stderr, Quiet: e.opts.Quiet, Trust: true, World: e.opts.World}, nil)
	if err != nil {
		L.RaiseError("building the default model: %s", err.Error())
	}
	defer child.Close()
	child.intr = e.intr
	CL := child.L
	if err := CL.DoString(`local m = require("defaultmodel"); return m.ensure, m.VERSION, require("rook").exists(m.dir() .. "/model/config.json")`); err != nil {
		L.RaiseError("building the default model: %s", err.Error())
	}
	ensure, v, existed := CL.Get(-3), CL.Get(-2).String(), lua.LVAsBool(CL.Get(-1))
	CL.Pop(3)
	o := CL.NewTable()
	o.RawSetString("log", lua.LTrue)
	if ud, ok := engine.(*lua.LUserData); ok {
		if pool, ok := ud.Value.(*stockfishPool); ok {
			o.RawSetString("engine", newUserData(CL, stockfishType, pool))
		}
	}
	CL.Push(ensure)
	CL.Push(o)
	if err := child.call(L.Context(), 1, 1); err != nil {
		L.RaiseError("building the default model: %s", err.Error())
	}
	path = CL.Get(-1).String()
	CL.Pop(1)
	return path, v, !existed
}

// checkDefault verifies the default model's weights (hash) against its version's known
// hash, or the record of this machine's own build; a fresh build writes that record.
func checkDefault(path, version, hash string, fresh bool) error {
	record := filepath.Join(filepath.Dir(path), "build.json")
	if fresh {
		b, _ := json.MarshalIndent(defaultBuild{Version: version, Hash: hash}, "", "  ")
		if err := atomicfile.WriteBytes(record, append(b, '\n')); err != nil {
			return fmt.Errorf("recording the default model's build: %w", err)
		}
	}
	if want, ok := defaultModelHashes[version]; ok && want == hash {
		return nil
	}
	var rec defaultBuild
	if b, err := os.ReadFile(record); err == nil && json.Unmarshal(b, &rec) == nil && rec.Version == version && rec.Hash == hash {
		return nil
	}
	return &DefaultModelError{Dir: filepath.Dir(path), Version: version, Got: hash, Want: defaultModelHashes[version]}
}

// DefaultModelError refuses a cached default model whose weights are neither its version's
// nor this machine's build of it: something changed them after the build.
type DefaultModelError struct{ Dir, Version, Got, Want string }

func (e *DefaultModelError) Error() string {
	return fmt.Sprintf("the cached default model %s in %s has weights %s, neither the %s build's (%s) nor the build this machine recorded (build.json): it was changed after it was built; remove %s to build it again",
		e.Version, e.Dir, short(e.Got), e.Version, short(e.Want), e.Dir)
}

// announce prints a model's "model: …" line once.
func (e *Env) announce(m *model) {
	if m.announce != "" && !e.opts.Quiet {
		e.say(m.announce)
	}
	m.announce = ""
}

// announcePending prints the lines rook.load held back during a resume.
func (e *Env) announcePending() {
	for _, m := range e.pending {
		e.announce(m)
	}
	e.pending = nil
}

func (e *Env) modelMethods() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"reference": modelReference,
		"sync":      modelSync,
		"save":      e.modelSave,
		"generate":  e.modelGenerate,
		"rollout":   e.modelRollout,
		"logprobs":  e.modelLogprobs,
		"info":      modelInfo,
		"hash":      modelHash,
		"score":     modelScore,
		"diff":      modelDiff,
		// The step as primitives (primitives.go).
		"forward_backward": e.modelForwardBackward,
		"zero_grad":        e.modelZeroGrad,
	}
}

// Fields: model.random (bool: the source is a random initialisation), model.source (string),
// model.frozen (bool).
func modelIndex(L *lua.LState) int {
	m := checkModel(L, 1)
	switch L.CheckString(2) {
	case "random":
		L.Push(lua.LBool(m.source.Random))
	case "source":
		L.Push(lua.LString(m.label()))
	case "frozen":
		L.Push(lua.LBool(m.frozen))
	default:
		L.Push(lua.LNil)
	}
	return 1
}

// model:reference() → a frozen copy of the model's current weights on the same device. A
// copy of weights that are not the source's (trained, or resumed from a checkpoint) is
// labelled as such. After a resume, the run's reference is run.ref, not a copy of the policy.
func modelReference(L *lua.LState) int {
	m := checkModel(L, 1)
	params := m.m.ParamsHost()
	ref, err := gpt2.New(m.m.B, m.m.Config, params)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	r := &model{m: ref, source: m.source, sourceHash: m.sourceHash, hash: gpt2.ParamsHash(m.m.Config, params), frozen: true, device: m.device}
	L.Push(newUserData(L, modelType, r))
	return 1
}

// checkRunReference raises when a GRPO step of a run's policy is given a KL reference other
// than the one the run recorded (a copy of the resumed policy, a reference synced behind the
// run's back): its KL would be measured against weights no checkpoint names.
func checkRunReference(L *lua.LState, policy, ref *model) {
	if policy.run == nil || ref == nil {
		return
	}
	id := policy.run.identity
	if ref.hash == id.Current() {
		return
	}
	L.ArgError(2, fmt.Sprintf("the reference (%s, hash %s) is not run %s's recorded KL reference (%s, hash %s); after a resume use run.ref, and move the reference only with run:sync_reference",
		ref.label(), short(ref.hash), policy.run.r.Dir, id.Source, short(id.Current())))
}

// ref:sync(policy [, step]) copies the policy's weights into a reference that belongs to no
// run, and returns the new content hash. A run's reference moves only by
// run:sync_reference(step), which the checkpoint records.
func modelSync(L *lua.LState) int {
	r, p := checkModel(L, 1), checkModel(L, 2)
	step := L.OptInt(3, 0)
	if !r.frozen {
		L.ArgError(1, "sync is for references (policy:reference()), not for a trained model")
	}
	if r.run != nil {
		L.ArgError(1, fmt.Sprintf("this reference is the KL reference of run %s: use run:sync_reference(step), which records the sync in the checkpoint", r.run.r.Dir))
	}
	params := p.m.ParamsHost()
	if err := r.setParams(params, gpt2.ParamsHash(p.m.Config, params)); err != nil {
		L.RaiseError("%s", err.Error())
	}
	r.syncs = append(r.syncs, syncRecord{Step: step, Hash: r.hash})
	L.Push(lua.LString(r.hash))
	return 1
}

// model:save(dir) writes a Hugging Face GPT-2 directory, creating its parent directories;
// nil, err on failure, non-finite weights and a folder that holds something else than a
// model included (gpt2.SaveHF refuses them). A confined recipe saves only where it may write.
func (e *Env) modelSave(L *lua.LState) int {
	m := checkModel(L, 1)
	dir := L.CheckString(2)
	e.mustPath(L, "write", dir)
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o755); err != nil {
		return pushErr(L, fmt.Errorf("saving %s: %w", dir, err))
	}
	if err := gpt2.SaveHF(dir, m.m.Config, m.m.ParamsHost()); err != nil {
		return pushErr(L, err)
	}
	L.Push(lua.LTrue)
	return 1
}

func modelHash(L *lua.LState) int {
	m := checkModel(L, 1)
	L.Push(lua.LString(gpt2.ParamsHash(m.m.Config, m.m.ParamsHost())))
	return 1
}

// model:info() → a table: source, description, random, frozen, architecture, device,
// source_hash (the weights the source loads to) and hash (the weights now).
func modelInfo(L *lua.LState) int {
	m := checkModel(L, 1)
	c := m.m.Config
	hash := m.hash
	if !m.frozen {
		hash = gpt2.ParamsHash(c, m.m.ParamsHost())
	}
	L.Push(fromGo(L, map[string]any{
		"source": m.label(), "description": m.source.Description, "random": m.source.Random,
		"frozen": m.frozen, "params": m.m.Layout.Total, "layers": c.NumLayers, "heads": c.NumHeads,
		"channels": c.Channels, "vocab": c.VocabSize, "context": c.MaxSeqLen, "device": m.device,
		"source_hash": m.sourceHash, "hash": hash,
	}))
	return 1
}

func tokenizerOrRaise(L *lua.LState) *tokenizer.Tokenizer {
	t, err := tok()
	if err != nil {
		L.RaiseError("tokenizer: %s", err.Error())
	}
	return t
}

// sampling reads argument n as the rollout settings of a call on m: a table or a rollout
// section. Without a seed (seed 0), calls on a model draw seeds 1, 2, 3, ...; a resumable
// recipe gives its own (from the step).
func (m *model) sampling(L *lua.LState, n int) rollout.Config {
	m.draws++
	c := settingsArg[rollout.Config](L, n, "rollout", "model:rollout")
	if c.Seed == 0 {
		c.Seed = m.draws
	}
	return c
}

// checkPrompts warns, once a run, of a prompt that ends inside a token of the text a model
// trained on whole documents continues it with (a trailing space after a FEN, a P: row's full
// padding): tokenized alone it ends one token off anything the model saw. It names the
// prompt and its token-consistent form (rookworld.PromptBoundary), as Hugging Face's
// tokenizers and Guidance's token healing treat the same boundary.
func (e *Env) checkPrompts(prompts []string) {
	if e.promptWarned || e.opts.Quiet {
		return
	}
	tk, err := tok()
	if err != nil {
		return
	}
	for _, p := range prompts {
		if ok, consistent := rookworld.PromptBoundary(tk, p); !ok {
			e.promptWarned = true
			e.say(fmt.Sprintf("warning: the prompt %q ends inside a token of the text that follows it (BPE joins its last characters to the next word), so the model meets a split it never saw in training; the token-consistent form is %q (said once a run)", p, consistent))
			return
		}
	}
}

func (m *model) generate(L *lua.LState, prompts []string, cfg rollout.Config) *rollout.Batch {
	t := tokenizerOrRaise(L)
	if m.m.Config.VocabSize != t.VocabSize() {
		L.RaiseError("this model's vocabulary (%d) is not GPT-2's (%d): it cannot read text", m.m.Config.VocabSize, t.VocabSize())
	}
	ids := make([][]int32, len(prompts))
	for i, p := range prompts {
		ids[i] = t.Encode(p)
	}
	cfg.Decode = t.Decode
	if m.sampler == nil {
		m.sampler = rollout.NewSampler(m.m)
	}
	b, err := m.sampler.Generate(L.Context(), ids, cfg)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	return b
}

// model:generate(prompt(s) [, opts]) → text, or a list of texts for a list of prompts (n
// samples each when n > 1: a list per prompt).
func (e *Env) modelGenerate(L *lua.LState) int {
	m := checkModel(L, 1)
	single := L.Get(2).Type() == lua.LTString
	prompts := texts(promptsArg(L, 2))
	e.checkPrompts(prompts)
	o := struct {
		rollout.Config
		N int `json:"n"`
	}{Config: rollout.DefaultConfig(), N: 1}
	t, _ := L.Get(3).(*lua.LTable)
	if t != nil && t.RawGetString("group") != lua.LNil {
		L.RaiseError("model:generate: the number of samples per prompt is n, not group")
	}
	options(L, 3, "model:generate", &o)
	n := o.N
	m.draws++
	cfg := o.Config
	cfg.Group = n
	if cfg.Seed == 0 {
		cfg.Seed = m.draws
	}
	if err := cfg.Validate(); err != nil {
		L.RaiseError("model:generate: %s", err.Error())
	}
	b := m.generate(L, prompts, cfg)
	out := L.CreateTable(len(prompts), 0)
	for i := range prompts {
		if n == 1 {
			out.Append(lua.LString(b.Completions[i].Text))
			continue
		}
		group := L.CreateTable(n, 0)
		for j := range n {
			group.Append(lua.LString(b.Completions[i*n+j].Text))
		}
		out.Append(group)
	}
	if single {
		L.Push(out.RawGetInt(1))
	} else {
		L.Push(out)
	}
	return 1
}

// model:rollout(prompts, opts) → batch: opts.group completions per prompt. The batch keeps
// each prompt's item (item.go), which is all its scorers read.
//
// In a data-parallel run each rank samples its share of the prompts — their groups dealt in
// turn, group g to rank g mod size — with the random streams they have in the whole batch,
// so that the groups drawn do not depend on the number of ranks; the batch holds the share.
func (e *Env) modelRollout(L *lua.LState) int {
	m := checkModel(L, 1)
	items := promptsArg(L, 2)
	prompts := texts(items)
	e.checkPrompts(prompts)
	cfg := m.sampling(L, 3)
	c := e.world()
	if c.Size() == 1 {
		b := m.generate(L, prompts, cfg)
		L.Push(newUserData(L, batchType, &batch{b: b, items: items}))
		return 1
	}
	if len(prompts) < c.Size() {
		L.ArgError(2, fmt.Sprintf("%d prompts cannot be shared by %d ranks: a rank samples whole groups (give at least one prompt per rank)", len(prompts), c.Size()))
	}
	seen := map[string]int{}
	var share []item
	var groups []int
	for g, it := range items {
		occ := seen[it.prompt]
		seen[it.prompt]++
		if g%c.Size() == c.Rank() {
			share, groups, cfg.Occurrences = append(share, it), append(groups, g), append(cfg.Occurrences, occ)
		}
	}
	b := m.generate(L, texts(share), cfg)
	b.Groups, b.TotalGroups = groups, len(prompts)
	L.Push(newUserData(L, batchType, &batch{b: b, items: share}))
	return 1
}

// model:logprobs(prompt, completion [, {temperature=}]) → list of the completion tokens'
// log-probabilities under the training forward (for health checks against a rollout).
func (e *Env) modelLogprobs(L *lua.LState) int {
	m := checkModel(L, 1)
	prompt, completion := L.CheckString(2), L.CheckString(3)
	e.checkPrompts([]string{prompt})
	o := struct {
		Temperature float64 `json:"temperature"`
	}{Temperature: 1}
	options(L, 4, "model:logprobs", &o)
	temp := o.Temperature
	t := tokenizerOrRaise(L)
	p, c := t.Encode(prompt), t.Encode(completion)
	if len(p) == 0 || len(c) == 0 {
		L.ArgError(2, "prompt and completion must both be non-empty")
	}
	var b gpt2.Batch
	b.Add(append(append([]int32{}, p...), c...), len(p)-1)
	var out gpt2.Output
	if err := m.m.Forward(&b, float32(temp), false, &out); err != nil {
		L.RaiseError("%s", err.Error())
	}
	res := L.CreateTable(len(out.LogP), 0)
	for _, v := range out.LogP {
		res.Append(lua.LNumber(v))
	}
	L.Push(res)
	return 1
}

func humanCount(n int) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// rook.encode(text) → list of GPT-2 token ids (special tokens are never parsed from text).
func luaEncode(L *lua.LState) int {
	ids := tokenizerOrRaise(L).Encode(L.CheckString(1))
	t := L.CreateTable(len(ids), 0)
	for _, id := range ids {
		t.Append(lua.LNumber(id))
	}
	L.Push(t)
	return 1
}

// rook.decode(ids) → text; nil, err for an id outside the vocabulary.
func luaDecode(L *lua.LState) int {
	t := L.CheckTable(1)
	ids := make([]int32, t.Len())
	for i := range ids {
		v, ok := t.RawGetInt(i + 1).(lua.LNumber)
		if !ok {
			L.ArgError(1, fmt.Sprintf("element %d is not a number", i+1))
		}
		ids[i] = int32(v)
	}
	s, err := tokenizerOrRaise(L).DecodeErr(ids)
	if err != nil {
		return pushErr(L, err)
	}
	L.Push(lua.LString(s))
	return 1
}
