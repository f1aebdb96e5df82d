package dataset_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/dataset"
)

func TestParquetTextRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.parquet")
	want := texts(1000, "a")
	writeParquet(t, path, want, 128)
	rows := readAll(t, open(t, path, dataset.Options{}))
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		if r.File != path || r.Row != int64(i+1) || r.Layout != dataset.TextRows || r.Text != want[i].Text || r.FEN != "" {
			t.Fatalf("row %d: %+v, want text %q", i+1, r, want[i].Text)
		}
	}
}

func TestTextColumnSetting(t *testing.T) {
	type promptRow struct {
		Prompt string `parquet:"prompt"`
		Text   int64  `parquet:"text"` // ignored: the setting names another column
	}
	path := filepath.Join(t.TempDir(), "rows.parquet")
	writeParquet(t, path, []promptRow{{"P: one", 1}, {"A: two", 2}}, 10)
	rows := readAll(t, open(t, path, dataset.Options{TextColumn: "prompt"}))
	if len(rows) != 2 || rows[0].Text != "P: one" || rows[1].Text != "A: two" {
		t.Fatalf("rows %+v", rows)
	}
}

func TestParquetFENRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fens.parquet")
	p, a := "P", "A"
	want := []fenRow{{"fen1", &p}, {"fen2", nil}, {"fen3", &a}}
	for i := 0; i < 300; i++ {
		want = append(want, fenRow{FEN: fmt.Sprintf("fen%d", i+4), Task: &p})
	}
	writeParquet(t, path, want, 50)
	rows := readAll(t, open(t, path, dataset.Options{}))
	if len(rows) != len(want) {
		t.Fatalf("%d rows", len(rows))
	}
	for i, r := range rows {
		task := ""
		if want[i].Task != nil {
			task = *want[i].Task
		}
		if r.Layout != dataset.FENRows || r.FEN != want[i].FEN || r.Task != task || r.Row != int64(i+1) {
			t.Fatalf("row %d: %+v", i+1, r)
		}
	}
}

func TestJSONL(t *testing.T) {
	dir := t.TempDir()
	text := "{\"text\": \"P: a\", \"n\": 1}\n\n{\"text\": \"A: b\\u00e9\", \"other\": [1, 2]}\r\n{\"n\": 3, \"text\": \"P: c\"}"
	fens := `{"fen": "8/8/8/8/8/8/8/8 w - - 0 1", "task": "P"}
{"fen": "8/8/8/8/8/8/8/8 b - - 0 1"}
{"fen": "8/8/8/8/8/8/8/8 b - - 0 2", "task": null}
`
	cases := []struct {
		name, file string
		data       []byte
		want       []dataset.Row
	}{
		{"text", "t.jsonl", []byte(text), []dataset.Row{
			{Row: 1, Layout: dataset.TextRows, Text: "P: a"},
			{Row: 3, Layout: dataset.TextRows, Text: "A: bé"},
			{Row: 4, Layout: dataset.TextRows, Text: "P: c"},
		}},
		{"gzipped text", "t.jsonl.gz", gz([]byte(text)), []dataset.Row{
			{Row: 1, Layout: dataset.TextRows, Text: "P: a"},
			{Row: 3, Layout: dataset.TextRows, Text: "A: bé"},
			{Row: 4, Layout: dataset.TextRows, Text: "P: c"},
		}},
		{"fen", "f.jsonl", []byte(fens), []dataset.Row{
			{Row: 1, Layout: dataset.FENRows, FEN: "8/8/8/8/8/8/8/8 w - - 0 1", Task: "P"},
			{Row: 2, Layout: dataset.FENRows, FEN: "8/8/8/8/8/8/8/8 b - - 0 1"},
			{Row: 3, Layout: dataset.FENRows, FEN: "8/8/8/8/8/8/8/8 b - - 0 2"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.file)
			writeFile(t, path, c.data)
			rows := readAll(t, open(t, path, dataset.Options{}))
			if len(rows) != len(c.want) {
				t.Fatalf("rows %+v", rows)
			}
			for i := range rows {
				c.want[i].File = path
				if rows[i] != c.want[i] {
					t.Errorf("row %+v, want %+v", rows[i], c.want[i])
				}
			}
		})
	}
}

// hfDir writes a Hugging Face-style dataset: data/train-0000i-of-00003.parquet and
// data/test-00000-of-00001.parquet.
func hfDir(t *testing.T) (string, [][]textRow) {
	dir := t.TempDir()
	var shards [][]textRow
	for i, n := range []int{70, 0, 45} {
		rows := texts(n, fmt.Sprintf("train%d", i))
		shards = append(shards, rows)
		writeParquet(t, filepath.Join(dir, "data", fmt.Sprintf("train-%05d-of-00003.parquet", i)), rows, 16)
	}
	writeParquet(t, filepath.Join(dir, "data", "test-00000-of-00001.parquet"), texts(9, "test"), 16)
	writeFile(t, filepath.Join(dir, "README.md"), []byte("# not a shard\n"))
	return dir, shards
}

func TestShardDirectory(t *testing.T) {
	dir, shards := hfDir(t)
	r := open(t, dir, dataset.Options{Split: "train"})
	if got := r.Files(); len(got) != 3 || !strings.HasSuffix(got[2], "train-00002-of-00003.parquet") {
		t.Fatalf("files %q", got)
	}
	rows := readAll(t, r)
	var k int
	for i, shard := range shards {
		for j, w := range shard {
			got := rows[k]
			if got.Text != w.Text || got.Row != int64(j+1) || got.File != r.Files()[i] {
				t.Fatalf("row %d: %+v, want %q row %d of %s", k, got, w.Text, j+1, r.Files()[i])
			}
			k++
		}
	}
	if k != len(rows) {
		t.Fatalf("%d rows, want %d", len(rows), k)
	}
	test := readAll(t, open(t, dir, dataset.Options{Split: "test"}))
	if len(test) != 9 || !strings.Contains(test[0].Text, "test row 1") {
		t.Fatalf("test split %+v", test)
	}
}

