package dataset_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/rookscript/rookscript/engine/dataset"
)

type textRow struct {
	Source int64  `parquet:"source"`
	Text   string `parquet:"text"`
}

type fenRow struct {
	FEN  string  `parquet:"fen"`
	Task *string `parquet:"task,optional"`
}

// writeParquet writes rows with small row groups and pages, so that a few hundred rows span
// several of each.
func writeParquet[T any](t testing.TB, path string, rows []T, rowsPerGroup int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[T](f, parquet.MaxRowsPerRowGroup(rowsPerGroup), parquet.PageBufferSize(512), parquet.Compression(&parquet.Snappy))
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

func texts(n int, tag string) []textRow {
	rows := make([]textRow, n)
	for i := range rows {
		rows[i] = textRow{Source: int64(i), Text: fmt.Sprintf("P: %s row %d 8/8/8/8/8/8/8/8 w - - 0 %d", tag, i+1, i+1)}
	}
	return rows
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func gz(data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

func open(t testing.TB, path string, opt dataset.Options) *dataset.Reader {
	t.Helper()
	r, err := dataset.Open(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// readAll reads to the end; it fails the test on any error.
func readAll(t testing.TB, r *dataset.Reader) []dataset.Row {
	t.Helper()
	var rows []dataset.Row
	for {
		row, err := r.Next()
		if err == io.EOF {
			return rows
		}
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
}

// drain reads to the end or to an error that ends the reader, returning rows and errors.
func drain(r *dataset.Reader) ([]dataset.Row, []*dataset.Error, error) {
	var rows []dataset.Row
	var errs []*dataset.Error
	for {
		row, err := r.Next()
		if err == io.EOF {
			return rows, errs, nil
		}
		if err == nil {
			rows = append(rows, row)
			continue
		}
		var de *dataset.Error
		if !errors.As(err, &de) {
			return rows, errs, err
		}
		errs = append(errs, de)
		if !de.Skippable() {
			return rows, errs, nil
		}
	}
}
