package grpo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/rookscript/rookscript/engine/dist"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

// A GRPO step is primitives composed, in the shape of Tinker's API, and a recipe may compose
// them itself:
//
//	advantages set on the batch            Advantages (Step's), or the recipe's own
//	ForwardBackward(pass)                   one minibatch's forward, loss and backward; the
//	                                        gradient accumulates
//	OptimStep(max_grad_norm)                the accumulated gradient summed over the ranks,
//	                                        clipped and applied by AdamW; the next
//	                                        ForwardBackward starts from zero
//	Score(model, batch)                     per-token log-probabilities under any model
//
// Step is ZeroGrads, then for each pass and minibatch ForwardBackward and OptimStep, over the
// same engine calls: the same batch and settings composed by a recipe give Step's weights bit
// for bit. ForwardBackward adds to the gradient, so several calls before one OptimStep
// accumulate. An applied update's gradient (clipped) stays on the policy to be looked at, as
// torch's optimizer leaves it, and the first ForwardBackward after it clears it: a step
// accumulates only its own passes, as Tinker's optim_step promises.

// Loss is what ForwardBackward minimises: a built-in loss by Name, or Func, a loss computed
// outside the engine (a recipe's Lua function).
type Loss struct {
	// Name is a loss type of the GRPO family ("grpo", "bnpo", "dapo", "dr_grpo": Config's
	// settings shape it) or one of Tinker's ("importance_sampling", "ppo", "cispo", "dro",
	// "cross_entropy": TinkerConfig shapes them).
	Name   string
	Tinker TinkerConfig
	// Func, when set, is the loss; Name is then only what metrics call it.
	Func SequenceLoss
	// Entropy asks the forward for each token's entropy and gives Func its gradient ∂L/∂H.
	Entropy bool
	// Step says the loss is the settings' loss_type (rook.grpo.step's), whatever Name says.
	Step bool
	// TokenLevel says Func's gradient of a token depends on that token's numbers alone (and
	// the completion's length): Func is then called once per LM-head chunk inside the fused
	// forward and backward, with completions that a chunk boundary may cut (Sequence.First),
	// and the head's logits are not computed twice.
	TokenLevel bool
}

// Tinker's losses (tinker-docs.thinkingmachines.ai/tinker/losses): sums over tokens.
const (
	LossImportanceSampling = "importance_sampling"
	LossPPO                = "ppo"
	LossTinkerCISPO        = "cispo"
	LossDRO                = "dro"
	LossCrossEntropy       = "cross_entropy"
)

// LossNames are the built-in losses, the GRPO family first.
// The name cispo is Tinker's here; the GRPO family's CISPO is rook.grpo.step's loss_type.
var LossNames = append(slices.Clone(familyNames), tinkerNames...)

var (
	familyNames = []string{string(LossGRPO), string(LossBNPO), string(LossDAPO), string(LossDrGRPO), string(LossSAPO)}
	tinkerNames = []string{LossImportanceSampling, LossPPO, LossTinkerCISPO, LossDRO, LossCrossEntropy}
)

func (l Loss) tinker() bool {
	return l.Func == nil && !l.Step && slices.Contains(tinkerNames, l.Name)
}

// TinkerConfig is Tinker's loss_fn_config: the ratio's clip thresholds of ppo and cispo, and
// dro's β.
type TinkerConfig struct {
	ClipLowThreshold  float64 `json:"clip_low_threshold"`
	ClipHighThreshold float64 `json:"clip_high_threshold"`
	Beta              float64 `json:"beta"`
}

// DefaultTinkerConfig is Tinker's: thresholds 0.8 and 1.2 (ε = 0.2 on both sides), and the dro
// β of Tinker's own example, 0.05.
func DefaultTinkerConfig() TinkerConfig {
	return TinkerConfig{ClipLowThreshold: 0.8, ClipHighThreshold: 1.2, Beta: 0.05}
}

