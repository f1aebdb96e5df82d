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
// A missing engine is one error wrapping ErrNotFound that says how to install one.
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
		return "", fmt.Errorf("%w: no \"stockfish\" on PATH and no %s; %s", ErrNotFound, fallback, installHint)
	}
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", fmt.Errorf("%w: no %q on PATH; %s", ErrNotFound, path, installHint)
		}
		return p, nil
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w: engine binary %q does not exist; %s", ErrNotFound, path, installHint)
	case err != nil:
		return "", fmt.Errorf("stockfish: engine binary %q: %w", path, err)
	case st.IsDir():
		return "", fmt.Errorf("stockfish: engine binary %q is a directory", path)
	case st.Mode()&0o111 == 0:
		return "", fmt.Errorf("stockfish: engine binary %q is not executable", path)
	}
	return path, nil
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
