package scripts_test

import (
	"testing"

	"github.com/rookscript/rookscript/luabind"
	"github.com/rookscript/rookscript/luabind/luatest"
)

// TestLuaModules runs scripts/tests/*_test.lua.
func TestLuaModules(t *testing.T) {
	for _, f := range luatest.Files(t, "tests") {
		t.Run(f, func(t *testing.T) { luatest.Run(t, f, luabind.Options{Quiet: true}) })
	}
}
