package luabind

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/internal/editdist"
	"github.com/rookscript/rookscript/scripts"
)

// docs/lua-api.md, the Lua API reference, is checked against what a script can reach: every
// function, constant and sub-table of module rook, every method, field and operator of its
// userdata types, and what the embedded modules (scripts/*.lua) export have one entry each,
// under the section of their module or type, and every entry names something that exists.
// The settings tables of option tables decoded from engine config structs are generated from
// those structs, with defaults as the binding builds them; their meaning column and all other
// prose are written by hand.
//
//	go test ./luabind -run APIDoc -update   rewrites the generated columns of the settings tables

var update = flag.Bool("update", false, "rewrite the generated parts of docs/lua-api.md")

// apiDocName is the reference's path in the repository (and in messages); apiDocFile is it
// from this package's directory, where tests run.
const (
	apiDocName = "docs/lua-api.md"
	apiDocFile = "../" + apiDocName
)

// TestAPIDoc fails, naming each entry, when docs/lua-api.md and the registered API differ.
func TestAPIDoc(t *testing.T) {
	raw, err := os.ReadFile(apiDocFile)
	if err != nil {
		t.Fatal(err)
	}
	ref := newAPIReference(t)
	text := string(raw)
	if *update {
		if text, err = updateSettings(ref.settings, text); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(apiDocFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range ref.problems(text) {
		t.Error(p)
	}
}

// TestAPIDocReportsDrift: the check names what a change to the API or to the document
// breaks — a deleted entry, a renamed method, a renamed or missing setting, an entry in the
// wrong section, a function documented as a value.
func TestAPIDocReportsDrift(t *testing.T) {
	raw, err := os.ReadFile(apiDocFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	ref := newAPIReference(t)
	cases := []struct {
		name   string
		mutate func(string) string
		want   []string
	}{
		{"entry deleted", dropLine("### rook.load("),
			[]string{"rook.load (a function of module rook) is not documented: add `### rook.load(…)` under `## Module rook`"}},
		{"method renamed", replace("### model:rollout(", "### model:rollout_all("),
			[]string{"model:rollout (a method of rook.model) is not documented",
				"model:rollout_all is documented but a script cannot reach it (did you mean model:rollout?)"}},
		{"field renamed", replace("### run.step →", "### run.steps →"),
			[]string{"run.step (a field of rook.run) is not documented",
				"run.steps is documented but a script cannot reach it (did you mean run.step?)"}},
		{"module function in another section", moveLine("### rook.clock(", "### rook.grpo.defaults("),
			[]string{"rook.clock is under `## Module rook.grpo`, want `## Module rook`"}},
		{"function written as a value", replace("### rook.exists(path)", "### rook.exists"),
			[]string{"rook.exists is a function: its heading needs an argument list"}},
		{"embedded module function deleted", dropLine("### curriculum.phase("),
			[]string{"curriculum.phase (a function of module curriculum) is not documented"}},
		{"constant changed", replace("### rook.eot = 50256", "### rook.eot = 50257"),
			[]string{"the document says rook.eot = 50257, but it is 50256"}},
		{"signature changed under a link", replace("### rook.adamw(model [, settings]) → adamw", "### rook.adamw(model, settings) → adamw"),
			[]string{"link #rookadamwmodel--settings--adamw names no heading"}},
		{"type section deleted", dropLine("## Type rook.config_error"),
			[]string{"no `## Type rook.config_error` section"}},
		{"setting renamed", replace("| `beta` |", "| `kl_beta` |"),
			[]string{"settings grpo: setting `beta` is missing",
				"settings grpo: row `kl_beta` is not a setting of rook.grpo.step (grpo.Config) (renamed or removed?)"}},
		{"nested setting renamed", replace("| `policy.best_rank` |", "| `policy.rank` |"),
			[]string{"settings reward: setting `policy.best_rank` is missing", "settings reward: row `policy.rank` is not a setting"}},
		{"settings taken from another table left unsaid", dropLine("And every setting of `rook.sft.loss`."),
			[]string{"settings sft: after the table want"}},
		{"setting's default changed", replace("| `max_grad_norm` | number | `1` |", "| `max_grad_norm` | number | `0.5` |"),
			[]string{"settings grpo: `max_grad_norm`: default is `1`, the table says `0.5`"}},
		{"setting without meaning", emptyMeaning("| `lr_warmup` |"),
			[]string{"settings adamw: `lr_warmup` has no meaning written"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mutated := c.mutate(doc)
			if mutated == doc {
				t.Fatal("the mutation did not change the document")
			}
			got := strings.Join(ref.problems(mutated), "\n")
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("want a problem containing %q, got:\n%s", w, got)
				}
			}
		})
	}
}

// TestTypeFields: a type's fields are read from the string cases of its index function's
// switch on L.CheckString(2), named or literal; an index function without one is an error,
// never an empty list of fields.
func TestTypeFields(t *testing.T) {
	cases := []struct {
		name, src string
		want      map[string]typeInfo
		err       string
	}{
		{"named index function", `package luabind
const aType = "rook.a"
func register(L *lua.LState) {
	registerType(L, aType, aMethods, aIndex)
	registerType(L, "rook.b", nil, nil)
}
func aIndex(L *lua.LState) int {
	if i, ok := L.Get(2).(lua.LNumber); ok {
		return item(L, int(i))
	}
	switch L.CheckString(2) {
	case "x", "y":
	case "z":
	default:
	}
	return 1
}`, map[string]typeInfo{"rook.a": {fields: []string{"x", "y", "z"}, indexed: true}, "rook.b": {}}, ""},
		{"literal index function", `package luabind
func register(L *lua.LState) {
	registerType(L, "rook.c", nil, func(L *lua.LState) int {
		switch L.CheckString(2) {
		case "w":
		}
		return 1
	})
}`, map[string]typeInfo{"rook.c": {fields: []string{"w"}}}, ""},
		{"no switch to read", `package luabind
func register(L *lua.LState) { registerType(L, "rook.d", nil, dIndex) }
func dIndex(L *lua.LState) int { return fields[L.CheckString(2)](L) }`, nil, "the index function of rook.d has no switch on L.CheckString(2)"},
		{"index function elsewhere", `package luabind
func register(L *lua.LState) { registerType(L, "rook.e", nil, other.Index) }`, nil, "the index function of rook.e is neither nil, a function name nor a literal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "types.go"), []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := typeFields(dir)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("want an error containing %q, got %v", c.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func dropLine(prefix string) func(string) string {
	return func(doc string) string {
		lines := strings.Split(doc, "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
		if i < 0 {
			return doc
		}
		return strings.Join(slices.Delete(lines, i, i+1), "\n")
	}
}

func replace(old, new string) func(string) string {
	return func(doc string) string { return strings.Replace(doc, old, new, 1) }
}

// moveLine moves the heading that starts with prefix (not its text) to just after the one
// that starts with after.
func moveLine(prefix, after string) func(string) string {
	return func(doc string) string {
		lines := strings.Split(doc, "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
		if i < 0 {
			return doc
		}
		moved := lines[i]
		lines = slices.Delete(lines, i, i+1)
		j := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, after) })
		if j < 0 {
			return doc
		}
		return strings.Join(slices.Insert(lines, j+1, "", moved, "Moved here.", ""), "\n")
	}
}

// emptyMeaning blanks the last cell of the table row that starts with prefix.
func emptyMeaning(prefix string) func(string) string {
	return func(doc string) string {
		lines := strings.Split(doc, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, prefix) {
				cells := splitRow(l)
				cells[len(cells)-1] = ""
				lines[i] = joinRow(cells)
			}
		}
		return strings.Join(lines, "\n")
	}
}

// apiReference is what the reference must say, read once from a fresh environment: the
// registered names and the generated settings tables.
type apiReference struct {
	reg      registered
	settings map[string]generatedTable
}

func newAPIReference(t *testing.T) *apiReference {
	t.Helper()
	env, err := New(Options{Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	ref := &apiReference{reg: registeredAPI(t, env.L), settings: map[string]generatedTable{}}
	specs := settingsSpecs()
	for name, spec := range specs {
		var err error
		if ref.settings[name], err = generateTable(env.L, spec, specs); err != nil {
			t.Fatalf("settings %s: %v", name, err)
		}
	}
	return ref
}

// problems lists every difference between doc and the registered API.
func (r *apiReference) problems(doc string) []string {
	problems := append(checkSettings(r.settings, doc), checkLinks(doc)...)
	entries, sections, parseProblems := parseAPIDoc(doc)
	problems = append(problems, parseProblems...)
	return append(problems, compareAPI(r.reg, entries, sections)...)
}

// An apiName is one thing a script can reach, or one entry of the reference.
type apiName struct {
	section string // "Module rook", "Module rook.grpo", "Type rook.model", "Module schedules"
	name    string // "rook.load", "rook.eot", "model:rollout", "model.random", "#batch", "batch[i]"
	call    bool   // a function or method: its heading has an argument list
	value   string // a constant as Lua writes it ("50256", `{ "a", "b" }`); in the document, what "NAME = …" says
	line    int    // an entry's heading line
	body    bool   // an entry has text under its heading
}

// what describes a registered name for messages: "a method of rook.model".
func (a apiName) what() string {
	owner, isType := strings.CutPrefix(a.section, "Type ")
	if isType {
		switch {
		case strings.HasPrefix(a.name, "#"):
			return "the length operator of " + owner
		case strings.HasSuffix(a.name, "[i]"):
			return "the index operator of " + owner
		case a.call:
			return "a method of " + owner
		}
		return "a field of " + owner
	}
	owner = strings.TrimPrefix(a.section, "Module ")
	switch {
	case strings.Contains(a.name, ":"):
		return "a method of the objects module " + owner + " makes"
	case a.call:
		return "a function of module " + owner
	}
	return "a value of module " + owner
}

// registered is what a script can reach: its names, and the sections they belong in (a type
// without methods or fields still has one).
type registered struct {
	names    []apiName
	sections []string
}

func (r *registered) add(a apiName) { r.names = append(r.names, a) }

// registeredAPI is everything a script can reach, found by walking the live module tables and
// type metatables; a type's fields, which its index function serves without a table to walk,
// come from that function's source.
func registeredAPI(t *testing.T, L *lua.LState) registered {
	t.Helper()
	var out registered
	walkModule(&out, "rook", requireModule(t, L, "rook"), true)

	fields, err := typeFields(".")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	L.G.Registry.ForEach(func(k, v lua.LValue) {
		name, ok := k.(lua.LString)
		mt, isTable := v.(*lua.LTable)
		if !ok || !isTable || !strings.HasPrefix(string(name), "rook.") {
			return
		}
		types = append(types, string(name))
		section := "Type " + string(name)
		out.sections = append(out.sections, section)
		recv := string(name)[strings.LastIndex(string(name), ".")+1:]
		if methods, ok := mt.RawGetString("__methods").(*lua.LTable); ok {
			methods.ForEach(func(_, m lua.LValue) {
				out.add(apiName{section: section, name: recv + ":" + m.String(), call: true})
			})
		}
		f, ok := fields[string(name)]
		if !ok {
			t.Errorf("type %s is registered, but no registerType call in luabind names it", name)
		}
		for _, field := range f.fields {
			out.add(apiName{section: section, name: recv + "." + field})
		}
		if f.indexed {
			out.add(apiName{section: section, name: recv + "[i]"})
		}
		mt.ForEach(func(k, _ lua.LValue) {
			switch k.String() {
			case "__index", "__name", "__tostring", "__methods", "__metatable": // __metatable: a confined recipe's read-only view
			case "__len":
				out.add(apiName{section: section, name: "#" + recv})
			case "__newindex": // a field set and read by name
				out.add(apiName{section: section, name: recv + ".NAME"})
			default:
				t.Errorf("type %s has metamethod %s, which TestAPIDoc does not know how to document", name, k)
			}
		})
	})
	for name := range fields {
		if !slices.Contains(types, name) {
			t.Errorf("registerType names type %s, but module rook does not register it", name)
		}
	}

	mods, err := fs.Glob(scripts.FS, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range mods {
		name := strings.TrimSuffix(file, ".lua")
		walkModule(&out, name, requireModule(t, L, name), false)
		src, err := fs.ReadFile(scripts.FS, file)
		if err != nil {
			t.Fatal(err)
		}
		// Methods of the objects a module's functions make ("function Policy:check(" → policy:check).
		for _, m := range luaMethod.FindAllStringSubmatch(string(src), -1) {
			out.add(apiName{section: "Module " + name, name: strings.ToLower(m[1]) + ":" + m[2], call: true})
		}
	}
	return out
}

var luaMethod = regexp.MustCompile(`(?m)^function ([A-Za-z_]\w*):([A-Za-z_]\w*)\(`)

func requireModule(t *testing.T, L *lua.LState, name string) *lua.LTable {
	t.Helper()
	if err := L.DoString(fmt.Sprintf("return require(%q)", name)); err != nil {
		t.Fatal(err)
	}
	mod, ok := L.Get(-1).(*lua.LTable)
	L.Pop(1)
	if !ok {
		t.Fatalf("module %s is not a table", name)
	}
	return realTable(mod) // a confined recipe sees a read-only view of it
}

// walkModule lists a module's functions and values; with sub, its tables are sub-modules
// (rook.grpo) walked in turn, else values (curriculum.ALL).
func walkModule(out *registered, path string, mod *lua.LTable, sub bool) {
	section := "Module " + path
	out.sections = append(out.sections, section)
	mod.ForEach(func(k, v lua.LValue) {
		name := path + "." + k.String()
		switch v := v.(type) {
		case *lua.LFunction:
			out.add(apiName{section: section, name: name, call: true})
		case *lua.LTable:
			if sub {
				walkModule(out, name, v, true)
				return
			}
			out.add(apiName{section: section, name: name, value: luaLiteral(v)})
		default:
			out.add(apiName{section: section, name: name, value: luaLiteral(v)})
		}
	})
}

// luaLiteral writes a constant as Lua source: a number, a string, a boolean, or a list of
// those; "" for anything else.
func luaLiteral(v lua.LValue) string {
	switch v := v.(type) {
	case lua.LNumber:
		return strconv.FormatFloat(float64(v), 'g', -1, 64)
	case lua.LString:
		return strconv.Quote(string(v))
	case lua.LBool:
		return strconv.FormatBool(bool(v))
	case *lua.LTable:
		n, items := 0, []string{}
		v.ForEach(func(lua.LValue, lua.LValue) { n++ })
		for i := 1; i <= v.Len(); i++ {
			item := luaLiteral(v.RawGetInt(i))
			if item == "" || strings.HasPrefix(item, "{") {
				return ""
			}
			items = append(items, item)
		}
		if n != len(items) {
			return ""
		}
		if n == 0 {
			return "{}"
		}
		return "{ " + strings.Join(items, ", ") + " }"
	}
	return ""
}

// typeInfo is what a type's index function serves besides its methods.
type typeInfo struct {
	fields  []string // the string cases of its switch on L.CheckString(2)
	indexed bool     // it also takes a number: ud[i]
}

// typeFields reads the Go source of package luabind in dir: for each registerType(L, name,
// methods, index) call, the fields its index function serves.
func typeFields(dir string) (map[string]typeInfo, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	consts := map[string]string{}
	funcs := map[string]*ast.FuncDecl{}
	var parsed []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, file)
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					funcs[d.Name.Name] = d
				}
			case *ast.GenDecl:
				if d.Tok != token.CONST {
					continue
				}
				for _, s := range d.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := stringLit(vs.Values[i]); ok {
								consts[n.Name] = s
							}
						}
					}
				}
			}
		}
	}
	out := map[string]typeInfo{}
	for _, file := range parsed {
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isIdent(call.Fun, "registerType") || len(call.Args) != 4 {
				return true
			}
			pos := fset.Position(call.Pos())
			name, ok := stringLit(call.Args[1])
			if id, isID := call.Args[1].(*ast.Ident); isID {
				name, ok = consts[id.Name]
			}
			if !ok {
				err = fmt.Errorf("%s: registerType's type name is not a string constant", pos)
				return false
			}
			var body *ast.BlockStmt
			switch f := call.Args[3].(type) {
			case *ast.Ident:
				if f.Name == "nil" {
					out[name] = typeInfo{}
					return false
				}
				decl, found := funcs[f.Name]
				if !found {
					err = fmt.Errorf("%s: index function %s of %s not found", pos, f.Name, name)
					return false
				}
				body = decl.Body
			case *ast.FuncLit:
				body = f.Body
			default:
				err = fmt.Errorf("%s: the index function of %s is neither nil, a function name nor a literal", pos, name)
				return false
			}
			info, found := indexCases(body)
			if !found {
				err = fmt.Errorf("%s: the index function of %s has no switch on L.CheckString(2) to read its fields from", pos, name)
				return false
			}
			out[name] = info
			return false
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// indexCases reads an index function: the string cases of its switch on L.CheckString(2), and
// whether it takes L.Get(2) as a number.
func indexCases(body *ast.BlockStmt) (typeInfo, bool) {
	var info typeInfo
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SwitchStmt:
			if !isCallWith(n.Tag, "CheckString", "2") {
				return true
			}
			found = true
			for _, c := range n.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					if s, ok := stringLit(e); ok {
						info.fields = append(info.fields, s)
					}
				}
			}
		case *ast.TypeAssertExpr:
			if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "LNumber" && isCallWith(n.X, "Get", "2") {
				info.indexed = true
			}
		}
		return true
	})
	return info, found
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// isCallWith reports whether e is a call x.method(arg).
func isCallWith(e ast.Expr, method, arg string) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	lit, isLit := call.Args[0].(*ast.BasicLit)
	return ok && sel.Sel.Name == method && isLit && lit.Value == arg
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// The reference's shape: "## Module NAME" and "## Type NAME" sections hold the entries, one
// "### " heading each:
//
//	### rook.load(source [, opts]) → model | nil, err      a function or method
//	### rook.eot = 50256                                   a constant
//	### model.random → boolean                             a field
//	### #batch → integer, ### batch[i] → completion        operators
var (
	sectionHeading = regexp.MustCompile(`^## (?:Module|Type) [A-Za-z_][\w.]*$`)
	entryHeading   = regexp.MustCompile(`^### (#?)([A-Za-z_]\w*(?:[.:][A-Za-z_]\w*)*)(\[i\])?(.*)$`)
)

