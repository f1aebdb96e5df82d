package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stRaw assembles a safetensors file from a literal header and data section.
func stRaw(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	f16 := Tensor{Name: "half", DType: "F16", Shape: []int{2}, Data: []byte{0x00, 0x3c, 0x00, 0xc0}}
	in := []Tensor{
		F32("b.weight", []int{2, 3}, []float32{1, -2, 3.5, float32(math.Inf(1)), 0, -0.25}),
		I32("a.ids", []int{4}, []int32{7, -1, math.MaxInt32, math.MinInt32}),
		F32("scalar", nil, []float32{42}),
		F32("empty", []int{0, 3}, nil),
		f16,
	}
	if err := Write(path, in, map[string]string{"note": "x<y&z"}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	if n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}
	hdr := string(raw[8 : 8+n])
	// Reference layout: metadata first, wider dtypes first, then names; no HTML escaping.
	wantPrefix := `{"__metadata__":{"format":"pt","note":"x<y&z"},"b.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"empty":{"dtype":"F32","shape":[0,3],"data_offsets":[24,24]},"scalar":{"dtype":"F32","shape":[],"data_offsets":[24,28]},"a.ids":{"dtype":"I32","shape":[4],"data_offsets":[28,44]},"half":{"dtype":"F16","shape":[2],"data_offsets":[44,48]}}`
	if strings.TrimRight(hdr, " ") != wantPrefix {
		t.Errorf("header\n%s\nwant\n%s", hdr, wantPrefix)
	}
	if entries, err := os.ReadDir(filepath.Dir(path)); err != nil || len(entries) != 1 {
		t.Errorf("temporary files left behind: %v %v", entries, err)
	}

	st, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Names(); !slices.Equal(got, []string{"a.ids", "b.weight", "empty", "half", "scalar"}) {
		t.Errorf("names %v", got)
	}
	if st.Metadata["format"] != "pt" || st.Metadata["note"] != "x<y&z" {
		t.Errorf("metadata %v", st.Metadata)
	}
	w, err := st.Tensors["b.weight"].Float32s()
	if err != nil || !slices.Equal(w, []float32{1, -2, 3.5, float32(math.Inf(1)), 0, -0.25}) || !slices.Equal(st.Tensors["b.weight"].Shape, []int{2, 3}) {
		t.Errorf("b.weight = %v %v %v", w, st.Tensors["b.weight"].Shape, err)
	}
	ids, err := st.Tensors["a.ids"].Ints()
	if err != nil || !slices.Equal(ids, []int{7, -1, math.MaxInt32, math.MinInt32}) {
		t.Errorf("a.ids = %v %v", ids, err)
	}
	if s, err := st.Tensors["scalar"].Float32s(); err != nil || !slices.Equal(s, []float32{42}) {
		t.Errorf("scalar = %v %v", s, err)
	}
	if h, err := st.Tensors["half"].Float32s(); err != nil || !slices.Equal(h, []float32{1, -2}) {
		t.Errorf("half = %v %v", h, err)
	}
	var de *DTypeError
	if _, err := st.Tensors["a.ids"].Float32s(); !errors.As(err, &de) || de.File != path || de.Tensor != "a.ids" || de.DType != "I32" {
		t.Errorf("Float32s of I32: %v", err)
	}
	if _, err := st.Tensors["b.weight"].Ints(); !errors.As(err, &de) || de.Tensor != "b.weight" || de.DType != "F32" {
		t.Errorf("Ints of F32: %v", err)
	}
}

func TestI64(t *testing.T) {
	data := binary.LittleEndian.AppendUint64(nil, uint64(1<<40))
	data = binary.LittleEndian.AppendUint64(data, math.MaxUint64) // -1
	st, err := Parse("i64", stRaw(`{"x":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}`, data))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := st.Tensors["x"].Ints(); err != nil || !slices.Equal(v, []int{1 << 40, -1}) {
		t.Errorf("I64 = %v %v", v, err)
	}
}

// Bit patterns worked out by hand from the IEEE 754 binary16 and bfloat16 definitions.
func TestHalfConversions(t *testing.T) {
	for _, c := range []struct {
		h    uint16
		want uint32 // float32 bits
	}{
		{0x3c00, 0x3f800000}, // 1
		{0xc000, 0xc0000000}, // -2
		{0x3555, 0x3eaaa000}, // 0.333251953125
		{0x7bff, 0x477fe000}, // 65504, the largest finite half
		{0x0400, 0x38800000}, // 2^-14, the smallest normal
		{0x0001, 0x33800000}, // 2^-24, the smallest subnormal
		{0x0002, 0x34000000}, // 2^-23
		{0x0003, 0x34400000}, // 3·2^-24
		{0x03ff, 0x387fc000}, // 1023·2^-24, the largest subnormal
		{0x8001, 0xb3800000}, // -2^-24
		{0x0000, 0x00000000}, // +0
		{0x8000, 0x80000000}, // -0
		{0x7c00, 0x7f800000}, // +Inf
		{0xfc00, 0xff800000}, // -Inf
		{0x7e00, 0x7fc00000}, // quiet NaN
		{0x7c01, 0x7f802000}, // signalling NaN, payload kept
		{0xfe01, 0xffc02000}, // negative NaN with payload
	} {
		if got := math.Float32bits(F16ToF32(c.h)); got != c.want {
			t.Errorf("f16 %#04x -> %#08x, want %#08x", c.h, got, c.want)
		}
	}
	for _, c := range []struct {
		h    uint16
		want uint32
	}{
		{0x3f80, 0x3f800000}, // 1
		{0xc049, 0xc0490000}, // -3.140625
		{0x0001, 0x00010000}, // smallest bf16 subnormal, 2^-133
		{0x0080, 0x00800000}, // smallest normal, 2^-126
		{0x7f7f, 0x7f7f0000}, // largest finite
		{0x7f80, 0x7f800000}, // +Inf
		{0xff80, 0xff800000}, // -Inf
		{0x7fc1, 0x7fc10000}, // NaN with payload
		{0x8000, 0x80000000}, // -0
	} {
		if got := math.Float32bits(BF16ToF32(c.h)); got != c.want {
			t.Errorf("bf16 %#04x -> %#08x, want %#08x", c.h, got, c.want)
		}
	}
	// Through a file: F16 and BF16 tensors decode to the same values.
	half := []byte{0x00, 0x3c, 0x01, 0x00, 0x00, 0xfc}
	brain := []byte{0x80, 0x3f, 0x49, 0xc0, 0x01, 0x00}
	b := stRaw(`{"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[6,12]}}`, append(half, brain...))
	st, err := Parse("half", b)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := st.Tensors["h"].Float32s()
	bf, _ := st.Tensors["b"].Float32s()
	if !slices.Equal(h, []float32{1, 0x1p-24, float32(math.Inf(-1))}) || !slices.Equal(bf, []float32{1, -3.140625, 0x1p-133}) {
		t.Errorf("F16 %v, BF16 %v", h, bf)
	}
}

