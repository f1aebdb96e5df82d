// Package atomicfile replaces files so that a reader, or a crash at any moment, sees either
// the old file or the complete new one: write a temporary file in the same directory, fsync
// it, rename it over the target, fsync the directory. Checkpoints, model files, datasets and
// run pointers all go through it (DESIGN: data is never lost to a half-written file).
//
// A temporary (file, or directory from TempDir) is named ".tmp-<target's name>-<digits>" and
// its writer holds a flock on it until it is renamed or removed. A writer that dies mid-write
// (SIGKILL, a crash, a lost machine) cannot remove its temporary, but the kernel drops its
// lock, so the next write of the same target finds the temporary unlocked and removes it; a
// temporary still locked belongs to a live writer and is left alone. Writers lock the
// directory while they sweep and create, so no temporary is seen between its creation and its
// lock. Where flock is not supported (some network filesystems) nothing is swept.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Write replaces path with what write produces (buffered). On any error the target is
// untouched and the temporary file removed; what an earlier writer of path left behind when
// it was killed is removed first.
func Write(path string, write func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := claim(dir, filepath.Base(path), func(pattern string) (*os.File, error) {
		return os.CreateTemp(dir, pattern)
	})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	// Renamed while still open, so that the lock is held until the temporary is gone. The
	// data is synced: closing after the rename cannot lose it.
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	f.Close()
	return SyncDir(dir)
}

// WriteBytes replaces path with data.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// TempDir creates a directory beside target to build it in (mode 0700, as os.MkdirTemp
// makes it), removing the ones killed builders of target left. The caller renames it into
// place or removes it, then calls release, which ends its claim on the name.
func TempDir(target string) (dir string, release func(), err error) {
	parent := filepath.Dir(target)
	lock, err := claim(parent, filepath.Base(target), func(pattern string) (*os.File, error) {
		d, err := os.MkdirTemp(parent, pattern)
		if err != nil {
			return nil, err
		}
		f, err := os.Open(d) // what the lock is taken on
		if err != nil {
			os.Remove(d)
		}
		return f, err
	})
	if err != nil {
		return "", nil, err
	}
	return lock.Name(), func() { lock.Close() }, nil
}

// tempPrefix starts the names of target's temporaries; os.CreateTemp and os.MkdirTemp put
// decimal digits after it.
func tempPrefix(target string) string { return ".tmp-" + target + "-" } // ".tmp-": run directories sweep these up

// claim sweeps dir of target's stale temporaries, then creates a new one with create (given
// the name pattern) and returns it locked, all under the directory's lock: exclusive to
// sweep, shared to create. A writer that cannot have the directory to itself at once
// (another is creating, or dir is a temporary directory being built, which its builder holds
// shared) skips the sweep: it is best effort, and waiting could deadlock a builder writing
// into its own temporary directory.
func claim(dir, target string, create func(pattern string) (*os.File, error)) (*os.File, error) {
	if d, err := os.Open(dir); err == nil { // else create fails and says why
		defer d.Close() // releases the directory's lock
		switch fd := int(d.Fd()); {
		case syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) == nil:
			sweep(dir, target)
		default:
			syscall.Flock(fd, syscall.LOCK_SH) // held exclusively only while sweeping
		}
	}
	f, err := create(tempPrefix(target) + "*")
	if err != nil {
		return nil, err
	}
	// Shared, so that a writer can create files in a temporary directory its builder holds.
	// Without flock support a sweeper could not have locked the directory either, so an
	// unlocked temporary is still safe.
	syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	return f, nil
}

// sweep removes target's temporaries in dir that no live writer holds. It is best effort: a
// temporary it cannot remove is left for the next write, which is no reason to fail this one.
func sweep(dir, target string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := tempPrefix(target)
	for _, e := range entries {
		digits, ok := strings.CutPrefix(e.Name(), prefix)
		// Digits only: ".tmp-a-1-5" is a temporary of "a-1", not of "a".
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" || !(e.Type().IsRegular() || e.IsDir()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			os.RemoveAll(p)
		}
		f.Close()
	}
}

// SyncDir makes renames and creations in dir durable. Filesystems that cannot fsync a
// directory say so with EINVAL; there is nothing more to do on them.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
