package rookworld

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/dataset"
)

type textRow struct {
	ID   int64  `parquet:"id"`
	Text string `parquet:"text"`
}

type fenRow struct {
	FEN  string  `parquet:"fen"`
	Task *string `parquet:"task,optional"`
}

// writeParquet writes rows in small row groups and pages, so that a few dozen rows span
// several of each.
func writeParquet[T any](t *testing.T, path string, rows []T) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[T](f, parquet.MaxRowsPerRowGroup(7), parquet.PageBufferSize(512))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// rookRows are n legal RookWorld text rows, P: and A: in turn, from seeded games.
func rookRows(t *testing.T, n int, seed uint64) []string {
	t.Helper()
	g, err := NewGenerator(GeneratorOptions{Seed: seed, MaxPly: 30})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for len(out) < n {
		it, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pos, err := chess.ParseFEN(it.FEN)
		if err != nil {
			t.Fatal(err)
		}
		legal := pos.LegalMoves()
		if len(legal) == 0 {
			continue
		}
		if len(out)%2 == 0 {
			moves := legal[:min(5, len(legal))]
			evals := make([]float64, len(moves))
			for i := range evals {
				evals[i] = 0.5 - 0.1*float64(i)
			}
			out = append(out, PolicyText(it.FEN, moves, evals, moves[0]))
			continue
		}
		r, err := EnvStep(it.FEN, legal[len(out)%len(legal)])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, EnvText(r, it.History[max(0, len(it.History)-9):]))
	}
	return out
}

func textRows(texts []string) []textRow {
	rows := make([]textRow, len(texts))
	for i, s := range texts {
		rows[i] = textRow{ID: int64(i), Text: s}
	}
	return rows
}

func jsonLines(texts []string) string {
	var b strings.Builder
	for _, s := range texts {
		fmt.Fprintf(&b, "{\"text\": %q}\n", s)
	}
	return b.String()
}

func gzipped(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

func openData(t *testing.T, path string, opt DataOptions) *DataSource {
	t.Helper()
	s, err := OpenDataSource(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestDataSourceBadRows: each kind of bad row is an error naming its file, row and column,
// of the type that says what is wrong; with skip_invalid the rows around it still come, and
// it is counted. A file that cannot be read on stops the source either way.
func TestDataSourceBadRows(t *testing.T) {
	good := rookRows(t, 2, 1)
	const kingless = "5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58"
	illegalRow := PolicyText(kingless, []string{"b3d5"}, []float64{0.1}, "b3d5")
	task := func(s string) *string { return &s }
	truncated := func(t *testing.T, dir string) string {
		p := filepath.Join(dir, "cut.parquet")
		writeParquet(t, p, textRows(append(good, good...)))
		b, _ := os.ReadFile(p)
		os.WriteFile(p, b[:len(b)/2], 0o644)
		return p
	}
	type want struct {
		row     int64
		column  string
		problem RowProblem   // a *RowError
		kind    dataset.Kind // else a *dataset.Error
	}
	cases := []struct {
		name   string
		write  func(t *testing.T, dir string) string
		want   want
		before int // items before the error; a skipped row has one item on each side
	}{
		{"illegal FEN in a fen column", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "fen.parquet")
			writeParquet(t, p, []fenRow{{FEN: chess.StartFEN}, {FEN: kingless}, {FEN: chess.StartFEN}})
			return p
		}, want{row: 2, column: "fen", problem: IllegalPosition}, 1},
		{"illegal FEN in a text row", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "text.parquet")
			writeParquet(t, p, textRows([]string{good[0], illegalRow, good[1]}))
			return p
		}, want{row: 2, column: "text", problem: IllegalPosition}, 1},
		{"unknown task prefix", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "text.jsonl")
			os.WriteFile(p, []byte(jsonLines([]string{good[0], "Q: " + chess.StartFEN + " M: e2e4", good[1]})), 0o644)
			return p
		}, want{row: 2, column: "text", problem: UnknownTask}, 1},
		{"unknown task value", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "fen.parquet")
			writeParquet(t, p, []fenRow{{FEN: chess.StartFEN, Task: task("P")}, {FEN: chess.StartFEN, Task: task("Q")}, {FEN: chess.StartFEN}})
			return p
		}, want{row: 2, column: "task", problem: UnknownTask}, 1},
		{"malformed text row", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "text.jsonl.gz")
			os.WriteFile(p, []byte(gzipped(jsonLines([]string{good[0], "P: " + chess.StartFEN, good[1]}))), 0o644)
			return p
		}, want{row: 2, column: "text", problem: NotARow}, 1},
		{"missing column in a row", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "text.jsonl")
			os.WriteFile(p, []byte(jsonLines(good[:1])+`{"txt": "P: …"}`+"\n"+jsonLines(good[1:])), 0o644)
			return p
		}, want{row: 2, column: "text", kind: dataset.MissingColumn}, 1},
		{"missing column in a file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "other.parquet")
			writeParquet(t, p, []struct {
				Prompt string `parquet:"prompt"`
			}{{"P: x"}})
			return p
		}, want{row: 0, column: "text", kind: dataset.MissingColumn}, 0},
		{"a value that is not a string", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "text.jsonl")
			os.WriteFile(p, []byte(jsonLines(good[:1])+`{"text": 7}`+"\n"+jsonLines(good[1:])), 0o644)
			return p
		}, want{row: 2, column: "text", kind: dataset.NotString}, 1},
		{"a line that is not JSON", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "text.jsonl")
			os.WriteFile(p, []byte(jsonLines(good[:1])+"{\"text\": \"P: \n"+jsonLines(good[1:])), 0o644)
			return p
		}, want{row: 2, kind: dataset.BadLine}, 1},
		{"truncated parquet file", truncated, want{kind: dataset.Corrupt}, 0},
		{"truncated gzip stream", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "text.jsonl.gz")
			z := gzipped(jsonLines(append(good, good...)))
			os.WriteFile(p, []byte(z[:len(z)-6]), 0o644)
			return p
		}, want{row: 5, kind: dataset.Corrupt}, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := c.write(t, t.TempDir())
			for _, skip := range []bool{false, true} {
				s := openData(t, path, DataOptions{FileOptions: FileOptions{SkipInvalid: skip}})
				var items int
				var err error
				for {
					_, err = s.Next(context.Background())
					if err != nil {
						break
					}
					items++
				}
				var re *RowError
				var de *dataset.Error
				skippable := c.want.problem != 0 || c.want.kind != dataset.Corrupt && c.want.row > 0
				switch {
				case skip && skippable:
					if err != io.EOF || items != 2 || s.Skipped() != 1 || s.FirstSkipped() == nil {
						t.Errorf("skip_invalid: %d items, %d skipped, then %v; want 2, 1 and the end", items, s.Skipped(), err)
					}
				case c.want.problem != 0:
					if !errors.As(err, &re) || re.Problem != c.want.problem || re.File != path || re.Row != c.want.row || re.Column != c.want.column {
						t.Fatalf("error %v (%T), want a %v at %s row %d column %q", err, err, c.want.problem, path, c.want.row, c.want.column)
					}
				default:
					if !errors.As(err, &de) || de.Kind != c.want.kind || de.File != path || de.Row != c.want.row || de.Column != c.want.column {
						t.Fatalf("error %v (%T), want %v at %s row %d column %q", err, err, c.want.kind, path, c.want.row, c.want.column)
					}
				}
				if !(skip && skippable) && items != c.before {
					t.Errorf("%d items before the error, want %d", items, c.before)
				}
				if skip && !skippable && s.Skipped() != 0 {
					t.Errorf("a file that cannot be read on counted %d skipped rows", s.Skipped())
				}
			}
		})
	}
}

