package dataset

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// MaxLineBytes bounds one JSONL line; RookWorld rows are a few hundred bytes.
const MaxLineBytes = 8 << 20

// Options select what Open reads.
type Options struct {
	Split      string // a directory's shards: "train" (when empty), "test", or another split's name
	TextColumn string // the text rows' column: "text" when empty
}

// Layout is what a row holds.
type Layout int

const (
	TextRows Layout = iota + 1 // Row.Text
	FENRows                    // Row.FEN and Row.Task
)

// Column names of the FEN layout.
const (
	FENColumn  = "fen"
	TaskColumn = "task"
)

// Row is one prompt row.
type Row struct {
	File   string // the file's path
	Row    int64  // 1-based within File (JSONL: the line number)
	Layout Layout
	Text   string
	FEN    string
	Task   string // "" when the file has no task column or the value is null
}

// Cursor is a position in a Reader's stream: the next row is row Row+1 of File.
type Cursor struct {
	File string `json:"file"` // relative to the path given to Open ("." joined), slash-separated
	Row  int64  `json:"row"`  // rows (JSONL: lines) of File already consumed
}

// Reader streams the rows of a file or a set of shards, in order.
type Reader struct {
	root  string   // the path given to Open
	files []string // paths, in reading order
	rels  []string // their Cursor names
	opt   Options

	idx  int    // the file being read
	src  source // nil before a file is opened or after it ended
	skip int64  // rows to skip when files[idx] is opened
	pos  int64  // rows of files[idx] consumed
	err  error  // sticky: an error that ended the Reader
}

// source reads one file. next returns io.EOF at its end; after a skippable *Error it is at
// the next row; after any other error it is not called again.
type source interface {
	next() (Row, error)
	close() error
}

// Open finds the files of path (see the package doc); Next or Seek opens the first one read.
func Open(path string, opt Options) (*Reader, error) {
	if opt.Split == "" {
		opt.Split = "train"
	}
	if opt.TextColumn == "" {
		opt.TextColumn = "text"
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, &Error{Kind: NoData, File: path, Err: err}
	}
	r := &Reader{root: path, opt: opt}
	if !st.IsDir() {
		if fileKind(path) == "" {
			return nil, &Error{Kind: NoData, File: path, Err: errors.New("not a .parquet, .jsonl or .jsonl.gz file")}
		}
		r.files = []string{path}
		r.rels = []string{filepath.Base(path)}
		return r, nil
	}
	r.files, err = shards(path, opt.Split)
	if err != nil {
		return nil, err
	}
	for _, f := range r.files {
		rel, err := filepath.Rel(path, f)
		if err != nil {
			return nil, &Error{Kind: NoData, File: f, Err: err}
		}
		r.rels = append(r.rels, filepath.ToSlash(rel))
	}
	return r, nil
}

// Files are the paths the Reader reads, in order.
func (r *Reader) Files() []string { return r.files }

// Next returns the next row, or io.EOF after the last one.
func (r *Reader) Next() (Row, error) {
	if r.err != nil {
		return Row{}, r.err
	}
	for {
		if r.src == nil {
			if r.idx >= len(r.files) {
				return Row{}, io.EOF
			}
			if err := r.openCurrent(); err != nil {
				return Row{}, err
			}
		}
		row, err := r.src.next()
		if err == nil {
			r.pos = row.Row
			return row, nil
		}
		if err == io.EOF {
			if err := r.src.close(); err != nil {
				return Row{}, r.fail(&Error{Kind: Corrupt, File: r.files[r.idx], Err: err})
			}
			r.src = nil
			if r.idx+1 < len(r.files) {
				r.idx, r.pos = r.idx+1, 0
				continue
			}
			r.idx = len(r.files) // the end: Cursor stays on the last file
			return Row{}, io.EOF
		}
		var de *Error
		if errors.As(err, &de) && de.Skippable() {
			r.pos = de.Row
			return Row{}, err
		}
		return Row{}, r.fail(err)
	}
}

// Cursor is the position after the last row Next returned (or skipped with an error).
func (r *Reader) Cursor() Cursor {
	i := min(r.idx, len(r.files)-1)
	return Cursor{File: r.rels[i], Row: r.pos}
}

