package grpo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/dist"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

// Metrics is a flat name → number map. Names follow TRL where TRL has one ("kl",
// "clip_ratio/low_mean", "completions/mean_length", "frac_reward_zero_std", ...).
type Metrics map[string]float64

// Hooks let tests and fault drills reach into a step.
type Hooks struct {
	// AfterBackward runs after each minibatch's backward, before its gradient is checked.
	AfterBackward func(policy *gpt2.Model)
}

// Trainer updates a policy with GRPO.
type Trainer struct {
	Policy *gpt2.Model
	Ref    *gpt2.Model // frozen reference; needed only when Beta > 0
	Opt    *optim.AdamW
	Hooks  Hooks
	// Warn receives warnings about how a step is set up; each kind is sent once per trainer.
	Warn func(msg string)
	// Comm is the world of a data-parallel run (whole.go): every rank steps with its share of
	// the batch and applies the same update. Nil: one rank.
	Comm dist.Comm
	// NoSignal is why the last step's whole batch carried no reward signal (NoRewardSignal),
	// "" when it did.
	NoSignal string

	// RefHash, when set, is the content hash (gpt2.ParamsHash) of the reference the caller
	// recorded — a run's, DESIGN §6.6: a step that runs the reference refuses one whose weights
	// hash otherwise. They are hashed when a reference is first used and again only after a
	// write, as the model's ParamGeneration says.
	RefHash string

	acc         accumulated // what the gradient holds since it was last cleared
	refSeen     refHashed   // the reference last hashed
	warned      map[string]bool
	batch       gpt2.Batch
	out         gpt2.Output
	dlogp, dent []float32
	hostGrads   []float32 // a device's gradient on the host, to sum over the ranks
}

// completion is one completion's place in the step.
type completion struct {
	c       *rollout.Completion
	prompt  []int32
	adv     float64
	keep    bool      // trained on; false: masked, counted only in sequence counts (MaskedInDenominator)
	refLogp []float32 // logp under the reference, when Beta > 0 (or a loss asks for it)
	// tokenAdv are its advantages per token, when a recipe set them so (adv is then only
	// whether any of them is not 0).
	tokenAdv []float64
	index    int // its place in the rank's batch
	// highEntropy marks the tokens that carry the policy term under top_entropy_quantile
	// (nil: all of them), set for each pass.
	highEntropy []bool
}

// stats accumulates token-level quantities over a step.
type stats struct {
	n                            int
	ratioSum, ratioSq            float64
	ratioMin, ratioMax           float64
	klSum, klMax                 float64
	entSum                       float64
	clipLow, clipHigh, klClamped int
	maxAbsLogRatio               float64
	loss, pgLoss, klLoss, ent    float64 // aggregated (weighted) values of the current minibatch
	// exact holds each token's log-probability to the recorded one bit for bit (the first
	// minibatch of a batch its policy sampled, on a batch-invariant backend: DESIGN §6.1);
	// offPolicy is the first token that is not.
	exact     bool
	offPolicy *OffPolicyError
	nonFinite *NonFinite // the first non-finite value of a loss computed outside the engine
	// top_entropy_quantile's passes: their thresholds summed, the tokens selected and scored
	// (already the whole minibatch's, over the ranks).
	maskPasses, maskSelected, maskTokens int
	maskThreshold                        float64
}

func newStats() stats { return stats{ratioMin: math.Inf(1), ratioMax: math.Inf(-1)} }

