package rollout

import (
	"strings"

	"github.com/rookscript/rookscript/engine/rookworld"
)

// ender watches one completion's text for its stop strings and stop rule. It reads each new
// token's text once, holding only the last bytes that a stop string could still complete, so
// a token costs its own length times the number of stop strings, whatever the completion's
// length.
type ender struct {
	stops []string
	keep  int    // longest stop string less one: the bytes of tail worth keeping
	tail  string // the completion's last keep bytes
	rule  *rookworld.AnswerEnd
	one   [1]int32
}

// newEnder returns the watcher of a completion of prompt, nil when nothing can stop it.
func newEnder(cfg Config, prompt string) *ender {
	e := &ender{stops: cfg.Stop}
	for _, s := range cfg.Stop {
		e.keep = max(e.keep, len(s)-1)
	}
	if cfg.StopRule == StopRuleRookWorld {
		e.rule = rookworld.NewAnswerEnd(prompt)
	}
	if e.rule == nil && len(e.stops) == 0 {
		return nil
	}
	return e
}

// stopped reads c's newest token and reports whether c ends with it, recording what ended it
// in c.Stop. A stop string that ends inside the token keeps the whole token: the tokens are what
// was sampled and what training scores. When the rule finds that the answer ended before the
// token (a move that turned out not to promote), the token is dropped with its logprob, unless
// it is the completion's only one.
func (e *ender) stopped(c *Completion, decode func([]int32) string) bool {
	e.one[0] = c.Tokens[len(c.Tokens)-1]
	piece := decode(e.one[:])
	rule := -1 // where in piece the rule ends the answer
	if e.rule != nil {
		rule = e.rule.Feed(piece)
	}
	// A match cannot lie wholly in tail (it would have ended an earlier token), so any match
	// in window ends in this token.
	window := e.tail + piece
	first, at := "", len(window)+1
	for _, s := range e.stops {
		if i := strings.Index(window, s); i >= 0 && i+len(s) < at {
			first, at = s, i+len(s)
		}
	}
	switch {
	case rule >= 0 && (first == "" || rule <= at-len(e.tail)):
		if rule == 0 && len(c.Tokens) > 1 {
			c.Tokens, c.LogProbs = c.Tokens[:len(c.Tokens)-1], c.LogProbs[:len(c.LogProbs)-1]
		}
		c.Stop = StopRuleRookWorld
	case first != "":
		c.Stop = first
	default:
		e.tail = window[max(0, len(window)-e.keep):]
		return false
	}
	return true
}
