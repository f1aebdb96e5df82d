package sft

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/engine/tokenizer"
)

// answerScore is how a model scores a reference answer after a prompt: the log-probability of
// its first token and the mean negative log-likelihood of the rest (nats per token).
type answerScore struct{ first, rest float64 }

// TestWholeTextTrainedModel: a tiny GPT-2 trained on whole P: rows, tokenized as one text as
// llm.c trained RookWorld-LM, gives its reference answer's first token (" M") a
// log-probability above −2 under PolicyPrompt's prompt, and under the old fully padded prompt,
// which carries the pad space GPT-2 joins to " M", gives the answer's first token ("M", a
// token it never saw there) one below −8: the test can fail. Its tokens are GPT-2's, renumbered
// to the few the rows use so that the model is small.
func TestWholeTextTrainedModel(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ fen, text string }
	var rows []row
	r := rand.New(rand.NewPCG(7, 7))
	for len(rows) < 6 {
		g, err := chess.NewGame(chess.StartFEN)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 + 3*len(rows) {
			legal := g.Position().LegalMoves()
			if err := g.Push(legal[r.IntN(len(legal))]); err != nil {
				t.Fatal(err)
			}
		}
		pos := g.Position()
		moves := pos.LegalMoves()[:5]
		evals := []float64{0.31, -0.2, 0.05, -1.5, 2.25}
		rows = append(rows, row{pos.FEN(), rookworld.PolicyText(pos.FEN(), moves, evals, moves[len(rows)%5])})
	}

	// The prompt forms, each with its answer's tokens as they follow it.
	type form struct {
		name   string
		prompt func(fen string) string
	}
	forms := []form{
		{"padded (PolicyPrompt)", func(fen string) string { return rookworld.PolicyPrompt(fen, true) }},
		{"bare (the model card's)", func(fen string) string { return rookworld.PolicyPrompt(fen, false) }},
		{"fully padded (old)", func(fen string) string {
			return rookworld.PolicyPrefix + fen + strings.Repeat(" ", rookworld.PolicyFENWidth-len(fen))
		}},
	}
	split := func(f form, rw row) (prompt, answer []int32) {
		p := f.prompt(rw.fen)
		if !strings.HasPrefix(rw.text, p) {
			t.Fatalf("%s: %q is not a prefix of its row", f.name, p)
		}
		// The answer's tokens as a rollout of this prompt meets them: the joint text's when the
		// prompt is a token prefix, else the answer's own (the old form's "M", ":", ...).
		if ids, n, ok := tok.Split(p, rw.text[len(p):]); ok {
			return ids[:n], ids[n:]
		}
		return tok.Encode(p), tok.Encode(rw.text[len(p):])
	}

	// Renumber GPT-2's ids to the ones in use.
	ids := map[int32]int32{}
	renumber := func(s []int32) []int32 {
		out := make([]int32, len(s))
		for i, id := range s {
			if _, ok := ids[id]; !ok {
				ids[id] = int32(len(ids))
			}
			out[i] = ids[id]
		}
		return out
	}
	var docs []Doc
	longest := 0
	for _, rw := range rows {
		d := Doc{Tokens: renumber(tok.EncodeDoc(rw.text))}
		docs = append(docs, d)
		longest = max(longest, len(d.Tokens))
	}
	for _, f := range forms {
		for _, rw := range rows {
			p, a := split(f, rw)
			renumber(p)
			renumber(a)
		}
	}
	cfg := gpt2test.Tiny()
	cfg.VocabSize, cfg.MaxSeqLen, cfg.Channels = len(ids), longest+8, 32
	m := gpt2test.Random(t, cpu.New(2), cfg, 3, 1)
	opt, err := optim.NewAdamW(m, optim.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var last Metrics
	for range 150 {
		if last, err = Step(context.Background(), m, opt, docs, Config{LR: 1e-2, MaxGradNorm: 1}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d rows, vocabulary %d, %d steps in %.1f s, whole-text loss %.3f", len(rows), len(ids), 150, time.Since(start).Seconds(), last["loss"])

	score := func(f form) answerScore {
		var s answerScore
		n := 0
		for _, rw := range rows {
			p, a := split(f, rw)
			var b gpt2.Batch
			b.Add(renumber(append(slices.Clone(p), a...)), len(p)-1)
			var out gpt2.Output
			if err := m.Forward(&b, 1, false, &out); err != nil {
				t.Fatal(err)
			}
			s.first += float64(out.LogP[0]) / float64(len(rows))
			for _, lp := range out.LogP[1:] {
				s.rest -= float64(lp)
				n++
			}
		}
		s.rest /= float64(n)
		return s
	}
	got := map[string]answerScore{}
	for _, f := range forms {
		got[f.name] = score(f)
		t.Logf("%-24s first token log-probability %7.2f, rest of the answer %.3f nats/token", f.name, got[f.name].first, got[f.name].rest)
	}
	if s := got[forms[0].name]; !(s.first > -2) {
		t.Errorf("under PolicyPrompt's prompt the answer's first token has log-probability %.2f, want > -2", s.first)
	}
	if s := got[forms[2].name]; !(s.first < -8) || math.IsNaN(s.first) {
		t.Errorf("under the fully padded prompt the answer's first token has log-probability %.2f, want < -8", s.first)
	}
}
