package dataset

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

type jsonlSource struct {
	path       string
	f          *os.File
	gz         *gzip.Reader // nil for a plain file
	r          *bufio.Reader
	textColumn string
	layout     Layout // 0 until the first non-blank line decides it
	line       int64  // lines consumed
	fatal      error
}

func openJSONL(path string, gzipped bool, textColumn string, skip int64) (source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Kind: NoData, File: path, Err: err}
	}
	s := &jsonlSource{path: path, f: f, textColumn: textColumn}
	var in io.Reader = f
	if gzipped {
		if s.gz, err = gzip.NewReader(bufio.NewReaderSize(f, 64<<10)); err != nil {
			f.Close()
			return nil, &Error{Kind: Corrupt, File: path, Err: fmt.Errorf("gzip header: %w", err)}
		}
		in = s.gz
	}
	s.r = bufio.NewReaderSize(in, 64<<10)
	// The layout is the first non-blank line's, even when a cursor skips it.
	for s.line < skip {
		line, err := s.readLine()
		if err == io.EOF {
			s.close()
			return nil, &Error{Kind: BadCursor, File: path, Err: fmt.Errorf("cursor skips %d lines of a file of %d", skip, s.line)}
		}
		if err != nil {
			s.close()
			return nil, err
		}
		if s.layout == 0 {
			s.decideLayout(line)
		}
	}
	return s, nil
}

// readLine returns the next line without its end, or io.EOF when none is left. A read error
// (a truncated or damaged gzip stream) is Corrupt: the partial line is never a row.
func (s *jsonlSource) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLineBytes {
			return nil, &Error{Kind: Corrupt, File: s.path, Row: s.line + 1, Err: fmt.Errorf("line longer than %d bytes", MaxLineBytes)}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(line) == 0:
			return nil, io.EOF
		case err == io.EOF: // a last line without its newline
		case err != nil:
			return nil, &Error{Kind: Corrupt, File: s.path, Row: s.line + 1, Err: err}
		}
		s.line++
		return bytes.TrimRight(line, "\r\n"), nil
	}
}

func (s *jsonlSource) next() (Row, error) {
	if s.fatal != nil {
		return Row{}, s.fatal
	}
	for {
		line, err := s.readLine()
		if err == io.EOF {
			return Row{}, io.EOF
		}
		if err != nil {
			s.fatal = err
			return Row{}, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		return s.parse(line)
	}
}

func (s *jsonlSource) decideLayout(line []byte) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(line, &obj) != nil || obj == nil {
		return
	}
	if _, ok := obj[s.textColumn]; ok {
		s.layout = TextRows
	} else if _, ok := obj[FENColumn]; ok {
		s.layout = FENRows
	}
}

func (s *jsonlSource) parse(line []byte) (Row, error) {
	if trimmed := bytes.TrimSpace(line); trimmed[0] != '{' {
		return Row{}, &Error{Kind: BadLine, File: s.path, Row: s.line, Err: fmt.Errorf("a JSON %s, not an object", jsonKind(trimmed))}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return Row{}, &Error{Kind: BadLine, File: s.path, Row: s.line, Err: err}
	}
	if s.layout == 0 {
		s.decideLayout(line)
		if s.layout == 0 {
			return Row{}, &Error{Kind: MissingColumn, File: s.path, Row: s.line, Column: s.textColumn,
				Err: fmt.Errorf("the first row has neither a %q nor a %q key", s.textColumn, FENColumn)}
		}
	}
	row := Row{File: s.path, Row: s.line, Layout: s.layout}
	var err error
	if s.layout == TextRows {
		row.Text, err = s.str(obj, s.textColumn, false)
		return row, err
	}
	if row.FEN, err = s.str(obj, FENColumn, false); err != nil {
		return Row{}, err
	}
	row.Task, err = s.str(obj, TaskColumn, true)
	if err != nil {
		return Row{}, err
	}
	return row, nil
}

// str reads obj[key] as a string; an optional key may be absent or null.
func (s *jsonlSource) str(obj map[string]json.RawMessage, key string, optional bool) (string, error) {
	raw, ok := obj[key]
	if !ok {
		if optional {
			return "", nil
		}
		return "", &Error{Kind: MissingColumn, File: s.path, Row: s.line, Column: key}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		got := jsonKind(raw)
		if got == "null" && optional {
			return "", nil
		}
		return "", &Error{Kind: NotString, File: s.path, Row: s.line, Column: key, Got: got}
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", &Error{Kind: BadLine, File: s.path, Row: s.line, Column: key, Err: err}
	}
	return v, nil
}

func jsonKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

func (s *jsonlSource) close() error {
	var err error
	if s.gz != nil {
		err = s.gz.Close()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
