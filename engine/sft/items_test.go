package sft

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/engine/tokenizer"
)

// TestDocs: an item is its joined text's tokens, split where its prompt ends; an item whose
// prompt ends inside a token is refused, naming the item and the consistent prompt.
func TestDocs(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	fen := chess.StartFEN
	row := rookworld.PolicyText(fen, []string{"e2e4", "d2d4"}, []float64{0.3, 0.25}, "e2e4")
	sample, err := rookworld.ParseSample(row)
	if err != nil {
		t.Fatal(err)
	}
	padded := rookworld.PolicyPrompt(fen, true)
	tests := []struct {
		name       string
		items      []Item
		refused    int    // the item refused, from 1; 0: none
		consistent string // its consistent prompt
	}{
		{"P: sample", []Item{{sample.Prompt, sample.Target}}, 0, ""},
		{"P: bare prompt", []Item{{rookworld.PolicyPrompt(fen, false), row[len(rookworld.PolicyPrompt(fen, false)):]}}, 0, ""},
		{"A: row", []Item{{rookworld.EnvPrompt(fen, "e2e4", nil), "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1+0.001+0+0"}}, 0, ""},
		{"fully padded prompt", []Item{{sample.Prompt, sample.Target}, {padded + " ", strings.TrimPrefix(sample.Target, " ")}}, 2, padded},
		{"inside a word", []Item{{"Hel", "lo"}}, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, completionOnly := range []bool{false, true} {
				docs, err := Docs(tok, tc.items, completionOnly)
				if tc.refused > 0 {
					var be *BoundaryError
					if !errors.As(err, &be) || be.Item != tc.refused || be.Consistent != tc.consistent || be.Prompt != tc.items[tc.refused-1].Prompt {
						t.Fatalf("err = %v, want a BoundaryError for item %d with consistent prompt %q", err, tc.refused, tc.consistent)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				for i, it := range tc.items {
					d := docs[i]
					if !slices.Equal(d.Tokens, tok.EncodeDoc(it.Prompt+it.Target)) {
						t.Errorf("item %d: tokens are not the joined text's", i+1)
					}
					want := 0
					if completionOnly {
						want = len(tok.Encode(it.Prompt)) - 1
					}
					if d.ScoreFrom != want {
						t.Errorf("item %d: ScoreFrom %d, want %d", i+1, d.ScoreFrom, want)
					}
				}
			}
		})
	}
}
