// Package sft is supervised fine-tuning: mean next-token cross-entropy over documents, the
// same forward/backward and optimizer as GRPO with a weight of −1/N on every scored token.
// It is how the project builds its embedded default model from generated RookWorld text, and
// what recipes/sft.lua runs.
//
// An item given as a prompt and a target (Docs) is tokenized as its joined text, as a model
// trained on whole documents read it, and split where the prompt ends, so that SFT, a rollout
// of the prompt and a model trained on the whole text see the same tokens. A prompt that ends
// inside a token of that text (a trailing space that GPT-2 joins to the target's first word)
// is refused with a BoundaryError naming the item and the token-consistent prompt, never moved
// to a boundary: moving it would change which tokens are learned, and a rollout of the
// author's prompt would still start inside the token.
package sft

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
)

// Doc is one training document; the loss covers its next-token predictions from ScoreFrom
// on (0: every token; the prompt length: the completion only).
type Doc struct {
	Tokens    []int32
	ScoreFrom int
}

// Config of a step.
type Config struct {
	LR          float64
	MaxGradNorm float64 // 0: no clipping
	MicroTokens int     // tokens per forward/backward (memory only); 0: the whole batch
}

// Metrics of a step, flat like GRPO's.
type Metrics map[string]float64

// Step takes one optimizer step on the mean cross-entropy of docs. A non-finite loss or
// gradient skips the update (reported as finite = 0).
func Step(ctx context.Context, m *gpt2.Model, opt *optim.AdamW, docs []Doc, cfg Config) (Metrics, error) {
	start := time.Now()
	n := 0
	for _, d := range docs {
		n += max(0, len(d.Tokens)-1-d.ScoreFrom)
	}
	if n == 0 {
		return nil, errors.New("sft: the batch has no token to learn from")
	}
	m.ZeroGrads()
	loss, err := run(ctx, m, docs, cfg.MicroTokens, -1/float32(n))
	if err != nil {
		return nil, err
	}
	out := Metrics{"loss": loss / float64(n), "tokens": float64(n), "lr": cfg.LR, "finite": 1, "updates": 0}
	norms := optim.Norms(m)
	out["grad_norm"] = norms.Total
	if math.IsNaN(loss) || math.IsInf(loss, 0) || !norms.Finite() {
		out["finite"], out["skipped"] = 0, 1
		m.ZeroGrads()
	} else {
		optim.Clip(m, norms.Total, cfg.MaxGradNorm)
		opt.Step(cfg.LR)
		out["updates"] = 1
	}
	secs := time.Since(start).Seconds()
	out["time/update"], out["tokens_per_sec"] = secs, float64(n)/secs
	return out, nil
}

// Loss is the mean cross-entropy of docs, without touching gradients.
func Loss(ctx context.Context, m *gpt2.Model, docs []Doc, microTokens int) (float64, error) {
	total, n := 0.0, 0
	for _, d := range docs {
		n += max(0, len(d.Tokens)-1-d.ScoreFrom)
	}
	if n == 0 {
		return 0, errors.New("sft: no token to score")
	}
	total, err := run(ctx, m, docs, microTokens, 0)
	return total / float64(n), err
}

// run forwards docs in micro-batches of up to microTokens tokens and returns the summed
// negative log-likelihood; with a non-zero weight it also accumulates the gradient of that
// weight times every scored token's log-probability. The gradient is the fused
// forward-backward's: each chunk of LM-head logits becomes its gradient while it is in
// memory, since a cross-entropy token's gradient (the weight) is known before the forward.
func run(ctx context.Context, m *gpt2.Model, docs []Doc, microTokens int, weight float32) (float64, error) {
	var b gpt2.Batch
	var out gpt2.Output
	nll := 0.0
	grad := func(_ int, _, _, dlogp, _ []float32) {
		for i := range dlogp {
			dlogp[i] = weight
		}
	}
	flush := func() error {
		if len(b.Tokens) == 0 {
			return nil
		}
		var err error
		if weight != 0 && len(b.Rows) > 0 {
			err = m.ForwardBackward(&b, 1, false, grad, &out)
		} else {
			err = m.Score(&b, 1, false, &out)
		}
		if err != nil {
			return err
		}
		for _, lp := range out.LogP {
			nll -= float64(lp)
		}
		b.Reset()
		return nil
	}
	for i, d := range docs {
		if len(d.Tokens) > m.Config.MaxSeqLen {
			return 0, fmt.Errorf("sft: document %d has %d tokens, more than the model's context of %d", i, len(d.Tokens), m.Config.MaxSeqLen)
		}
		if microTokens > 0 && len(b.Tokens) > 0 && len(b.Tokens)+len(d.Tokens) > microTokens {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if err := flush(); err != nil {
				return 0, err
			}
		}
		b.Add(d.Tokens, d.ScoreFrom)
	}
	return nll, flush()
}
