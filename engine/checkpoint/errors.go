package checkpoint

import (
	"fmt"
	"strings"
)

// DataError is a line of a run's JSONL file that does not parse: the file, its 1-based line
// and the decoder's error.
type DataError struct {
	File string
	Line int
	Err  error
}

func (e *DataError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *DataError) Unwrap() error { return e.Err }

// NotRunError is a directory that is not a run's: one that holds other files, where a new run
// would overwrite them, or one without checkpoints/ to read.
type NotRunError struct {
	Dir string
	// Holds names up to five of its entries, More how many others it has, when the directory
	// is refused for a new run; nil when it was to be read and has no checkpoints/.
	Holds []string
	More  int
}

func (e *NotRunError) Error() string {
	if e.Holds == nil {
		return fmt.Sprintf("%s is not a run directory (no checkpoints/ in it)", e.Dir)
	}
	more := ""
	if e.More > 0 {
		more = fmt.Sprintf(" and %d more", e.More)
	}
	return fmt.Sprintf("%s is not a run directory and is not empty (it holds %s%s): a run writes config.json, recipe.lua and metrics.jsonl there; choose a new or empty directory",
		e.Dir, strings.Join(e.Holds, ", "), more)
}
