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
	"reflect"
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
		{"signature changed under a link", replace("### rook.adamw(model [, opts]) → adamw", "### rook.adamw(model, opts) → adamw"),
			[]string{"link #rookadamwmodel--opts--adamw names no heading"}},
		{"type section deleted", dropLine("## Type rook.config_error"),
			[]string{"no `## Type rook.config_error` section"}},
		{"setting renamed", replace("| `beta` |", "| `kl_beta` |"),
			[]string{"settings grpo: setting `beta` is missing",
				"settings grpo: row `kl_beta` is not a setting of rook.grpo.step (grpo.Config) (renamed or removed?)"}},
		{"nested setting renamed", replace("| `policy.best_rank` |", "| `policy.rank` |"),
			[]string{"settings reward: setting `policy.best_rank` is missing", "settings reward: row `policy.rank` is not a setting"}},
		{"settings taken from another table left unsaid", dropLine("And every setting of `rook.reward.chess`."),
			[]string{"settings eval: after the table want"}},
		{"setting's default changed", replace("| `max_grad_norm` |  | number | `1` |", "| `max_grad_norm` |  | number | `0.5` |"),
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
	specs, err := settingsSpecs()
	if err != nil {
		t.Fatal(err)
	}
	for name, spec := range specs {
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
			case "__index", "__name", "__tostring", "__methods":
			case "__len":
				out.add(apiName{section: section, name: "#" + recv})
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
	return mod
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

// Settings tables. An option table decoded from a config struct documents its settings in a
// table between "<!-- settings NAME -->" and "<!-- end settings -->": one row per setting, in
// declaration order (a nested struct's as "policy.format"), with its canonical name, the other
// names it accepts, its type (an enum-like type's values), its defaults as the binding builds
// them (one column per set of defaults), and its meaning, written by hand. Settings a struct
// embeds from another documented struct (rook.eval's reward settings) are not repeated: a
// line after the table names that table.

// A settingsSpec is a documented option struct and how the binding builds its defaults.
type settingsSpec struct {
	call    string       // the Lua call that reads it, for messages
	typ     reflect.Type // decoded by decodeOptions: its schema is exactly what the call accepts
	headers []string     // one per column of defaults; none when the call's defaults are not reachable
	// defaults returns each column's defaults as the binding builds them, for two successive
	// calls: a setting that differs between them (a seed drawn per call) is shown as such.
	defaults func(L *lua.LState) (first, second []any, err error)
}

// groupDefaults say how each setting group (settingGroups: what rook.check and rook.settings
// know) gets its defaults; every group must have an entry.
var groupDefaults = map[string]settingsSpec{
	"grpo": {headers: []string{"default", "with `trl_compat = true`"},
		defaults: func(L *lua.LState) ([]any, []any, error) {
			d, err := grpoOptions(nil)
			if err != nil {
				return nil, nil, err
			}
			t := L.NewTable()
			t.RawSetString("trl_compat", lua.LTrue)
			trl, err := grpoOptions(t)
			return []any{d, trl}, []any{d, trl}, err
		}},
	"rollout": {headers: []string{"default"},
		defaults: func(L *lua.LState) ([]any, []any, error) {
			// The group a rollout gets without one, from a real call; the rest from the
			// binding's reading of an empty option table, twice on one model.
			if err := L.DoString(`return require("rook").load("random:tiny"):rollout({ "a" }, { max_new_tokens = 1 }).group`); err != nil {
				return nil, nil, err
			}
			group := L.ToInt(-1)
			L.Pop(1)
			m := &model{}
			return []any{m.sampling(L, nil, "model:rollout", group)}, []any{m.sampling(L, nil, "model:rollout", group)}, nil
		}},
	"adamw": {headers: []string{"default"},
		defaults: func(*lua.LState) ([]any, []any, error) {
			o, err := readAdamW(nil)
			return []any{o}, []any{o}, err
		}},
	"reward": {headers: []string{"default"},
		defaults: func(*lua.LState) ([]any, []any, error) {
			c, _, err := rewardOptions(nil)
			return []any{c}, []any{c}, err
		}},
	"stockfish": {headers: []string{"default"},
		defaults: func(*lua.LState) ([]any, []any, error) {
			c, err := stockfishOptions(nil)
			return []any{c}, []any{c}, err
		}},
	"eval": {headers: []string{"default"},
		defaults: func(*lua.LState) ([]any, []any, error) {
			// readEval hands its defaults on as the rollout and reward configs it builds.
			c, r, _, err := readEval(nil)
			o := evalOptions{MaxNewTokens: c.MaxNewTokens, Temperature: c.Temperature, Greedy: c.Greedy, Seed: c.Seed, RewardConfig: r}
			return []any{o}, []any{o}, err
		}},
}

// settingsSpecs are every documented option struct: the setting groups, and rook.sft's
// options, whose defaults live inside their calls (the meaning column gives them).
func settingsSpecs() (map[string]settingsSpec, error) {
	specs := map[string]settingsSpec{
		"sft.step": {call: "rook.sft.step", typ: reflect.TypeFor[sftStepOptions]()},
		"sft.loss": {call: "rook.sft.loss", typ: reflect.TypeFor[sftLossOptions]()},
	}
	for _, g := range settingGroups {
		spec, ok := groupDefaults[g.name]
		if !ok {
			return nil, fmt.Errorf("setting group %q (%s) has no entry in groupDefaults: say how the binding builds its defaults", g.name, g.call)
		}
		spec.call, spec.typ = g.call, g.typ
		specs[g.name] = spec
	}
	return specs, nil
}

var settingsOpen = regexp.MustCompile(`^<!-- settings (\S+) -->$`)

const settingsClose = "<!-- end settings -->"

// A settingsBlock is a settings table's lines: the markers at begin and end.
type settingsBlock struct {
	name       string
	begin, end int
}

func settingsBlocks(lines []string) ([]settingsBlock, []string) {
	var blocks []settingsBlock
	var problems []string
	for i := 0; i < len(lines); i++ {
		m := settingsOpen.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		end := slices.Index(lines[i:], settingsClose)
		if end < 0 {
			problems = append(problems, fmt.Sprintf("%s:%d: settings %s has no %q", apiDocName, i+1, m[1], settingsClose))
			break
		}
		blocks = append(blocks, settingsBlock{name: m[1], begin: i, end: i + end})
		i += end
	}
	return blocks, problems
}

// A generatedTable is a settings table as its struct makes it: the header row, each
// setting's generated cells (all but the meaning), and the lines after the table.
type generatedTable struct {
	what     string
	columns  []string // the generated columns' names
	header   string
	rows     [][]string
	aliases  map[string][]string // setting → its other names
	includes []string            // the calls whose settings this one takes as well
}

// trailer is what follows the table in its block.
func (g generatedTable) trailer() []string {
	if len(g.includes) == 0 {
		return nil
	}
	return []string{"", "And every setting of " + codeList(g.includes) + "."}
}

func generateTable(L *lua.LState, spec settingsSpec, specs map[string]settingsSpec) (generatedTable, error) {
	g := generatedTable{what: spec.call + " (" + spec.typ.String() + ")",
		columns: append([]string{"setting", "also accepted", "type"}, spec.headers...), aliases: map[string][]string{}}
	g.header = joinRow(append(slices.Clone(g.columns), "meaning"))
	var first, second []reflect.Value
	if spec.defaults != nil {
		a, b, err := spec.defaults(L)
		if err != nil {
			return g, err
		}
		for i := range a {
			first, second = append(first, reflect.ValueOf(a[i])), append(second, reflect.ValueOf(b[i]))
		}
	}
	documented := map[reflect.Type]string{}
	for _, other := range specs {
		if other.typ != spec.typ {
			documented[other.typ] = other.call
		}
	}
	return g, g.add(spec.typ, "", first, second, documented)
}

// add appends the rows of struct type t's settings, named under prefix; first and second
// hold t's values in each column of defaults.
func (g *generatedTable) add(t reflect.Type, prefix string, first, second []reflect.Value, documented map[reflect.Type]string) error {
	s := schemaOf(t)
	for _, name := range s.names {
		f := s.fields[name]
		if call := embeddedFrom(t, f.index, documented); call != "" {
			if !slices.Contains(g.includes, call) {
				g.includes = append(g.includes, call)
			}
			continue
		}
		a, b := make([]reflect.Value, len(first)), make([]reflect.Value, len(second))
		for c := range first {
			a[c], b[c] = first[c].FieldByIndex(f.index), second[c].FieldByIndex(f.index)
		}
		if f.typ.Kind() == reflect.Struct {
			if err := g.add(f.typ, prefix+name+".", a, b, nil); err != nil {
				return err
			}
			continue
		}
		typ, err := settingType(f.typ)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", g.what, prefix+name, err)
		}
		aliases := make([]string, len(f.aliases))
		for i, al := range f.aliases {
			aliases[i] = prefix + al
		}
		row := []string{code(prefix + name), codeList(aliases), typ}
		for c := range a {
			va, vb := settingValue(a[c]), settingValue(b[c])
			if va == vb {
				row = append(row, code(va))
			} else {
				row = append(row, code(va)+", "+code(vb)+", … (one per call)")
			}
		}
		g.rows = append(g.rows, row)
		g.aliases[prefix+name] = aliases
	}
	return nil
}

// embeddedFrom returns the call whose documented struct a setting at index of struct t is
// embedded from, or "".
func embeddedFrom(t reflect.Type, index []int, documented map[reflect.Type]string) string {
	for i := 1; i < len(index); i++ {
		if f := t.FieldByIndex(index[:i]); f.Anonymous && documented[f.Type] != "" {
			return documented[f.Type]
		}
	}
	return ""
}

// checkSettings compares every settings table with its struct.
func checkSettings(tables map[string]generatedTable, doc string) []string {
	lines := strings.Split(doc, "\n")
	blocks, problems := settingsBlocks(lines)
	found := map[string]bool{}
	for _, b := range blocks {
		g, ok := tables[b.name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s:%d: no settings table is named %q", apiDocName, b.begin+1, b.name))
			continue
		}
		if found[b.name] {
			problems = append(problems, fmt.Sprintf("%s:%d: settings %s appear twice", apiDocName, b.begin+1, b.name))
		}
		found[b.name] = true
		body := lines[b.begin+1 : b.end]
		if len(body) < 2 || body[0] != g.header {
			problems = append(problems, fmt.Sprintf("%s:%d: settings %s: the table's header is not %q (-update writes it)", apiDocName, b.begin+2, b.name, g.header))
			continue
		}
		rows := body[2:]
		n := slices.IndexFunc(rows, func(l string) bool { return !strings.HasPrefix(l, "|") })
		if n < 0 {
			n = len(rows)
		}
		if trailer := rows[n:]; !slices.Equal(trailer, g.trailer()) {
			problems = append(problems, fmt.Sprintf("%s:%d: settings %s: after the table want %q, got %q (-update writes it)", apiDocName, b.begin+3+n, b.name, g.trailer(), trailer))
		}
		given := map[string][]string{}
		var order []string
		for _, l := range rows[:n] {
			cells := splitRow(l)
			name := strings.Trim(cells[0], "`")
			given[name] = cells
			order = append(order, name)
		}
		for _, want := range g.rows {
			name := strings.Trim(want[0], "`")
			got, ok := given[name]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("settings %s: setting `%s` is missing (-update adds its row; then write its meaning)", b.name, name))
				continue
			case len(got) != len(want)+1:
				problems = append(problems, fmt.Sprintf("settings %s: `%s`: want %d cells, the row has %d", b.name, name, len(want)+1, len(got)))
				continue
			}
			for c := range want {
				if got[c] != want[c] {
					problems = append(problems, fmt.Sprintf("settings %s: `%s`: %s is %s, the table says %s", b.name, name, g.columns[c], orNone(want[c]), orNone(got[c])))
				}
			}
			if got[len(want)] == "" {
				problems = append(problems, fmt.Sprintf("settings %s: `%s` has no meaning written", b.name, name))
			}
		}
		for _, name := range order {
			if !slices.ContainsFunc(g.rows, func(r []string) bool { return strings.Trim(r[0], "`") == name }) {
				problems = append(problems, fmt.Sprintf("settings %s: row `%s` is not a setting of %s (renamed or removed?)", b.name, name, g.what))
			}
		}
	}
	for name := range tables {
		if !found[name] {
			problems = append(problems, fmt.Sprintf("settings %s: no table (want <!-- settings %s --> … %s)", name, name, settingsClose))
		}
	}
	slices.Sort(problems)
	return problems
}

