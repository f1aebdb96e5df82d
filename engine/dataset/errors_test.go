package dataset_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/rookscript/rookscript/engine/dataset"
)

// TestErrors has one row per kind of bad input. Each names the error it must produce (kind,
// row, column) and how many good rows come through: a bad row is reported and skipped, never
// dropped silently, and a corrupt file ends the stream after the rows before the damage.
func TestErrors(t *testing.T) {
	type optText struct {
		Text *string `parquet:"text,optional"`
	}
	type optFEN struct {
		FEN *string `parquet:"fen,optional"`
	}
	str := func(s string) *string { return &s }

	cases := []struct {
		name   string
		setup  func(t *testing.T, dir string) (path string, seek *dataset.Cursor)
		onOpen bool // the error comes from Open
		kind   dataset.Kind
		row    int64 // -1: any
		column string
		got    string
		rows   int    // good rows returned
		file   string // the error's file, relative to dir ("" = the opened path)
	}{
		{name: "parquet without the column", kind: dataset.MissingColumn, column: "text",
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				type other struct {
					Other string `parquet:"other"`
				}
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, []other{{"a"}}, 10)
				return p, nil
			}},
		{name: "jsonl row without the column", kind: dataset.MissingColumn, row: 3, column: "text", rows: 3,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.jsonl")
				writeFile(t, p, []byte(`{"text": "P: 1"}`+"\n"+`{"text": "P: 2"}`+"\n"+`{"txt": "P: 3"}`+"\n"+`{"text": "P: 4"}`+"\n"))
				return p, nil
			}},
		{name: "jsonl fen row without fen", kind: dataset.MissingColumn, row: 2, column: "fen", rows: 1,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.jsonl")
				writeFile(t, p, []byte(`{"fen": "8/8/8/8/8/8/8/8 w - - 0 1"}`+"\n"+`{"task": "P"}`+"\n"))
				return p, nil
			}},
		{name: "parquet integer column", kind: dataset.NotString, column: "text", got: "INT64",
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				type ints struct {
					Text int64 `parquet:"text"`
				}
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, []ints{{1}}, 10)
				return p, nil
			}},
		{name: "parquet list column", kind: dataset.NotString, column: "text", got: "a group",
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				type lists struct {
					Text []string `parquet:"text,list"`
				}
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, []lists{{[]string{"a"}}}, 10)
				return p, nil
			}},
		{name: "parquet null text", kind: dataset.NotString, row: 40, column: "text", got: "null", rows: 99,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				var rows []optText
				for i := 1; i <= 100; i++ {
					rows = append(rows, optText{str("P: x")})
				}
				rows[39].Text = nil
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, rows, 32)
				return p, nil
			}},
		{name: "parquet null fen", kind: dataset.NotString, row: 2, column: "fen", got: "null", rows: 2,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, []optFEN{{str("a")}, {nil}, {str("c")}}, 10)
				return p, nil
			}},
		{name: "jsonl number", kind: dataset.NotString, row: 2, column: "text", got: "number", rows: 1,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.jsonl")
				writeFile(t, p, []byte(`{"text": "P: 1"}`+"\n"+`{"text": 2}`+"\n"))
				return p, nil
			}},
		{name: "jsonl null", kind: dataset.NotString, row: 1, column: "text", got: "null", rows: 1,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.jsonl")
				writeFile(t, p, []byte(`{"text": null}`+"\n"+`{"text": "P: 2"}`+"\n"))
				return p, nil
			}},
		{name: "jsonl task not a string", kind: dataset.NotString, row: 1, column: "task", got: "array", rows: 0,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.jsonl")
				writeFile(t, p, []byte(`{"fen": "8/8/8/8/8/8/8/8 w - - 0 1", "task": ["P"]}`+"\n"))
				return p, nil
			}},
		{name: "bad json line", kind: dataset.BadLine, row: 2, rows: 2,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.jsonl")
				writeFile(t, p, []byte(`{"text": "P: 1"}`+"\n"+`{"text": "P: 2"`+"\n"+`{"text": "P: 3"}`+"\n"))
				return p, nil
			}},
		{name: "json line not an object", kind: dataset.BadLine, row: 1, rows: 1,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.jsonl")
				writeFile(t, p, []byte(`["P: 1"]`+"\n"+`{"text": "P: 2"}`+"\n"))
				return p, nil
			}},
		{name: "truncated parquet", kind: dataset.Corrupt,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, texts(200, "t"), 64)
				st, _ := os.Stat(p)
				if err := os.Truncate(p, st.Size()/2); err != nil {
					t.Fatal(err)
				}
				return p, nil
			}},
		{name: "parquet bad magic", kind: dataset.Corrupt,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, texts(20, "t"), 64)
				patch(t, p, 0, []byte("PARX"))
				return p, nil
			}},
		{name: "parquet garbage footer", kind: dataset.Corrupt,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, texts(20, "t"), 64)
				st, _ := os.Stat(p)
				patch(t, p, st.Size()-40, []byte(strings.Repeat("\xff", 32)))
				return p, nil
			}},
		{name: "parquet corrupt page header", kind: dataset.Corrupt, row: 65, column: "text", rows: 64,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, texts(200, "t"), 64)
				// The text column's first page in the second row group.
				start, _ := columnChunk(t, p, 1, "text")
				patch(t, p, start, []byte(strings.Repeat("\xff", 24)))
				return p, nil
			}},
		{name: "parquet damaged page data", kind: dataset.Corrupt, row: 65, column: "text", rows: 64,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, texts(200, "t"), 64)
				// Near the end of the row group's text pages, past the header: caught by the
				// page's CRC.
				start, size := columnChunk(t, p, 1, "text")
				off := start + size - 10
				b := make([]byte, 1)
				f, _ := os.Open(p)
				f.ReadAt(b, off)
				f.Close()
				patch(t, p, off, []byte{b[0] ^ 0x55})
				return p, nil
			}},
		{name: "truncated gzip", kind: dataset.Corrupt, row: -1, rows: -1, // where the cut falls
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.jsonl.gz")
				data := gz([]byte(strings.Repeat(`{"text": "P: 8/8/8/8/8/8/8/8 w - - 0 1"}`+"\n", 5000)))
				writeFile(t, p, data[:len(data)/2])
				return p, nil
			}},
		{name: "gzip checksum", kind: dataset.Corrupt, row: 4, rows: 3,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.jsonl.gz")
				data := gz([]byte(`{"text": "P: 1"}` + "\n" + `{"text": "P: 2"}` + "\n" + `{"text": "P: 3"}` + "\n"))
				data[len(data)-8] ^= 0xff // the CRC-32 in the trailer
				writeFile(t, p, data)
				return p, nil
			}},
		{name: "not gzip", kind: dataset.Corrupt,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.jsonl.gz")
				writeFile(t, p, []byte(`{"text": "P: 1"}`+"\n"))
				return p, nil
			}},
		{name: "missing shard", kind: dataset.NoData, onOpen: true, file: "data",
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				writeParquet(t, filepath.Join(dir, "data", "train-00000-of-00003.parquet"), texts(3, "a"), 10)
				writeParquet(t, filepath.Join(dir, "data", "train-00002-of-00003.parquet"), texts(3, "c"), 10)
				return dir, nil
			}},
		{name: "no shard of the split", kind: dataset.NoData, onOpen: true,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				writeParquet(t, filepath.Join(dir, "data", "test-00000-of-00001.parquet"), texts(3, "a"), 10)
				return dir, nil
			}},
		{name: "unsupported file", kind: dataset.NoData, onOpen: true,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.csv")
				writeFile(t, p, []byte("text\nP: 1\n"))
				return p, nil
			}},
		{name: "cursor past the end", kind: dataset.BadCursor,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, texts(20, "t"), 8)
				return p, &dataset.Cursor{File: "x.parquet", Row: 21}
			}},
		{name: "cursor past the end of jsonl", kind: dataset.BadCursor,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.jsonl")
				writeFile(t, p, []byte(`{"text": "P: 1"}`+"\n"))
				return p, &dataset.Cursor{File: "x.jsonl", Row: 2}
			}},
		{name: "cursor on another file", kind: dataset.BadCursor,
			setup: func(t *testing.T, dir string) (string, *dataset.Cursor) {
				p := filepath.Join(dir, "x.parquet")
				writeParquet(t, p, texts(20, "t"), 8)
				return p, &dataset.Cursor{File: "y.parquet", Row: 0}
			}},
	}
	seen := map[dataset.Kind]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path, seek := c.setup(t, dir)
			r, err := dataset.Open(path, dataset.Options{})
			var rows []dataset.Row
			var errs []*dataset.Error
			switch {
			case c.onOpen:
			case err != nil:
				t.Fatalf("Open: %v", err)
			case seek != nil:
				defer r.Close()
				err = r.Seek(*seek)
			default:
				defer r.Close()
				rows, errs, err = drain(r)
				if err == nil && len(errs) > 0 {
					err = errs[len(errs)-1]
				}
			}
			var de *dataset.Error
			if !errors.As(err, &de) {
				t.Fatalf("error %v (%T), want a *dataset.Error", err, err)
			}
			wantFile := path
			if c.file != "" {
				wantFile = filepath.Join(dir, c.file)
			}
			if de.Kind != c.kind || (c.row >= 0 && de.Row != c.row) || de.Column != c.column || de.Got != c.got || de.File != wantFile {
				t.Fatalf("error %+v:\n%v\nwant kind %v row %d column %q got %q file %s", *de, de, c.kind, c.row, c.column, c.got, wantFile)
			}
			if len(errs) > 1 {
				t.Fatalf("errors %v, want one", errs)
			}
			if c.rows >= 0 && len(rows) != c.rows {
				t.Fatalf("%d rows, want %d", len(rows), c.rows)
			}
			for i, row := range rows {
				if i > 0 && row.Row <= rows[i-1].Row {
					t.Fatalf("rows out of order: %+v", rows)
				}
			}
			if de.Kind == dataset.Corrupt && de.Row > 0 && len(rows) > 0 && rows[len(rows)-1].Row != de.Row-1 {
				t.Fatalf("last row %d before the damage at row %d", rows[len(rows)-1].Row, de.Row)
			}
			// A reader that an error ended keeps returning it.
			if r != nil && !de.Skippable() && !c.onOpen {
				if _, again := r.Next(); again != err {
					t.Fatalf("after the error Next returned %v", again)
				}
			}
			seen[c.kind] = true
			t.Log(de)
		})
	}
	for k := dataset.MissingColumn; k <= dataset.BadCursor; k++ {
		if !seen[k] {
			t.Errorf("no case of %v", k)
		}
	}
}

