// Package tbread decodes TensorBoard event files for tests. It is written from the format's
// definition alone — its own CRC-32C, varint and protobuf field parsing — and shares no code
// with the writer it checks (engine/tbevents uses hash/crc32 and protowire), so that a bug in
// one is not repeated in the other.
//
//	record = uint64 length (LE) | masked CRC-32C of the length | data | masked CRC-32C of data
//	masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8
//
// Events are tensorboard.Event protobufs: wall_time 1, step 2, file_version 3, summary 5,
// session_log 7, source_metadata 10. PythonView and RustView replay how TensorBoard's two
// readers resolve the values of a tag that a restart or a rollback wrote twice.
package tbread

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// CRC32C is the bitwise CRC-32C (reflected polynomial 0x82F63B78).
func CRC32C(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

// Masked is TFRecord's masked CRC-32C of b.
func Masked(b []byte) uint32 {
	c := CRC32C(b)
	return (c>>15 | c<<17) + 0xa282ead8
}

// ReadRecords splits a TFRecord file, checking both checksums of every record.
func ReadRecords(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for off := 0; off < len(data); {
		if len(data)-off < 12 {
			return nil, fmt.Errorf("%s: %d stray bytes at %d", path, len(data)-off, off)
		}
		n := binary.LittleEndian.Uint64(data[off:])
		if got, want := binary.LittleEndian.Uint32(data[off+8:]), Masked(data[off:off+8]); got != want {
			return nil, fmt.Errorf("%s: record at %d: length crc %#x, want %#x", path, off, got, want)
		}
		off += 12
		if uint64(len(data)-off) < n+4 {
			return nil, fmt.Errorf("%s: record at %d: truncated", path, off)
		}
		rec := data[off : off+int(n)]
		if got, want := binary.LittleEndian.Uint32(data[off+int(n):]), Masked(rec); got != want {
			return nil, fmt.Errorf("%s: record at %d: data crc %#x, want %#x", path, off, got, want)
		}
		out = append(out, rec)
		off += int(n) + 4
	}
	return out, nil
}

// Field is one protobuf field.
type Field struct {
	Num  int
	Wire int
	U    uint64 // varint, fixed32 or fixed64 payload
	B    []byte // length-delimited payload
}

func uvarint(b []byte) (uint64, int, error) {
	var x uint64
	for i := 0; i < len(b) && i < 10; i++ {
		x |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return x, i + 1, nil
		}
	}
	return 0, 0, fmt.Errorf("bad varint")
}

