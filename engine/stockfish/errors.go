package stockfish

import (
	"errors"
	"fmt"
	"time"
)

// ConfigError is a setting of Config out of its range: its key as recipes write it, the value
// and what it must be.
type ConfigError struct {
	Key    string
	Value  any
	Reason string // what Key must be ("≥ 1", "a positive number of seconds")
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("stockfish: %s must be %s, got %v", e.Key, e.Reason, e.Value)
}

// PathError is an engine binary that cannot be run: missing (it wraps ErrNotFound, and says
// how to install one), a directory, or not executable.
type PathError struct {
	Path   string // the path or name configured; "stockfish" when none is
	Reason string // what is wrong, for people
	Err    error  // ErrNotFound, or the error that stat gave
}

func (e *PathError) Error() string {
	if errors.Is(e.Err, ErrNotFound) {
		return fmt.Sprintf("%v: %s; %s", ErrNotFound, e.Reason, installHint)
	}
	if e.Err != nil {
		return fmt.Sprintf("stockfish: %s: %v", e.Reason, e.Err)
	}
	return "stockfish: " + e.Reason
}

func (e *PathError) Unwrap() error { return e.Err }

// StartError is an engine that did not start: the binary and what failed.
type StartError struct {
	Path string
	Step string // "making pipes for", "starting", or "handshake" for an engine that started but did not complete it
	Err  error
}

func (e *StartError) Error() string {
	if e.Step == "handshake" {
		return fmt.Sprintf("stockfish: %q handshake: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("stockfish: %s %q: %v", e.Step, e.Path, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// ExitError is an engine process that died: its exit status and the end of its stderr.
type ExitError struct {
	Doing  string // what the pool was doing when it found out ("writing \"isready\": ..."); "" when reading
	Status string // "exit status 3", "signal: killed", or "still running" when it could not be reaped
	Stderr string // the end of what it wrote to stderr
}

func (e *ExitError) Error() string {
	msg := e.Status
	if e.Doing != "" {
		msg = e.Doing + "; " + msg
	}
	if e.Stderr != "" {
		msg += "; stderr: " + e.Stderr
	}
	return fmt.Sprintf("engine process exited (%s)", msg)
}

// NoAnswerError is an engine that did not read a command, or did not answer one, in time.
type NoAnswerError struct {
	Command string // the command it did not read; "" when it did not answer
	Stderr  string // the end of what it wrote to stderr
	Err     error  // the context's error
}

func (e *NoAnswerError) Error() string {
	if e.Command != "" {
		return fmt.Sprintf("engine did not read %q: %v", e.Command, e.Err)
	}
	s := fmt.Sprintf("engine did not answer: %v", e.Err)
	if e.Stderr != "" {
		s += fmt.Sprintf(" (stderr: %s)", e.Stderr)
	}
	return s
}

func (e *NoAnswerError) Unwrap() error { return e.Err }

// GiveUpError is a position every attempt at failed: the engines that failed cost it Lost, at
// most MaxLoss, and Err is the last attempt's error.
type GiveUpError struct {
	FEN      string
	Depth    int
	Attempts int
	// PositionTimeout is the position_timeout, in seconds, when it is what ended the
	// attempts; 0 when they ran out.
	PositionTimeout float64
	Lost, MaxLoss   time.Duration
	Err             error
}

func (e *GiveUpError) Error() string {
	spent := ""
	if e.PositionTimeout > 0 {
		spent = fmt.Sprintf(", its position_timeout of %gs spent", e.PositionTimeout)
	}
	return fmt.Sprintf("stockfish: %s depth %d: gave up after %d attempts%s, %.1fs lost to failing engines (bound %s): %v",
		e.FEN, e.Depth, e.Attempts, spent, e.Lost.Seconds(), e.MaxLoss, e.Err)
}

func (e *GiveUpError) Unwrap() error { return e.Err }

// CacheError is a line of a cache file that does not hold a valid analysis: the file, its
// 1-based line, the field at fault and why.
type CacheError struct {
	File   string
	Line   int
	Field  string // "fen", "depth", "lines[0].move", ...; "" when the line as a whole is bad
	Reason string // what is wrong, for people
	Err    error  // the cause, if any: the JSON decoder's error, a *chess.FENError, ...
}

func (e *CacheError) Error() string {
	s := fmt.Sprintf("stockfish cache %s:%d: ", e.File, e.Line)
	if e.Field != "" {
		s += "field " + e.Field + ": "
	}
	s += e.Reason
	if e.Err != nil {
		if e.Reason != "" {
			s += ": "
		}
		s += e.Err.Error()
	}
	return s
}

func (e *CacheError) Unwrap() error { return e.Err }

// InfoError is a UCI info line that does not parse: the line (clipped), the key at fault and
// why.
type InfoError struct {
	Line   string // the line, clipped to 60 characters
	Key    string // "depth", "multipv", "score", ...; "" when it is not an info line at all
	Value  string // the value as written; "" when there is none
	Reason string // what is wrong with it, for people
}

func (e *InfoError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("uci: not an info line: %q", e.Line)
	}
	return fmt.Sprintf("uci: %q: %s %s", e.Line, e.Key, e.Reason)
}