func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// columnChunk is where a column chunk's pages lie in the file.
func columnChunk(t *testing.T, path string, group int, column string) (start, size int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := pf.Schema().Lookup(column)
	md := pf.Metadata().RowGroups[group].Columns[leaf.ColumnIndex].MetaData
	start = md.DataPageOffset
	if md.DictionaryPageOffset != 0 {
		start = md.DictionaryPageOffset
	}
	return start, md.TotalCompressedSize
}

// TestDamagedParquet flips bytes all over a parquet file: whatever the damage, the reader
// returns rows and *Error values, never a panic or another error.
func TestDamagedParquet(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	writeParquet(t, good, texts(120, "d"), 40)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	kinds := map[dataset.Kind]int{}
	panics := 0
	for i := 0; i < 400; i++ {
		bad := bytes.Clone(data)
		for range 1 + rng.IntN(4) {
			bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
		}
		p := filepath.Join(dir, "bad.parquet")
		writeFile(t, p, bad)
		r, err := dataset.Open(p, dataset.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rows, errs, err := drain(r)
		r.Close()
		if err != nil {
			t.Fatalf("variant %d: %v (%T)", i, err, err)
		}
		if len(rows)+len(errs) > 121 {
			t.Fatalf("variant %d: %d rows and %d errors from 120 rows", i, len(rows), len(errs))
		}
		for _, e := range errs {
			kinds[e.Kind]++
			if strings.Contains(e.Error(), "panicked") {
				panics++ // recovered inside the reader
			}
		}
	}
	t.Logf("errors by kind over 400 damaged files: %v, of which %d were library panics", kinds, panics)
}