// Step runs one GRPO step on a scored rollout batch: NumIterations passes of Minibatches
// optimizer updates, each at the optimizer's scheduled learning rate. A non-finite loss or
// gradient skips that update (the weights and the optimizer state stay as they were) and is
// counted in the metrics; the caller's recovery policy decides what follows. An empty batch
// is not an error: it is reported and nothing changes.
func (tr *Trainer) Step(ctx context.Context, b *rollout.Batch, cfg Config) (Metrics, error) {
	if err := tr.check(b, cfg); err != nil {
		return nil, err
	}
	m := Metrics{"lr": tr.Opt.LR(), "beta": cfg.Beta, "finite": 1, "updates": 0, "skipped": 0,
		"time/rollout": b.Stats.Seconds}
	samplingMetrics(m, b)
	if len(b.Completions) == 0 {
		m["empty_batch"] = 1
		return m, nil
	}
	tr.warnings(b, cfg)
	start := time.Now()
	world := tr.worldOf()
	whole, err := wholeBatch(world, b)
	if err != nil {
		return nil, err
	}
	adv, zeroStd := Advantages(whole.Rewards, whole.Group, cfg)
	setAdvantages(b, whole, adv)
	p := newPlan(b, whole, adv, zeroStd, cfg, false)
	rewardMetrics(m, whole, p.zeroStd, cfg)
	m["completions/kept"] = float64(p.wholeTrained)
	if tr.NoSignal = NoRewardSignal(whole, cfg); tr.NoSignal != "" {
		m["no_reward_signal"] = 1
	}
	if p.wholeTrained == 0 {
		m["no_signal"] = 1
		return m, nil
	}
	if cfg.Beta > 0 {
		t0 := time.Now()
		if err := tr.referenceLogprobs(ctx, p.trained, b.Temperature, cfg); err != nil {
			return nil, err
		}
		m["time/reference"] = time.Since(t0).Seconds()
	}
	// The composition of the primitives (pass.go): the gradient is zero before the first
	// ForwardBackward, and each pass after an update starts from zero again.
	t0 := time.Now()
	u := newUpdates()
	if !p.noSignal {
		tr.ZeroGrads()
	}
	for range cfg.NumIterations {
		for i, part := range p.minibatches {
			r := passRun{part: part, total: p.totals[i], noSignal: p.noSignal, b: b, cfg: cfg, loss: Loss{Name: string(cfg.LossType), Step: true}}
			if err := tr.minibatch(ctx, r, u); err != nil {
				return nil, err
			}
		}
	}
	m["time/update"] = time.Since(t0).Seconds()
	if p.noSignal {
		m["no_signal"] = 1
	}
	if err := reduceStats(world, &u.st); err != nil {
		return nil, err
	}
	if err := reduceStats(world, &u.first); err != nil {
		return nil, err
	}
	u.report(m, cfg)
	lengthMetrics(m, whole)
	// The whole batch's tokens over the slowest rank's time.
	elapsed := b.Stats.Seconds + time.Since(start).Seconds()
	rate := []float64{float64(b.Stats.NewTokens), 0}
	if err := world.SumF64(rate); err != nil {
		return nil, err
	}
	slowest, err := maxima(world, []float64{elapsed})
	if err != nil {
		return nil, err
	}
	m["time/total"] = slowest[0]
	if slowest[0] > 0 {
		m["tokens_per_sec"] = rate[0] / slowest[0]
	}
	return m, nil
}

// check refuses a step that cannot be run as asked.
// MinGroup is the fewest completions per prompt GRPO compares.
const MinGroup = 2

// CheckGroup refuses groups of fewer than MinGroup completions with a *GroupError.
func CheckGroup(g int) error {
	if g < MinGroup {
		return &GroupError{Group: g}
	}
	return nil
}

func (tr *Trainer) check(b *rollout.Batch, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Beta > 0 && tr.Ref == nil {
		return errors.New("grpo: beta > 0 needs a reference model")
	}
	if cfg.Beta > 0 {
		if err := tr.checkReference(); err != nil {
			return err
		}
	}
	n := len(b.Completions)
	switch {
	case n == 0:
		return nil
	case len(b.Rewards) != n:
		return &BatchError{Reason: fmt.Sprintf("the batch has %d completions but %d rewards (score it before the step)", n, len(b.Rewards))}
	case b.Group < MinGroup:
		return CheckGroup(b.Group)
	case n%b.Group != 0:
		return &BatchError{Reason: fmt.Sprintf("%d completions do not form groups of %d", n, b.Group)}
	case b.Shaping.Greedy && !cfg.AllowGreedy:
		return &BatchError{Setting: "allow_greedy",
			Reason: "the batch was sampled greedily: its groups have no variety and its logprobs are not those of what was drawn; set allow_greedy = true to train on it anyway"}
	}
	return nil
}

// refHashed is a reference's content hash at one generation of its weights.
type refHashed struct {
	m    *gpt2.Model
	gen  uint64
	hash string
}

