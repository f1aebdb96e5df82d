package rookworld

import (
	"strings"

	"github.com/rookscript/rookscript/engine/chess"
)

// AnswerEnd finds where a RookWorld answer ends, where RookWorld-LM's model
// card stops generation: a P: answer after "B:" and one complete UCI move, an
// A: answer after its fourth '+' (the card's final '+'). It reads the answer
// as it is written, a token's text at a time, keeping a few bytes of state,
// so each piece costs its own length.
//
// A four-character move is complete unless it promotes, which the prompt's
// position decides (a pawn of the side to move reaching the last rank; without
// a readable position, any move from the seventh rank to the eighth or the
// second to the first): then a promotion letter completes it, and any other
// character shows that the move ended before it.
type AnswerEnd struct {
	task Task
	pos  *chess.Position // P: the prompt's position; nil if it does not parse
	done bool

	// P: where the reader is: seeking "B:", after "B:" (reading spaces), or
	// inside the move (n of its characters read, the last one waiting for a
	// promotion letter when wait).
	afterB bool
	prevB  bool
	move   [4]byte
	n      int
	wait   bool

	plus int // A: '+' signs read
}

// NewAnswerEnd returns the rule for the answer to prompt, or nil when the
// prompt is of neither task. A P: prompt that already holds the start of its
// answer (a recipe may end it with "M:") is read as part of the answer.
func NewAnswerEnd(prompt string) *AnswerEnd {
	task, err := DetectTask(prompt)
	if err != nil {
		return nil
	}
	a := &AnswerEnd{task: task}
	if task == TaskPolicy {
		s := strings.TrimLeft(prompt, " \t\r\n")[2:]
		tail := ""
		if i := strings.Index(s, "M:"); i >= 0 {
			s, tail = s[:i], s[i:]
		}
		a.pos, _ = chess.ParseFEN(strings.TrimSpace(s))
		if tail != "" && a.Feed(tail) >= 0 {
			a.done = true // the prompt holds a whole answer: nothing left to stop
		}
	}
	return a
}

// Feed reads the next piece of the answer and reports where the answer ended:
// end bytes into piece (0: before it, at the end of the previous piece), or
// -1 while it goes on. After an end, Feed returns -1.
func (a *AnswerEnd) Feed(piece string) (end int) {
	if a.done {
		return -1
	}
	for i := 0; i < len(piece); i++ {
		if e := a.step(piece[i]); e >= 0 {
			a.done = true
			return i + e
		}
	}
	return -1
}

// step reads one byte; it returns 1 when the answer ends after it, 0 when it
// ended before it, -1 otherwise.
func (a *AnswerEnd) step(c byte) int {
	if a.task == TaskEnv {
		if c == '+' {
			a.plus++
			if a.plus == 4 {
				return 1
			}
		}
		return -1
	}
	if a.wait {
		if strings.IndexByte("qrbn", c) >= 0 {
			return 1
		}
		return 0
	}
	switch {
	case a.n > 0 || (a.afterB && c != ' ' && c != '\t'):
		if !moveChar(a.n, c) {
			a.afterB, a.n = false, 0
			break
		}
		a.move[a.n] = c
		a.n++
		if a.n < 4 {
			return -1
		}
		if a.promotes() {
			a.wait = true
			return -1
		}
		return 1
	case a.afterB:
		return -1
	case a.prevB && c == ':':
		a.afterB, a.prevB = true, false
		return -1
	}
	a.prevB = c == 'B'
	return -1
}

// moveChar reports whether c can be the i-th character of a UCI move's two
// squares.
func moveChar(i int, c byte) bool {
	if i%2 == 0 {
		return c >= 'a' && c <= 'h'
	}
	return c >= '1' && c <= '8'
}

// promotes reports whether the four characters read need a promotion letter.
func (a *AnswerEnd) promotes() bool {
	from, to := string(a.move[:2]), a.move[3]
	if a.pos == nil {
		return (from[1] == '7' && to == '8') || (from[1] == '2' && to == '1')
	}
	if a.pos.Turn() == "w" {
		return a.pos.PieceAt(from) == "P" && to == '8'
	}
	return a.pos.PieceAt(from) == "p" && to == '1'
}
