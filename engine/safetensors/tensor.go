package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
)

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

// bad is a *FormatError naming t.
func (t Tensor) bad(format string, a ...any) error {
	return &FormatError{File: t.file, Tensor: t.Name, Reason: fmt.Sprintf(format, a...)}
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
			return t.bad("%d bytes for %d F32 values", len(t.Data), n)
		}
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case "F16", "BF16":
		if len(t.Data) != 2*n {
			return t.bad("%d bytes for %d %s values", len(t.Data), n, t.DType)
		}
		conv := F16ToF32
		if t.DType == "BF16" {
			conv = BF16ToF32
		}
		for i := range dst {
			dst[i] = conv(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
	default:
		return &DTypeError{File: t.file, Tensor: t.Name, DType: t.DType, Want: []string{"F32", "F16", "BF16"}}
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
			return nil, t.bad("%d bytes for %d I32 values", len(t.Data), n)
		}
		for i := range out {
			out[i] = int(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
		}
	case "I64":
		if len(t.Data) != 8*n {
			return nil, t.bad("%d bytes for %d I64 values", len(t.Data), n)
		}
		for i := range out {
			v := int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
			if int64(int(v)) != v {
				return nil, t.bad("value %d overflows int", v)
			}
			out[i] = int(v)
		}
	default:
		return nil, &DTypeError{File: t.file, Tensor: t.Name, DType: t.DType, Want: []string{"I32", "I64"}}
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