// Validate reports the first unusable threshold or β: a *ConfigError naming its key.
func (c TinkerConfig) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"clip_low_threshold", c.ClipLowThreshold}, {"clip_high_threshold", c.ClipHighThreshold}, {"beta", c.Beta}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return &ConfigError{Key: "loss_fn_config." + f.name, Value: f.v, Reason: "a finite number ≥ 0"}
		}
	}
	if c.ClipLowThreshold > c.ClipHighThreshold {
		return &ConfigError{Key: "loss_fn_config.clip_low_threshold", Value: c.ClipLowThreshold, Reason: fmt.Sprintf("≤ clip_high_threshold (%g)", c.ClipHighThreshold)}
	}
	return nil
}

// Sequence is one completion as a loss computed outside the engine sees it: its tokens'
// log-probabilities from this forward (Logp) and, when asked for, entropies; those recorded
// at sampling time (Old) and under the reference (Ref, nil without one), copies the loss
// cannot change the originals through; its advantages, one per token; and where the loss
// writes its gradient: ∂L/∂logp and ∂L/∂H per token (DEnt nil without entropy), zeroed.
type Sequence struct {
	Completion, Prompt      int // its place in the (rank's) batch, and its prompt's
	First, Len              int // its tokens here are First .. First+len(Logp)-1 of Len
	Logp, Old, Ref, Entropy []float32
	Adv                     []float64
	DLogp, DEnt             []float32
}

// Totals are what the whole minibatch counts, over every micro-batch and rank: the
// completions the sequence means of grpo and dr_grpo count, the tokens trained on (dapo,
// bnpo), and the rollout's max_new_tokens (dr_grpo). A loss normalised by them does not depend
// on how the minibatch is split (DESIGN §6.5).
type Totals struct {
	Sequences, Tokens, MaxNewTokens int
}

// SequenceLoss is a loss computed outside the engine, called once per micro-batch with its
// completions whole: it returns their loss and fills each one's DLogp (and DEnt). The engine
// applies those as the backward's row gradients after the one forward: no second pass.
type SequenceLoss func(seqs []Sequence, t Totals) (float64, error)

// NonFinite is where a loss computed outside the engine first gave a value that is not
// finite: its loss, or a token's gradient. The update that would apply it is skipped.
type NonFinite struct {
	Completion, Token int    // the completion's place in the (rank's) batch; Token -1 for the loss
	What              string // "loss", "dlogp" or "dent"
	Value             float64
}

func (n *NonFinite) String() string {
	if n.Token < 0 {
		return fmt.Sprintf("the loss of the micro-batch starting at completion %d is %v", n.Completion, n.Value)
	}
	return fmt.Sprintf("completion %d token %d: %s is %v", n.Completion, n.Token, n.What, n.Value)
}

// Pass is one ForwardBackward: a batch, its advantages, which minibatch of it, the settings
// and the loss.
type Pass struct {
	Batch *rollout.Batch
	// Adv is each completion's advantage (the batch's own, Batch.Advantages, when nil);
	// TokenAdv, when set, each completion's per token instead.
	Adv      []float64
	TokenAdv [][]float64
	// RefLogp is each completion's log-probabilities under the reference (Score): needed by
	// β > 0, and given to Func when set.
	RefLogp [][]float32
	// Config selects the completions (drop_zero_std, mask_truncated_completions,
	// masked_in_denominator, minibatches, micro_batch) and shapes the GRPO family's loss; its
	// loss_type is Loss.Name's when that is one of the family.
	Config    Config
	Minibatch int // which of Config.Minibatches, from 0
	Loss      Loss
}

// passRun is one pass as Step and ForwardBackward run it: this rank's share of a minibatch
// (kept completions, and masked ones counted in its denominators) with the whole minibatch's
// totals.
type passRun struct {
	part     []*completion
	total    minibatchTotal
	noSignal bool // the whole batch has no gradient: forward only
	exact    bool // the forward must give the recorded log-probabilities bit for bit (§6.1)
	b        *rollout.Batch
	cfg      Config
	loss     Loss
}

// accumulated is what the ForwardBackward calls since the gradient was last cleared added to
// it: OptimStep applies it only if some pass had a gradient and everything was finite.
type accumulated struct {
	passes    int
	signal    bool
	loss      float64 // summed over the passes and the ranks
	nonFinite *NonFinite
	applied   bool // the gradient is an applied update's: the next pass clears it first
}

