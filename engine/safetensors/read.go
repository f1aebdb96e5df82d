package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
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

// Parse validates b as a safetensors file; path only names it in errors, which are
// *FormatError. It checks
// the header length against the file, that the header is one JSON object without duplicate
// keys, every dtype is known, every byte count matches shape×dtype, and that the tensors tile
// the data section exactly (in range, no overlap, no gap).
func Parse(path string, b []byte) (*File, error) {
	hdr, data, fe := split(b)
	if fe == nil {
		var f *File
		var spans []span
		if f, spans, fe = parseHeader(path, hdr, data); fe == nil {
			if fe = checkTiling(spans, uint64(len(data))); fe == nil {
				return f, nil
			}
		}
	}
	fe.File = path
	return nil, fe
}

// split checks the 8-byte header length and returns the JSON header and the data section.
func split(b []byte) (hdr, data []byte, err *FormatError) {
	if len(b) < 8 {
		return nil, nil, bad("", "file is %d bytes, shorter than the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		return nil, nil, bad("", "header length %d exceeds the %d bytes after it (truncated or not safetensors)", n, len(b)-8)
	}
	if n > maxHeader {
		return nil, nil, bad("", "header length %d exceeds the %d-byte limit", n, maxHeader)
	}
	hdr, data = b[8:8+n], b[8+n:]
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, nil, bad("", "header does not start with a JSON object")
	}
	if !utf8.Valid(hdr) {
		return nil, nil, bad("", "header is not valid UTF-8")
	}
	return hdr, data, nil
}

// span is the byte range of one tensor in the data section.
type span struct {
	name       string
	begin, end uint64
}

// parseHeader reads the header's JSON object key by key (so a duplicate key is seen) into a
// File whose tensors alias data.
func parseHeader(path string, hdr, data []byte) (*File, []span, *FormatError) {
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, nil, bad("", "corrupt header: %v", err)
	}
	f := &File{Path: path, Tensors: map[string]Tensor{}}
	var spans []span
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, bad("", "corrupt header: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, nil, bad("", "corrupt header: key %v is not a string", tok)
		}
		if seen[key] {
			return nil, nil, bad(key, "named twice in the header")
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, bad(key, "corrupt header: %v", err)
		}
		if key == "__metadata__" {
			if err := json.Unmarshal(raw, &f.Metadata); err != nil {
				return nil, nil, bad("", "__metadata__ must map strings to strings: %v", err)
			}
			continue
		}
		t, sp, err := parseEntry(key, raw, data)
		if err != nil {
			return nil, nil, bad(key, "%v", err)
		}
		t.file = path
		f.Tensors[key] = t
		spans = append(spans, sp)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, bad("", "corrupt header: %v", err)
	}
	if rest := hdr[dec.InputOffset():]; len(bytes.Trim(rest, " \t\r\n")) != 0 {
		return nil, nil, bad("", "corrupt header: %d unexpected bytes after the JSON object", len(rest))
	}
	return f, spans, nil
}

// parseEntry validates one tensor's header record against the data section.
func parseEntry(key string, raw json.RawMessage, data []byte) (Tensor, span, error) {
	var e headerEntry
	ed := json.NewDecoder(bytes.NewReader(raw))
	ed.DisallowUnknownFields()
	if err := ed.Decode(&e); err != nil {
		return Tensor{}, span{}, fmt.Errorf("bad header entry: %v", err)
	}
	if e.DType == nil || e.Shape == nil || e.Offsets == nil {
		return Tensor{}, span{}, errors.New("header entry needs dtype, shape and data_offsets")
	}
	dt, ok := dtypes[*e.DType]
	if !ok {
		return Tensor{}, span{}, fmt.Errorf("unknown dtype %q", *e.DType)
	}
	if len(e.Offsets) != 2 || e.Offsets[0] > e.Offsets[1] {
		return Tensor{}, span{}, fmt.Errorf("data_offsets %v is not [begin, end] with begin <= end", e.Offsets)
	}
	if e.Offsets[1] > uint64(len(data)) {
		return Tensor{}, span{}, fmt.Errorf("data_offsets %v run past the %d-byte data section", e.Offsets, len(data))
	}
	shape := make([]int, len(*e.Shape))
	numel := uint64(1)
	for i, d := range *e.Shape {
		if d < 0 {
			return Tensor{}, span{}, fmt.Errorf("negative dimension in shape %v", *e.Shape)
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
		return Tensor{}, span{}, fmt.Errorf("shape %v of %s needs %s bytes but data_offsets %v hold %d",
			shape, *e.DType, byteCount(*e.Shape, dt.size), e.Offsets, want)
	}
	t := Tensor{Name: key, DType: *e.DType, Shape: shape, Data: data[e.Offsets[0]:e.Offsets[1]:e.Offsets[1]]}
	return t, span{key, e.Offsets[0], e.Offsets[1]}, nil
}

// checkTiling reports a gap, an overlap or trailing bytes among the tensors' byte ranges.
func checkTiling(spans []span, size uint64) *FormatError {
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
			return bad(s.name, "data bytes [%d, %d) before it belong to no tensor", pos, s.begin)
		case s.begin < pos:
			return bad(s.name, "overlaps tensor %q", prev)
		}
		pos, prev = s.end, s.name
	}
	if pos != size {
		return bad("", "data bytes [%d, %d) belong to no tensor (trailing bytes)", pos, size)
	}
	return nil
}

// bad is a *FormatError of the file Parse fills in.
func bad(tensor, format string, a ...any) *FormatError {
	return &FormatError{Tensor: tensor, Reason: fmt.Sprintf(format, a...)}
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
