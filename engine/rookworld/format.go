package rookworld

import (
	"math"
	"strconv"
	"strings"

	"github.com/rookscript/rookscript/engine/tokenizer"
)

// Field widths of the policy training string: the public generator formats
// f"P: {fen:90}M: {moves:30}E: {evals:40}B: {best}", i.e. each field is
// left-aligned and space-padded to at least this many characters.
const (
	PolicyFENWidth   = 90
	PolicyMovesWidth = 30
	PolicyEvalsWidth = 40
)

// Token bounds of RookWorld text in GPT-2's tokenizer, for sizing KV caches and memory
// plans: a prompt (P: with its padded FEN, or A: with FEN, move and history) is under
// MaxPromptTokens, and an answer (the longest is an A: answer's new FEN and flags) fits
// MaxAnswerTokens, the evaluation's decoding bound.
const (
	MaxPromptTokens = 128
	MaxAnswerTokens = 144
)

// EnvHistoryLen is how many recent moves (the current one included) an A:
// prompt carries.
const EnvHistoryLen = 10

// Task prefixes.
const (
	PolicyPrefix = "P: "
	EnvPrefix    = "A: "
)

// Task is the RookWorld task of a prompt.
type Task string

// The two RookWorld tasks.
const (
	TaskPolicy Task = "policy" // P: prompts
	TaskEnv    Task = "env"    // A: prompts
)

// pad left-aligns s in a field of at least width characters, like Python's
// f"{s:width}" for strings.
func pad(s string, width int) string {
	if len(s) >= width {
		return s
	}
	return s + strings.Repeat(" ", width-len(s))
}

// PyFloat formats x the way Python's str(float) does: the shortest repr that
// round-trips, always with a decimal point or exponent ("1.0", "-2.07",
// "0.001", "1e-05", "inf").
func PyFloat(x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	case x == 0:
		if math.Signbit(x) {
			return "-0.0"
		}
		return "0.0"
	}
	// Python's repr switches to exponent notation outside [1e-4, 1e16).
	e := strconv.FormatFloat(x, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		es := strconv.Itoa(exp)
		if len(es) < 2 {
			es = "0" + es
		}
		return mant + "e" + sign + es
	}
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// FormatEval renders an evaluation in pawns like Python's str(round(x, 2)):
// "-2.0", "-2.07", "0.3", "999.97".
func FormatEval(pawns float64) string {
	if math.IsNaN(pawns) || math.IsInf(pawns, 0) {
		return PyFloat(pawns)
	}
	// FormatFloat with a precision rounds the exact binary value correctly,
	// ties to even, which is what Python's round(x, 2) does.
	r, _ := strconv.ParseFloat(strconv.FormatFloat(pawns, 'f', 2, 64), 64)
	return PyFloat(r) // -0.001 gives "-0.0", as in Python; cp/100 never does

}

// FormatReward renders an environment reward as the data does ("0.001", "1.0").
func FormatReward(r float64) string { return PyFloat(r) }

// PolicyPrompt is the P: prompt for a FEN, a token prefix of its training text
// (TokenBoundary): padded, "P: " and the FEN padded to PolicyFENWidth less its
// last space, which GPT-2's BPE joins to the answer's " M", so that the model
// continues with " M:" at the training column; unpadded, "P: <fen>", the model
// card's form, after which the model writes the padding itself.
func PolicyPrompt(fen string, padded bool) string {
	if padded {
		return PolicyPrefix + pad(fen, PolicyFENWidth-1)
	}
	return PolicyPrefix + fen
}

// PolicyCompletion renders "M: … E: … B: best" with the data's padding.
// moves and evals pair up by index. After PolicyPrompt(fen, true) the model
// writes it with the FEN's last pad space before it (PolicyText).
func PolicyCompletion(moves []string, evals []float64, best string) string {
	es := make([]string, len(evals))
	for i, e := range evals {
		es[i] = FormatEval(e)
	}
	return "M: " + pad(strings.Join(moves, " "), PolicyMovesWidth) +
		"E: " + pad(strings.Join(es, " "), PolicyEvalsWidth) +
		"B: " + best
}

// PolicyText is the full policy training string: the padded FEN, then the
// completion. It begins with PolicyPrompt(fen, true), and the rest, the answer
// as the model writes it after that prompt, is " M: …" (or "M: …" after a FEN
// that fills the width).
func PolicyText(fen string, moves []string, evals []float64, best string) string {
	return PolicyPrefix + pad(fen, PolicyFENWidth) + PolicyCompletion(moves, evals, best)
}

// EnvPrompt is "A: {fen}+{uci}+{history}+" where history is the moves played
// before this one (oldest first) followed by uci itself, cut to the last
// EnvHistoryLen moves.
func EnvPrompt(fen, uci string, previous []string) string {
	h := append(append([]string(nil), previous...), uci)
	if len(h) > EnvHistoryLen {
		h = h[len(h)-EnvHistoryLen:]
	}
	return EnvPrefix + fen + "+" + uci + "+" + strings.Join(h, " ") + "+"
}

// EnvText is the full environment training string for a judged step;
// previous are the moves played before r.Move.
func EnvText(r EnvResult, previous []string) string {
	return EnvPrompt(r.PrevFEN, r.Move, previous) + r.Completion()
}

// TokenBoundary reports whether prompt, encoded alone, is a token prefix of
// prompt+completion encoded as one text, as RookWorld-LM was trained (DESIGN
// §3). When it is not, consistent is the longest prefix of prompt that is,
// such as a padded P: prompt without its last space; when it is, consistent is
// prompt.
func TokenBoundary(tok *tokenizer.Tokenizer, prompt, completion string) (ok bool, consistent string) {
	ids, n, ok := tok.Split(prompt, completion)
	if ok {
		return true, prompt
	}
	return false, tok.Decode(ids[:n])
}

// PromptBoundary is TokenBoundary for a prompt given alone, as a user writes
// one: a P: prompt is checked against its row's padding and the answer's first
// word, any other prompt against a word after it, so a prompt that ends inside
// a token (a trailing space after a FEN, a full row's padding) is found and
// its consistent form named. Without a prompt's text, only a trailing space is
// known to join the next word, so other prompts that do not end in a space
// pass.
func PromptBoundary(tok *tokenizer.Tokenizer, prompt string) (ok bool, consistent string) {
	if task, err := DetectTask(prompt); err == nil && task == TaskPolicy {
		if fen, tail, err := PolicyPromptFields(prompt); err == nil && tail == "" {
			head := PolicyPrefix + pad(fen, PolicyFENWidth) + "M: "
			if strings.HasPrefix(head, prompt) {
				return TokenBoundary(tok, prompt, head[len(prompt):]+"e2e4")
			}
		}
	}
	if !strings.HasSuffix(prompt, " ") {
		return true, prompt
	}
	return TokenBoundary(tok, prompt, "M")
}
