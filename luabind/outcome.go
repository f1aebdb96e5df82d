package luabind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// interrupts is the state of a graceful interrupt (SIGINT, SIGTERM), shared by an environment
// and those rook.exec starts from it: the runs open to honour one, and the checkpoint saved
// when one was.
type interrupts struct {
	mu      sync.Mutex
	sig     os.Signal
	writers int    // runs open for writing
	runs    []*run // every run opened, newest last
	saved   *run   // the run that saved at the interrupt
}

func (in *interrupts) signal() os.Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sig
}

// Interrupt asks the recipe to stop at the next step boundary: a run's next run:save_due is
// true and its run:save, once the checkpoint is written, ends the recipe with an
// *InterruptedError. It returns false when no run is open to do that (nothing to save, or a
// second interrupt): the caller then cancels the context, which aborts at once. A recipe that
// ends on its own before it saves ends as it would have. Safe to call from a signal
// handler's goroutine.
func (e *Env) Interrupt(sig os.Signal) bool {
	in := e.intr
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.sig != nil {
		return false
	}
	in.sig = sig
	return in.writers > 0
}

// InterruptedError is how a recipe ends after Interrupt.
type InterruptedError struct {
	Signal     os.Signal
	Aborted    bool   // the context was cancelled: the current step was abandoned unsaved
	Dir        string // the run that can be resumed ("" if none saved a checkpoint)
	Checkpoint string // its newest checkpoint
	Recipe     string // the recipe that runs it
	Saved      bool   // Checkpoint was saved at the interrupt
	Err        error  // what the recipe ended with, if anything
}

func (e *InterruptedError) Error() string {
	what := "interrupted"
	if e.Aborted {
		what = "aborted"
	}
	msg := fmt.Sprintf("%s by %s", what, signalName(e.Signal))
	switch {
	case e.Saved:
		msg += fmt.Sprintf(": saved checkpoint %s of %s", e.Checkpoint, e.Dir)
	case e.Checkpoint != "":
		msg += fmt.Sprintf(" before saving; the newest checkpoint of %s is %s", e.Dir, e.Checkpoint)
	default:
		msg += "; no checkpoint to resume from"
	}
	if e.Err != nil && !e.Saved && !errors.Is(e.Err, context.Canceled) {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

// ExitCode is the shell's convention for a process ended by a signal: 128 + its number.
func (e *InterruptedError) ExitCode() int {
	if s, ok := e.Signal.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 130
}

func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// StoppedError is how a recipe ends when a run's recovery policy stopped it (run:stop): the
// run did not fail, and did not complete either.
type StoppedError struct {
	Dir    string
	Reason string
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("run %s was stopped by its recovery policy (report in %s/report.txt)", e.Dir, e.Dir)
}

// outcome turns how the recipe's chunk ended into how the recipe ended. An interrupt the
// recipe never came to honour (it ended on its own first) does not change that.
func (e *Env) outcome(err error) error {
	e.announcePending()
	e.intr.mu.Lock()
	sig, saved := e.intr.sig, e.intr.saved
	e.intr.mu.Unlock()
	if sig != nil && (err != nil || saved != nil) {
		ie := &InterruptedError{Signal: sig, Err: err, Aborted: errors.Is(err, context.Canceled)}
		e.intr.mu.Lock()
		r := e.intr.saved
		if r != nil {
			ie.Saved = true
		} else {
			for i := len(e.intr.runs) - 1; i >= 0 && r == nil; i-- {
				if name, lerr := e.intr.runs[i].r.LatestName(); lerr == nil && name != "" {
					r = e.intr.runs[i]
				}
			}
		}
		e.intr.mu.Unlock()
		if r != nil {
			ie.Dir, ie.Recipe = r.r.Dir, r.env.opts.Recipe
			ie.Checkpoint, _ = r.r.LatestName()
		}
		return ie
	}
	if err != nil {
		return err
	}
	for _, r := range e.runs {
		if r.saveErr != nil {
			return fmt.Errorf("run %s: the last checkpoint save failed, so the run ends without it: %w", r.r.Dir, r.saveErr)
		}
	}
	for _, r := range e.runs {
		if r.stopped != "" {
			return &StoppedError{Dir: r.r.Dir, Reason: r.stopped}
		}
	}
	return nil
}
