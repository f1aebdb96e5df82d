package luabind_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/luabind"
)

// TestShapedBatchWarnsOnce: training on a top-k batch prints one warning per policy, in
// the recipe's output; --quiet silences it.
func TestShapedBatchWarnsOnce(t *testing.T) {
	const src = `
		local rook = require("rook")
		local policy = rook.load("random:tiny")
		local opt = rook.adamw(policy, { lr = 1e-3 })
		for seed = 1, 3 do
			local b = policy:rollout({ "a" }, { group = 4, max_new_tokens = 3, seed = seed, top_k = 5 })
			b:set_rewards({ 1, 0, 0.5, 0.25 })
			rook.grpo.step(policy, nil, opt, b)
		end`
	for _, quiet := range []bool{false, true} {
		var out strings.Builder
		e, err := luabind.New(luabind.Options{Stdout: &out, Quiet: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.DoString(context.Background(), src, "shaped.lua"); err != nil {
			t.Fatal(err)
		}
		e.Close()
		const want = "warning: rook.grpo.step: the batch was sampled with top_k = 5, but the ratio and the KL use the full softmax(logits/1)"
		n := strings.Count(out.String(), "warning:")
		switch {
		case quiet && n != 0:
			t.Errorf("--quiet printed %d warnings:\n%s", n, out.String())
		case !quiet && (n != 1 || !strings.Contains(out.String(), want)):
			t.Errorf("got %d warnings, want one saying %q:\n%s", n, want, out.String())
		}
	}
}
