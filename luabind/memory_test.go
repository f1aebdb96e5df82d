package luabind

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestMemoryLimitLeavesGOMEMLIMIT: with GOMEMLIMIT in the environment, rook.memory.limit
// leaves the runtime's limit as the user set it. (Without it, memory_test.lua's test_limit.)
func TestMemoryLimitLeavesGOMEMLIMIT(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "3GiB")
	debug.SetMemoryLimit(3 << 30) // what the runtime read from it at start-up
	out, err := runLua(t, Options{}, "limit.lua", `
		local got, set = require("rook").memory.limit("800 MiB")
		print(got, set)`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out); got != "3221225472\tfalse" || debug.SetMemoryLimit(-1) != 3<<30 {
		t.Fatalf("rook.memory.limit with GOMEMLIMIT set printed %q; limit now %d", got, debug.SetMemoryLimit(-1))
	}
}
