package dataset

import (
	"fmt"
	"strings"
)

// Kind says what is wrong.
type Kind int

const (
	// MissingColumn: a column the rows need is absent, from the file's schema (Row 0) or
	// from one JSONL line.
	MissingColumn Kind = iota + 1
	// NotString: a column whose type, or a value that, is not a string; Got names what it is
	// ("null", "INT64", "number", ...).
	NotString
	// BadLine: a JSONL line that is not one JSON object.
	BadLine
	// Corrupt: a file that cannot be read on: truncated, bad magic or footer, an undecodable
	// page, a bad gzip stream, a failure inside the parquet library.
	Corrupt
	// NoData: no file for the path and split, a shard missing from a numbered set, or a file
	// name this package does not read.
	NoData
	// BadCursor: a cursor that does not fit the data: its file is not in the set, or it has
	// fewer rows than the cursor skips.
	BadCursor
)

func (k Kind) String() string {
	switch k {
	case MissingColumn:
		return "missing column"
	case NotString:
		return "not a string"
	case BadLine:
		return "bad JSON line"
	case Corrupt:
		return "corrupt file"
	case NoData:
		return "no data"
	case BadCursor:
		return "bad cursor"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Error is every error of this package: what is wrong, and where.
type Error struct {
	Kind   Kind
	File   string // the file's path
	Row    int64  // 1-based row (the line number in JSONL); 0 when it concerns the whole file
	Column string // the column, for MissingColumn and NotString
	Got    string // for NotString: what the column or value is
	Err    error  // the underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("dataset: ")
	b.WriteString(e.File)
	if e.Row > 0 {
		fmt.Fprintf(&b, ": row %d", e.Row)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, ": column %q", e.Column)
	}
	b.WriteString(": ")
	b.WriteString(e.Kind.String())
	if e.Got != "" {
		fmt.Fprintf(&b, " (%s)", e.Got)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Skippable reports whether the Reader stays usable after e: a bad row (Row > 0) that is
// missing a column, holds a non-string, or is not a JSON object. Next then goes on with the
// row after it. Every other error ends the Reader.
func (e *Error) Skippable() bool {
	return e.Row > 0 && (e.Kind == MissingColumn || e.Kind == NotString || e.Kind == BadLine)
}