// CheckReference refuses a reference whose weights are not RefHash's (a *ReferenceError), as
// a step that runs the reference does.
func (tr *Trainer) CheckReference() error { return tr.checkReference() }

// checkReference refuses a reference whose weights are not RefHash's, hashing them only when
// they may have changed since they were last hashed.
func (tr *Trainer) checkReference() error {
	if tr.RefHash == "" {
		return nil
	}
	if s := tr.refSeen; s.m != tr.Ref || s.gen != tr.Ref.ParamGeneration() || s.hash == "" {
		tr.refSeen = refHashed{m: tr.Ref, gen: tr.Ref.ParamGeneration(), hash: gpt2.ParamsHash(tr.Ref.Config, tr.Ref.ParamsHost())}
	}
	if h := tr.refSeen.hash; h != tr.RefHash {
		return &ReferenceError{Hash: h, Recorded: tr.RefHash}
	}
	return nil
}

// warnings reports, once per trainer each, settings that do something other than what they
// are usually taken to do.
func (tr *Trainer) warnings(b *rollout.Batch, cfg Config) {
	if cfg.ImportanceSamplingLevel == LevelSequence && cfg.LossType != LossGRPO {
		tr.warn("sequence-level", fmt.Sprintf("grpo: importance_sampling_level = sequence with loss_type = %s sums the sequence's loss over its tokens, "+
			"weighting each sequence by its length; GSPO's objective is loss_type = grpo", cfg.LossType))
	}
	if s := b.Shaping; s.Shaped() {
		tr.warn("shaped", fmt.Sprintf("grpo: the batch was sampled with %s, but the ratio and the KL use the full softmax(logits/%g), "+
			"as TRL does: the recorded logprobs are not those of the narrowed distribution the tokens were drawn from", s, b.Temperature))
	}
}

func (tr *Trainer) warn(kind, msg string) {
	if tr.Warn == nil || tr.warned[kind] {
		return
	}
	if tr.warned == nil {
		tr.warned = map[string]bool{}
	}
	tr.warned[kind] = true
	tr.Warn(msg)
}

// plan is how a step uses its batch: each completion's advantage, which completions are
// trained on, and the minibatches with the completions their denominators count. It is
// decided on the whole batch (whole.go) and holds this rank's share of each minibatch.
type plan struct {
	zeroStd      []bool          // per group of the whole batch
	trained      []*completion   // this share's kept completions, in batch order
	wholeTrained int             // kept completions of the whole batch
	minibatches  [][]*completion // this share of each minibatch: its kept completions and, with MaskedInDenominator, its masked ones
	totals       []minibatchTotal
	noSignal     bool // every advantage is 0 and no other term has a gradient
}

// minibatchTotal is what a whole minibatch counts in its loss's denominators.
type minibatchTotal struct {
	seqs, keptTokens, trained int
	selected                  int // tokens top_entropy_quantile selected; 0 when it is off
}

// newPlan decides the step on the whole batch from each completion's advantage adv (a
// stand-in that is 0 exactly when all of a completion's advantages are, for advantages set
// per token) and which groups have no variance (zeroStd). ownTerms is a loss with terms of
// its own beside the advantage's (one written outside the engine): it always has a signal.
func newPlan(b, whole *rollout.Batch, adv []float64, zeroStd []bool, cfg Config, ownTerms bool) *plan {
	p := &plan{zeroStd: zeroStd, noSignal: cfg.Beta == 0 && cfg.EntropyCoef == 0 && !ownTerms}
	g := whole.Group
	local := localIndex(b)
	keep := func(gi int) bool {
		return !(cfg.DropZeroStd && zeroStd[gi/g]) && !(cfg.MaskTruncated && whole.Completions[gi].Truncated)
	}
	// The whole batch's counted completions, in order; the minibatches are runs of them.
	var counted []int
	for gi := range whole.Completions {
		if keep(gi) {
			p.wholeTrained++
			p.noSignal = p.noSignal && adv[gi] == 0
		}
		if keep(gi) || cfg.MaskedInDenominator {
			counted = append(counted, gi)
		}
	}
	mine := make(map[int]*completion, len(b.Completions))
	for gi := range whole.Completions {
		i := local(gi)
		if i < 0 {
			continue
		}
		c := &b.Completions[i]
		k := &completion{c: c, prompt: b.Prompts[c.Prompt], adv: adv[gi], keep: keep(gi), index: i}
		if k.keep {
			p.trained = append(p.trained, k)
		}
		mine[gi] = k
	}
	for mb := range cfg.Minibatches {
		var part []*completion
		var t minibatchTotal
		for _, gi := range counted[mb*len(counted)/cfg.Minibatches : (mb+1)*len(counted)/cfg.Minibatches] {
			t.seqs++
			if keep(gi) {
				t.keptTokens += len(whole.Completions[gi].Tokens)
				t.trained++
			}
			if k := mine[gi]; k != nil {
				part = append(part, k)
			}
		}
		p.minibatches, p.totals = append(p.minibatches, part), append(p.totals, t)
	}
	return p
}

