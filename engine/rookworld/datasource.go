package rookworld

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/rookscript/rookscript/engine/dataset"
)

// DataOptions configure a data set source.
type DataOptions struct {
	FileOptions
	// Split: the first of these splits a directory of shards has ("train" when empty), so
	// that {"test", "train"} reads a data set's test split where it has one. A single file
	// is the split "train".
	Split      []string
	TextColumn string // the column of RookWorld text rows ("text" when empty)
}

// RowProblem says why a row gives no position.
type RowProblem int

const (
	// IllegalPosition: the FEN (a fen column's, or the one a text row holds) does not parse
	// or is not a position ValidatePosition accepts.
	IllegalPosition RowProblem = iota + 1
	// UnknownTask: a text row that starts with neither "P:" nor "A:" (nor is a raw A: row
	// without its prefix), or a task column value other than P, A, policy or env.
	UnknownTask
	// NotARow: a text row with a known prefix that ParseSample refuses (a missing field, a
	// malformed answer), or an empty one.
	NotARow
)

func (p RowProblem) String() string {
	switch p {
	case IllegalPosition:
		return "illegal position"
	case UnknownTask:
		return "unknown task"
	case NotARow:
		return "not a RookWorld row"
	}
	return fmt.Sprintf("RowProblem(%d)", int(p))
}

// RowError is a data set row that gives no position: the file, its row (a JSONL file's line)
// and column, and why. What the files themselves get wrong (a missing column, a value that is
// not a string, a line that is not JSON, a truncated or corrupt file) is a *dataset.Error.
type RowError struct {
	File    string
	Row     int64
	Column  string
	Problem RowProblem
	Err     error
}

func (e *RowError) Error() string {
	return fmt.Sprintf("%s: row %d: column %q: %s: %v", e.File, e.Row, e.Column, e.Problem, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// DataSource streams positions from data set files (engine/dataset): parquet, JSONL or
// gzipped JSONL, one file or a directory of Hugging Face-style shards. Rows are RookWorld text
// rows (Item.Sample: the position, the history and the task from the text) or a fen column
// with an optional task column (Item.Task). A bad row is an error naming its file, row and
// column (*RowError, *dataset.Error); with SkipInvalid it is counted (Skipped, FirstSkipped)
// and the stream goes on, except after an error that ends the file (a corrupt file). Files
// stream: memory does not grow with the number of rows. The cursor is the file and the rows
// of it consumed; Restore seeks there (parquet by row group and page index, JSONL by reading
// lines up to it).
type DataSource struct {
	path       string
	r          *dataset.Reader
	start      dataset.Cursor // the first row: where a loop starts over
	textColumn string
	opt        FileOptions
	epoch      int
	count      int64
	epochItems int64
	skipped    int64
	firstSkip  error
}

// OpenDataSource opens the data set at path: a .parquet, .jsonl or .jsonl.gz file, or a
// directory of their shards (dataset.Open).
func OpenDataSource(path string, opt DataOptions) (*DataSource, error) {
	splits := opt.Split
	if len(splits) == 0 {
		splits = []string{"train"}
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, &dataset.Error{Kind: dataset.NoData, File: path, Err: err}
	}
	split := ""
	if st.IsDir() {
		for _, s := range splits {
			if dataset.HasSplit(path, s) {
				split = s
				break
			}
		}
		if split == "" {
			if len(splits) > 1 {
				return nil, &dataset.Error{Kind: dataset.NoData, File: path,
					Err: fmt.Errorf("no shards of any of the splits %s", strings.Join(splits, ", "))}
			}
			split = splits[0] // Open says where it looked
		}
	} else if !slices.Contains(splits, "train") {
		return nil, &dataset.Error{Kind: dataset.NoData, File: path,
			Err: fmt.Errorf("one file is the split train; split %s needs a directory of shards", strings.Join(splits, ", "))}
	}
	r, err := dataset.Open(path, dataset.Options{Split: split, TextColumn: opt.TextColumn})
	if err != nil {
		return nil, err
	}
	col := opt.TextColumn
	if col == "" {
		col = "text"
	}
	return &DataSource{path: path, r: r, start: r.Cursor(), textColumn: col, opt: opt.FileOptions}, nil
}

// isDataSet reports whether path names a data set: a directory, or a file of a kind
// engine/dataset reads.
func isDataSet(path string) bool {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return true
	}
	p := strings.ToLower(path)
	return strings.HasSuffix(p, ".parquet") || strings.HasSuffix(p, ".jsonl") || strings.HasSuffix(p, ".jsonl.gz")
}

// notDataOptions refuses the data set settings for a source of another kind, where they
// would mean nothing. A file source is its own train split.
func notDataOptions(kind string, spec SourceSpec) error {
	if len(spec.Split) > 0 && !slices.Contains(spec.Split, "train") {
		return fmt.Errorf("source %q: split %s: a %s source is one split, train; splits are a data set directory's", spec.Path, strings.Join(spec.Split, ", "), kind)
	}
	if spec.TextColumn != "" {
		return fmt.Errorf("source %q: text_column is a parquet or JSONL setting, not a %s source's", spec.Path, kind)
	}
	return nil
}

// Files are the files the source reads, in order.
func (s *DataSource) Files() []string { return s.r.Files() }

func (s *DataSource) Next(ctx context.Context) (Item, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Item{}, err
		}
		row, err := s.r.Next()
		if err == io.EOF {
			if !s.opt.Loop || s.epochItems == 0 {
				return Item{}, io.EOF
			}
			s.epoch++
			s.epochItems = 0
			if err := s.r.Seek(s.start); err != nil {
				return Item{}, err
			}
			continue
		}
		if err == nil {
			var it Item
			if it, err = s.item(row); err == nil {
				s.count++
				s.epochItems++
				return it, nil
			}
		}
		var de *dataset.Error
		var re *RowError
		if s.opt.SkipInvalid && (errors.As(err, &re) || errors.As(err, &de) && de.Skippable()) {
			s.skipped++
			if s.firstSkip == nil {
				s.firstSkip = err
			}
			continue
		}
		return Item{}, err
	}
}

