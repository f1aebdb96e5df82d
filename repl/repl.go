// Package repl is rookscript's interactive shell: line editing and history (peterh/liner),
// tab completion of rook.* names and of methods of the values in scope, multi-line input
// (a chunk continues while its syntax is open), expressions printed as values, Ctrl-C to
// cancel the running call without leaving the session, Ctrl-D to exit.
package repl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"

	"github.com/peterh/liner"

	"github.com/rookscript/rookscript/luabind"
)

// Config sets up a session.
type Config struct {
	Env         *luabind.Env
	HistoryFile string    // "" for no history
	Out         io.Writer // where values and errors go; os.Stdout if nil
	// Interrupts cancel the running evaluation; nil installs a SIGINT handler.
	Interrupts <-chan os.Signal
}

// DefaultHistoryFile is $ROOKSCRIPT_HISTORY, else ~/.rookscript_history.
func DefaultHistoryFile() string {
	if p := os.Getenv("ROOKSCRIPT_HISTORY"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".rookscript_history")
}

const banner = `rookscript REPL — module rook is loaded as 'rook'. Expressions print their value.
Tab completes names and methods; Ctrl-C cancels a running call; Ctrl-D exits.`

// Run reads and evaluates chunks until end of input.
func Run(cfg Config) error {
	out := cfg.Out
	if out == nil {
		out = os.Stdout
	}
	env := cfg.Env
	if _, _, err := env.Eval(context.Background(), `rook = require("rook")`); err != nil {
		return err
	}
	ints := cfg.Interrupts
	if ints == nil {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt)
		defer signal.Stop(ch)
		ints = ch
	}
	// One goroutine owns the interrupt channel: it cancels whatever evaluation is running.
	var mu sync.Mutex
	var cancel context.CancelFunc
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ints:
				mu.Lock()
				if cancel != nil {
					cancel()
				}
				mu.Unlock()
			}
		}
	}()

	ln := liner.NewLiner()
	defer ln.Close()
	ln.SetCtrlCAborts(true)
	ln.SetMultiLineMode(true)
	ln.SetCompleter(env.Complete)
	if cfg.HistoryFile != "" {
		if f, err := os.Open(cfg.HistoryFile); err == nil {
			ln.ReadHistory(f)
			f.Close()
		}
		defer func() {
			if f, err := os.Create(cfg.HistoryFile); err == nil {
				ln.WriteHistory(f)
				f.Close()
			}
		}()
	}
	fmt.Fprintln(out, banner)

	var chunk strings.Builder
	for {
		prompt := "rook> "
		if chunk.Len() > 0 {
			prompt = "...   "
		}
		line, err := ln.Prompt(prompt)
		if errors.Is(err, liner.ErrPromptAborted) {
			chunk.Reset() // Ctrl-C at the prompt drops the pending input
			continue
		}
		if err == io.EOF {
			fmt.Fprintln(out)
			return nil
		}
		if err != nil {
			return err
		}
		if chunk.Len() > 0 {
			chunk.WriteByte('\n')
		}
		chunk.WriteString(line)
		src := chunk.String()
		if strings.TrimSpace(src) == "" {
			chunk.Reset()
			continue
		}
		ctx, c := context.WithCancel(context.Background())
		mu.Lock()
		cancel = c
		mu.Unlock()
		values, incomplete, err := env.Eval(ctx, src)
		mu.Lock()
		cancel = nil
		mu.Unlock()
		c()
		if incomplete {
			continue
		}
		ln.AppendHistory(src)
		chunk.Reset()
		switch {
		case errors.Is(err, context.Canceled):
			fmt.Fprintln(out, "interrupted")
		case err != nil:
			var re *luabind.RecipeError
			if errors.As(err, &re) {
				fmt.Fprintln(out, re.Message) // the traceback of a one-line chunk says nothing more
			} else {
				fmt.Fprintln(out, err.Error())
			}
		case len(values) > 0:
			fmt.Fprintln(out, strings.Join(values, "\t")) // several values on one line, as Lua's own REPL
		}
	}
}