// setAdvantages records the whole batch's advantages on it and on this rank's share b.
func setAdvantages(b, whole *rollout.Batch, adv []float64) {
	whole.Advantages = adv
	if b == whole {
		return
	}
	b.Advantages = make([]float64, len(b.Completions))
	local := localIndex(b)
	for gi := range whole.Completions {
		if i := local(gi); i >= 0 {
			b.Advantages[i] = adv[gi]
		}
	}
}

// updates accumulates what the minibatches of a step did.
type updates struct {
	st, first                     stats // every token so far; the first minibatch (before any update)
	haveFirst                     bool
	passes                        int // minibatches run
	lossSum, pgSum, klSum, entSum float64
	normSum, normMax              float64
	layerNorms                    map[string]float64
	applied, skipped              int
	nonfiniteGrad, nonfiniteLoss  int
}

func newUpdates() *updates { return &updates{st: newStats(), layerNorms: map[string]float64{}} }

// minibatch runs one minibatch of a step: ForwardBackward's pass over it, then, unless the
// step has no signal, OptimStep's update or its skip when something is not finite.
func (tr *Trainer) minibatch(ctx context.Context, r passRun, u *updates) error {
	if r.total.trained == 0 {
		return nil // on every rank: the whole minibatch trains nothing
	}
	st := &u.st
	st.loss, st.pgLoss, st.klLoss, st.ent = 0, 0, 0, 0
	r.exact = !u.haveFirst && tr.Policy.BatchInvariant() && r.b.SampledBy(tr.Policy)
	if tr.acc.applied {
		tr.ZeroGrads() // the last update's gradient, left to be looked at
	}
	if err := tr.forwardBackward(ctx, r, st); err != nil {
		return err
	}
	if !u.haveFirst {
		u.first, u.haveFirst = *st, true // the first minibatch run comes before any update
	}
	u.passes++
	u.lossSum, u.pgSum, u.klSum, u.entSum = u.lossSum+st.loss, u.pgSum+st.pgLoss, u.klSum+st.klLoss, u.entSum+st.ent
	if r.noSignal {
		return nil // no gradient anywhere: nothing to apply, and AdamW's momentum must not move the weights
	}
	up, err := tr.OptimStep(r.cfg.MaxGradNorm)
	if err != nil {
		return err
	}
	u.add(up)
	return nil
}

// pack lays out completions with their prompts, scoring each completion token. Completions
// of one prompt side by side share it: the prompt but its last token is packed once, and each
// completion continues it from that last token (whose row scores the completion's first).
func (tr *Trainer) pack(part []*completion) *gpt2.Batch {
	packInto(&tr.batch, part)
	return &tr.batch
}

func packInto(gb *gpt2.Batch, part []*completion) {
	gb.Reset()
	for i, k := range part {
		p := k.prompt
		shared := len(p) > 1 && ((i > 0 && part[i-1].c.Prompt == k.c.Prompt) || (i+1 < len(part) && part[i+1].c.Prompt == k.c.Prompt))
		if !shared {
			gb.Add(append(append(make([]int32, 0, len(p)+len(k.c.Tokens)), p...), k.c.Tokens...), len(p)-1)
			continue
		}
		if i == 0 || part[i-1].c.Prompt != k.c.Prompt {
			gb.Add(p[:len(p)-1], len(p)) // context only
		}
		gb.AddContinuation(append(append(make([]int32, 0, 1+len(k.c.Tokens)), p[len(p)-1]), k.c.Tokens...), 0)
	}
}

