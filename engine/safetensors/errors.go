package safetensors

import (
	"fmt"
	"strings"
)

// FormatError is a file, or a tensor of one, that is not valid safetensors: the file, the
// tensor when one is at fault, and why.
type FormatError struct {
	File   string // "" for a tensor built in memory
	Tensor string // "" when the error concerns the file as a whole (its header, its tiling)
	Reason string // what is wrong, for people
}

func (e *FormatError) Error() string {
	return "safetensors: " + where(e.File, e.Tensor, ": ") + e.Reason
}

// DTypeError is a tensor read as a dtype it does not have.
type DTypeError struct {
	File   string // "" for a tensor built in memory
	Tensor string
	DType  string   // the tensor's dtype
	Want   []string // the dtypes the conversion reads
}

func (e *DTypeError) Error() string {
	want := strings.Join(e.Want, " or ")
	if n := len(e.Want); n > 2 {
		want = strings.Join(e.Want[:n-1], ", ") + " or " + e.Want[n-1]
	}
	return fmt.Sprintf("safetensors: %s has dtype %s; want %s", where(e.File, e.Tensor, ""), e.DType, want)
}

// WriteError is a tensor Write refuses to write, or what refused writing the file.
type WriteError struct {
	File   string
	Tensor string // "" when the error concerns the file
	Reason string
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("safetensors: writing %s: ", e.File) + where("", e.Tensor, ": ") + e.Reason
}

// where names a file and tensor in a message: "file: tensor \"x\"" then sep.
func where(file, tensor, sep string) string {
	var b strings.Builder
	if file != "" {
		b.WriteString(file)
		if tensor != "" || sep != "" {
			b.WriteString(": ")
		}
	}
	if tensor != "" {
		fmt.Fprintf(&b, "tensor %q%s", tensor, sep)
	}
	return b.String()
}