// Parse splits a protobuf message into its fields, in order.
func Parse(b []byte) ([]Field, error) {
	var fs []Field
	for len(b) > 0 {
		key, n, err := uvarint(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		f := Field{Num: int(key >> 3), Wire: int(key & 7)}
		switch f.Wire {
		case 0:
			f.U, n, err = uvarint(b)
			if err != nil {
				return nil, err
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return nil, fmt.Errorf("short fixed64")
			}
			f.U, b = binary.LittleEndian.Uint64(b), b[8:]
		case 5:
			if len(b) < 4 {
				return nil, fmt.Errorf("short fixed32")
			}
			f.U, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case 2:
			l, n, err := uvarint(b)
			if err != nil {
				return nil, err
			}
			b = b[n:]
			if uint64(len(b)) < l {
				return nil, fmt.Errorf("short bytes field %d", f.Num)
			}
			f.B, b = b[:l], b[l:]
		default:
			return nil, fmt.Errorf("wire type %d", f.Wire)
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// MustParse is Parse for bytes a test has already checked; it panics on an error.
func MustParse(b []byte) []Field {
	fs, err := Parse(b)
	if err != nil {
		panic(err)
	}
	return fs
}

// Tensor is the part of a TensorProto the writer uses.
type Tensor struct {
	DType     int
	HasShape  bool
	Dims      []int64
	StringVal []string
}

// Value is one Summary.Value.
type Value struct {
	Tag         string
	Simple      *float32 // simple_value, for a scalar
	Tensor      *Tensor
	HasMeta     bool
	Plugin      string // metadata.plugin_data.plugin_name
	Content     []byte // metadata.plugin_data.content
	OtherFields []int  // field numbers this reader does not decode
}

// Event is one decoded Event.
type Event struct {
	Wall        float64
	Step        int64
	FileVersion string
	Writer      string // source_metadata.writer
	Session     int    // SessionLog status (1: START); 0 when absent
	Values      []Value
}

// DecodeEvent decodes one record's Event.
func DecodeEvent(b []byte) (Event, error) {
	fs, err := Parse(b)
	if err != nil {
		return Event{}, err
	}
	var e Event
	for _, f := range fs {
		switch f.Num {
		case 1:
			e.Wall = math.Float64frombits(f.U)
		case 2:
			e.Step = int64(f.U)
		case 3:
			e.FileVersion = string(f.B)
		case 5:
			sfs, err := Parse(f.B)
			if err != nil {
				return e, err
			}
			for _, sf := range sfs {
				if sf.Num != 1 {
					return e, fmt.Errorf("Summary field %d", sf.Num)
				}
				v, err := decodeValue(sf.B)
				if err != nil {
					return e, err
				}
				e.Values = append(e.Values, v)
			}
		case 7:
			sfs, err := Parse(f.B)
			if err != nil {
				return e, err
			}
			for _, sf := range sfs {
				if sf.Num == 1 {
					e.Session = int(sf.U)
				}
			}
		case 10:
			sfs, err := Parse(f.B)
			if err != nil {
				return e, err
			}
			for _, sf := range sfs {
				if sf.Num == 1 {
					e.Writer = string(sf.B)
				}
			}
		default:
			return e, fmt.Errorf("Event field %d", f.Num)
		}
	}
	return e, nil
}

func decodeValue(b []byte) (v Value, err error) {
	defer func() {
		if p := recover(); p != nil { // a nested message that does not parse
			err = fmt.Errorf("Summary.Value: %v", p)
		}
	}()
	for _, f := range MustParse(b) {
		switch f.Num {
		case 1:
			v.Tag = string(f.B)
		case 2:
			x := math.Float32frombits(uint32(f.U))
			v.Simple = &x
		case 8:
			t := &Tensor{}
			for _, tf := range MustParse(f.B) {
				switch tf.Num {
				case 1:
					t.DType = int(tf.U)
				case 2:
					t.HasShape = true
					for _, sf := range MustParse(tf.B) {
						if sf.Num == 2 {
							var size int64
							for _, df := range MustParse(sf.B) {
								if df.Num == 1 {
									size = int64(df.U)
								}
							}
							t.Dims = append(t.Dims, size)
						}
					}
				case 8:
					t.StringVal = append(t.StringVal, string(tf.B))
				default:
					return v, fmt.Errorf("TensorProto field %d", tf.Num)
				}
			}
			v.Tensor = t
		case 9:
			v.HasMeta = true
			for _, mf := range MustParse(f.B) {
				if mf.Num == 1 {
					for _, pf := range MustParse(mf.B) {
						switch pf.Num {
						case 1:
							v.Plugin = string(pf.B)
						case 2:
							v.Content = pf.B
						}
					}
				}
			}
		default:
			v.OtherFields = append(v.OtherFields, f.Num)
		}
	}
	return v, nil
}

// ReadDir decodes every event file of dir in TensorBoard's order (lexicographic by name) and
// returns the file names and each file's events.
func ReadDir(dir string) ([]string, [][]Event, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.Contains(e.Name(), "tfevents") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var files [][]Event
	for _, n := range names {
		recs, err := ReadRecords(filepath.Join(dir, n))
		if err != nil {
			return nil, nil, err
		}
		var evs []Event
		for i, r := range recs {
			e, err := DecodeEvent(r)
			if err != nil {
				return nil, nil, fmt.Errorf("%s record %d: %w", n, i, err)
			}
			evs = append(evs, e)
		}
		files = append(files, evs)
	}
	return names, files, nil
}

// Point is one value of a tag as a reader shows it.
type Point struct {
	Step  int64
	Value float32 // a scalar's value; 0 for a text
	Wall  float64
	Text  string // a text summary's string
}

// PythonView replays plugin_event_accumulator's purge for file_version 2: the first
// SessionLog START is the run's start, each later one drops every tag's points at steps >=
// its step. Scalars and texts (rank-0 string tensors) are kept, each under its tag.
func PythonView(files [][]Event) map[string][]Point {
	out := map[string][]Point{}
	seenStart := false
	for _, evs := range files {
		for _, e := range evs {
			if e.Session == 1 {
				if seenStart {
					for tag, ps := range out {
						kept := ps[:0]
						for _, p := range ps {
							if p.Step < e.Step {
								kept = append(kept, p)
							}
						}
						out[tag] = kept
					}
				}
				seenStart = true
			}
			for _, v := range e.Values {
				if p, ok := point(e, v); ok {
					out[v.Tag] = append(out[v.Tag], p)
				}
			}
		}
	}
	return out
}

// RustView replays RustBoard's reservoir preemption: a point at step s drops its tag's
// points at steps >= s.
func RustView(files [][]Event) map[string][]Point {
	out := map[string][]Point{}
	for _, evs := range files {
		for _, e := range evs {
			for _, v := range e.Values {
				p, ok := point(e, v)
				if !ok {
					continue
				}
				ps := out[v.Tag]
				kept := ps[:0]
				for _, q := range ps {
					if q.Step < e.Step {
						kept = append(kept, q)
					}
				}
				out[v.Tag] = append(kept, p)
			}
		}
	}
	return out
}

func point(e Event, v Value) (Point, bool) {
	switch {
	case v.Simple != nil:
		return Point{Step: e.Step, Value: *v.Simple, Wall: e.Wall}, true
	case v.Tensor != nil && v.Tensor.DType == 7 && len(v.Tensor.StringVal) == 1:
		return Point{Step: e.Step, Wall: e.Wall, Text: v.Tensor.StringVal[0]}, true
	}
	return Point{}, false
}
