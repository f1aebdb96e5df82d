package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/rookscript/rookscript/engine/atomicfile"
)

// maxHeader is the reference implementation's limit on the JSON header.
const maxHeader = 100_000_000

// dtypes lists the dtypes the reader understands structurally: element size and the rank
// the reference writer sorts by (descending, so wider types come first and stay aligned).
var dtypes = map[string]struct{ size, rank int }{
	"BOOL": {1, 0}, "U8": {1, 1}, "I8": {1, 2}, "F8_E5M2": {1, 3}, "F8_E4M3": {1, 4},
	"I16": {2, 5}, "U16": {2, 6}, "F16": {2, 7}, "BF16": {2, 8}, "I32": {4, 9}, "U32": {4, 10},
	"F32": {4, 11}, "F64": {8, 12}, "I64": {8, 13}, "U64": {8, 14},
}

// Tensor is one tensor of a safetensors file: raw little-endian bytes plus dtype and shape.
type Tensor struct {
	Name  string
	DType string // "F32", "F16", "BF16", "I32", "I64", ...
	Shape []int
	Data  []byte
	file  string // for error messages; empty for tensors built in memory
}

// File is a parsed safetensors file. Tensor data aliases the bytes it was parsed from.
type File struct {
	Path     string
	Metadata map[string]string
	Tensors  map[string]Tensor
}

