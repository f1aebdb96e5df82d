package luabind

import (
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// TestOffPolicyNamesTheStep (DESIGN §6.1): a recorded logprob that is not the policy's
// forward bit for bit stops rook.grpo.step before any update, and inside a run the error
// names the run's step as well as the completion and the token.
func TestOffPolicyNamesTheStep(t *testing.T) {
	e, err := New(Options{Quiet: true, Trust: true, Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.DoString(t.Context(), `
		rook = require("rook")
		policy = rook.load("random:tiny")
		opt = rook.adamw(policy)
		run = assert(rook.run{ dir = "`+filepath.Join(t.TempDir(), "run")+`", policy = policy, opt = opt })
		b = policy:rollout({ "a" }, { group = 4, max_new_tokens = 4, seed = 1 })
		b:set_rewards({ 1, 0, 0, 1 })
		rook.grpo.step(policy, nil, opt, b)
		run:log(1, { loss = 0 })
		b = policy:rollout({ "a" }, { group = 4, max_new_tokens = 4, seed = 2 })
		b:set_rewards({ 1, 0, 0, 1 })`, "off.lua"); err != nil {
		t.Fatal(err)
	}
	c := &e.L.GetGlobal("b").(*lua.LUserData).Value.(*batch).b.Completions[2]
	c.LogProbs[1] = math.Nextafter32(c.LogProbs[1], 0)
	err = e.DoString(t.Context(), "rook.grpo.step(policy, nil, opt, b)", "off.lua")
	for _, want := range []string{"step 2 of the run in ", "completion 2 (prompt 0) token 1", "DESIGN §6.1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("an off-policy logprob: %v, want an error saying %q", err, want)
		}
	}
}
