//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/rookworld"
)

type rookRow struct {
	Text string `parquet:"text"`
}

// rookPositions are n positions of seeded games, each with a legal move.
func rookPositions(t testing.TB, n int, seed uint64) []rookworld.Item {
	t.Helper()
	g, err := rookworld.NewGenerator(rookworld.GeneratorOptions{Seed: seed, MinPly: 4, MaxPly: 30})
	if err != nil {
		t.Fatal(err)
	}
	var out []rookworld.Item
	for len(out) < n {
		it, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if p, err := chess.ParseFEN(it.FEN); err == nil && len(p.LegalMoves()) > 0 {
			out = append(out, it)
		}
	}
	return out
}

// policyRow and envRow are RookWorld training text for a position: a P: row whose M:/E:/B:
// are legal moves (the labels are not Stockfish's: the prompt is what matters here), an A:
// row judging a legal move.
func policyRow(t testing.TB, it rookworld.Item) string {
	p, _ := chess.ParseFEN(it.FEN)
	moves := p.LegalMoves()[:min(5, len(p.LegalMoves()))]
	evals := make([]float64, len(moves))
	for i := range evals {
		evals[i] = 0.3 - 0.1*float64(i)
	}
	return rookworld.PolicyText(it.FEN, moves, evals, moves[0])
}

func envRow(t testing.TB, it rookworld.Item) string {
	p, _ := chess.ParseFEN(it.FEN)
	r, err := rookworld.EnvStep(it.FEN, p.LegalMoves()[0])
	if err != nil {
		t.Fatal(err)
	}
	return rookworld.EnvText(r, it.History[max(0, len(it.History)-9):])
}

func writeShard(t testing.TB, path string, rows []string, perGroup int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[rookRow](f, parquet.MaxRowsPerRowGroup(perGroup), parquet.Compression(&parquet.Snappy))
	var batch []rookRow
	for _, r := range rows {
		batch = append(batch, rookRow{Text: r})
	}
	if _, err := w.Write(batch); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGRPOStableOnParquetShards: the main job on a directory of parquet shards as Hugging
// Face stores a data set, in RookWorld's text format. Training draws from the train split,
// the evaluation set comes from the test split (A: rows only here), and training skips the
// positions of the evaluation set, which the train split holds too. A run saved at step 2,
// its cursor in the middle of the first shard, and resumed to step 4, trains on the same
// prompts with the same completions as a run of 4 steps in one go.
func TestGRPOStableOnParquetShards(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	data := filepath.Join(tmp, "rookworld")
	test := rookPositions(t, 4, 8)
	var testRows []string
	for _, it := range test {
		testRows = append(testRows, envRow(t, it))
	}
	writeShard(t, filepath.Join(data, "data", "test-00000-of-00001.parquet"), testRows, 2)
	var train []string
	for i, it := range rookPositions(t, 10, 7) {
		if i == 0 || i == 2 { // the evaluation set's positions, which training must skip
			train = append(train, policyRow(t, test[i/2]))
		}
		if i%2 == 0 {
			train = append(train, policyRow(t, it))
		} else {
			train = append(train, envRow(t, it))
		}
	}
	writeShard(t, filepath.Join(data, "data", "train-00000-of-00002.parquet"), train[:6], 2)
	writeShard(t, filepath.Join(data, "data", "train-00001-of-00002.parquet"), train[6:], 2)

	straight, split := filepath.Join(tmp, "straight"), filepath.Join(tmp, "split")
	code, out, errOut := rookscript(t, tmp, nil, tinyGRPO(straight, "positions="+data, "steps=4", "save_every=2")...)
	wantExit(t, "4 steps on the data set", code, 0, out, errOut)
	code, out, errOut = rookscript(t, tmp, nil, tinyGRPO(split, "positions="+data, "steps=2", "save_every=2")...)
	wantExit(t, "2 steps on the data set", code, 0, out, errOut)
	cur := checkpointState(t, split, 2)["cursor"].(map[string]any)
	if cur["kind"] != "dataset" || cur["file"] != "data/train-00000-of-00002.parquet" || cur["line"].(float64) < 3 || cur["line"].(float64) >= 6 {
		t.Fatalf("step 2's cursor %v: want one in the middle of the first shard, past its first row group", cur)
	}
	// A confined recipe reads the paths named on the command line: the data set is named again.
	code, out, errOut = rookscript(t, tmp, nil, grpoRecipe, "resume="+split, "steps=4", "positions="+data)
	wantExit(t, "resume to step 4", code, 0, out, errOut)

	a, err := checkpoint.ReadSamples(straight)
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkpoint.ReadSamples(split)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) || len(a) != 8 {
		t.Fatalf("%d and %d samples, want 8 each", len(a), len(b))
	}
	for i := range a {
		if a[i].Prompt != b[i].Prompt || a[i].Completion != b[i].Completion {
			t.Errorf("step %d: resumed run's sample %q → %q, the straight run's %q → %q", a[i].Step, b[i].Prompt, b[i].Completion, a[i].Prompt, a[i].Completion)
		}
		for _, it := range test[:2] {
			if strings.Contains(a[i].Prompt, it.FEN) {
				t.Errorf("step %d trained on an evaluation position: %q", a[i].Step, a[i].Prompt)
			}
		}
	}
	for dir, want := range map[string]int{straight: 2, split: 3} { // 0 and the last step of each process
		raw, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		evals := 0
		for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
			var rec map[string]any
			if err := json.Unmarshal(line, &rec); err != nil {
				t.Fatal(err)
			}
			if _, ok := rec["eval/a_count"]; ok {
				evals++
				if rec["eval/a_count"] != 2.0 || rec["eval/p_count"] != 0.0 {
					t.Errorf("%s step %v: evaluated %v A: and %v P: prompts, want the test split's 2 A: rows", dir, rec["step"], rec["eval/a_count"], rec["eval/p_count"])
				}
			}
		}
		if evals != want {
			t.Errorf("%s: %d evaluations, want %d", dir, evals, want)
		}
	}
}

