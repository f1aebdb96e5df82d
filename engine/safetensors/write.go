package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/rookscript/rookscript/engine/atomicfile"
)

// Write writes tensors to path atomically (temporary file in the same directory,
// fsync, rename). As the reference writer does, data is laid out by dtype width (widest first)
// then name, the header lists tensors in that order after "__metadata__", and the header is
// padded with spaces to a multiple of 8 bytes so the data section is aligned. metadata gets
// "format": "pt" when it has no "format" key, as PyTorch-produced files carry.
func Write(path string, tensors []Tensor, metadata map[string]string) error {
	fail := func(tensor, format string, a ...any) error {
		return &WriteError{File: path, Tensor: tensor, Reason: fmt.Sprintf(format, a...)}
	}
	ts := append([]Tensor(nil), tensors...)
	seen := map[string]bool{}
	for _, t := range ts {
		dt, ok := dtypes[t.DType]
		switch {
		case t.Name == "" || t.Name == "__metadata__":
			return fail(t.Name, "invalid tensor name")
		case seen[t.Name]:
			return fail(t.Name, "given twice")
		case !ok:
			return fail(t.Name, "unknown dtype %q", t.DType)
		}
		for _, d := range t.Shape {
			if d < 0 {
				return fail(t.Name, "negative dimension in shape %v", t.Shape)
			}
		}
		if len(t.Data) != t.NumElements()*dt.size {
			return fail(t.Name, "%d bytes of data for shape %v of %s", len(t.Data), t.Shape, t.DType)
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