// updateSettings rewrites each settings table from its struct, keeping the meanings written
// (a renamed setting keeps the meaning of the row named as one of its aliases).
func updateSettings(tables map[string]generatedTable, doc string) (string, error) {
	lines := strings.Split(doc, "\n")
	blocks, problems := settingsBlocks(lines)
	if len(problems) > 0 {
		return "", fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		g, ok := tables[b.name]
		if !ok {
			return "", fmt.Errorf("%s:%d: no settings table is named %q", apiDocName, b.begin+1, b.name)
		}
		meaning := map[string]string{}
		for _, l := range lines[min(b.begin+3, b.end):b.end] {
			if cells := splitRow(l); strings.HasPrefix(l, "|") && len(cells) > 1 {
				meaning[strings.Trim(cells[0], "`")] = cells[len(cells)-1]
			}
		}
		table := []string{g.header, joinRow(slices.Repeat([]string{"---"}, len(g.columns)+1))}
		for _, r := range g.rows {
			name := strings.Trim(r[0], "`")
			m := meaning[name]
			for _, a := range g.aliases[name] {
				if m == "" {
					m = meaning[a]
				}
			}
			table = append(table, joinRow(append(slices.Clone(r), m)))
		}
		table = append(table, g.trailer()...)
		lines = slices.Concat(lines[:b.begin+1], table, lines[b.end:])
	}
	return strings.Join(lines, "\n"), nil
}

