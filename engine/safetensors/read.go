package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"unicode/utf8"
)

// maxHeader is the reference implementation's limit on the JSON header.
const maxHeader = 100_000_000

// Read reads and validates a whole safetensors file.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return Parse(path, b)
}

// headerEntry is one tensor's header record.
type headerEntry struct {
	DType   *string  `json:"dtype"`
	Shape   *[]int64 `json:"shape"`
	Offsets []uint64 `json:"data_offsets"`
}

// Parse validates b as a safetensors file; path only names it in errors. It checks
// the header length against the file, that the header is one JSON object without duplicate
// keys, every dtype is known, every byte count matches shape×dtype, and that the tensors tile
// the data section exactly (in range, no overlap, no gap).
func Parse(path string, b []byte) (*File, error) {
	fail := func(format string, a ...any) (*File, error) {
		return nil, fmt.Errorf("safetensors: %s: %s", path, fmt.Sprintf(format, a...))
	}
	if len(b) < 8 {
		return fail("file is %d bytes, shorter than the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		return fail("header length %d exceeds the %d bytes after it (truncated or not safetensors)", n, len(b)-8)
	}
	if n > maxHeader {
		return fail("header length %d exceeds the %d-byte limit", n, maxHeader)
	}
	hdr := b[8 : 8+n]
	data := b[8+n:]
	if len(hdr) == 0 || hdr[0] != '{' {
		return fail("header does not start with a JSON object")
	}
	if !utf8.Valid(hdr) {
		return fail("header is not valid UTF-8")
	}

	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return fail("corrupt header: %v", err)
	}
	st := &File{Path: path, Tensors: map[string]Tensor{}}
	type span struct {
		name       string
		begin, end uint64
	}
	var spans []span
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail("corrupt header: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return fail("corrupt header: key %v is not a string", tok)
		}
		if seen[key] {
			return fail("header names %q twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fail("corrupt header at %q: %v", key, err)
		}
		if key == "__metadata__" {
			if err := json.Unmarshal(raw, &st.Metadata); err != nil {
				return fail("__metadata__ must map strings to strings: %v", err)
			}
			continue
		}
		var e headerEntry
		ed := json.NewDecoder(bytes.NewReader(raw))
		ed.DisallowUnknownFields()
		if err := ed.Decode(&e); err != nil {
			return fail("tensor %q: bad header entry: %v", key, err)
		}
		if e.DType == nil || e.Shape == nil || e.Offsets == nil {
			return fail("tensor %q: header entry needs dtype, shape and data_offsets", key)
		}
		dt, ok := dtypes[*e.DType]
		if !ok {
			return fail("tensor %q: unknown dtype %q", key, *e.DType)
		}
		if len(e.Offsets) != 2 || e.Offsets[0] > e.Offsets[1] {
			return fail("tensor %q: data_offsets %v is not [begin, end] with begin <= end", key, e.Offsets)
		}
		if e.Offsets[1] > uint64(len(data)) {
			return fail("tensor %q: data_offsets %v run past the %d-byte data section", key, e.Offsets, len(data))
		}
		shape := make([]int, len(*e.Shape))
		numel := uint64(1)
		for i, d := range *e.Shape {
			if d < 0 {
				return fail("tensor %q: negative dimension in shape %v", key, *e.Shape)
			}
			// Any element count beyond the data section is a mismatch anyway; capping it keeps
			// the product from overflowing.
			if d != 0 && numel > uint64(len(data))/uint64(d) {
				numel = uint64(len(data)) + 1
			} else {
				numel *= uint64(d)
			}
			shape[i] = int(d)
		}
		if want := e.Offsets[1] - e.Offsets[0]; numel > want || numel*uint64(dt.size) != want {
			return fail("tensor %q: shape %v of %s needs %s bytes but data_offsets %v hold %d",
				key, shape, *e.DType, byteCount(*e.Shape, dt.size), e.Offsets, want)
		}
		st.Tensors[key] = Tensor{Name: key, DType: *e.DType, Shape: shape,
			Data: data[e.Offsets[0]:e.Offsets[1]:e.Offsets[1]], file: path}
		spans = append(spans, span{key, e.Offsets[0], e.Offsets[1]})
	}
	if _, err := dec.Token(); err != nil {
		return fail("corrupt header: %v", err)
	}
	if rest := hdr[dec.InputOffset():]; len(bytes.Trim(rest, " \t\r\n")) != 0 {
		return fail("corrupt header: %d unexpected bytes after the JSON object", len(rest))
	}

	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].end < spans[j].end
	})
	var pos uint64
	prev := ""
	for _, s := range spans {
		switch {
		case s.begin > pos:
			return fail("data bytes [%d, %d) belong to no tensor (gap before %q)", pos, s.begin, s.name)
		case s.begin < pos:
			return fail("tensor %q overlaps tensor %q", s.name, prev)
		}
		pos, prev = s.end, s.name
	}
	if pos != uint64(len(data)) {
		return fail("data bytes [%d, %d) belong to no tensor (trailing bytes)", pos, len(data))
	}
	return st, nil
}

// byteCount formats shape×size for an error message without overflowing.
func byteCount(shape []int64, size int) string {
	f := float64(size)
	for _, d := range shape {
		f *= float64(d)
	}
	if f < 1<<53 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.3g", f)
}
