package rollout

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"runtime"
	"sync"
	"time"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/philox"
)

// EOT is GPT-2's <|endoftext|>: the document separator and the stop token.
const EOT int32 = 50256

// Config says how to sample. Each field's json tag is its one name in option tables and
// recipe configs (TRL's where TRL has the setting).
type Config struct {
	Group        int     `json:"group"`          // completions per prompt (G)
	MaxNewTokens int     `json:"max_new_tokens"` // a completion that reaches this without the stop token is truncated
	Temperature  float32 `json:"temperature"`    // logprobs are recorded under softmax(logits / Temperature)
	Shaping              // top-k / top-p / greedy: what is sampled, never what is recorded
	Seed         uint64  `json:"seed"` // base of every completion's random stream (model:rollout: 0 draws one per call)
	StopToken    int32   `json:"-"`    // EOT unless set; a model with a small vocabulary may use another id
	// Stop strings: a completion ends with the token whose text completes one of them
	// (Completion.Stop). They are matched in the completion's text, not the prompt's.
	Stop []string `json:"stop"`
	// StopRule names a built-in rule that ends completions: "rookworld" (StopRuleRookWorld)
	// ends each completion where its prompt's task ends an answer (rookworld.AnswerEnd); ""
	// none.
	StopRule string `json:"stop_rule"`
	// Decode turns tokens into text: the completions' Text, and, for Stop and StopRule, each
	// new token's text and the prompts'. Optional without them.
	Decode func([]int32) string `json:"-"`
	// Progress, if set, is told after each token step how many of at most MaxNewTokens ran.
	Progress func(step, maxSteps int) `json:"-"`
	// Occurrences, if set, gives each prompt's occurrence among the copies of its text in the
	// whole batch (0 for the first): what a rank sampling a share of a batch needs, so that a
	// completion's random stream is the one it has in the whole batch. Nil: counted here.
	Occurrences []int `json:"-"`
}

// DefaultConfig is a rollout of 8 completions per prompt, each of at most 128 new tokens,
// sampled at temperature 1 from the full distribution.
func DefaultConfig() Config { return Config{Group: 8, MaxNewTokens: 128, Temperature: 1} }

// Validate reports unusable values, naming the field.
func (c Config) Validate() error {
	switch {
	case c.Group < 1:
		return fmt.Errorf("rollout: group must be ≥ 1, got %d", c.Group)
	case c.MaxNewTokens < 1:
		return fmt.Errorf("rollout: max_new_tokens must be ≥ 1, got %d", c.MaxNewTokens)
	case !(c.Temperature > 0):
		return fmt.Errorf("rollout: temperature must be > 0, got %g (use greedy for argmax decoding)", c.Temperature)
	}
	if err := c.Shaping.Validate(); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	for i, s := range c.Stop {
		if s == "" {
			return fmt.Errorf("rollout: stop string %d is empty", i+1)
		}
	}
	if c.StopRule != "" && c.StopRule != StopRuleRookWorld {
		return fmt.Errorf("rollout: stop_rule %q is not %q or empty", c.StopRule, StopRuleRookWorld)
	}
	return nil
}

// StopRuleRookWorld is the stop rule of RookWorld-LM's model card: a P: answer ends after "B:"
// and a complete UCI move, an A: answer after its fourth '+'.
const StopRuleRookWorld = "rookworld"

// ValidateContext reports whether completions of MaxNewTokens fit a model's context of n
// positions after a prompt of at least one token; checked before any work, where
// Generate would find out only at the first prompt.
func (c Config) ValidateContext(n int) error {
	if c.MaxNewTokens >= n {
		return fmt.Errorf("rollout: max_new_tokens must be < %d (the model's context, less one prompt token), got %d", n, c.MaxNewTokens)
	}
	return nil
}

// Completion is one sampled continuation of a prompt. It is finished by the stop token (its
// last token), by a stop string or rule (Stop), or truncated by the token limit.
type Completion struct {
	Prompt    int       // index of its prompt in Batch.Prompts
	Tokens    []int32   // sampled tokens: the stop token last, or the token that completed Stop, or MaxNewTokens of them
	LogProbs  []float32 // log softmax(logits/T)[token] recorded when each token was sampled
	Truncated bool      // reached MaxNewTokens without a stop
	Stop      string    // the stop string, or the stop rule's name, that finished it; "" otherwise
	Text      string    // Config.Decode of the tokens, without the stop token
}