// settingType names a setting's Lua type; an enum-like string type lists its values.
func settingType(t reflect.Type) (string, error) {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return "number", nil
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "integer", nil
	case reflect.Uint, reflect.Uint32, reflect.Uint64:
		return "integer ≥ 0", nil
	case reflect.Bool:
		return "boolean", nil
	case reflect.String:
		if t.PkgPath() == "" {
			return "string", nil
		}
		values, err := enumValues(t)
		if err != nil {
			return "", err
		}
		for i, v := range values {
			values[i] = code(strconv.Quote(v))
		}
		return strings.Join(values, ", "), nil
	case reflect.Slice:
		switch elem, _ := settingType(t.Elem()); elem {
		case "number", "integer", "string", "boolean":
			return "list of " + elem + "s", nil
		}
	}
	return "", fmt.Errorf("a %s setting cannot be documented", t)
}

// enumValues reads the constants of a named string type from its package's source, in
// declaration order.
func enumValues(t reflect.Type) ([]string, error) {
	self := reflect.TypeFor[model]().PkgPath() // this package: the module path + "/luabind"
	module := strings.TrimSuffix(self, "/luabind")
	rel, ok := strings.CutPrefix(t.PkgPath(), module+"/")
	if !ok {
		return nil, fmt.Errorf("type %s is outside the module", t)
	}
	files, err := filepath.Glob(filepath.Join("..", filepath.FromSlash(rel), "*.go"))
	if err != nil {
		return nil, err
	}
	var values []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if !isIdent(vs.Type, t.Name()) {
					continue
				}
				for _, v := range vs.Values {
					if s, ok := stringLit(v); ok {
						values = append(values, s)
					}
				}
			}
		}
	}
	if len(values) == 0 {
		return nil, fmt.Errorf("type %s has no constants to list", t)
	}
	return values, nil
}

