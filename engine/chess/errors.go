package chess

import "fmt"

// FENError is a FEN that does not parse: the FEN, the field at fault and why.
type FENError struct {
	FEN string
	// Field is "board", "side-to-move", "castling", "en-passant", "halfmove" or "fullmove";
	// "" when the error concerns the whole FEN (its field count, or a position the move
	// generator rejects).
	Field  string
	Reason string // what is wrong, for people
	Err    error  // the move generator's error, if it gave one
}

func (e *FENError) Error() string {
	s := fmt.Sprintf("fen %q: ", e.FEN)
	if e.Field != "" {
		s += e.Field + " field: "
	}
	s += e.Reason
	if e.Err != nil {
		if e.Reason != "" {
			s += ": "
		}
		s += e.Err.Error()
	}
	return s
}

func (e *FENError) Unwrap() error { return e.Err }

// InvalidError is a position Valid refuses: a side with other than one king, more than 16
// pieces or more than 8 pawns, or the side not to move in check.
type InvalidError struct {
	Side  string // "white" or "black": the side with the wrong count, or the side in check
	Piece string // "kings", "pieces" or "pawns"; "" when the side not to move is in check
	Count int    // how many of Piece the side has
}

func (e *InvalidError) Error() string {
	if e.Piece == "" {
		return "the side not to move is in check"
	}
	return fmt.Sprintf("%s has %d %s", e.Side, e.Count, e.Piece)
}

// PlyError is a move of a game that cannot be played: its 1-based ply and the move's error
// (which wraps ErrMalformedMove or ErrIllegalMove).
type PlyError struct {
	Ply int
	Err error
}

func (e *PlyError) Error() string { return fmt.Sprintf("ply %d: %v", e.Ply, e.Err) }
func (e *PlyError) Unwrap() error { return e.Err }

// PGNError is PGN text that does not read: the input's name, the line, the game's first
// line and why.
type PGNError struct {
	File string // the name given to the reader ("pgn" for ParsePGN)
	Line int    // 1-based line at which the error was found
	// Game is the line of the game's first token; 0 when the error is in a tag pair, a
	// comment or the input itself, which name their own line.
	Game   int
	Tag    string // the tag pair's name, for an error in one
	Reason string // what is wrong, for people
	Err    error  // the cause: a move's error (ErrIllegalMove, ErrMalformedMove), a *FENError, an I/O error
}

func (e *PGNError) Error() string {
	s := fmt.Sprintf("%s:%d: ", e.File, e.Line)
	if e.Game > 0 {
		s += fmt.Sprintf("game at line %d: ", e.Game)
	}
	if e.Tag != "" {
		s += "tag " + e.Tag + ": "
	}
	s += e.Reason
	if e.Err != nil {
		if e.Reason != "" {
			s += ": "
		}
		s += e.Err.Error()
	}
	return s
}

func (e *PGNError) Unwrap() error { return e.Err }
