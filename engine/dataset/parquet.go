package dataset

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// parquetSource reads the needed columns of one parquet file page by page: one value of each
// column per row. Only flat columns are read, so every row has exactly one value (maybe null)
// in each.
type parquetSource struct {
	path   string
	f      *os.File
	layout Layout
	cols   []string // the columns read: [text] or [fen] or [fen, task]
	leaves []int    // their leaf indexes

	groups   []parquet.RowGroup
	g        int          // the row group being read; len(groups) at the end
	groupEnd int64        // rows in the groups up to and including g
	readers  []*colReader // one per column, for group g
	row      int64        // the last row returned (1-based)
	fatal    error
}

type colReader struct {
	pages  parquet.Pages
	page   parquet.Page        // the current page, released once its values are copied out
	values parquet.ValueReader // the current page's values
	buf    []parquet.Value
	n, i   int
	eof    bool // values returned io.EOF with buf[:n]: the page ends after them
}

// openParquet opens path and positions it after skip rows.
func openParquet(path, textColumn string, skip int64) (src source, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Kind: NoData, File: path, Err: err}
	}
	s := &parquetSource{path: path, f: f}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if err := s.guard(0, func() error { return s.open(textColumn) }); err != nil {
		return nil, err
	}
	if err := s.guard(0, func() error { return s.seek(skip) }); err != nil {
		return nil, err
	}
	return s, nil
}

// guard turns a panic inside the parquet library into a Corrupt error: a damaged file must
// never crash a run.
func (s *parquetSource) guard(row int64, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Kind: Corrupt, File: s.path, Row: row, Err: fmt.Errorf("parquet reader panicked: %v", p)}
		}
	}()
	return fn()
}

