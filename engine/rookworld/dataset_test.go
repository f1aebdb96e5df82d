package rookworld

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
)

func buildTestDataset(t *testing.T, pool *stockfish.Pool, opt DatasetOptions) (string, DatasetStats) {
	t.Helper()
	gen, err := NewGenerator(GeneratorOptions{Seed: 11, MinPly: 1, MaxPly: 40})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st, err := BuildDataset(context.Background(), gen, pool, &buf, opt)
	if err != nil {
		t.Fatal(err)
	}
	return buf.String(), st
}

func TestBuildDataset(t *testing.T) {
	pool := newTestPool(t, stockfish.Config{Depth: 6, Workers: 2})
	opt := DatasetOptions{Rows: 24, EnvFraction: 0.4, IllegalFraction: 0.25, Seed: 3}
	out, st := buildTestDataset(t, pool, opt)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 24 || st.Rows != 24 || st.Policy+st.Env != 24 || st.Env == 0 || st.Policy == 0 || st.EnvIllegal == 0 {
		t.Fatalf("%d lines, stats %+v", len(lines), st)
	}

	// Same seed and depth, fresh engine: the same bytes.
	again, _ := buildTestDataset(t, newTestPool(t, stockfish.Config{Depth: 6}), opt)
	if again != out {
		t.Error("the dataset is not deterministic")
	}

	ctx := context.Background()
	illegal := 0
	for i, line := range lines {
		s, err := ParseSample(line)
		if err != nil {
			t.Fatalf("row %d does not parse: %v\n%s", i, err, line)
		}
		switch s.Task {
		case TaskPolicy:
			a, err := pool.Analyse(ctx, s.FEN)
			if err != nil {
				t.Fatal(err)
			}
			if want := PolicyText(s.FEN, a.Moves(), a.Evals(), a.Best()); line != want {
				t.Errorf("row %d:\n%q\nwant\n%q", i, line, want)
			}
		case TaskEnv:
			r, err := EnvStep(s.FEN, s.Move)
			if err != nil {
				t.Fatal(err)
			}
			if s.Target != r.Completion() {
				t.Errorf("row %d: target %q, rules say %q", i, s.Target, r.Completion())
			}
			if !r.Legal {
				illegal++
			}
			if s.History[len(s.History)-1] != s.Move {
				t.Errorf("row %d: history %v does not end with the move", i, s.History)
			}
		}
	}
	if illegal != st.EnvIllegal {
		t.Errorf("%d illegal rows, stats say %d", illegal, st.EnvIllegal)
	}
}

func TestBuildDatasetPublicQuirks(t *testing.T) {
	pool := newTestPool(t, stockfish.Config{Depth: 6})
	ctx := context.Background()
	out, _ := buildTestDataset(t, pool, DatasetOptions{Rows: 16, Seed: 5, PublicBestQuirk: true, ShuffleCandidates: true})
	black := 0
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		s, err := ParseSample(line)
		if err != nil {
			t.Fatal(err)
		}
		o := ParsePolicyCompletion(s.Target)
		a, _ := pool.Analyse(ctx, s.FEN)
		want := a.Best()
		if chess.MustParseFEN(s.FEN).Turn() == chess.Black {
			black++
			want = a.Lines[len(a.Lines)-1].Move
		}
		if o.Best != want {
			t.Errorf("%s: B: %s, want %s", s.FEN, o.Best, want)
		}
		// Shuffled, but every move keeps its own evaluation.
		if len(o.Moves) != len(a.Lines) {
			t.Fatalf("%d moves for %d lines", len(o.Moves), len(a.Lines))
		}
		for i, m := range o.Moves {
			k := a.Rank(m)
			if k == 0 || FormatEval(a.Lines[k-1].Score.Pawns()) != o.EvalText[i] {
				t.Errorf("%s: %s paired with %s", s.FEN, m, o.EvalText[i])
			}
		}
	}
	if black == 0 {
		t.Error("no black-to-move row exercised the quirk")
	}
}

func TestBuildDatasetEnvOnly(t *testing.T) {
	out, st := buildTestDataset(t, nil, DatasetOptions{Rows: 5, EnvFraction: 1, EnvMove: EnvMoveRandom, JSONL: true})
	if st.Env != 5 {
		t.Fatalf("stats %+v", st)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var row struct{ Text string }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseSample(row.Text); err != nil || !strings.HasPrefix(row.Text, "A: ") {
			t.Errorf("row %q: %v", row.Text, err)
		}
	}
	gen, _ := NewGenerator(GeneratorOptions{})
	for _, bad := range []DatasetOptions{{EnvFraction: 0.5}, {EnvFraction: 1, EnvMove: "best"}, {EnvFraction: 2}} {
		if _, err := BuildDataset(context.Background(), gen, nil, &bytes.Buffer{}, bad); err == nil {
			t.Errorf("options %+v accepted", bad)
		}
	}
}