const positionsBigEnv = "ROOKSCRIPT_POSITIONS_BIG" // =1 runs TestPositionsBigParquetRSS

// TestPositionsBigParquetRSS draws every prompt of a 1M-row parquet file of RookWorld text
// rows, in one row group (where a reader that loads a row group loads the whole file), through
// rook.positions in the binary, and reports the process's peak RSS beside that of the same
// script on a 100-row file. docs/lua-api.md states the figure.
//
//	ROOKSCRIPT_POSITIONS_BIG=1 go test ./cmd/rookscript -run TestPositionsBigParquetRSS -v
func TestPositionsBigParquetRSS(t *testing.T) {
	if os.Getenv(positionsBigEnv) != "1" {
		t.Skip("set " + positionsBigEnv + "=1 to write and draw from a 1M-row parquet file")
	}
	tmp := t.TempDir()
	// Distinct positions, each row written with its own evaluations, so that the file is not
	// a few rows compressed away.
	items := rookPositions(t, 2000, 11)
	rng := uint64(1)
	row := func(i int) string {
		it := items[i%len(items)]
		if i%2 == 1 {
			return envRow(t, it)
		}
		p, _ := chess.ParseFEN(it.FEN)
		moves := p.LegalMoves()[:min(5, len(p.LegalMoves()))]
		evals := make([]float64, len(moves))
		for j := range evals {
			rng = rng*6364136223846793005 + 1442695040888963407
			evals[j] = float64(int64(rng>>40)%2000-1000) / 100
		}
		return rookworld.PolicyText(it.FEN, moves, evals, moves[0])
	}
	write := func(name string, n int) (string, int64) {
		rows := make([]string, n)
		for i := range rows {
			rows[i] = row(i)
		}
		path := filepath.Join(tmp, name)
		writeShard(t, path, rows, int64(n))
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return path, st.Size()
	}
	script := filepath.Join(tmp, "draw.lua")
	os.WriteFile(script, []byte(`local rook = require("rook")
local cfg = rook.config{ path = "", batch = 1000 }
local data = assert(rook.positions{ path = cfg.path, loop = false, task = "mix" })
while #data:next(cfg.batch) > 0 do end
print(string.format("items %d peak %d", data:stats().items, assert(rook.memory.peak())))
`), 0o644)
	// The peak is the process's own (VmHWM, since exec): a child's rusage would count the
	// test process it was forked from.
	draw := func(path string, rows int) int64 {
		code, out, errOut := rookscript(t, tmp, nil, script, "path="+path)
		wantExit(t, "draw from "+path, code, 0, out, errOut)
		var items, peak int64
		if _, err := fmt.Sscanf(out[strings.LastIndex(out, "items "):], "items %d peak %d", &items, &peak); err != nil || items != int64(rows) {
			t.Fatalf("drew %d items (%v), want %d:\n%s", items, err, rows, out)
		}
		return peak
	}
	small, _ := write("small.parquet", 100)
	big, size := write("big.parquet", 1_000_000)
	base, peak := draw(small, 100), draw(big, 1_000_000)
	t.Logf("1M rows (file %.1f MiB, one row group): peak RSS %.1f MiB; the same script on 100 rows %.1f MiB",
		float64(size)/(1<<20), float64(peak)/(1<<20), float64(base)/(1<<20))
	if peak >= base+size {
		t.Errorf("peak RSS %d B for a file of %d B over a base of %d B: rook.positions does not stream", peak, size, base)
	}
}
