package stockfish

import (
	"fmt"
	"strconv"
	"strings"
)

// MateScore is the centipawn value python-chess's score(mate_score=100000)
// gives a mate; the public data divides by 100, so a mate in n moves reads
// ±(1000 − n/100) pawns (999.97 for mate in 3) and being mated now −1000.0.
const MateScore = 100000

// Score is an engine evaluation from the side to move's point of view: a
// centipawn value, or with Mate set, moves to mate (negative: being mated;
// 0: checkmated now).
type Score struct {
	Mate  bool `json:"mate,omitempty"`
	Value int  `json:"value"`
}

// Centipawns converts to python-chess's score(mate_score=MateScore).
func (s Score) Centipawns() int {
	if !s.Mate {
		return s.Value
	}
	if s.Value > 0 {
		return MateScore - s.Value
	}
	return -MateScore - s.Value
}

// Pawns is Centipawns()/100, the unit of the E: field.
func (s Score) Pawns() float64 { return float64(s.Centipawns()) / 100 }

// Neg is the same evaluation from the other side (no change in mate distance).
func (s Score) Neg() Score { return Score{Mate: s.Mate, Value: -s.Value} }

// String renders the UCI form: "cp 35" or "mate -2".
func (s Score) String() string {
	if s.Mate {
		return fmt.Sprintf("mate %d", s.Value)
	}
	return fmt.Sprintf("cp %d", s.Value)
}

// parentScore converts the evaluation of the position after a move (from the
// opponent's side) into the evaluation of that move for the mover.
func parentScore(child Score) Score {
	if !child.Mate {
		return Score{Value: -child.Value}
	}
	if child.Value > 0 { // the opponent mates in n: we are mated in n
		return Score{Mate: true, Value: -child.Value}
	}
	// The opponent is mated in n (0: already): one more move of ours.
	return Score{Mate: true, Value: -child.Value + 1}
}

// InfoLine is one parsed UCI "info" line; fields absent from the line are zero.
type InfoLine struct {
	Depth    int      `json:"depth"`
	SelDepth int      `json:"seldepth"`
	MultiPV  int      `json:"multipv"` // 1 when the line omits it
	Score    Score    `json:"score"`
	HasScore bool     `json:"has_score"`
	Bound    string   `json:"bound,omitempty"` // "lower" or "upper" for aspiration fails
	Nodes    int64    `json:"nodes"`
	PV       []string `json:"pv,omitempty"`
	String   string   `json:"string,omitempty"`
}

// ParseInfo parses a UCI "info" line. Unknown keys are skipped the way the
// protocol asks; malformed numbers are errors (*InfoError).
func ParseInfo(line string) (InfoLine, error) {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "info" {
		return InfoLine{}, &InfoError{Line: clip(line, 60)}
	}
	in := InfoLine{MultiPV: 1}
	bad := func(key, value, format string, a ...any) error {
		return &InfoError{Line: clip(line, 60), Key: key, Value: value, Reason: fmt.Sprintf(format, a...)}
	}
	num := func(i int, key string) (int64, error) {
		if i >= len(f) {
			return 0, bad(key, "", "without a value")
		}
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, bad(key, f[i], "value %q is not an integer", f[i])
		}
		return v, nil
	}
	for i := 1; i < len(f); i++ {
		switch key := f[i]; key {
		case "depth", "seldepth", "multipv", "nodes", "nps", "time", "hashfull",
			"tbhits", "sbhits", "cpuload", "currmovenumber":
			v, err := num(i+1, key)
			if err != nil {
				return InfoLine{}, err
			}
			i++
			switch key {
			case "depth":
				in.Depth = int(v)
			case "seldepth":
				in.SelDepth = int(v)
			case "multipv":
				if v < 1 {
					return InfoLine{}, bad(key, f[i], "%d < 1", v)
				}
				in.MultiPV = int(v)
			case "nodes":
				in.Nodes = v
			}
		case "score":
			if i+2 >= len(f) {
				return InfoLine{}, bad("score", "", "truncated")
			}
			kind := f[i+1]
			if kind != "cp" && kind != "mate" {
				return InfoLine{}, bad("score", kind, "kind %q is unknown", kind)
			}
			v, err := num(i+2, "score "+kind)
			if err != nil {
				return InfoLine{}, err
			}
			if v > 1<<30 || v < -(1<<30) {
				return InfoLine{}, bad("score "+kind, f[i+2], "%d out of range", v)
			}
			in.Score, in.HasScore = Score{Mate: kind == "mate", Value: int(v)}, true
			i += 2
			if i+1 < len(f) && (f[i+1] == "lowerbound" || f[i+1] == "upperbound") {
				in.Bound = strings.TrimSuffix(f[i+1], "bound")
				i++
			}
		case "wdl":
			i += 3
		case "currmove":
			i++
		case "pv":
			in.PV = append([]string(nil), f[i+1:]...)
			i = len(f)
		case "string":
			in.String = strings.Join(f[i+1:], " ")
			i = len(f)
		case "refutation", "currline":
			i = len(f)
		}
	}
	return in, nil
}

// clip shortens s for error messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
