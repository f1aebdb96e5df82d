package rookworld

import (
	"context"
	"testing"

	"github.com/rookscript/rookscript/engine/tokenizer"
)

// TestTokenBounds: RookWorld prompts of either task, from positions of long random games,
// stay under MaxPromptTokens GPT-2 tokens, and the longest answers (a P: answer of five
// promotions with two-digit evaluations, an A: answer's FEN and flags) fit MaxAnswerTokens:
// the bounds KV caches and memory plans are sized with.
func TestTokenBounds(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGenerator(GeneratorOptions{Seed: 3, Style: StyleRandom, MinPly: 0, MaxPly: 300})
	if err != nil {
		t.Fatal(err)
	}
	mix := Mix{Task: MixBoth, EnvFraction: 0.5, Pad: true}
	longestPrompt, longestAnswer := 0, 0
	for i := range 400 {
		it, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range []string{MixPolicy, MixEnv} {
			p := mix.Prompt(it, int64(i), task)
			longestPrompt = max(longestPrompt, len(tok.Encode(p.Prompt)))
			if p.Move != "" {
				r, err := EnvStep(p.FEN, p.Move)
				if err != nil {
					t.Fatal(err)
				}
				longestAnswer = max(longestAnswer, len(tok.Encode(r.Completion())))
			}
		}
	}
	policy := PolicyCompletion([]string{"a7a8q", "b7b8q", "c7c8q", "d7d8q", "e7e8q"}, []float64{-99.99, -98.76, -87.65, -76.54, -65.43}, "a7a8q")
	longestAnswer = max(longestAnswer, len(tok.Encode(policy)))
	if longestPrompt >= MaxPromptTokens || longestAnswer > MaxAnswerTokens {
		t.Errorf("longest prompt %d tokens (bound %d), longest answer %d (bound %d)", longestPrompt, MaxPromptTokens, longestAnswer, MaxAnswerTokens)
	}
	t.Logf("longest prompt %d tokens, longest answer %d", longestPrompt, longestAnswer)
}
