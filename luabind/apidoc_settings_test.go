package luabind

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/grpo"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

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

// sectionColumns say how each section's defaults are shown, where one column of the call's
// defaults is not the whole story; every other section shows spec.defaults(false).
var sectionColumns = map[string]settingsSpec{
	"grpo": {headers: []string{"default", "with `trl_compat = true`"},
		defaults: func(*lua.LState) ([]any, []any, error) {
			d, trl := *sectionNamed("grpo").defaults(false).(*grpo.Config), *sectionNamed("grpo").defaults(true).(*grpo.Config)
			return []any{d, trl}, []any{d, trl}, nil
		}},
	"rollout": {headers: []string{"default"},
		defaults: func(L *lua.LState) ([]any, []any, error) {
			// Two calls on one model without settings: the seed is drawn per call.
			m := &model{}
			L.Push(lua.LNil)
			defer L.Pop(1)
			return []any{m.sampling(L, L.GetTop())}, []any{m.sampling(L, L.GetTop())}, nil
		}},
}

// settingsSpecs are every documented option struct: the sections, and rook.sft.loss's
// options, whose defaults live inside the call (the meaning column gives them).
func settingsSpecs() map[string]settingsSpec {
	specs := map[string]settingsSpec{
		"sft.loss": {call: "rook.sft.loss", typ: reflect.TypeFor[sftLossOptions]()},
	}
	for _, s := range sectionSpecs {
		spec, ok := sectionColumns[s.name]
		if !ok {
			spec = settingsSpec{headers: []string{"default"}, defaults: func(*lua.LState) ([]any, []any, error) {
				d := reflect.ValueOf(s.defaults(false)).Elem().Interface()
				return []any{d}, []any{d}, nil
			}}
		}
		spec.call, spec.typ = s.call, s.typ
		specs[s.name] = spec
	}
	return specs
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
	includes []string // the calls whose settings this one takes as well
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
		columns: append([]string{"setting", "type"}, spec.headers...)}
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
		if call := documented[f.typ]; call != "" && f.typ.Kind() == reflect.Struct {
			row := []string{code(prefix + name), "table, or a section, of " + call + "'s settings"}
			for range a {
				row = append(row, call+"'s")
			}
			g.rows = append(g.rows, row)
			continue
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
		row := []string{code(prefix + name), typ}
		for c := range a {
			va, vb := settingValue(a[c]), settingValue(b[c])
			if va == vb {
				row = append(row, code(va))
			} else {
				row = append(row, code(va)+", "+code(vb)+", … (one per call)")
			}
		}
		g.rows = append(g.rows, row)
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

// updateSettings rewrites each settings table from its struct, keeping the meanings written.
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
			table = append(table, joinRow(append(slices.Clone(r), meaning[name])))
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