func TestShardLayouts(t *testing.T) {
	for _, layout := range []string{"train-00000-of-00002.jsonl", "train/part-0.jsonl"} {
		t.Run(layout, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, layout), []byte(`{"text": "P: x"}`+"\n"))
			if strings.Contains(layout, "-of-") {
				writeFile(t, filepath.Join(dir, "train-00001-of-00002.jsonl.gz"), gz([]byte(`{"text": "P: y"}`+"\n")))
			}
			rows := readAll(t, open(t, dir, dataset.Options{}))
			if len(rows) == 0 || rows[0].Text != "P: x" {
				t.Fatalf("rows %+v", rows)
			}
		})
	}
}

// TestSeek: for every cursor position, a Reader seeked there returns exactly the rows a full
// read returns after it, and the cursor a Reader reports resumes at the next row.
func TestSeek(t *testing.T) {
	dir, _ := hfDir(t)
	jsonl := filepath.Join(t.TempDir(), "rows.jsonl.gz")
	var lines strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&lines, "{\"text\": \"P: %d\"}\n", i)
		if i%7 == 3 {
			lines.WriteString("\n")
		}
	}
	writeFile(t, jsonl, gz([]byte(lines.String())))

	for _, path := range []string{dir, jsonl} {
		all := readAll(t, open(t, path, dataset.Options{}))
		var cursors []dataset.Cursor
		r := open(t, path, dataset.Options{})
		for range all {
			cursors = append(cursors, r.Cursor())
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
		}
		cursors = append(cursors, r.Cursor())
		for i, c := range cursors {
			s := open(t, path, dataset.Options{})
			if err := s.Seek(c); err != nil {
				t.Fatalf("seek %+v: %v", c, err)
			}
			rest := readAll(t, s)
			if len(rest) != len(all)-i {
				t.Fatalf("seek %+v: %d rows, want %d", c, len(rest), len(all)-i)
			}
			for j := range rest {
				if rest[j] != all[i+j] {
					t.Fatalf("seek %+v: row %+v, want %+v", c, rest[j], all[i+j])
				}
			}
		}
	}
}

// TestNPMParquet reads files written by hyparquet-writer (testdata/gen_npm_parquet.mjs):
// snappy and uncompressed, several row groups, a converted-type UTF8 column, nulls.
func TestNPMParquet(t *testing.T) {
	rows := readAll(t, open(t, filepath.Join("testdata", "npm_text.parquet"), dataset.Options{}))
	prefixes := []string{"P: r1b1kbnr/", "A: 5R2/", "P: rnbqkbnr/", "A: rnbqkbnr/", "P: 8/8/8/8/8/5k2/", "P: r1b1kbnr/", "A: 8/8/8/8/8/5k2/"}
	if len(rows) != len(prefixes) {
		t.Fatalf("%d rows, want %d", len(rows), len(prefixes))
	}
	for i, r := range rows {
		if !strings.HasPrefix(r.Text, prefixes[i]) || r.Row != int64(i+1) {
			t.Errorf("row %d: %+v", i+1, r)
		}
	}
	if !strings.HasSuffix(rows[0].Text, "B: c8d7") || !strings.HasSuffix(rows[1].Text, "+0.001+0+0") {
		t.Errorf("rows cut: %q, %q", rows[0].Text, rows[1].Text)
	}

	fens := readAll(t, open(t, filepath.Join("testdata", "npm_fen.parquet"), dataset.Options{}))
	wantTasks := []string{"P", "A", "", "P", "A"}
	if len(fens) != 5 {
		t.Fatalf("%d fen rows", len(fens))
	}
	for i, r := range fens {
		if r.Layout != dataset.FENRows || r.Task != wantTasks[i] || strings.Count(r.FEN, "/") != 7 {
			t.Errorf("row %d: %+v", i+1, r)
		}
	}
	if fens[4].FEN != "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1" {
		t.Errorf("last fen %q", fens[4].FEN)
	}

	// Seeking into the npm file's third row group.
	r := open(t, filepath.Join("testdata", "npm_text.parquet"), dataset.Options{})
	if err := r.Seek(dataset.Cursor{File: "npm_text.parquet", Row: 6}); err != nil {
		t.Fatal(err)
	}
	if rest := readAll(t, r); len(rest) != 1 || rest[0].Row != 7 || rest[0] != rows[6] {
		t.Fatalf("after seek: %+v", rest)
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(bigReadEnv) != "" {
		os.Exit(bigRead())
	}
	os.Exit(m.Run())
}

func TestParquetDictionary(t *testing.T) {
	type dictRow struct {
		Text string `parquet:"text,dict"`
	}
	path := filepath.Join(t.TempDir(), "dict.parquet")
	var want []dictRow
	for i := 0; i < 500; i++ {
		want = append(want, dictRow{fmt.Sprintf("P: %d", i%7)})
	}
	writeParquet(t, path, want, 100)
	r := open(t, path, dataset.Options{})
	if err := r.Seek(dataset.Cursor{File: "dict.parquet", Row: 250}); err != nil {
		t.Fatal(err)
	}
	rows := readAll(t, r)
	if len(rows) != 250 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, row := range rows {
		if row.Text != want[250+i].Text || row.Row != int64(251+i) {
			t.Fatalf("row %+v, want %q", row, want[250+i].Text)
		}
	}
}