// settingValue writes a default as Lua writes it.
func settingValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Float32:
		return strconv.FormatFloat(v.Float(), 'g', -1, 32)
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Int, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Slice:
		items := make([]string, v.Len())
		for i := range items {
			items[i] = settingValue(v.Index(i))
		}
		if len(items) == 0 {
			return "{}"
		}
		return "{ " + strings.Join(items, ", ") + " }"
	}
	return fmt.Sprint(v)
}

func code(s string) string { return "`" + s + "`" }

func codeList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = code(n)
	}
	return strings.Join(out, ", ")
}

func orNone(cell string) string {
	if cell == "" {
		return "empty"
	}
	return cell
}

// splitRow splits a Markdown table row into its trimmed cells (a pipe escaped as \| stays).
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	if strings.HasSuffix(line, "|") && !strings.HasSuffix(line, `\|`) {
		line = line[:len(line)-1]
	}
	var cells []string
	start := 0
	for i := 0; i < len(line); i++ {
		if line[i] == '\\' {
			i++
			continue
		}
		if line[i] == '|' {
			cells = append(cells, strings.TrimSpace(line[start:i]))
			start = i + 1
		}
	}
	return append(cells, strings.TrimSpace(line[start:]))
}

func joinRow(cells []string) string {
	return "| " + strings.Join(cells, " | ") + " |"
}
