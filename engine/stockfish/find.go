package stockfish

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
)

// DefaultPath is where Debian's stockfish package installs the engine; /usr/games is often
// not on PATH, so it is tried after PATH.
const DefaultPath = "/usr/games/stockfish"

// ErrNotFound marks a missing engine binary.
var ErrNotFound = errors.New("stockfish not found")

// installHint is the one line that tells a user how to get an engine.
const installHint = `install it with "make setup" (Debian package stockfish) or set stockfish=PATH`

// FindEngine resolves an engine path as NewPool does: path itself when it names a file
// (a bare name is looked up on PATH); with path "", "stockfish" on PATH, then DefaultPath.
// Errors are *PathError; a missing engine is one wrapping ErrNotFound that says how to install
// one.
func FindEngine(path string) (string, error) {
	return findEngine(path, DefaultPath)
}

func findEngine(path, fallback string) (string, error) {
	if path == "" {
		if p, err := exec.LookPath("stockfish"); err == nil {
			return p, nil
		}
		if isFile(fallback) {
			return fallback, nil
		}
		return "", &PathError{Path: "stockfish", Reason: fmt.Sprintf("no \"stockfish\" on PATH and no %s", fallback), Err: ErrNotFound}
	}
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", &PathError{Path: path, Reason: fmt.Sprintf("no %q on PATH", path), Err: ErrNotFound}
		}
		return p, nil
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", &PathError{Path: path, Reason: fmt.Sprintf("engine binary %q does not exist", path), Err: ErrNotFound}
	case err != nil:
		return "", &PathError{Path: path, Reason: fmt.Sprintf("engine binary %q", path), Err: err}
	case st.IsDir():
		return "", &PathError{Path: path, Reason: fmt.Sprintf("engine binary %q is a directory", path)}
	case st.Mode()&0o111 == 0:
		return "", &PathError{Path: path, Reason: fmt.Sprintf("engine binary %q is not executable", path)}
	}
	return path, nil
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
