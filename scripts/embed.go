// Package scripts embeds the Lua modules recipes require (schedules, curriculum, recovery,
// evalkit, ...), so every rookscript binary carries them. A scripts/ directory beside a recipe
// takes precedence, for local edits (luabind logs each override); nothing else does.
package scripts

import "embed"

// FS holds the modules as NAME.lua.
//
//go:embed *.lua
var FS embed.FS