// ZeroGrads clears the policy's gradient and what has been accumulated into it.
func (tr *Trainer) ZeroGrads() {
	tr.Policy.ZeroGrads()
	tr.acc = accumulated{}
}

// forwardBackward runs one pass: its micro-batches' forwards, losses and backwards into the
// gradient (forwards only without signal), its loss over the ranks added to tr.acc.
func (tr *Trainer) forwardBackward(ctx context.Context, r passRun, st *stats) error {
	var train []*completion
	for _, k := range r.part {
		if k.keep {
			train = append(train, k)
		}
	}
	if r.cfg.TopEntropyQuantile < 1 && !r.noSignal {
		selected, err := tr.entropyMask(ctx, r, train, st)
		if err != nil {
			return err
		}
		r.total.selected = selected
	}
	var trainW []weights
	w := minibatchWeights(r.part, r.total, r.cfg, r.b.MaxNewTokens)
	for i, k := range r.part {
		if k.keep {
			trainW = append(trainW, w[i])
		}
	}
	st.exact = r.exact
	defer func() { st.exact = false }()
	signal := false
	for lo := 0; lo < len(train); {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := len(train)
		if r.cfg.MicroBatch > 0 {
			hi = min(hi, lo+r.cfg.MicroBatch)
		}
		if r.loss.Func != nil && r.loss.TokenLevel && fusedHead {
			s, err := tr.customTokenMicroBatch(train[lo:hi], r, st)
			if err != nil {
				return err
			}
			signal = signal || s
		} else if r.loss.Func != nil {
			s, err := tr.customMicroBatch(train[lo:hi], r, st)
			if err != nil {
				return err
			}
			signal = signal || s
		} else if err := tr.builtinMicroBatch(train[lo:hi], trainW[lo:hi], r.b.Temperature, r.cfg, r.loss, st, !r.noSignal); err != nil {
			return err
		}
		lo = hi
		if e := st.offPolicy; e != nil {
			if e.Update = 1; tr.Opt != nil {
				e.Update = tr.Opt.Steps + 1
			}
			return e
		}
	}
	if r.loss.Func == nil {
		signal = !r.noSignal
	}
	// The pass's loss over the ranks, so that every rank sees a non-finite one; with a loss
	// computed outside the engine, whether any rank has a gradient too.
	world := tr.worldOf()
	if world.Size() > 1 {
		l := []float64{st.loss, st.pgLoss, st.klLoss, st.ent, 0}
		if signal {
			l[4] = 1
		}
		if err := world.SumF64(l); err != nil {
			return err
		}
		st.loss, st.pgLoss, st.klLoss, st.ent, signal = l[0], l[1], l[2], l[3], l[4] > 0
	}
	tr.acc.passes++
	tr.acc.signal = tr.acc.signal || signal
	tr.acc.loss += st.loss
	if tr.acc.nonFinite == nil {
		tr.acc.nonFinite = st.nonFinite
	}
	return nil
}

