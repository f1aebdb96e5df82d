package main

import (
	"strconv"
	"strings"
	"testing"
)

// TestCustomLossRecipe: recipes/custom_loss.lua check=true takes one step three ways from one
// state and one batch, and prints last that rook.grpo.step and the primitives with the
// built-in loss give the same weights bit for bit, and that the GRPO loss written in Lua gives
// the built-in gradient within 1e-6 of its largest element.
func TestCustomLossRecipe(t *testing.T) {
	out := runRecipe(t, "--quiet", "../../recipes/custom_loss.lua", "check=true", "model=random:tiny")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("want two lines, got:\n%s", out)
	}
	if got := lines[len(lines)-2]; got != "max_abs_weight_diff_builtin=0" {
		t.Errorf("%s: want max_abs_weight_diff_builtin=0", got)
	}
	v, ok := strings.CutPrefix(lines[len(lines)-1], "max_rel_grad_diff_lua=")
	rel, err := strconv.ParseFloat(v, 64)
	if !ok || err != nil || !(rel <= 1e-6) {
		t.Errorf("%s: want max_rel_grad_diff_lua ≤ 1e-6", lines[len(lines)-1])
	}
}