// A parquet file written by another implementation (hyparquet-writer, engine/dataset's
// fixture): its RookWorld rows, one of which holds a board without a black king.
func TestDataSourceNPMParquet(t *testing.T) {
	path := filepath.Join("..", "dataset", "testdata", "npm_text.parquet")
	s := openData(t, path, DataOptions{FileOptions: FileOptions{SkipInvalid: true}})
	items := drain(t, s, -1)
	if len(items) != 6 || s.Skipped() != 1 {
		t.Fatalf("%d items and %d skipped, want 6 and 1", len(items), s.Skipped())
	}
	var re *RowError
	if !errors.As(s.FirstSkipped(), &re) || re.Row != 2 || re.Problem != IllegalPosition {
		t.Fatalf("skipped %v, want row 2's illegal position", s.FirstSkipped())
	}
	for i, it := range items {
		if it.Sample == nil || !strings.HasPrefix(it.Origin, path+":") {
			t.Fatalf("item %d: %+v", i, it)
		}
	}
	if env := items[2]; env.Sample.Task != TaskEnv || env.Next != "e2e4" || env.FEN != chess.StartFEN {
		t.Errorf("A: row: %+v", env)
	}
}

// writeShards writes a data set directory as Hugging Face stores one: data/<split>-i-of-n.
func writeShards(t *testing.T, dir, split string, rows []string, n int) {
	t.Helper()
	per := (len(rows) + n - 1) / n
	for i := range n {
		part := rows[min(i*per, len(rows)):min((i+1)*per, len(rows))]
		writeParquet(t, filepath.Join(dir, "data", fmt.Sprintf("%s-%05d-of-%05d.parquet", split, i, n)), textRows(part))
	}
}