// customMicroBatch runs a micro-batch with a loss computed outside the engine: the forward,
// the loss over whole completions, then the backward of its row gradients (none when they
// are all 0: signal false). A non-finite loss or gradient is recorded in st, with the NaN
// loss that makes every rank skip the update, and not backpropagated.
func (tr *Trainer) customMicroBatch(part []*completion, r passRun, st *stats) (signal bool, err error) {
	if err := tr.Policy.Forward(tr.pack(part), r.b.Temperature, r.loss.Entropy, &tr.out); err != nil {
		return false, fmt.Errorf("grpo: policy forward: %w", err)
	}
	rows := len(tr.out.LogP)
	tr.dlogp = resize(tr.dlogp, rows)
	clear(tr.dlogp)
	var dent []float32
	if r.loss.Entropy {
		tr.dent = resize(tr.dent, rows)
		clear(tr.dent)
		dent = tr.dent
	}
	seqs := make([]Sequence, len(part))
	off := 0
	for i, k := range part {
		n := len(k.c.Tokens)
		logp := tr.out.LogP[off : off+n]
		st.checkExact(k, 0, logp)
		s := Sequence{Completion: k.index, Prompt: k.c.Prompt, Len: n, Logp: slices.Clone(logp), Old: slices.Clone(k.c.LogProbs),
			Adv: k.tokenAdv, DLogp: tr.dlogp[off : off+n]}
		if s.Adv == nil {
			s.Adv = make([]float64, n)
			for t := range s.Adv {
				s.Adv[t] = k.adv
			}
		}
		if k.refLogp != nil {
			s.Ref = slices.Clone(k.refLogp)
		}
		if r.loss.Entropy {
			s.Entropy, s.DEnt = slices.Clone(tr.out.Entropy[off:off+n]), dent[off:off+n]
		}
		for t := range n {
			logRatio := float64(logp[t]) - float64(k.c.LogProbs[t])
			h := 0.0
			if r.loss.Entropy {
				h = float64(s.Entropy[t])
			}
			st.add(math.Exp(logRatio), logRatio, tokenLoss{}, h, false)
		}
		seqs[i] = s
		off += n
	}
	if st.offPolicy != nil {
		return false, nil
	}
	loss, err := r.loss.Func(seqs, Totals{Sequences: r.total.seqs, Tokens: r.total.keptTokens, MaxNewTokens: r.b.MaxNewTokens})
	if err != nil {
		return false, err
	}
	if nf := firstNonFinite(seqs, loss); nf != nil {
		if st.nonFinite == nil {
			st.nonFinite = nf
		}
		st.loss = math.NaN()
		return false, nil
	}
	st.loss += loss
	st.pgLoss += loss
	signal = slices.ContainsFunc(tr.dlogp, func(x float32) bool { return x != 0 }) ||
		slices.ContainsFunc(dent, func(x float32) bool { return x != 0 })
	if !signal {
		return false, nil // the forward's activations are dropped: nothing to backpropagate
	}
	if err := tr.Policy.Backward(tr.dlogp, dent); err != nil {
		return false, fmt.Errorf("grpo: policy backward: %w", err)
	}
	return true, nil
}

// customTokenMicroBatch runs a micro-batch with a token-level loss computed outside the
// engine inside the fused forward and backward: the loss is called once per LM-head chunk with
// the runs of completions the chunk holds, and each chunk's logits become their gradient while
// they are in memory. A loss that fails leaves a partial gradient behind: it is cleared, with
// what was accumulated before it.
func (tr *Trainer) customTokenMicroBatch(part []*completion, r passRun, st *stats) (signal bool, err error) {
	tot := Totals{Sequences: r.total.seqs, Tokens: r.total.keptTokens, MaxNewTokens: r.b.MaxNewTokens}
	i, first := 0, 0 // the completion holding the next row, and its first row
	grad := func(lo int, logp, ent, dlogp, dent []float32) {
		var seqs []Sequence
		for row := 0; row < len(logp); {
			k := part[i]
			n := len(k.c.Tokens)
			t0 := lo + row - first
			t1 := min(n, t0+len(logp)-row)
			m := t1 - t0
			st.checkExact(k, t0, logp[row:row+m])
			s := Sequence{Completion: k.index, Prompt: k.c.Prompt, First: t0, Len: n, Logp: slices.Clone(logp[row : row+m]),
				Old: slices.Clone(k.c.LogProbs[t0:t1]), DLogp: dlogp[row : row+m]}
			if k.tokenAdv != nil {
				s.Adv = k.tokenAdv[t0:t1]
			} else {
				s.Adv = make([]float64, m)
				for t := range s.Adv {
					s.Adv[t] = k.adv
				}
			}
			if k.refLogp != nil {
				s.Ref = slices.Clone(k.refLogp[t0:t1])
			}
			if ent != nil {
				s.Entropy, s.DEnt = slices.Clone(ent[row:row+m]), dent[row:row+m]
			}
			for t := range m {
				logRatio := float64(s.Logp[t]) - float64(s.Old[t])
				h := 0.0
				if ent != nil {
					h = float64(s.Entropy[t])
				}
				st.add(math.Exp(logRatio), logRatio, tokenLoss{}, h, false)
			}
			seqs = append(seqs, s)
			row += m
			if t1 == n {
				i, first = i+1, first+n
			}
		}
		if err != nil || st.offPolicy != nil {
			return // the pass fails: its gradient is cleared below
		}
		loss, ferr := r.loss.Func(seqs, tot)
		if ferr != nil {
			err = ferr
			clear(dlogp)
			clear(dent)
			return
		}
		if nf := firstNonFinite(seqs, loss); nf != nil {
			if st.nonFinite == nil {
				st.nonFinite = nf
			}
			loss = math.NaN() // every rank skips the update
		}
		st.loss += loss
		st.pgLoss += loss
		signal = signal || slices.ContainsFunc(dlogp, func(x float32) bool { return x != 0 }) ||
			slices.ContainsFunc(dent, func(x float32) bool { return x != 0 })
	}
	if ferr := tr.Policy.ForwardBackward(tr.pack(part), r.b.Temperature, r.loss.Entropy, grad, &tr.out); ferr != nil {
		return false, fmt.Errorf("grpo: policy forward and backward: %w", ferr)
	}
	if err != nil || st.offPolicy != nil {
		tr.ZeroGrads()
		return false, err
	}
	return signal, nil
}