// Names returns the tensor names in sorted order.
func (s *File) Names() []string {
	names := make([]string, 0, len(s.Tensors))
	for n := range s.Tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NumElements is the product of the shape (1 for a scalar).
func (t Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

func (t Tensor) where() string {
	if t.file == "" {
		return fmt.Sprintf("tensor %q", t.Name)
	}
	return fmt.Sprintf("%s: tensor %q", t.file, t.Name)
}

// Float32s converts an F32, F16 or BF16 tensor to float32. The half-precision conversions are
// exact (every F16 and BF16 value, subnormals, infinities and NaN payloads included, is a float32).
func (t Tensor) Float32s() ([]float32, error) {
	out := make([]float32, t.NumElements())
	return out, t.DecodeFloat32(out)
}

// DecodeFloat32 is Float32s into a caller buffer of exactly NumElements floats.
func (t Tensor) DecodeFloat32(dst []float32) error {
	n := len(dst)
	switch t.DType {
	case "F32":
		if len(t.Data) != 4*n {
			return fmt.Errorf("safetensors: %s: %d bytes for %d F32 values", t.where(), len(t.Data), n)
		}
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case "F16", "BF16":
		if len(t.Data) != 2*n {
			return fmt.Errorf("safetensors: %s: %d bytes for %d %s values", t.where(), len(t.Data), n, t.DType)
		}
		conv := F16ToF32
		if t.DType == "BF16" {
			conv = BF16ToF32
		}
		for i := range dst {
			dst[i] = conv(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
	default:
		return fmt.Errorf("safetensors: %s has dtype %s; want F32, F16 or BF16", t.where(), t.DType)
	}
	return nil
}

// Ints converts an I32 or I64 tensor to int.
func (t Tensor) Ints() ([]int, error) {
	n := t.NumElements()
	out := make([]int, n)
	switch t.DType {
	case "I32":
		if len(t.Data) != 4*n {
			return nil, fmt.Errorf("safetensors: %s: %d bytes for %d I32 values", t.where(), len(t.Data), n)
		}
		for i := range out {
			out[i] = int(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
		}
	case "I64":
		if len(t.Data) != 8*n {
			return nil, fmt.Errorf("safetensors: %s: %d bytes for %d I64 values", t.where(), len(t.Data), n)
		}
		for i := range out {
			v := int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
			if int64(int(v)) != v {
				return nil, fmt.Errorf("safetensors: %s: value %d overflows int", t.where(), v)
			}
			out[i] = int(v)
		}
	default:
		return nil, fmt.Errorf("safetensors: %s has dtype %s; want I32 or I64", t.where(), t.DType)
	}
	return out, nil
}

// F16ToF32 widens an IEEE 754 binary16 value.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN: keep the payload in the top mantissa bits
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal mant·2^-24: normalise, every one is a normal float32
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	default:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
}

// BF16ToF32 widens a bfloat16 value: it is the top half of a float32.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32 builds an F32 tensor from values; len(v) must match shape.
func F32(name string, shape []int, v []float32) Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Tensor{Name: name, DType: "F32", Shape: append([]int(nil), shape...), Data: b}
}

// I32 builds an I32 tensor from values; len(v) must match shape.
func I32(name string, shape []int, v []int32) Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return Tensor{Name: name, DType: "I32", Shape: append([]int(nil), shape...), Data: b}
}

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

// Write writes tensors to path atomically (temporary file in the same directory,
// fsync, rename). As the reference writer does, data is laid out by dtype width (widest first)
// then name, the header lists tensors in that order after "__metadata__", and the header is
// padded with spaces to a multiple of 8 bytes so the data section is aligned. metadata gets
// "format": "pt" when it has no "format" key, as PyTorch-produced files carry.
func Write(path string, tensors []Tensor, metadata map[string]string) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("safetensors: writing %s: %s", path, fmt.Sprintf(format, a...))
	}
	ts := append([]Tensor(nil), tensors...)
	seen := map[string]bool{}
	for _, t := range ts {
		dt, ok := dtypes[t.DType]
		switch {
		case t.Name == "" || t.Name == "__metadata__":
			return fail("invalid tensor name %q", t.Name)
		case seen[t.Name]:
			return fail("tensor %q given twice", t.Name)
		case !ok:
			return fail("tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		for _, d := range t.Shape {
			if d < 0 {
				return fail("tensor %q: negative dimension in shape %v", t.Name, t.Shape)
			}
		}
		if len(t.Data) != t.NumElements()*dt.size {
			return fail("tensor %q: %d bytes of data for shape %v of %s", t.Name, len(t.Data), t.Shape, t.DType)
		}
		seen[t.Name] = true
	}
	sort.Slice(ts, func(i, j int) bool {
		ri, rj := dtypes[ts[i].DType].rank, dtypes[ts[j].DType].rank
		if ri != rj {
			return ri > rj
		}
		return ts[i].Name < ts[j].Name
	})

	meta := map[string]string{"format": "pt"}
	for k, v := range metadata {
		meta[k] = v
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var h strings.Builder
	h.WriteString(`{"__metadata__":{`)
	for i, k := range keys {
		if i > 0 {
			h.WriteByte(',')
		}
		h.WriteString(jsonString(k) + ":" + jsonString(meta[k]))
	}
	h.WriteByte('}')
	var off int
	for _, t := range ts {
		h.WriteString("," + jsonString(t.Name) + `:{"dtype":` + jsonString(t.DType) + `,"shape":[`)
		for i, d := range t.Shape {
			if i > 0 {
				h.WriteByte(',')
			}
			fmt.Fprintf(&h, "%d", d)
		}
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, off, off+len(t.Data))
		off += len(t.Data)
	}
	h.WriteByte('}')
	if pad := (8 - h.Len()%8) % 8; pad > 0 {
		h.WriteString(strings.Repeat(" ", pad))
	}

	return atomicfile.Write(path, func(w io.Writer) error {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(h.Len()))
		if _, err := w.Write(n[:]); err != nil {
			return err
		}
		if _, err := io.WriteString(w, h.String()); err != nil {
			return err
		}
		for _, t := range ts {
			if _, err := w.Write(t.Data); err != nil {
				return err
			}
		}
		return nil
	})
}

// jsonString encodes s as a JSON string without Go's HTML escaping, matching serde_json.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a Go string always encodes
	}
	return strings.TrimSuffix(b.String(), "\n")
}