// Batch is the result of one rollout: Group completions per prompt, prompt i's group at
// Completions[i*Group : (i+1)*Group]. It records the settings it was drawn with (Config's
// sampling settings), so that whatever reads it later needs no other copy of them.
type Batch struct {
	Prompts      [][]int32
	Group        int
	Temperature  float32
	Shaping      Shaping // how the tokens were drawn; the logprobs are of softmax(logits/Temperature) regardless
	MaxNewTokens int
	Seed         uint64   // the base of every completion's random stream
	Stop         []string // the stop strings
	StopRule     string   // the stop rule
	Completions  []Completion

	// Filled by the caller's reward function: one reward per completion and optionally named
	// components of it (each as long as Completions).
	Rewards    []float64
	Components map[string][]float64

	// Filled by a GRPO step: each completion's advantage (0 for a group without variance).
	Advantages []float64

	// A rank's share of a batch split across the ranks of a data-parallel run: Groups[i] is
	// the index of prompt i's group in the whole batch, of TotalGroups. Nil: the whole batch.
	Groups      []int
	TotalGroups int

	Stats Stats

	// The model that sampled the completions and its ParamGeneration then (SampledBy).
	sampler    *gpt2.Model
	samplerGen uint64
}

// SampledBy reports whether m sampled the completions and its weights have not been written
// since, so that m's forward gives their recorded logprobs now: bit for bit on a
// batch-invariant backend (DESIGN §6.1), which GRPO holds the first minibatch to.
func (b *Batch) SampledBy(m *gpt2.Model) bool {
	return m != nil && b.sampler == m && b.samplerGen == m.ParamGeneration()
}

// Edited records that the recorded logprobs are no longer the sampler's own (a caller changed
// them): SampledBy is false from now on.
func (b *Batch) Edited() { b.sampler = nil }

// Stats describe the cost of a rollout.
type Stats struct {
	Seconds       float64
	PrefillTokens int
	NewTokens     int // tokens sampled, a token the RookWorld stop rule drops among them
	DecodeSteps   int
	RiderTokens   int // tokens drawn, and dropped, for finished completions riding in the decode batch
}

// TokensPerSecond is the rate of new tokens over the whole rollout.
func (s Stats) TokensPerSecond() float64 {
	if s.Seconds == 0 {
		return 0
	}
	return float64(s.NewTokens) / s.Seconds
}

// Sampler generates with one model, keeping its KV cache between calls (the cache of a
// 124M model for 64 sequences of 144 tokens is ~680 MB: allocated once, not per rollout).
type Sampler struct {
	Model *gpt2.Model
	kv    *gpt2.KVCache
}

// NewSampler returns a sampler for m.
func NewSampler(m *gpt2.Model) *Sampler { return &Sampler{Model: m} }

// completionState is a completion being sampled.
type completionState struct {
	c      *Completion
	row    int // its row in the current distribution
	slot   int32
	start  int32  // its prompt's length
	pos    int32  // position of the next token to feed
	stream uint64 // its random stream (streamKey)
	smp    sampler
	end    *ender // nil without stop strings or rule
	done   bool   // finished: riding along in the decode batch, if at all
	fed    int32  // the last token drawn for it on the device
}