// firstNonFinite is the first value of a custom loss that is not finite, or nil.
func firstNonFinite(seqs []Sequence, loss float64) *NonFinite {
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return &NonFinite{Completion: seqs[0].Completion, Token: -1, What: "loss", Value: loss}
	}
	for _, s := range seqs {
		for t, d := range s.DLogp {
			if v := float64(d); math.IsNaN(v) || math.IsInf(v, 0) {
				return &NonFinite{Completion: s.Completion, Token: s.First + t, What: "dlogp", Value: v}
			}
		}
		for t, d := range s.DEnt {
			if v := float64(d); math.IsNaN(v) || math.IsInf(v, 0) {
				return &NonFinite{Completion: s.Completion, Token: s.First + t, What: "dent", Value: v}
			}
		}
	}
	return nil
}

// ForwardBackward runs one pass over a minibatch of p.Batch and accumulates its loss's
// gradient into the policy's (it never clears it: OptimStep does). The completions it trains
// and the denominators of their losses are decided on the whole batch as Step decides them,
// from the advantages the recipe set; on a batch the policy sampled at its current weights
// the forward must give the recorded log-probabilities bit for bit (DESIGN §6.1), or the pass
// stops with an *OffPolicyError before anything is accumulated from it. Returns the pass's
// metrics (the loss, its terms, ratio and clip statistics).
func (tr *Trainer) ForwardBackward(ctx context.Context, p Pass) (Metrics, error) {
	b, cfg := p.Batch, p.Config
	if err := tr.checkPass(&p); err != nil {
		return nil, err
	}
	cfg = p.Config
	if tr.acc.applied {
		tr.ZeroGrads()
	}
	n := len(b.Completions)
	m := Metrics{"completions": 0, "tokens": 0}
	if n == 0 {
		m["empty_batch"] = 1
		return m, nil
	}
	// A completion's stand-in advantage: its own, or whether any of its tokens has one.
	adv := p.Adv
	if adv == nil {
		adv = b.Advantages
	}
	if p.TokenAdv != nil {
		adv = make([]float64, n)
		for i, ta := range p.TokenAdv {
			if slices.ContainsFunc(ta, func(a float64) bool { return a != 0 }) {
				adv[i] = 1
			}
		}
	}
	world := tr.worldOf()
	whole, err := wholeBatch(world, b)
	if err != nil {
		return nil, err
	}
	wholeAdv, err := gatherAdvantages(world, b, whole, adv)
	if err != nil {
		return nil, err
	}
	pl := newPlan(b, whole, wholeAdv, zeroGroups(wholeAdv, whole.Group), cfg, p.Loss.Func != nil)
	part, total := pl.minibatches[p.Minibatch], pl.totals[p.Minibatch]
	for _, k := range part {
		i := k.index
		k.adv = adv[i]
		if p.TokenAdv != nil {
			k.adv, k.tokenAdv = 0, p.TokenAdv[i]
		}
		if p.RefLogp != nil {
			k.refLogp = p.RefLogp[i]
		}
	}
	m["completions"], m["completions/kept"] = float64(total.trained), float64(pl.wholeTrained)
	m["tokens"] = float64(total.keptTokens)
	if total.trained == 0 {
		m["no_signal"] = 1
		return m, nil
	}
	st := newStats()
	r := passRun{part: part, total: total, noSignal: pl.noSignal, b: b, cfg: cfg, loss: p.Loss,
		exact: tr.Policy.BatchInvariant() && b.SampledBy(tr.Policy)}
	if err := tr.forwardBackward(ctx, r, &st); err != nil {
		return nil, err
	}
	if err := reduceStats(world, &st); err != nil {
		return nil, err
	}
	passMetrics(m, st, r)
	return m, nil
}