func TestParseErrors(t *testing.T) {
	f32x2 := make([]byte, 8)
	ok := `{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	hugeLen := binary.LittleEndian.AppendUint64(nil, 1<<60)
	for _, c := range []struct {
		name   string
		file   []byte
		tensor string // the tensor the error names; "" for the file as a whole
	}{
		{"empty", nil, ""},
		{"header past end", append(hugeLen, "{}"...), ""},
		{"truncated data", stRaw(ok, f32x2[:6]), "t"},
		{"truncated header", stRaw(ok, f32x2)[:20], ""},
		{"not json", stRaw("hello", nil), ""},
		{"corrupt json", stRaw(`{"t":{"dtype":"F32",`, nil), "t"},
		{"json array", stRaw(`[1]`, nil), ""},
		{"trailing junk", stRaw(ok+`x`, f32x2), ""},
		{"duplicate", stRaw(`{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32x2), "t"},
		{"unknown dtype", stRaw(`{"t":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}}`, f32x2), "t"},
		{"missing field", stRaw(`{"t":{"dtype":"F32","data_offsets":[0,8]}}`, f32x2), "t"},
		{"unknown field", stRaw(`{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, f32x2), "t"},
		{"negative dim", stRaw(`{"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, f32x2), "t"},
		{"float dim", stRaw(`{"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}`, f32x2), "t"},
		{"size mismatch", stRaw(`{"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, f32x2), "t"},
		{"dtype size mismatch", stRaw(`{"t":{"dtype":"F16","shape":[2],"data_offsets":[0,8]}}`, f32x2), "t"},
		{"overflowing shape", stRaw(`{"t":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}}`, f32x2), "t"},
		{"reversed offsets", stRaw(`{"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, f32x2), "t"},
		{"three offsets", stRaw(`{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}}`, f32x2), "t"},
		{"overlap", stRaw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32x2), "b"},
		{"gap", stRaw(`{"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32x2), "t"},
		{"trailing data", stRaw(`{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32x2), ""},
		{"invalid utf-8", stRaw("{\"t\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", f32x2), ""},
		{"bad metadata", stRaw(`{"__metadata__":{"a":1}}`, nil), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.safetensors")
			if err := os.WriteFile(path, c.file, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Read(path)
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != path || fe.Tensor != c.tensor {
				t.Errorf("error %v, want a *FormatError in %s naming tensor %q", err, path, c.tensor)
			}
		})
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing.safetensors")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestWriteRejects(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		ts     []Tensor
		tensor string
	}{
		{"duplicate", []Tensor{F32("a", []int{1}, []float32{1}), F32("a", []int{1}, []float32{2})}, "a"},
		{"size", []Tensor{F32("a", []int{2}, []float32{1})}, "a"},
		{"dtype", []Tensor{{Name: "a", DType: "Q8", Shape: []int{1}, Data: []byte{0}}}, "a"},
		{"reserved name", []Tensor{F32("__metadata__", []int{1}, []float32{1})}, "__metadata__"},
	} {
		path := filepath.Join(dir, c.name+".safetensors")
		err := Write(path, c.ts, nil)
		var we *WriteError
		if !errors.As(err, &we) || we.File != path || we.Tensor != c.tensor {
			t.Errorf("%s: %v, want a *WriteError in %s naming tensor %q", c.name, err, path, c.tensor)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s: file written despite the error", c.name)
		}
	}
}

func FuzzParse(f *testing.F) {
	var buf bytes.Buffer
	buf.Write(stRaw(`{"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[2,1],"data_offsets":[0,4]},"b":{"dtype":"I64","shape":[],"data_offsets":[4,12]}}`, make([]byte, 12)))
	f.Add(buf.Bytes())
	f.Add(stRaw(`{"t":{"dtype":"BF16","shape":[0],"data_offsets":[0,0]}}  `, nil))
	f.Add(stRaw(`{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, []byte{1, 2, 3, 4}))
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := Parse("fuzz", b)
		if err != nil {
			return
		}
		for _, name := range st.Names() {
			ts := st.Tensors[name]
			if size := dtypes[ts.DType].size; len(ts.Data) != ts.NumElements()*size {
				t.Fatalf("tensor %q: %d bytes for shape %v of %s", name, len(ts.Data), ts.Shape, ts.DType)
			}
			_, _ = ts.Float32s()
			_, _ = ts.Ints()
		}
	})
}