// Generate samples cfg.Group completions for each prompt. It stops early with ctx's error
// if ctx is cancelled (checked between decode steps).
func (s *Sampler) Generate(ctx context.Context, prompts [][]int32, cfg Config) (*Batch, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.StopToken == 0 {
		cfg.StopToken = EOT
	}
	m := s.Model
	if int(cfg.StopToken) >= m.Config.VocabSize {
		return nil, fmt.Errorf("rollout: stop token %d is outside the model's vocabulary of %d", cfg.StopToken, m.Config.VocabSize)
	}
	if len(prompts) == 0 {
		return cfg.batch(nil, nil), nil
	}
	if cfg.Occurrences != nil && len(cfg.Occurrences) != len(prompts) {
		return nil, fmt.Errorf("rollout: %d occurrences for %d prompts", len(cfg.Occurrences), len(prompts))
	}
	stops := len(cfg.Stop) > 0 || cfg.StopRule != ""
	if stops && cfg.Decode == nil {
		return nil, fmt.Errorf("rollout: stop strings and stop_rule read the tokens' text: the config needs Decode")
	}
	start := time.Now()
	longest := 0
	var pb gpt2.Batch
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("rollout: prompt %d is empty", i)
		}
		if len(p)+cfg.MaxNewTokens > m.Config.MaxSeqLen {
			return nil, fmt.Errorf("rollout: prompt %d has %d tokens; with max_new_tokens %d it exceeds the model's context of %d",
				i, len(p), cfg.MaxNewTokens, m.Config.MaxSeqLen)
		}
		longest = max(longest, len(p))
		pb.Add(p, len(p))
	}
	g := cfg.Group
	slots := len(prompts) * g
	capacity := longest + cfg.MaxNewTokens
	if s.kv == nil || s.kv.Slots < slots || s.kv.Cap < capacity {
		if s.kv != nil {
			slots, capacity = max(slots, s.kv.Slots), max(capacity, s.kv.Cap)
			s.kv = nil // let the old cache go before allocating the new one
		}
		kv, err := m.NewKVCache(slots, capacity)
		if err != nil {
			return nil, err
		}
		s.kv = kv
		slots = len(prompts) * g
	}

	b := cfg.batch(prompts, m)
	b.Completions = make([]Completion, slots)
	b.Stats.PrefillTokens = len(pb.Tokens)
	prefillSlots := make([]int32, len(prompts))
	for i := range prompts {
		prefillSlots[i] = int32(i * g)
	}
	states := make([]completionState, slots)
	seen := map[uint64]int{}
	for i, p := range prompts {
		key := promptKey(p)
		occurrence := seen[key]
		seen[key]++
		if cfg.Occurrences != nil {
			occurrence = cfg.Occurrences[i]
		}
		promptText := ""
		if cfg.StopRule != "" {
			promptText = cfg.Decode(p)
		}
		for j := range g {
			k := i*g + j
			b.Completions[k].Prompt = i
			states[k] = completionState{c: &b.Completions[k], row: i, slot: int32(k), start: int32(len(p)), pos: int32(len(p)),
				stream: streamKey(key, occurrence, j), smp: sampler{shape: cfg.Shaping}}
			if stops {
				states[k].end = newEnder(cfg, promptText)
			}
		}
	}
	// The first token of every completion comes from its prompt's prefill distribution.
	active := make([]*completionState, slots)
	for k := range states {
		active[k] = &states[k]
	}
	// A backend that samples on the device draws there, unless top-k or top-p shape the draw.
	onDevice := m.SamplesOnDevice() && cfg.TopK <= 0 && !(cfg.TopP > 0 && cfg.TopP < 1)
	var d gpt2.Dist
	var drawn []int32
	var logps []float32
	var err error
	if onDevice {
		drawn, logps, err = m.PrefillSample(s.kv, &pb, prefillSlots, cfg.Temperature, draws(active, cfg))
	} else {
		d, err = m.Prefill(s.kv, &pb, prefillSlots, cfg.Temperature)
	}
	if err != nil {
		return nil, err
	}
	for i, p := range prompts { // the group's other slots read the prompt from its first
		for k := i*g + 1; k < (i+1)*g; k++ {
			if err := m.ShareSlot(s.kv, k, i*g, len(p)); err != nil {
				return nil, err
			}
		}
	}

	// The decode batch is the active completions. Where the backend runs a step that repeats
	// the last one as a graph, finished completions ride along, their draws ignored, until half
	// the batch has finished: the batch keeps its rows, so the steps between repeat (a row's
	// results do not depend on the rows beside it, DESIGN §6.1).
	batch, ride := active, onDevice && m.StepsAsGraphs()
	var tokens, slotIDs, pos []int32
	for step := 1; ; step++ {
		if onDevice {
			for r, st := range batch {
				if st.fed = drawn[r]; !st.done {
					st.c.Tokens, st.c.LogProbs = append(st.c.Tokens, drawn[r]), append(st.c.LogProbs, logps[r])
				}
			}
		} else {
			sampleRows(d, active, cfg)
		}
		b.Stats.NewTokens, b.Stats.RiderTokens = b.Stats.NewTokens+len(active), b.Stats.RiderTokens+len(batch)-len(active)
		if cfg.Progress != nil {
			cfg.Progress(step, cfg.MaxNewTokens)
		}
		// Finished completions leave the active ones.
		next := make([]*completionState, 0, len(active))
		for _, st := range active {
			last := st.c.Tokens[len(st.c.Tokens)-1]
			switch {
			case last == cfg.StopToken:
			case st.end != nil && st.end.stopped(st.c, cfg.Decode):
			case len(st.c.Tokens) >= cfg.MaxNewTokens:
				st.c.Truncated = true
			default:
				next = append(next, st)
				continue
			}
			st.done = true
		}
		active = next
		if len(active) == 0 {
			break
		}
		if !ride || 2*len(active) <= len(batch) {
			batch = active
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tokens, slotIDs, pos = tokens[:0], slotIDs[:0], pos[:0]
		for r, st := range batch {
			st.row = r
			tok := st.fed
			if !onDevice {
				tok = st.c.Tokens[len(st.c.Tokens)-1]
			}
			tokens = append(tokens, tok)
			slotIDs = append(slotIDs, st.slot)
			pos = append(pos, st.pos)
			st.pos++
		}
		if onDevice {
			drawn, logps, err = m.DecodeSample(s.kv, tokens, slotIDs, pos, cfg.Temperature, draws(batch, cfg))
		} else {
			d, err = m.Decode(s.kv, tokens, slotIDs, pos, cfg.Temperature)
		}
		if err != nil {
			return nil, err
		}
		b.Stats.DecodeSteps++
	}
	if cfg.Decode != nil {
		for k := range b.Completions {
			c := &b.Completions[k]
			c.Text = cfg.Decode(c.Tokens[:len(c.Tokens)-boolInt(!c.Truncated && c.Stop == "")])
		}
	}
	b.Stats.Seconds = time.Since(start).Seconds()
	return b, nil
}