// item reads a row's position.
func (s *DataSource) item(row dataset.Row) (Item, error) {
	origin := fmt.Sprintf("%s:%d", row.File, row.Row)
	if row.Layout == dataset.FENRows {
		bad := func(col string, p RowProblem, err error) error {
			return &RowError{File: row.File, Row: row.Row, Column: col, Problem: p, Err: err}
		}
		pos, err := parseLegal(strings.TrimSpace(row.FEN))
		if err != nil {
			return Item{}, bad(dataset.FENColumn, IllegalPosition, err)
		}
		it := Item{FEN: pos.FEN(), Origin: origin}
		switch t := strings.TrimSpace(row.Task); t {
		case "":
		case "P", "policy":
			it.Task = MixPolicy
		case "A", "env":
			it.Task = MixEnv
		default:
			return Item{}, bad(dataset.TaskColumn, UnknownTask, fmt.Errorf("%q is not P, A, policy or env", clip(t, 20)))
		}
		return it, nil
	}
	bad := func(p RowProblem, err error) error {
		return &RowError{File: row.File, Row: row.Row, Column: s.textColumn, Problem: p, Err: err}
	}
	body := strings.TrimSpace(row.Text)
	if body == "" {
		return Item{}, bad(NotARow, errors.New("empty text"))
	}
	// The FEN is judged first, so that an illegal position is told from a malformed row.
	var fen string
	switch {
	case strings.HasPrefix(body, "P:"):
		fen, _, _ = strings.Cut(body[2:], "M:")
	case strings.HasPrefix(body, "A:"):
		fen, _, _ = strings.Cut(body[2:], "+")
	case strings.Count(body, "+") == 6: // an A: row without its prefix, as ParseSample takes it
		fen, _, _ = strings.Cut(body, "+")
	default:
		return Item{}, bad(UnknownTask, fmt.Errorf("%q: want a P: or A: row", clip(body, 40)))
	}
	if err := ValidatePosition(strings.TrimSpace(fen)); err != nil {
		return Item{}, bad(IllegalPosition, err)
	}
	smp, err := ParseSample(row.Text)
	if err != nil {
		return Item{}, bad(NotARow, err)
	}
	return sampleItem(smp, origin), nil
}

func (s *DataSource) Cursor() Cursor {
	c := s.r.Cursor()
	return Cursor{Kind: "dataset", Path: s.path, File: c.File, Line: int(c.Row), Epoch: s.epoch, Count: s.count}
}

// Restore continues from a cursor of this data set; it also takes the cursor of the line
// source that read JSONL files before (kind "jsonl": its lines consumed are the rows).
func (s *DataSource) Restore(c Cursor) error {
	file := c.File
	if c.Kind == "jsonl" && file == "" && len(s.r.Files()) == 1 {
		file = s.start.File
	}
	if (c.Kind != "dataset" && c.Kind != "jsonl") || c.Path != s.path {
		return fmt.Errorf("data set %s: cursor is for %s source %s", s.path, c.Kind, c.Path)
	}
	if err := s.r.Seek(dataset.Cursor{File: file, Row: int64(c.Line)}); err != nil {
		return fmt.Errorf("data set %s: restore: %w", s.path, err)
	}
	s.epoch, s.count = c.Epoch, c.Count
	s.epochItems = 1 // the epoch has produced items before the cursor
	return nil
}

// Skipped counts the rows skipped as invalid (SkipInvalid); FirstSkipped is the first one's
// error, or nil.
func (s *DataSource) Skipped() int64      { return s.skipped }
func (s *DataSource) FirstSkipped() error { return s.firstSkip }

func (s *DataSource) Close() error { return s.r.Close() }
