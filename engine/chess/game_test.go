package chess

import (
	"errors"
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
	if n := g.Repetitions(); n != 3 {
		t.Errorf("repetitions = %d, want 3 (counted since a2a3)", n)
	}
}

func TestReplayGameErrorNamesPly(t *testing.T) {
	_, err := ReplayGame(StartFEN, []string{"e2e4", "e7e5", "e4e5"})
	var pe *PlyError
	if !errors.As(err, &pe) || pe.Ply != 3 || !errors.Is(err, ErrIllegalMove) {
		t.Errorf("error = %v, want a *PlyError at ply 3 wrapping ErrIllegalMove", err)
	}
}

// Repetition is FIDE's: the same placement, side to move, castling rights and en-passant
// captures. Here the placement and side to move come back, but the queenside castling right
// did not (the king moved), so the start does not count.
func TestRepetitionsNeedTheSameCastlingRights(t *testing.T) {
	g, err := ReplayGame("4k3/8/8/8/8/8/4P3/R3K3 w Q - 0 1", []string{"e1f1", "e8d8", "f1e1", "d8e8"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Position().boardField() != g.PositionAt(0).boardField() || g.Repetitions() != 1 {
		t.Errorf("repetitions = %d, want 1 (castling rights differ from the start's)", g.Repetitions())
	}
	for _, m := range []string{"e1f1", "e8d8", "f1e1", "d8e8"} {
		if err := g.Push(m); err != nil {
			t.Fatal(err)
		}
	}
	if g.Repetitions() != 2 {
		t.Errorf("repetitions = %d, want 2", g.Repetitions())
	}
}