// batch is an empty batch of prompts drawn with c by m (nil: none), recording c's settings.
func (c Config) batch(prompts [][]int32, m *gpt2.Model) *Batch {
	b := &Batch{Prompts: prompts, Group: c.Group, Temperature: c.Temperature, Shaping: c.Shaping, MaxNewTokens: c.MaxNewTokens,
		Seed: c.Seed, Stop: append([]string(nil), c.Stop...), StopRule: c.StopRule}
	if m != nil {
		b.sampler, b.samplerGen = m, m.ParamGeneration()
	}
	return b
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sampleRows draws one token for every active completion from its row of d, in parallel over
// completions (each has its own random stream, so the order of work does not matter).
func sampleRows(d gpt2.Dist, active []*completionState, cfg Config) {
	v := len(d.Probs) / d.Rows
	workers := min(runtime.GOMAXPROCS(0), len(active))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for k := w; k < len(active); k += workers {
				st := active[k]
				r := st.row
				u := philox.Uniform(cfg.Seed, st.stream, st.drawPos())
				tok := st.smp.pick(d.Probs[r*v:(r+1)*v], u)
				st.c.Tokens = append(st.c.Tokens, tok)
				st.c.LogProbs = append(st.c.LogProbs, d.LogProb(r, tok, cfg.Temperature))
			}
		}(w)
	}
	wg.Wait()
}

// drawPos is the position in its stream of a completion's next draw: the tokens fed to the
// model after its prompt, the one being fed now among them — its token count, for an active
// completion, and still advancing for one that rides along.
func (st *completionState) drawPos() uint32 { return uint32(st.pos - st.start) }

// draws are the batch's next tokens, drawn on the device: each from its row of the
// distribution, with its stream's uniform at drawPos, as sampleRows draws on the host.
func draws(batch []*completionState, cfg Config) gpt2.Draws {
	d := gpt2.Draws{Seed: cfg.Seed, Greedy: cfg.Greedy}
	for _, st := range batch {
		d.Rows, d.Streams = append(d.Rows, int32(st.row)), append(d.Streams, st.stream)
		d.Positions = append(d.Positions, int32(st.drawPos()))
	}
	return d
}

// promptKey hashes a prompt's tokens.
func promptKey(p []int32) uint64 {
	h := fnv.New64a()
	var buf [4]byte
	for _, t := range p {
		binary.LittleEndian.PutUint32(buf[:], uint32(t))
		h.Write(buf[:])
	}
	return h.Sum64()
}

// streamKey derives the random stream of completion j of the occurrence-th copy of a prompt
// (splitmix64 finalisers keep nearby inputs far apart).
func streamKey(prompt uint64, occurrence, j int) uint64 {
	x := prompt ^ mix(uint64(occurrence)+0x9e3779b97f4a7c15) ^ mix(uint64(j)<<32+1)
	return mix(x)
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// GlobalGroup is the index of local prompt i's group in the whole batch.
func (b *Batch) GlobalGroup(i int) int {
	if b.Groups == nil {
		return i
	}
	return b.Groups[i]
}

// WholeGroups is the number of groups of the whole batch, of which this one holds a share.
func (b *Batch) WholeGroups() int {
	if b.Groups == nil {
		return len(b.Prompts)
	}
	return b.TotalGroups
}