func (s *parquetSource) open(textColumn string) error {
	st, err := s.f.Stat()
	if err != nil {
		return &Error{Kind: Corrupt, File: s.path, Err: err}
	}
	pf, err := parquet.OpenFile(s.f, st.Size(), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
	if err != nil {
		return &Error{Kind: Corrupt, File: s.path, Err: err}
	}
	schema := pf.Schema()
	fields := map[string]parquet.Field{}
	for _, fl := range schema.Fields() {
		fields[fl.Name()] = fl
	}
	switch {
	case fields[textColumn] != nil:
		s.layout, s.cols = TextRows, []string{textColumn}
	case fields[FENColumn] != nil:
		s.layout, s.cols = FENRows, []string{FENColumn}
		if fields[TaskColumn] != nil {
			s.cols = append(s.cols, TaskColumn)
		}
	default:
		return &Error{Kind: MissingColumn, File: s.path, Column: textColumn,
			Err: fmt.Errorf("the file has neither a %q column nor a %q column", textColumn, FENColumn)}
	}
	for _, c := range s.cols {
		if got := notString(fields[c]); got != "" {
			return &Error{Kind: NotString, File: s.path, Column: c, Got: got}
		}
		leaf, ok := schema.Lookup(c)
		if !ok {
			return &Error{Kind: MissingColumn, File: s.path, Column: c}
		}
		s.leaves = append(s.leaves, leaf.ColumnIndex)
	}

	var total int64
	for gi, g := range pf.RowGroups() {
		chunks := g.ColumnChunks()
		for k, leaf := range s.leaves {
			if leaf >= len(chunks) || chunks[leaf].NumValues() != g.NumRows() {
				return &Error{Kind: Corrupt, File: s.path, Row: total + 1, Column: s.cols[k],
					Err: fmt.Errorf("row group %d: the column chunk does not hold one value per row", gi)}
			}
		}
		total += g.NumRows()
	}
	if total != pf.NumRows() {
		return &Error{Kind: Corrupt, File: s.path, Err: fmt.Errorf("row groups hold %d rows, the footer says %d", total, pf.NumRows())}
	}
	s.groups = pf.RowGroups()
	return nil
}

// notString says why a top-level field cannot be read as a string column, or "".
func notString(fl parquet.Field) string {
	switch {
	case !fl.Leaf():
		return "a group"
	case fl.Repeated():
		return "a repeated column"
	}
	t := fl.Type()
	if t.Kind() != parquet.ByteArray {
		return t.Kind().String()
	}
	if lt := t.LogicalType(); lt != nil && lt.Value != nil {
		switch lt.Value.(type) {
		case *format.StringType, *format.EnumType, *format.JsonType:
			return ""
		}
		return lt.String()
	}
	if ct := t.ConvertedType(); ct != nil {
		switch *ct {
		case deprecated.UTF8, deprecated.Enum, deprecated.Json:
			return ""
		}
		return fmt.Sprintf("BYTE_ARRAY with converted type %d", int(*ct))
	}
	return "" // plain BYTE_ARRAY: each value must be UTF-8
}

// seek positions the source after skip rows: whole row groups by their row counts, then
// within a row group by the column pages' SeekToRow.
func (s *parquetSource) seek(skip int64) error {
	var start int64
	for s.g = 0; s.g < len(s.groups); s.g++ {
		n := s.groups[s.g].NumRows()
		if skip < start+n {
			break
		}
		start += n
	}
	if s.g == len(s.groups) {
		if skip != start {
			return &Error{Kind: BadCursor, File: s.path, Err: fmt.Errorf("cursor skips %d rows of a file of %d", skip, start)}
		}
		s.row, s.groupEnd = start, start
		return nil
	}
	if err := s.openGroup(start); err != nil {
		return err
	}
	if off := skip - start; off > 0 {
		for k, r := range s.readers {
			if err := r.pages.SeekToRow(off); err != nil {
				return &Error{Kind: Corrupt, File: s.path, Row: skip + 1, Column: s.cols[k], Err: err}
			}
		}
	}
	s.row = skip
	return nil
}

// openGroup starts reading row group s.g, whose first row follows row start.
func (s *parquetSource) openGroup(start int64) error {
	s.closeReaders()
	g := s.groups[s.g]
	chunks := g.ColumnChunks()
	for _, leaf := range s.leaves {
		s.readers = append(s.readers, &colReader{pages: chunks[leaf].Pages(), buf: make([]parquet.Value, 256)})
	}
	s.groupEnd = start + g.NumRows()
	return nil
}

func (s *parquetSource) closeReaders() {
	for _, r := range s.readers {
		r.release()
		r.pages.Close()
	}
	s.readers = s.readers[:0]
}

func (s *parquetSource) next() (Row, error) {
	if s.fatal != nil {
		return Row{}, s.fatal
	}
	var row Row
	err := s.guard(s.row+1, func() (err error) {
		row, err = s.read()
		return err
	})
	if err != nil && err != io.EOF {
		var de *Error
		if !errors.As(err, &de) || !de.Skippable() {
			s.fatal = err
		}
	}
	return row, err
}

func (s *parquetSource) read() (Row, error) {
	for s.row >= s.groupEnd {
		if s.g+1 >= len(s.groups) {
			s.g = len(s.groups)
			return Row{}, io.EOF
		}
		s.g++
		if err := s.openGroup(s.groupEnd); err != nil {
			return Row{}, err
		}
	}
	s.row++
	row := Row{File: s.path, Row: s.row, Layout: s.layout}
	var bad *Error
	for k, r := range s.readers {
		v, err := r.next()
		if err != nil {
			if err == io.EOF {
				err = errors.New("the column's pages end before its row group does")
			}
			return Row{}, &Error{Kind: Corrupt, File: s.path, Row: s.row, Column: s.cols[k], Err: err}
		}
		// Every column's value of this row is read before reporting a bad one, so that
		// the columns stay aligned on the next row.
		str, got := stringValue(v)
		switch {
		case got == "null" && s.cols[k] == TaskColumn:
		case got != "":
			if bad == nil {
				bad = &Error{Kind: NotString, File: s.path, Row: s.row, Column: s.cols[k], Got: got}
			}
		case s.layout == TextRows:
			row.Text = str
		case k == 0:
			row.FEN = str
		default:
			row.Task = str
		}
	}
	if bad != nil {
		return Row{}, bad
	}
	return row, nil
}

// stringValue copies v's bytes out of the page, or says what v is instead.
func stringValue(v parquet.Value) (string, string) {
	if v.IsNull() {
		return "", "null"
	}
	if v.Kind() != parquet.ByteArray {
		return "", v.Kind().String()
	}
	b := v.ByteArray()
	if !utf8.Valid(b) {
		return "", "invalid UTF-8"
	}
	return string(b), ""
}

func (r *colReader) next() (parquet.Value, error) {
	for r.i >= r.n {
		if r.values != nil && !r.eof {
			n, err := r.values.ReadValues(r.buf)
			r.n, r.i = n, 0
			switch {
			case err == io.EOF:
				r.eof = true
			case err != nil:
				return parquet.Value{}, err
			}
			continue
		}
		r.release()
		page, err := r.pages.ReadPage()
		if err != nil {
			return parquet.Value{}, err
		}
		r.page, r.values, r.eof, r.n, r.i = page, page.Values(), false, 0, 0
	}
	v := r.buf[r.i]
	r.i++
	return v, nil
}

// release hands the page's buffers back to the library's pool once every value read from it
// has been copied (stringValue copies), which keeps a long read from making a page of garbage
// per page read.
func (r *colReader) release() {
	if r.page != nil {
		parquet.Release(r.page)
		r.page, r.values = nil, nil
	}
}

func (s *parquetSource) close() error {
	s.closeReaders()
	return s.f.Close()
}