// checkPass refuses a pass that cannot be run as asked, and sets its loss_type from the
// loss's name.
func (tr *Trainer) checkPass(p *Pass) error {
	b, l := p.Batch, p.Loss
	if l.Func == nil && !slices.Contains(LossNames, l.Name) {
		return &ConfigError{Key: "loss", Value: l.Name, Choices: LossNames}
	}
	if l.Func == nil && !l.tinker() {
		p.Config.LossType = LossType(l.Name)
	}
	cfg := p.Config
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.TopEntropyQuantile < 1 && (l.Func != nil || l.tinker()) {
		return &ConfigError{Key: "top_entropy_quantile", Value: cfg.TopEntropyQuantile,
			Reason: "1 with a loss other than rook.grpo.step's loss types (a loss written in Lua has each token's entropy to select by)"}
	}
	if l.tinker() {
		if err := l.Tinker.Validate(); err != nil {
			return err
		}
		if cfg.Beta != 0 || cfg.EntropyCoef != 0 || cfg.ImportanceSamplingLevel != LevelToken {
			return &ConfigError{Key: "loss", Value: l.Name, Reason: "a loss without a KL or entropy term, at the token level (Tinker's): " +
				"set beta = 0, entropy_coef = 0 and importance_sampling_level = \"token\" (a KL penalty goes into the advantages, as Tinker's recipes shape them)"}
		}
	}
	n := len(b.Completions)
	switch {
	case p.Minibatch < 0 || p.Minibatch >= cfg.Minibatches:
		return &ConfigError{Key: "minibatch", Value: p.Minibatch + 1, Reason: fmt.Sprintf("one of 1 .. %d (minibatches)", cfg.Minibatches)}
	case n == 0:
		return nil
	case b.Group < 1 || n%b.Group != 0:
		return &BatchError{Reason: fmt.Sprintf("%d completions do not form groups of %d", n, b.Group)}
	case b.Shaping.Greedy && !cfg.AllowGreedy:
		return &BatchError{Setting: "allow_greedy",
			Reason: "the batch was sampled greedily: its logprobs are not those of what was drawn; set allow_greedy = true to train on it anyway"}
	case p.Adv == nil && p.TokenAdv == nil && len(b.Advantages) != n:
		return &BatchError{Reason: "the batch has no advantages: set them (per completion or per token) before a forward_backward"}
	case p.Adv != nil && len(p.Adv) != n, p.TokenAdv != nil && len(p.TokenAdv) != n:
		return &BatchError{Reason: fmt.Sprintf("advantages for %d completions, the batch has %d", max(len(p.Adv), len(p.TokenAdv)), n)}
	case p.RefLogp != nil && len(p.RefLogp) != n:
		return &BatchError{Reason: fmt.Sprintf("reference log-probabilities for %d completions, the batch has %d", len(p.RefLogp), n)}
	case cfg.Beta > 0 && p.RefLogp == nil && l.Func == nil:
		return errors.New("grpo: beta > 0 needs the reference's log-probabilities (a reference model)")
	}
	for i, c := range b.Completions {
		if p.TokenAdv != nil && len(p.TokenAdv[i]) != len(c.Tokens) {
			return &BatchError{Reason: fmt.Sprintf("completion %d has %d tokens but %d advantages", i+1, len(c.Tokens), len(p.TokenAdv[i]))}
		}
		if p.RefLogp != nil && len(p.RefLogp[i]) != len(c.Tokens) {
			return &BatchError{Reason: fmt.Sprintf("completion %d has %d tokens but %d reference log-probabilities", i+1, len(c.Tokens), len(p.RefLogp[i]))}
		}
	}
	return nil
}