// A docSection is a "## Module" or "## Type" heading.
type docSection struct {
	name string // "Module rook.grpo"
	line int
}

// parseAPIDoc reads the entries and sections of the reference.
func parseAPIDoc(doc string) ([]apiName, []docSection, []string) {
	var (
		entries  []apiName
		sections []docSection
		problems []string
		section  string
		fenced   bool
		seen     = map[string]int{}
	)
	for i, line := range strings.Split(doc, "\n") {
		n := i + 1
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		switch {
		case strings.HasPrefix(line, "## "):
			section = ""
			if sectionHeading.MatchString(line) {
				section = strings.TrimPrefix(line, "## ")
				sections = append(sections, docSection{section, n})
			}
		case strings.HasPrefix(line, "### "):
			e, err := parseEntry(line)
			switch {
			case err != "":
				problems = append(problems, fmt.Sprintf("%s:%d: %s", apiDocName, n, err))
				continue
			case section == "":
				problems = append(problems, fmt.Sprintf("%s:%d: %s is outside a `## Module` or `## Type` section", apiDocName, n, e.name))
				continue
			}
			if first, dup := seen[e.name]; dup {
				problems = append(problems, fmt.Sprintf("%s:%d: %s is documented twice (first at line %d)", apiDocName, n, e.name, first))
				continue
			}
			seen[e.name] = n
			e.section, e.line = section, n
			entries = append(entries, e)
		case strings.HasPrefix(line, "#"):
			// A "####" heading inside an entry (its settings, an example) is part of it.
		case strings.TrimSpace(line) != "" && len(entries) > 0 && entries[len(entries)-1].section == section:
			entries[len(entries)-1].body = true
		}
	}
	return entries, sections, problems
}

