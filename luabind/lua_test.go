package luabind_test

import (
	"testing"

	"github.com/rookscript/rookscript/luabind"
	"github.com/rookscript/rookscript/luabind/luatest"
)

// TestLuaAPI runs testdata/*_test.lua against module rook.
func TestLuaAPI(t *testing.T) {
	// Trusted: these test the API; sandbox_test.go tests the confinement.
	for _, f := range luatest.Files(t, "testdata") {
		t.Run(f, func(t *testing.T) { luatest.Run(t, f, luabind.Options{Quiet: true, Trust: true}) })
	}
}
