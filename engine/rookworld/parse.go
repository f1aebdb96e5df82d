package rookworld

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rookscript/rookscript/engine/chess"
)

// MaxCandidates is the number of candidate moves a policy answer may list.
const MaxCandidates = 5

// PolicyOutput is a parsed policy completion ("M: … E: … B: …"). Parsing never
// fails: each field reports whether it was present and well formed, and
// Problems says what was wrong, so rewards can be graduated.
type PolicyOutput struct {
	Moves    []string  `json:"moves"`     // M: tokens as written
	EvalText []string  `json:"eval_text"` // E: tokens as written
	Evals    []float64 `json:"evals"`     // parsed E: values; valid when EvalsOK
	Best     string    `json:"best"`      // B: content, trimmed
	HasM     bool      `json:"has_m"`
	HasE     bool      `json:"has_e"`
	HasB     bool      `json:"has_b"`
	MovesOK  bool      `json:"moves_ok"` // 1..5 tokens, each spelled as UCI
	EvalsOK  bool      `json:"evals_ok"` // one finite number per M: token
	BestOK   bool      `json:"best_ok"`  // exactly one token spelled as UCI
	Problems []string  `json:"problems,omitempty"`
}

// WellFormed reports whether all three fields parse.
func (o PolicyOutput) WellFormed() bool { return o.MovesOK && o.EvalsOK && o.BestOK }

// FormatScore is the fraction of the three fields that parse.
func (o PolicyOutput) FormatScore() float64 {
	n := 0
	for _, ok := range []bool{o.MovesOK, o.EvalsOK, o.BestOK} {
		if ok {
			n++
		}
	}
	return float64(n) / 3
}

func (o *PolicyOutput) problem(format string, a ...any) {
	o.Problems = append(o.Problems, fmt.Sprintf(format, a...))
}

// ParsePolicyCompletion parses the text that follows the FEN of a P: prompt.
// Whitespace (including the data's padding) is ignored around fields.
func ParsePolicyCompletion(s string) PolicyOutput {
	var o PolicyOutput
	iM := strings.Index(s, "M:")
	from := 0
	if iM >= 0 {
		from = iM + 2
	}
	iE := indexFrom(s, "E:", from)
	if iE >= 0 {
		from = iE + 2
	}
	iB := indexFrom(s, "B:", from)
	o.HasM, o.HasE, o.HasB = iM >= 0, iE >= 0, iB >= 0
	first := len(s)
	for _, i := range []int{iM, iE, iB} {
		if i >= 0 && i < first {
			first = i
		}
	}
	leadingJunk := strings.TrimSpace(s[:first]) != ""
	// A field runs to the next marker found, or to the end.
	end := func(next ...int) int {
		for _, n := range next {
			if n >= 0 {
				return n
			}
		}
		return len(s)
	}

	if !o.HasM {
		o.problem("no M: field")
	} else {
		o.Moves = strings.Fields(s[iM+2 : end(iE, iB)])
		o.MovesOK = true
		switch {
		case leadingJunk:
			o.MovesOK = false
			o.problem("text before M: %q", strings.TrimSpace(s[:iM]))
		case len(o.Moves) == 0:
			o.MovesOK = false
			o.problem("M: is empty")
		case len(o.Moves) > MaxCandidates:
			o.MovesOK = false
			o.problem("M: lists %d moves, at most %d allowed", len(o.Moves), MaxCandidates)
		}
		for _, m := range o.Moves {
			if !chess.ValidUCI(m) {
				o.MovesOK = false
				o.problem("M: %q is not a UCI move", m)
			}
		}
	}

	if !o.HasE {
		o.problem("no E: field after M:")
	} else {
		o.EvalText = strings.Fields(s[iE+2 : end(iB)])
		o.EvalsOK = len(o.EvalText) > 0
		if len(o.EvalText) == 0 {
			o.problem("E: is empty")
		}
		for _, t := range o.EvalText {
			v, ok := parseDecimal(t)
			if !ok {
				o.EvalsOK = false
				o.problem("E: %q is not a number", t)
				continue
			}
			o.Evals = append(o.Evals, v)
		}
		if len(o.EvalText) != len(o.Moves) {
			o.EvalsOK = false
			o.problem("E: has %d values for %d moves", len(o.EvalText), len(o.Moves))
		}
		if !o.EvalsOK {
			o.Evals = nil
		}
	}

	if !o.HasB {
		o.problem("no B: field after E:")
	} else {
		o.Best = strings.TrimSpace(s[iB+2:])
		o.BestOK = chess.ValidUCI(o.Best)
		if !o.BestOK {
			o.problem("B: %q is not a single UCI move", o.Best)
		}
	}
	if !o.HasM && leadingJunk {
		o.problem("unexpected text %q", strings.TrimSpace(s[:first]))
	}
	return o
}

func indexFrom(s, sub string, from int) int {
	if from > len(s) {
		return -1
	}
	i := strings.Index(s[from:], sub)
	if i < 0 {
		return -1
	}
	return from + i
}