func (tr *Trainer) referenceLogprobs(ctx context.Context, kept []*completion, temperature float32, cfg Config) error {
	step := len(kept)
	if cfg.MicroBatch > 0 {
		step = cfg.MicroBatch
	}
	logp, _, err := scoreParts(ctx, tr.Ref, &tr.batch, &tr.out, kept, temperature, step, false)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("grpo: reference forward: %w", err)
	}
	for i, k := range kept {
		k.refLogp = logp[i]
	}
	return nil
}

// fusedHead selects the fused LM head for token-level updates; tests switch it off to
// compare with Forward + Backward.
var fusedHead = true

// microBatch runs the forward over part, accumulates the loss and token statistics, and,
// when backward is set, the gradient.
//
// A token's gradient (ratio, clip, KL, entropy bonus) depends on its own log-probability and
// entropy alone, so a token-level update runs the fused head (gpt2.ForwardBackward): each
// chunk of LM-head logits gets its rows' loss terms, in row order, and turns into its
// gradient while it is in memory, instead of being recomputed by Backward. The arithmetic is
// Forward + Backward's, bit for bit. The sequence-level ratio needs a whole sequence's
// log-probabilities first, which a chunk boundary may split: that update runs the forward,
// then the backward.
func (tr *Trainer) microBatch(part []*completion, w []weights, temperature float32, cfg Config, st *stats, backward bool) error {
	return tr.builtinMicroBatch(part, w, temperature, cfg, Loss{Name: string(cfg.LossType)}, st, backward)
}

// builtinMicroBatch is microBatch for any built-in loss: the GRPO family's (cfg.LossType) or
// one of Tinker's, which are token-level.
func (tr *Trainer) builtinMicroBatch(part []*completion, w []weights, temperature float32, cfg Config, loss Loss, st *stats, backward bool) error {
	b := tr.pack(part)
	tokenLevel := cfg.ImportanceSamplingLevel == LevelToken || loss.tinker()
	switch {
	case !backward:
		if err := tr.Policy.Score(b, temperature, true, &tr.out); err != nil {
			return fmt.Errorf("grpo: policy forward: %w", err)
		}
	case fusedHead && tokenLevel:
		if err := tr.Policy.ForwardBackward(b, temperature, true, rowLoss(part, w, cfg, loss, st), &tr.out); err != nil {
			return fmt.Errorf("grpo: policy forward and backward: %w", err)
		}
		return nil
	default:
		if err := tr.Policy.Forward(b, temperature, true, &tr.out); err != nil {
			return fmt.Errorf("grpo: policy forward: %w", err)
		}
	}
	rows := len(tr.out.LogP)
	tr.dlogp, tr.dent = resize(tr.dlogp, rows), resize(tr.dent, rows)
	rowLoss(part, w, cfg, loss, st)(0, tr.out.LogP, tr.out.Entropy, tr.dlogp, tr.dent)
	if !backward {
		return nil
	}
	var dent []float32
	if cfg.EntropyCoef != 0 {
		dent = tr.dent
	}
	return tr.Policy.Backward(tr.dlogp, dent)
}

// rowLoss is the loss of part's scored rows as a gpt2.RowGrad: called on consecutive runs of
// rows from the first (each completion's tokens in order, completion after completion), it
// adds their terms to st and writes their ∂L/∂logp and ∂L/∂H. A run may end inside a
// completion only at the token level, where a token's terms do not depend on the others.
func rowLoss(part []*completion, w []weights, cfg Config, loss Loss, st *stats) gpt2.RowGrad {
	i, first := 0, 0 // the completion holding the next row, and its first row
	return func(lo int, logp, ent, dlogp, dent []float32) {
		for r := 0; r < len(logp); {
			k := part[i]
			t0 := lo + r - first // the completion's first token in this run
			t1 := min(len(k.c.Tokens), t0+len(logp)-r)
			n := t1 - t0
			s := sequenceTokens{logp: logp[r : r+n], old: k.c.LogProbs[t0:t1], entropy: ent[r : r+n]}
			if k.highEntropy != nil {
				s.high = k.highEntropy[t0:t1]
			}
			if k.refLogp != nil {
				s.ref = k.refLogp[t0:t1]
			}
			if k.tokenAdv != nil {
				s.adv = k.tokenAdv[t0:t1]
			}
			st.checkExact(k, t0, s.logp)
			if loss.tinker() {
				tinkerLoss(loss, s, k.adv, st, dlogp[r:r+n])
			} else {
				sequenceLoss(cfg, s, k.adv, w[i], st, dlogp[r:r+n], dent[r:r+n])
			}
			r += n
			if t1 == len(k.c.Tokens) {
				i, first = i+1, first+len(k.c.Tokens)
			}
		}
	}
}