// checkLinks reports links to headings of the document that none has: a heading's anchor
// changes with its arguments, so a changed signature must not leave a dead link behind.
func checkLinks(doc string) []string {
	anchors := map[string]bool{}
	fenced := false
	lines := strings.Split(doc, "\n")
	for _, line := range lines {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && !fenced && strings.HasPrefix(line, "#") {
			anchors[slug(h)] = true
		}
	}
	var problems []string
	for i, line := range lines {
		for _, m := range docLink.FindAllStringSubmatch(line, -1) {
			if !anchors[m[1]] {
				problems = append(problems, fmt.Sprintf("%s:%d: link #%s names no heading", apiDocName, i+1, m[1]))
			}
		}
	}
	return problems
}

var docLink = regexp.MustCompile(`\]\(#([^)]+)\)`)

// slug is a heading's anchor as GitHub makes it: lower case, spaces as hyphens, letters,
// digits, hyphens and underscores kept, everything else dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// parseEntry reads an entry heading; err says what is wrong with its shape.
func parseEntry(line string) (apiName, string) {
	m := entryHeading.FindStringSubmatch(line)
	if m == nil {
		return apiName{}, fmt.Sprintf("heading %q is not an entry: want NAME(args) → results, NAME → type or NAME = value", line)
	}
	operator, name, index, rest := m[1] != "", m[2], m[3] != "", m[4]
	e := apiName{name: m[1] + name + m[3]}
	switch {
	case operator || index:
		if rest != "" && !strings.HasPrefix(rest, " → ") {
			return e, fmt.Sprintf("heading %q: an operator entry is `#x → type` or `x[i] → type`", line)
		}
	case strings.HasPrefix(rest, "("):
		e.call = true
	case strings.HasPrefix(rest, " = "):
		e.value = strings.TrimPrefix(rest, " = ")
	case rest != "" && !strings.HasPrefix(rest, " → "):
		return e, fmt.Sprintf("heading %q is not an entry: want NAME(args) → results, NAME → type or NAME = value", line)
	}
	return e, ""
}

