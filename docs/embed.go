// Package docs embeds the Lua API reference, lua-api.md, so that the REPL's help() can print
// its entries from any rookscript binary.
package docs

import _ "embed"

// LuaAPI is docs/lua-api.md.
//
//go:embed lua-api.md
var LuaAPI string
