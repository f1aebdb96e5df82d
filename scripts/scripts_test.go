package scripts_test

import (
	"testing"

	"github.com/rookscript/rookscript/luabind"
	"github.com/rookscript/rookscript/luabind/luatest"
)

// TestLuaModules runs scripts/tests/*_test.lua.
func TestLuaModules(t *testing.T) {
	// Trusted: these test the API; sandbox_test.go tests the confinement.
	for _, f := range luatest.Files(t, "tests") {
		t.Run(f, func(t *testing.T) { luatest.Run(t, f, luabind.Options{Quiet: true, Trust: true}) })
	}
}