// compareAPI lists what differs between the registered names and the reference's entries.
func compareAPI(reg registered, entries []apiName, sections []docSection) []string {
	var problems []string
	documented := map[string]apiName{}
	for _, e := range entries {
		documented[e.name] = e
	}
	byName := map[string]apiName{}
	var names []string
	for _, r := range reg.names {
		byName[r.name] = r
		names = append(names, r.name)
	}
	slices.Sort(names)
	for _, name := range names {
		r := byName[name]
		e, ok := documented[name]
		switch {
		case !ok:
			shape := " → …"
			if r.call {
				shape = "(…)"
			}
			problems = append(problems, fmt.Sprintf("%s (%s) is not documented: add `### %s%s` under `## %s`", name, r.what(), name, shape, r.section))
			continue
		case e.section != r.section:
			problems = append(problems, fmt.Sprintf("%s:%d: %s is under `## %s`, want `## %s`", apiDocName, e.line, name, e.section, r.section))
		case r.call && !e.call:
			problems = append(problems, fmt.Sprintf("%s:%d: %s is a function: its heading needs an argument list", apiDocName, e.line, name))
		case !r.call && e.call:
			problems = append(problems, fmt.Sprintf("%s:%d: %s is not a function: its heading takes no argument list", apiDocName, e.line, name))
		case e.value != "" && r.value == "":
			problems = append(problems, fmt.Sprintf("%s:%d: %s is not a constant a heading can write: use `### %s → type`", apiDocName, e.line, name, name))
		case e.value != "" && e.value != r.value:
			problems = append(problems, fmt.Sprintf("%s:%d: the document says %s = %s, but it is %s", apiDocName, e.line, name, e.value, r.value))
		}
		if !e.body {
			problems = append(problems, fmt.Sprintf("%s:%d: %s has no description", apiDocName, e.line, name))
		}
	}
	for _, e := range entries {
		if _, ok := byName[e.name]; !ok {
			problems = append(problems, fmt.Sprintf("%s:%d: %s is documented but a script cannot reach it%s", apiDocName, e.line, e.name, closest(e.name, names)))
		}
	}
	want := slices.Sorted(slices.Values(reg.sections))
	for _, s := range want {
		if !slices.ContainsFunc(sections, func(d docSection) bool { return d.name == s }) {
			problems = append(problems, fmt.Sprintf("no `## %s` section", s))
		}
	}
	for _, d := range sections {
		if !slices.Contains(want, d.name) {
			problems = append(problems, fmt.Sprintf("%s:%d: `## %s` names no module or type a script can reach", apiDocName, d.line, d.name))
		}
	}
	return problems
}

// closest proposes the registered name nearest to a documented one, for a rename.
func closest(name string, names []string) string {
	best, bestD := "", max(3, len(name)/3)+1
	for _, n := range names {
		if d := editdist.Levenshtein(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}