// parseDecimal accepts plain decimal numbers as Python's float() would for the
// data ("-2.07", "0.3", "999.97", "1e-3"); no hex, inf, nan or underscores.
func parseDecimal(t string) (float64, bool) {
	i := 0
	if i < len(t) && (t[i] == '+' || t[i] == '-') {
		i++
	}
	digits := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
		digits++
	}
	if i < len(t) && t[i] == '.' {
		i++
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		i++
		if i < len(t) && (t[i] == '+' || t[i] == '-') {
			i++
		}
		exp := 0
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
			exp++
		}
		if exp == 0 {
			return 0, false
		}
	}
	if i != len(t) {
		return 0, false
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil { // out of range
		return 0, false
	}
	return v, true
}

// EnvOutput is a parsed environment completion "new_fen+reward+term+trunc".
type EnvOutput struct {
	Fields       int      `json:"fields"` // number of '+'-separated fields found
	FEN          string   `json:"fen"`
	FENOK        bool     `json:"fen_ok"` // a valid position
	RewardText   string   `json:"reward_text"`
	Reward       float64  `json:"reward"`
	RewardOK     bool     `json:"reward_ok"`
	Terminated   bool     `json:"terminated"`
	TerminatedOK bool     `json:"terminated_ok"` // exactly "0" or "1"
	Truncated    bool     `json:"truncated"`
	TruncatedOK  bool     `json:"truncated_ok"`
	Problems     []string `json:"problems,omitempty"`
}

// WellFormed reports whether all four fields parse.
func (o EnvOutput) WellFormed() bool {
	return o.FENOK && o.RewardOK && o.TerminatedOK && o.TruncatedOK
}

// FormatScore is the fraction of the four fields that parse.
func (o EnvOutput) FormatScore() float64 {
	n := 0
	for _, ok := range []bool{o.FENOK, o.RewardOK, o.TerminatedOK, o.TruncatedOK} {
		if ok {
			n++
		}
	}
	return float64(n) / 4
}

// ParseEnvCompletion parses the text that follows an A: prompt: the data's
// "new_fen+reward+terminated+truncated", or the model card's form of it with a
// final '+'. Fields are trimmed, so surrounding whitespace is accepted; any
// other text after the truncated flag makes that field invalid.
func ParseEnvCompletion(s string) EnvOutput {
	var o EnvOutput
	f := strings.SplitN(strings.TrimSpace(s), "+", 4)
	o.Fields = len(f)
	if strings.TrimSpace(s) == "" {
		o.Fields = 0
	}
	if len(f) == 4 {
		f[3], _ = strings.CutSuffix(f[3], "+")
	}
	get := func(i int) (string, bool) {
		if i < len(f) {
			return strings.TrimSpace(f[i]), true
		}
		return "", false
	}
	if t, ok := get(0); ok && t != "" {
		o.FEN = t
		if _, err := chess.ParseFEN(t); err == nil {
			o.FENOK = true
		} else {
			o.Problems = append(o.Problems, err.Error())
		}
	} else {
		o.Problems = append(o.Problems, "no new FEN field")
	}
	if t, ok := get(1); ok {
		o.RewardText = t
		o.Reward, o.RewardOK = parseDecimal(t)
		if !o.RewardOK {
			o.Problems = append(o.Problems, fmt.Sprintf("reward %q is not a number", t))
		}
	} else {
		o.Problems = append(o.Problems, "no reward field")
	}
	parseFlag := func(i int, name string) (bool, bool) {
		t, ok := get(i)
		if !ok {
			o.Problems = append(o.Problems, "no "+name+" field")
			return false, false
		}
		if t != "0" && t != "1" {
			o.Problems = append(o.Problems, fmt.Sprintf("%s %q is not 0 or 1", name, t))
			return false, false
		}
		return t == "1", true
	}
	o.Terminated, o.TerminatedOK = parseFlag(2, "terminated")
	o.Truncated, o.TruncatedOK = parseFlag(3, "truncated")
	return o
}

// DetectTask reads the task from a prompt's prefix ("P:" or "A:", leading
// whitespace ignored).
func DetectTask(prompt string) (Task, error) {
	s := strings.TrimLeft(prompt, " \t\r\n")
	switch {
	case strings.HasPrefix(s, "P:"):
		return TaskPolicy, nil
	case strings.HasPrefix(s, "A:"):
		return TaskEnv, nil
	}
	return "", fmt.Errorf("prompt %q: want a P: or A: prefix", clip(prompt, 40))
}

// PolicyPromptFields splits a P: prompt into its FEN and whatever follows the
// FEN (a recipe may end the prompt with "M:"; that text belongs to the answer).
func PolicyPromptFields(prompt string) (fen, tail string, err error) {
	s := strings.TrimLeft(prompt, " \t\r\n")
	if !strings.HasPrefix(s, "P:") {
		return "", "", fmt.Errorf("policy prompt %q: want the prefix P:", clip(prompt, 40))
	}
	s = s[2:]
	if i := strings.Index(s, "M:"); i >= 0 {
		s, tail = s[:i], s[i:]
	}
	fen = strings.TrimSpace(s)
	if _, err := chess.ParseFEN(fen); err != nil {
		return "", "", fmt.Errorf("policy prompt: %w", err)
	}
	return fen, tail, nil
}

