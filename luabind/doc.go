// Package luabind is the Lua face of rookscript: module "rook" for gopher-lua, and the
// environment that runs recipes and the REPL. It is the only package that imports
// gopher-lua; everything numeric happens in engine/*, called a few times per step.
//
// Conventions (after gopher-lua-libs): one loader for the module; typed userdata with
// namespaced metatables ("rook.model", "rook.batch", ...) and checkX(L, n) helpers; option
// tables whose unknown keys are errors naming the key; misuse raises a Lua error carrying the
// recipe's file:line; expected failures (a missing file, an unreachable engine) return
// nil, err. Long Go calls take the state's context, so Ctrl-C in the REPL or a cancelled run
// stops them between decode steps and micro-batches.
package luabind