// zeroGroups marks each group whose advantages are all 0: a group without variance under
// Step's advantages, and what drop_zero_std drops.
func zeroGroups(adv []float64, g int) []bool {
	z := make([]bool, len(adv)/g)
	for gi := range z {
		z[gi] = !slices.ContainsFunc(adv[gi*g:(gi+1)*g], func(a float64) bool { return a != 0 })
	}
	return z
}

// passMetrics writes a pass's loss and token statistics.
func passMetrics(m Metrics, st stats, r passRun) {
	m["loss"], m["pg_loss"], m["kl_loss"], m["entropy_loss"] = st.loss, st.pgLoss, st.klLoss, st.ent
	m["finite"] = 1
	if math.IsNaN(st.loss) || math.IsInf(st.loss, 0) {
		m["finite"] = 0
	}
	if r.noSignal {
		m["no_signal"] = 1
	}
	if st.n == 0 {
		return
	}
	n := float64(st.n)
	mu := st.ratioSum / n
	m["ratio/mean"], m["ratio/std"] = mu, math.Sqrt(max(0, st.ratioSq/n-mu*mu))
	m["ratio/min"], m["ratio/max"] = st.ratioMin, st.ratioMax
	m["ratio/max_abs_log"] = st.maxAbsLogRatio
	if r.exact {
		m["ratio/first_max_abs_log"] = st.maxAbsLogRatio // before any update of this batch's sampler
	}
	if r.loss.Func == nil {
		m["clip_ratio/low_mean"], m["clip_ratio/high_mean"] = float64(st.clipLow)/n, float64(st.clipHigh)/n
		m["clip_ratio/region_mean"] = float64(st.clipLow+st.clipHigh) / n
	}
	if r.loss.Func == nil || r.loss.Entropy {
		m["entropy"] = st.entSum / n
	}
	maskMetrics(m, st)
	if r.cfg.Beta > 0 && r.loss.Func == nil {
		m["kl"], m["kl/max"] = st.klSum/n, st.klMax
	}
}

// Update is what OptimStep did.
type Update struct {
	Applied bool
	LR      float64         // the rate it applied (or would have)
	Norms   optim.GradNorms // before clipping; zero when the gradient was not looked at
	Passes  int             // ForwardBackward calls it applied
	// NoSignal: nothing accumulated had a gradient, so nothing was applied (AdamW's momentum
	// and weight decay would move weights no loss asked to move).
	NoSignal bool
	// NonFiniteLoss, NonFiniteGrad: skipped for a loss or gradient that is not finite; Where
	// says where a loss computed outside the engine first gave one.
	NonFiniteLoss, NonFiniteGrad bool
	Where                        *NonFinite
}

// OptimStep applies what the ForwardBackward calls since the gradient was last cleared
// accumulated: the gradient summed over the ranks, its norm, the clip to maxGradNorm (0: none)
// and one AdamW update at the optimizer's scheduled rate; a non-finite loss or gradient skips
// the update instead (DESIGN §6.9), and the weights and the optimizer state stay as they
// were, and the gradient is cleared. An applied update leaves its clipped gradient on the
// policy until the next ForwardBackward (or ZeroGrads).
func (tr *Trainer) OptimStep(maxGradNorm float64) (Update, error) {
	a := tr.acc
	up := Update{LR: tr.Opt.LR(), Passes: a.passes}
	finiteLoss := !math.IsNaN(a.loss) && !math.IsInf(a.loss, 0)
	if !a.signal && finiteLoss {
		up.NoSignal = true
		return up, nil
	}
	if a.signal { // every rank: the signal and the loss are the ranks' sums
		if err := tr.sumGrads(); err != nil {
			return up, err
		}
		if tr.Hooks.AfterBackward != nil {
			tr.Hooks.AfterBackward(tr.Policy)
		}
		up.Norms = optim.Norms(tr.Policy)
	}
	if !finiteLoss || !up.Norms.Finite() {
		up.NonFiniteGrad = !up.Norms.Finite() || (a.nonFinite != nil && a.nonFinite.What != "loss")
		up.NonFiniteLoss = !up.NonFiniteGrad
		up.Where = a.nonFinite
		tr.ZeroGrads() // nothing non-finite stays behind
		return up, nil
	}
	optim.Clip(tr.Policy, up.Norms.Total, maxGradNorm)
	tr.Opt.Step(up.LR)
	up.Applied = true
	tr.acc = accumulated{applied: true}
	return up, nil
}