// EnvPromptFields is a parsed A: prompt.
type EnvPromptFields struct {
	FEN     string   `json:"fen"`
	Move    string   `json:"move"`
	History []string `json:"history"` // recent moves, the judged move included
}

// ParseEnvPrompt parses "A: {fen}+{uci}+{history}+". The move is kept as
// written even when malformed: judging it is the environment's job.
func ParseEnvPrompt(prompt string) (EnvPromptFields, error) {
	s := strings.TrimSpace(prompt)
	if !strings.HasPrefix(s, "A:") {
		return EnvPromptFields{}, fmt.Errorf("env prompt %q: want the prefix A:", clip(prompt, 40))
	}
	return parseEnvHead(strings.TrimSpace(s[2:]), prompt, true)
}

// parseEnvHead parses "fen+uci+history+" (needTail: the text must end there).
func parseEnvHead(s, orig string, needTail bool) (EnvPromptFields, error) {
	var p EnvPromptFields
	f := strings.Split(s, "+")
	if len(f) < 4 {
		return p, fmt.Errorf("env prompt %q: want fen+move+history+, found %d '+' separators", clip(orig, 60), len(f)-1)
	}
	if needTail && (len(f) != 4 || strings.TrimSpace(f[3]) != "") {
		return p, fmt.Errorf("env prompt %q: unexpected text after the history field", clip(orig, 60))
	}
	p.FEN = strings.TrimSpace(f[0])
	if _, err := chess.ParseFEN(p.FEN); err != nil {
		return p, fmt.Errorf("env prompt: %w", err)
	}
	p.Move = strings.TrimSpace(f[1])
	if p.Move == "" || strings.ContainsAny(p.Move, " \t") {
		return p, fmt.Errorf("env prompt %q: move field %q must be one token", clip(orig, 60), p.Move)
	}
	p.History = strings.Fields(f[2])
	if len(p.History) > EnvHistoryLen {
		return p, fmt.Errorf("env prompt %q: history has %d moves, at most %d allowed", clip(orig, 60), len(p.History), EnvHistoryLen)
	}
	return p, nil
}

// Sample is one RookWorld training string split into prompt and target, so
// that Prompt+Target equals the string without trailing whitespace and the
// prompt ends at a token boundary of the whole string (TokenBoundary): a P:
// prompt ends before its last pad space, as PolicyPrompt does.
type Sample struct {
	Task    Task     `json:"task"`
	Prompt  string   `json:"prompt"`
	Target  string   `json:"target"`
	FEN     string   `json:"fen"`
	Move    string   `json:"move,omitempty"`    // A: the move judged
	History []string `json:"history,omitempty"` // A: recent moves incl. Move
}

// Text is Prompt+Target.
func (s Sample) Text() string { return s.Prompt + s.Target }

// ParseSample parses a training string: "P: …M: …E: …B: …", "A: …" or a raw
// ArbiterSim row without the "A: " prefix. The target must be well formed.
func ParseSample(text string) (Sample, error) {
	t := strings.TrimRight(text, " \t\r\n")
	body := strings.TrimLeft(t, " \t")
	switch {
	case strings.HasPrefix(body, "P:"):
		i := strings.Index(t, "M:")
		if i < 0 {
			return Sample{}, fmt.Errorf("policy sample %q: no M: field", clip(t, 60))
		}
		if i > 0 && t[i-1] == ' ' {
			i-- // GPT-2 joins the last pad space to "M": " M" starts the target
		}
		s := Sample{Task: TaskPolicy, Prompt: t[:i], Target: t[i:]}
		fen, _, err := PolicyPromptFields(s.Prompt)
		if err != nil {
			return Sample{}, err
		}
		s.FEN = fen
		if o := ParsePolicyCompletion(s.Target); !o.WellFormed() {
			return Sample{}, fmt.Errorf("policy sample %q: %s", clip(t, 60), strings.Join(o.Problems, "; "))
		}
		return s, nil
	case strings.HasPrefix(body, "A:") || strings.Count(body, "+") == 6:
		head := body
		if strings.HasPrefix(body, "A:") {
			head = strings.TrimLeft(body[2:], " ")
		}
		f := strings.SplitN(head, "+", 4)
		if len(f) != 4 {
			return Sample{}, fmt.Errorf("env sample %q: want 7 '+'-separated fields", clip(t, 60))
		}
		p, err := parseEnvHead(strings.Join(f[:3], "+")+"+", t, true)
		if err != nil {
			return Sample{}, err
		}
		cut := len(t) - len(f[3])
		s := Sample{Task: TaskEnv, Prompt: t[:cut], Target: t[cut:], FEN: p.FEN, Move: p.Move, History: p.History}
		if o := ParseEnvCompletion(s.Target); !o.WellFormed() || o.Fields != 4 {
			return Sample{}, fmt.Errorf("env sample %q: %s", clip(t, 60), strings.Join(o.Problems, "; "))
		}
		return s, nil
	}
	return Sample{}, fmt.Errorf("sample %q: want a P: or A: row", clip(t, 60))
}

// clip shortens s for error messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
