package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the file in a run directory that its writer holds an exclusive flock on. The
// kernel releases the lock when the process ends, however it ends, so a crashed run never
// leaves its directory locked; the file's content (the holder's pid) only names the holder.
const LockFile = "lock"

// LockedError is returned by Create and Open when another writer holds the run directory.
type LockedError struct {
	Dir string
	PID int // the holder's process id; 0 when it could not be read
}

func (e *LockedError) Error() string {
	holder := "another process"
	switch {
	case e.PID == os.Getpid():
		holder = fmt.Sprintf("this process (pid %d) through a run that is still open", e.PID)
	case e.PID > 0:
		holder = fmt.Sprintf("process %d", e.PID)
	}
	return fmt.Sprintf("run directory %s is in use by %s, which holds %s: one process writes a run at a time; wait for it to end or stop it",
		e.Dir, holder, filepath.Join(e.Dir, LockFile))
}

// lockDir takes the writer's lock of a run directory that exists.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking run directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid := holderPID(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Dir: dir, PID: pid}
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	// The pid is for the message a second writer gets; the lock itself is the flock.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

func holderPID(f *os.File) int {
	b, err := io.ReadAll(io.LimitReader(f, 32))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// probeLock reports a LockedError when another writer holds dir's lock, taking and at once
// dropping a shared lock (which any number of probes may hold together). It creates nothing:
// a directory without a lock file has no writer.
func probeLock(dir string) error {
	f, err := os.Open(filepath.Join(dir, LockFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking the lock of run directory %s: %w", dir, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return &LockedError{Dir: dir, PID: holderPID(f)}
		}
		return fmt.Errorf("checking the lock of run directory %s: %w", dir, err)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
