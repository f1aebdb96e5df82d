package luabind

import (
	"context"
	"math"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// TestReferenceMixup: run:sync_reference(step, alpha) makes the reference TRL's
// ref.mul_(1 − α).add_(policy, alpha=α), each product rounded to float32; the checkpoint
// records the mix's step and α, and a resume restores the mixed weights bit for bit (their
// hash is checked) and names the history.
func TestReferenceMixup(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	e, err := New(Options{Stdout: &out, Trust: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	err = e.DoString(context.Background(), `
		local rook = require("rook")
		policy = rook.load("random:tiny")
		ref = policy:reference()
		local opt = rook.adamw(policy, { lr = 1e-2 })
		run = assert(rook.run{ dir = "`+dir+`", policy = policy, ref = ref, opt = opt })
		local b = policy:rollout({ "a", "b" }, { group = 4, max_new_tokens = 4, seed = 7 })
		b:set_rewards({ 1, 0, 0, 1, 0, 1, 1, 0 })
		rook.grpo.step(policy, ref, opt, b, { beta = 0.1 })
		run:log(1, {})
	`, "mix.lua")
	if err != nil {
		t.Fatal(err)
	}
	pol := e.L.GetGlobal("policy").(*lua.LUserData).Value.(*model)
	ref := e.L.GetGlobal("ref").(*lua.LUserData).Value.(*model)
	p, r := pol.m.ParamsHost(), ref.m.ParamsHost()
	const alpha = 0.6
	if err := e.DoString(context.Background(), `mixed = run:sync_reference(1, 0.6); run:save(1); run:close()`, "sync.lua"); err != nil {
		t.Fatal(err)
	}
	got := ref.m.ParamsHost()
	moved := 0
	for i := range got {
		want := float32(r[i]*float32(1-alpha)) + float32(p[i]*float32(alpha))
		if math.Float32bits(got[i]) != math.Float32bits(want) {
			t.Fatalf("param %d: %g, want (1−α)·%g + α·%g = %g", i, got[i], r[i], p[i], want)
		}
		// Against the formula in float64: within float32 rounding.
		if d := math.Abs(float64(got[i]) - ((1-alpha)*float64(r[i]) + alpha*float64(p[i]))); d > 1e-6*math.Max(1, math.Abs(float64(p[i]))) {
			t.Fatalf("param %d off the formula by %g", i, d)
		}
		if p[i] != r[i] {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("the step did not move the policy: the mix tests nothing")
	}
	mixed := lua.LVAsString(e.L.GetGlobal("mixed"))

	out.Reset()
	e2, err := New(Options{Stdout: &out, Trust: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	err = e2.DoString(context.Background(), `
		local rook = require("rook")
		local p2 = rook.load("random:tiny")
		local run2 = assert(rook.run{ resume = "`+dir+`", policy = p2, opt = rook.adamw(p2, { lr = 1e-2 }) })
		hash = run2.ref:hash()
		run2:close()
	`, "resume.lua")
	if err != nil {
		t.Fatal(err)
	}
	if h := lua.LVAsString(e2.L.GetGlobal("hash")); h != mixed {
		t.Fatalf("resumed reference %s, want the mixed %s", h, mixed)
	}
	if !strings.Contains(out.String(), "mixed with the policy at step 1 (alpha 0.6)") {
		t.Fatalf("the resume does not name the mix:\n%s", out.String())
	}
	if _, err := runLua(t, Options{Trust: true, Quiet: true}, "bad.lua", `
		local rook = require("rook")
		local policy = rook.load("random:tiny")
		local run = assert(rook.run{ dir = "`+t.TempDir()+`", policy = policy, ref = policy:reference(), opt = rook.adamw(policy) })
		run:sync_reference(0, 1.5)`); err == nil || !strings.Contains(err.Error(), "alpha must be in (0, 1], got 1.5") {
		t.Fatalf("alpha 1.5: %v", err)
	}
}