// OffPolicyError is DESIGN §6.1 broken: before the step's first update, the training forward
// gave a token another log-probability than the one its policy's sampler recorded. On a
// batch-invariant backend the two are the same bits, so this is a bug (in a kernel, in the
// packing, in what the batch records), never rounding, and the step stops before any update.
type OffPolicyError struct {
	Update             int // the optimizer update the step was about to make (AdamW's count, from 1)
	Completion, Prompt int // the completion's place in the (rank's) batch, and its prompt's
	Token              int // the token's place in the completion
	Forward, Recorded  float32
}

func (e *OffPolicyError) Error() string {
	return fmt.Sprintf("grpo: before update %d, completion %d (prompt %d) token %d: the training forward's logprob %v is not the %v its sampler recorded (log ratio %.3g); "+
		"on a batch-invariant backend they are the same bits before an update (DESIGN §6.1): a bug, not rounding",
		e.Update, e.Completion, e.Prompt, e.Token, e.Forward, e.Recorded, float64(e.Forward)-float64(e.Recorded))
}

// checkExact records the first of a completion's tokens (from token t0) whose log-probability
// is not the recorded one, when the pass must give the recorded ones bit for bit.
func (s *stats) checkExact(k *completion, t0 int, logp []float32) {
	if !s.exact || s.offPolicy != nil {
		return
	}
	old := k.c.LogProbs[t0:]
	for j := range logp {
		if math.Float32bits(logp[j]) != math.Float32bits(old[j]) {
			s.offPolicy = &OffPolicyError{Completion: k.index, Prompt: k.c.Prompt, Token: t0 + j, Forward: logp[j], Recorded: old[j]}
			return
		}
	}
}

func (s *stats) add(ratio, logRatio float64, t tokenLoss, h float64, kl bool) {
	s.n++
	s.ratioSum += ratio
	s.ratioSq += ratio * ratio
	s.ratioMin, s.ratioMax = min(s.ratioMin, ratio), max(s.ratioMax, ratio)
	s.maxAbsLogRatio = max(s.maxAbsLogRatio, math.Abs(logRatio))
	s.entSum += h
	if kl {
		s.klSum += t.kl
		s.klMax = max(s.klMax, t.kl)
		if t.klClamped {
			s.klClamped++
		}
	}
	if t.clippedLow {
		s.clipLow++
	}
	if t.clippedHigh {
		s.clipHigh++
	}
}

func resize(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// sumGrads replaces the policy's gradient on every rank with its sum over the ranks: on the
// device when the backend has joined the ranks (NCCL between GPUs), through the host and MPI
// otherwise. Both add in rank order, so both give the same bits.
func (tr *Trainer) sumGrads() error {
	world := tr.worldOf()
	if world.Size() == 1 {
		return nil
	}
	m := tr.Policy
	m.EnsureGrads()
	if rs, ok := m.B.(backend.RankSummer); ok && rs.JoinedRanks() > 0 {
		if n := rs.JoinedRanks(); n != world.Size() {
			return &RanksError{Joined: n, Ranks: world.Size()}
		}
		return rs.SumRanks(m.Grads)
	}
	if m.Grads.M.Host != nil {
		return world.SumF32(m.Grads.F32())
	}
	if len(tr.hostGrads) != m.Grads.N {
		tr.hostGrads = make([]float32, m.Grads.N)
	}
	m.B.Download(tr.hostGrads, m.Grads)
	if err := world.SumF32(tr.hostGrads); err != nil {
		return err
	}
	m.B.Upload(m.Grads, tr.hostGrads)
	return nil
}