// add records an update of a step.
func (u *updates) add(up Update) {
	switch {
	case up.Applied:
		u.normSum += up.Norms.Total
		u.normMax = max(u.normMax, up.Norms.Total)
		for k, v := range up.Norms.Named {
			u.layerNorms[k] += v
		}
		u.applied++
	case up.NonFiniteGrad:
		u.skipped++
		u.nonfiniteGrad++
	case up.NonFiniteLoss:
		u.skipped++
		u.nonfiniteLoss++
	}
}

// Score returns the per-token log-probabilities of every completion of b under m, and their
// entropies when entropy is set, packed as a step packs them, microBatch completions at a time
// (0: all at once). On a batch-invariant backend the numbers do not depend on the packing.
func Score(ctx context.Context, m *gpt2.Model, b *rollout.Batch, microBatch int, entropy bool) (logp, ent [][]float32, err error) {
	part := make([]*completion, len(b.Completions))
	for i := range b.Completions {
		c := &b.Completions[i]
		part[i] = &completion{c: c, prompt: b.Prompts[c.Prompt], index: i}
	}
	var gb gpt2.Batch
	var out gpt2.Output
	return scoreParts(ctx, m, &gb, &out, part, b.Temperature, microBatch, entropy)
}

// scoreParts scores part under m, microBatch completions at a time.
func scoreParts(ctx context.Context, m *gpt2.Model, gb *gpt2.Batch, out *gpt2.Output, part []*completion, temperature float32, microBatch int, entropy bool) (logp, ent [][]float32, err error) {
	step := max(len(part), 1)
	if microBatch > 0 {
		step = microBatch
	}
	logp = make([][]float32, len(part))
	if entropy {
		ent = make([][]float32, len(part))
	}
	for lo := 0; lo < len(part); lo += step {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		chunk := part[lo:min(len(part), lo+step)]
		packInto(gb, chunk)
		if err := m.Score(gb, temperature, entropy, out); err != nil {
			return nil, nil, err
		}
		off := 0
		for i, k := range chunk {
			n := len(k.c.Tokens)
			logp[lo+i] = slices.Clone(out.LogP[off : off+n])
			if entropy {
				ent[lo+i] = slices.Clone(out.Entropy[off : off+n])
			}
			off += n
		}
	}
	return logp, ent, nil
}

// Accumulated is what the gradient holds since it was last cleared: the ForwardBackward
// calls that added to it, and where a loss computed outside the engine first gave a value
// that is not finite (nil: none did).
func (tr *Trainer) Accumulated() (passes int, nonFinite *NonFinite) {
	return tr.acc.passes, tr.acc.nonFinite
}

// StepAdvantages sets Step's advantages on b, computed on the whole batch of the world c (b is
// this rank's share; nil c: one rank), and returns b's.
func StepAdvantages(c dist.Comm, b *rollout.Batch, cfg Config) ([]float64, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := len(b.Completions)
	switch {
	case len(b.Rewards) != n:
		return nil, &BatchError{Reason: fmt.Sprintf("the batch has %d completions but %d rewards (score it first)", n, len(b.Rewards))}
	case b.Group < 1 || n%b.Group != 0:
		return nil, &BatchError{Reason: fmt.Sprintf("%d completions do not form groups of %d", n, b.Group)}
	}
	if c == nil {
		c = dist.Single{}
	}
	whole, err := wholeBatch(c, b)
	if err != nil {
		return nil, err
	}
	adv, _ := Advantages(whole.Rewards, whole.Group, cfg)
	setAdvantages(b, whole, adv)
	return b.Advantages, nil
}