// TestDataSourceResume: a cursor taken in the middle of a shard (past its first row group),
// and one taken after a loop, restore the stream bit for bit, through JSON as a checkpoint
// keeps it; so do cursors of JSONL and gzipped JSONL files.
func TestDataSourceResume(t *testing.T) {
	rows := rookRows(t, 60, 2)
	dir := t.TempDir()
	writeShards(t, dir, "train", rows, 3)
	jsonl := writeFile(t, "rows.jsonl", jsonLines(rows))
	gz := writeFile(t, "rows.jsonl.gz", gzipped(jsonLines(rows)))
	for _, c := range []struct {
		name    string
		path    string
		k, rest int
	}{
		{"shards, mid shard", dir, 29, 45}, // row 9 of shard 2 of 3, in its second row group; then a loop
		{"shards, after a loop", dir, 75, 10},
		{"jsonl", jsonl, 13, 60},
		{"jsonl.gz", gz, 41, 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			open := func() Source {
				s, err := Open(SourceSpec{Path: c.path, Loop: true})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			checkResume(t, open, c.k, c.rest)
			a := open()
			defer a.Close()
			drain(t, a, c.k)
			cur := a.Cursor()
			b := open()
			defer b.Close()
			if err := b.Restore(roundTripCursor(t, cur)); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(b.Cursor(), cur) {
				t.Errorf("restored cursor %+v, want %+v", b.Cursor(), cur)
			}
		})
	}
	s := openData(t, dir, DataOptions{})
	drain(t, s, 29)
	if c := s.Cursor(); c.Kind != "dataset" || c.File != "data/train-00001-of-00003.parquet" || c.Line != 9 {
		t.Errorf("cursor %+v, want row 9 of the second shard", c)
	}
	if err := s.Restore(Cursor{Kind: "dataset", Path: dir, File: "data/train-00009-of-00010.parquet"}); err == nil {
		t.Error("a cursor of another data set restored")
	}
}

// The line source that read JSONL before saved its cursors as kind "jsonl"; a run resumed
// from one goes on where it was.
func TestDataSourceRestoresJSONLCursor(t *testing.T) {
	rows := rookRows(t, 8, 3)
	path := writeFile(t, "rows.jsonl", jsonLines(rows))
	old, err := OpenSampleFile(path, true, FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	drain(t, old, 3)
	want := drain(t, old, 5)
	s := openData(t, path, DataOptions{})
	old2, _ := OpenSampleFile(path, true, FileOptions{})
	defer old2.Close()
	drain(t, old2, 3)
	if err := s.Restore(roundTripCursor(t, old2.Cursor())); err != nil {
		t.Fatal(err)
	}
	got := drain(t, s, 5)
	for i := range want {
		if got[i].FEN != want[i].FEN || !reflect.DeepEqual(got[i].Sample, want[i].Sample) {
			t.Fatalf("item %d after restoring the line cursor: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestDataSourceSplits: a list of splits reads the first the directory has; a file is the
// split train; settings that only a data set takes are refused elsewhere.
func TestDataSourceSplits(t *testing.T) {
	train, test := rookRows(t, 6, 4), rookRows(t, 4, 5)
	both, trainOnly := t.TempDir(), t.TempDir()
	writeShards(t, both, "train", train, 2)
	writeShards(t, both, "test", test, 1)
	writeShards(t, trainOnly, "train", train, 2)
	file := writeFile(t, "rows.jsonl", jsonLines(train))
	first := func(s Source) string { return drain(t, s, 1)[0].Sample.Text() }
	for _, c := range []struct {
		path  string
		split []string
		want  string // the first row's text
	}{
		{both, nil, train[0]},
		{both, []string{"test", "train"}, test[0]},
		{trainOnly, []string{"test", "train"}, train[0]},
		{file, []string{"test", "train"}, train[0]},
	} {
		s, err := Open(SourceSpec{Path: c.path, Split: c.split})
		if err != nil {
			t.Fatal(err)
		}
		if got := first(s); got != strings.TrimSpace(c.want) {
			t.Errorf("%s split %v: first row %q, want %q", c.path, c.split, got, c.want)
		}
		s.Close()
	}
	var de *dataset.Error
	for _, spec := range []SourceSpec{{Path: trainOnly, Split: []string{"test"}}, {Path: file, Split: []string{"test"}}} {
		if _, err := Open(spec); !errors.As(err, &de) || de.Kind != dataset.NoData {
			t.Errorf("%s split test: %v, want a NoData error", spec.Path, err)
		}
	}
	epd := writeFile(t, "p.epd", chess.StartFEN+"\n")
	for _, spec := range []SourceSpec{{Path: epd, Split: []string{"test"}}, {Path: epd, TextColumn: "row"}} {
		if _, err := Open(spec); err == nil {
			t.Errorf("%+v: no error", spec)
		}
	}
}

// A fen column's task decides the prompt's task, over the one asked for; without one the
// mix decides.
func TestDataSourceTaskColumn(t *testing.T) {
	task := func(s string) *string { return &s }
	path := filepath.Join(t.TempDir(), "fen.parquet")
	writeParquet(t, path, []fenRow{{FEN: chess.StartFEN, Task: task("A")}, {FEN: chess.StartFEN, Task: task("policy")}, {FEN: chess.StartFEN}})
	s := openData(t, path, DataOptions{})
	m := Mix{Task: MixPolicy, Pad: true}
	var tasks []string
	for i, it := range drain(t, s, -1) {
		tasks = append(tasks, m.Prompt(it, int64(i), MixEnv).Task)
	}
	if want := []string{"A", "P", "A"}; !reflect.DeepEqual(tasks, want) {
		t.Errorf("tasks %v, want %v", tasks, want)
	}
}
