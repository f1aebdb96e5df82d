// Package chess holds the rules of chess as the RookWorld data sees them:
// positions and FEN in python-chess's conventions, legal moves in UCI, SAN,
// games with the history that repetition needs, the automatic game-over
// rules, and a PGN reader. It knows nothing of tasks, engines or rewards
// (engine/rookworld and engine/stockfish build on it). Errors name the FEN
// field, ply or PGN line at fault, as values: *FENError, *InvalidError,
// *PlyError and *PGNError.
//
// # Parts
//
//	position.go  Position: FEN parsing/writing in python-chess conventions, legal moves, SAN
//	game.go      Game (history, repetition), Outcome and the game-over rules
//	pgn.go       PGN reader (own parser): tags, comments, variations, NAGs, results
//
// # Rules (python-chess semantics on top of notnil/chess)
//
// notnil/chess generates the moves; Position corrects what differs from
// python-chess:
//
//   - Castling rights are cleaned on every position: a right survives only with
//     king and rook on their original squares (notnil keeps the FEN's letters
//     and would even castle without the rook). They are written in KQkq order.
//   - An en-passant square is written only when an en-passant capture is legal
//     (notnil writes it after every double step). One that no pawn can just
//     have passed is dropped before move generation (notnil would invent a
//     capture on it).
//   - notnil is re-fed a fresh FEN after each move: its incremental update keeps
//     a stale king square when a king is captured, which happens in the
//     corrupt positions of the public ArbiterSim data (see engine/rookworld).
//   - Repetition compares placement, side to move, cleaned castling rights and
//     the en-passant square only when capturable (notnil compares the raw
//     square), counting back to the last irreversible move like python-chess.
//
// Game over, checked in python-chess's order (Position.Outcome, Game.Outcome):
// checkmate (the side to move is in check with no legal move; the other side
// wins); insufficient material (python-chess's rule, for both sides: no pawn,
// rook or queen, and either a lone knight facing only king and queens, or
// bishops all on one square colour with no knight or pawn on the board);
// stalemate (no legal move, not in check); the 75-move rule (halfmove clock
// >= 150); fivefold repetition (the current position occurred five times since
// the last irreversible move). Fivefold needs the game's history: Game tracks
// it (Game.Repetitions). An A: prompt carries at most ten moves, too few for
// five occurrences, so engine/rookworld judges A: answers with the game where
// the data has one (PGN, generator) and from the bare FEN elsewhere.
package chess
