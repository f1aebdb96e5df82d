// Package scripts embeds the Lua modules recipes require (schedules, curriculum, recovery,
// evalkit), so every rookscript binary carries them. A scripts/ directory beside a recipe or
// in the working directory takes precedence, for local edits.
package scripts

import "embed"

// FS holds the modules as NAME.lua.
//
//go:embed *.lua
var FS embed.FS
