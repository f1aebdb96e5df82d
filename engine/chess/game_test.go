package chess

import (
	"strings"
	"testing"
)

func TestRepetitionStopsAtIrreversibleMoves(t *testing.T) {
	// A pawn move between the repetitions resets the count.
	g, _ := NewGame(StartFEN)
	moves := []string{"g1f3", "g8f6", "f3g1", "f6g8", "g1f3", "g8f6", "f3g1", "f6g8", "a2a3",
		"g8f6", "g1f3", "f6g8", "f3g1", "g8f6", "g1f3", "f6g8", "f3g1"}
	for _, m := range moves {
		if err := g.Push(m); err != nil {
			t.Fatal(err)
		}
	}
	if n := g.repetitions(); n != 3 {
		t.Errorf("repetitions = %d, want 3 (counted since a2a3)", n)
	}
}

func TestReplayGameErrorNamesPly(t *testing.T) {
	_, err := ReplayGame(StartFEN, []string{"e2e4", "e7e5", "e4e5"})
	if err == nil || !strings.Contains(err.Error(), "ply 3") {
		t.Errorf("error = %v, want it to name ply 3", err)
	}
}
