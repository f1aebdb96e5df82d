package rookworld_test

import (
	"context"
	"fmt"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/rookworld"
)

func ExampleEnvStep() {
	r, err := rookworld.EnvStep("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", "a1a8")
	if err != nil {
		panic(err)
	}
	fmt.Println(rookworld.EnvPrompt(r.PrevFEN, r.Move, nil))
	fmt.Println(r.Completion())
	// Output:
	// A: 6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1+a1a8+a1a8+
	// R5k1/5ppp/8/8/8/8/8/6K1 b - - 1 1+1.0+1+0
}

// A move that repeats a position a fifth time ends the game, which only the game's history
// shows: the prompt's FEN and ten recent moves say the game goes on.
func ExampleEnvStepAfter() {
	var history []string
	for range 4 {
		history = append(history, "g1f3", "g8f6", "f3g1", "f6g8")
	}
	history, last := history[:15], history[15]
	g, _ := chess.ReplayGame(chess.StartFEN, history)
	fen := g.Position().FEN()
	withGame, _ := rookworld.EnvStepAfter(chess.StartFEN, history, fen, last)
	bare, _ := rookworld.EnvStep(fen, last)
	fmt.Println(rookworld.EnvPrompt(fen, last, history))
	fmt.Println(withGame.Completion(), withGame.Termination)
	fmt.Println(bare.Completion())
	// Output:
	// A: rnbqkb1r/pppppppp/5n2/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - 15 8+f6g8+f3g1 f6g8 g1f3 g8f6 f3g1 f6g8 g1f3 g8f6 f3g1 f6g8+
	// rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 16 9+0.5+1+0 fivefold_repetition
	// rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 16 9+0.001+0+0
}

func ExamplePolicyText() {
	fmt.Printf("%q\n", rookworld.PolicyText("8/8/8/8/8/2k5/8/KQ6 w - - 0 1",
		[]string{"b1b2", "b1c1"}, []float64{999.98, 9.5}, "b1b2"))
	// Output:
	// "P: 8/8/8/8/8/2k5/8/KQ6 w - - 0 1                                                             M: b1b2 b1c1                     E: 999.98 9.5                              B: b1b2"
}

// The model card's A: example: the FEN standard's en-passant square and a final '+', both
// accepted.
func ExampleScorer_Score() {
	s, err := rookworld.NewScorer(nil, rookworld.DefaultRewardConfig()) // A: answers need no engine
	if err != nil {
		panic(err)
	}
	prompt := "A: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1+e2e4+e2e4+"
	for _, answer := range []string{
		"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1+0.001+0+0+",
		"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e6 0 1+0.001+0+0",
	} {
		r, err := s.Score(context.Background(), rookworld.Input{Prompt: prompt, Completion: answer})
		if err != nil {
			panic(err)
		}
		fmt.Printf("total %.3f: %s\n", r.Total, rookworld.FormatComponents(r))
	}
	// Output:
	// total 1.000: format=1 fen_exact=1 fen_similarity=1 fen_ranks=1 flags=1 reward_field=1
	// total 0.400: format=1 fen_exact=0 fen_similarity=0.9831 fen_ranks=1 flags=1 reward_field=1
}