// Seek positions the Reader so that Next returns row c.Row+1 of c.File. It clears an error
// that ended the Reader.
func (r *Reader) Seek(c Cursor) error {
	r.closeSource()
	r.err = nil
	i := slices.Index(r.rels, c.File)
	if i < 0 || c.Row < 0 {
		return r.fail(&Error{Kind: BadCursor, File: r.root,
			Err: fmt.Errorf("cursor %s:%d is not in this data set", c.File, c.Row)})
	}
	r.idx, r.skip, r.pos = i, c.Row, c.Row
	return r.openCurrent()
}

// ErrClosed is returned by a Reader after Close.
var ErrClosed = errors.New("dataset: reader is closed")

// Close closes the open file.
func (r *Reader) Close() error {
	err := r.closeSource()
	r.err = ErrClosed
	return err
}

func (r *Reader) closeSource() error {
	if r.src == nil {
		return nil
	}
	err := r.src.close()
	r.src = nil
	return err
}

func (r *Reader) fail(err error) error {
	r.closeSource()
	r.err = err
	return err
}

func (r *Reader) openCurrent() error {
	path := r.files[r.idx]
	var src source
	var err error
	switch fileKind(path) {
	case "parquet":
		src, err = openParquet(path, r.opt.TextColumn, r.skip)
	default:
		src, err = openJSONL(path, fileKind(path) == "jsonl.gz", r.opt.TextColumn, r.skip)
	}
	r.skip = 0
	if err != nil {
		return r.fail(err)
	}
	r.src = src
	return nil
}

func fileKind(path string) string {
	switch {
	case strings.HasSuffix(path, ".parquet"):
		return "parquet"
	case strings.HasSuffix(path, ".jsonl"):
		return "jsonl"
	case strings.HasSuffix(path, ".jsonl.gz"):
		return "jsonl.gz"
	}
	return ""
}

// hfShard matches Hugging Face's shard names: train-00000-of-00003.parquet, with an optional
// suffix after the count.
var hfShard = regexp.MustCompile(`-(\d+)-of-(\d+)(?:-[^/]*)?\.(?:parquet|jsonl|jsonl\.gz)$`)

// HasSplit reports whether directory dir holds files of split, where Open looks for them. A
// caller with a choice of splits (a test split where there is one) asks it first, so that
// Open's errors keep meaning that the data is missing or damaged.
func HasSplit(dir, split string) bool { return len(splitFiles(dir, split)) > 0 }

// shards lists a directory's files of split, in name order, and checks that a numbered set is
// complete.
func shards(dir, split string) ([]string, error) {
	files := splitFiles(dir, split)
	if len(files) == 0 {
		return nil, &Error{Kind: NoData, File: dir,
			Err: fmt.Errorf("no %q shards in data/%s-*, %s-* or %s/*", split, split, split, split)}
	}
	return files, checkShardSet(files)
}

// splitFiles are the files of split in the first of its places that has any, in name order.
func splitFiles(dir, split string) []string {
	places := []struct{ dir, prefix string }{
		{filepath.Join(dir, "data"), split + "-"},
		{dir, split + "-"},
		{filepath.Join(dir, split), ""},
	}
	for _, p := range places {
		entries, err := os.ReadDir(p.dir)
		if err != nil {
			continue
		}
		var files []string
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() && strings.HasPrefix(name, p.prefix) && fileKind(name) != "" {
				files = append(files, filepath.Join(p.dir, name))
			}
		}
		if len(files) > 0 {
			sort.Strings(files)
			return files
		}
	}
	return nil
}

func checkShardSet(files []string) error {
	total := -1
	seen := map[int]bool{}
	for _, f := range files {
		m := hfShard.FindStringSubmatch(filepath.Base(f))
		if m == nil {
			continue
		}
		i, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		if total >= 0 && n != total {
			return &Error{Kind: NoData, File: f, Err: fmt.Errorf("shard counts differ: of %d and of %d", total, n)}
		}
		total = n
		if i >= n || seen[i] {
			return &Error{Kind: NoData, File: f, Err: fmt.Errorf("shard %d of %d is out of range or repeated", i, n)}
		}
		seen[i] = true
	}
	if total < 0 {
		return nil // not a numbered set
	}
	if len(seen) != len(files) {
		return &Error{Kind: NoData, File: filepath.Dir(files[0]), Err: errors.New("files outside the numbered set of shards beside them")}
	}
	for i := 0; i < total; i++ {
		if !seen[i] {
			return &Error{Kind: NoData, File: filepath.Dir(files[0]),
				Err: fmt.Errorf("shard %05d of %05d is missing", i, total)}
		}
	}
	return nil
}
