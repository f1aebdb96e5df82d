package luabind

import (
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/docs"
	"github.com/rookscript/rookscript/scripts"
)

// The REPL's help: the entries of docs/lua-api.md, which is embedded in the binary, found by
// the value a user has at hand (help(rook.grpo.step), help(policy)) or by name
// (help "model:score").

// apiEntry is one entry of the reference: its heading and its text.
type apiEntry struct{ section, heading, text string }

// apiHeading reads the name an entry's heading documents: "rook.grpo.step" of
// "### rook.grpo.step(policy, …) → metrics", "model.random" of "### model.random → boolean".
var apiHeading = regexp.MustCompile(`^### ([#]?[A-Za-z_][\w.:]*(?:\[i\])?)`)

// apiEntries are docs/lua-api.md's entries by name, and its sections in order with the names
// under each.
func apiEntries() (map[string]apiEntry, []string, map[string][]string) {
	entries, under := map[string]apiEntry{}, map[string][]string{}
	var sections []string
	section, name := "", ""
	var text strings.Builder
	flush := func() {
		if name != "" {
			e := entries[name]
			e.text = strings.TrimSpace(text.String())
			entries[name] = e
		}
		name = ""
		text.Reset()
	}
	for _, line := range strings.Split(docs.LuaAPI, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			flush()
			section = strings.TrimPrefix(line, "## ")
			sections = append(sections, section)
		case strings.HasPrefix(line, "### "):
			flush()
			if m := apiHeading.FindStringSubmatch(line); m != nil {
				name = m[1]
				entries[name] = apiEntry{section: section, heading: strings.TrimPrefix(line, "### ")}
				under[section] = append(under[section], name)
			}
		case name != "":
			text.WriteString(line + "\n")
		}
	}
	flush()
	return entries, sections, under
}

// helpName is the reference's name of a value: a function of module rook or of an embedded
// module, a method of a type, a module table, or a userdata's type.
func (e *Env) helpName(v lua.LValue) string {
	L := e.L
	switch x := v.(type) {
	case lua.LString:
		return string(x)
	case *lua.LUserData:
		return "Type " + describe(x)
	}
	found := ""
	var walk func(path string, t *lua.LTable, depth int)
	walk = func(path string, t *lua.LTable, depth int) {
		if t == v {
			found = "Module " + path
		}
		realTable(t).ForEach(func(k, val lua.LValue) {
			if found != "" {
				return
			}
			name := path + "." + k.String()
			switch val := val.(type) {
			case *lua.LFunction:
				if val == v {
					found = name
				}
			case *lua.LTable:
				if depth < 3 {
					walk(name, val, depth+1)
				}
			}
		})
	}
	if rook, ok := e.rookModule().(*lua.LTable); ok {
		walk("rook", rook, 0)
	}
	if found == "" {
		mods, _ := fs.Glob(scripts.FS, "*.lua")
		loaded, _ := L.GetField(L.GetGlobal("package"), "loaded").(*lua.LTable)
		for _, f := range mods {
			mod := strings.TrimSuffix(f, ".lua")
			if loaded == nil {
				break
			}
			if t, ok := realTable(loaded).RawGetString(mod).(*lua.LTable); ok && found == "" {
				walk(mod, t, 1)
			}
		}
	}
	if found == "" {
		L.G.Registry.ForEach(func(k, val lua.LValue) {
			typ, ok := strings.CutPrefix(k.String(), methodsKey)
			t, isTable := val.(*lua.LTable)
			if !ok || !isTable || found != "" {
				return
			}
			t.ForEach(func(m, f lua.LValue) {
				if f == v {
					found = typ[strings.LastIndex(typ, ".")+1:] + ":" + m.String()
				}
			})
		})
	}
	return found
}

// helpText is what help prints for a name: its entry, a section's list of entries, or the
// index of modules and types.
func helpText(name string) string {
	entries, sections, under := apiEntries()
	if name == "" {
		var b strings.Builder
		b.WriteString("help(x) prints the reference entry of a function, method, module or value x (or of a name: help \"model:score\").\n")
		for _, s := range sections {
			if len(under[s]) == 0 {
				continue
			}
			fmt.Fprintf(&b, "  %-24s %d entries\n", s, len(under[s]))
		}
		return b.String()
	}
	if list, ok := under[name]; ok {
		var b strings.Builder
		b.WriteString(name + ":\n")
		for _, n := range list {
			b.WriteString("  " + entries[n].heading + "\n")
		}
		return b.String()
	}
	if _, ok := under["Module "+name]; ok {
		return helpText("Module " + name)
	}
	if e, ok := entries[name]; ok {
		return e.heading + "\n\n" + e.text + "\n"
	}
	// A method or field named without its type: the one entry that ends so.
	var hits []string
	for n := range entries {
		if strings.HasSuffix(n, ":"+name) || strings.HasSuffix(n, "."+name) {
			hits = append(hits, n)
		}
	}
	sort.Strings(hits)
	switch len(hits) {
	case 1:
		return helpText(hits[0])
	case 0:
		return fmt.Sprintf("no entry for %q in the reference; help() lists its sections\n", name)
	}
	return fmt.Sprintf("%q is one of: %s\n", name, strings.Join(hits, ", "))
}

// luaHelp is the global help([x]) of the REPL.
func (e *Env) luaHelp(L *lua.LState) int {
	name := ""
	if L.GetTop() > 0 {
		if name = e.helpName(L.Get(1)); name == "" {
			fmt.Fprintf(e.out, "no reference entry for this %s (help() lists the modules and types)\n", L.Get(1).Type())
			return 0
		}
	}
	fmt.Fprint(e.out, helpText(name))
	return 0
}

// InstallHelp defines the global help([x]), which prints docs/lua-api.md's entry of x: what
// the REPL offers a user exploring the API.
func (e *Env) InstallHelp() {
	e.L.SetGlobal("help", e.L.NewFunction(e.luaHelp))
}
