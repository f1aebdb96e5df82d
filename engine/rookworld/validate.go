package rookworld

import (
	"fmt"
	"strings"

	"github.com/rookscript/rookscript/engine/chess"
)

// ValidatePosition reports why a FEN is not a position that can arise in a
// legal game. It refuses what chess.ParseFEN refuses (bad syntax, two kings
// of one colour, pawns on the first or last rank), what Position.Valid
// refuses (a side without its king, more than 16 pieces or 8 pawns, the side
// not to move in check), and two claims ParseFEN silently cleans: a castling
// right whose king or rook is not on its original square, and an en-passant
// square no pawn can just have passed (not on rank 6 with white to move or
// rank 3 with black to move, no pawn of the side not to move in front of it,
// or it or the square behind it occupied). Sources apply it to every position
// they load and EnvStep to every FEN it judges, so that a position the engine
// would refuse never reaches training.
func ValidatePosition(fen string) error {
	_, err := parseLegal(fen)
	return err
}

// parseLegal is ValidatePosition returning the parsed position.
func parseLegal(fen string) (*chess.Position, error) {
	p, err := chess.ParseFEN(fen)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(fen) // ParseFEN saw 4 to 6 fields
	err = p.Valid()
	if err == nil {
		err = castlingClaims(p, f[2])
	}
	if err == nil {
		err = enPassantClaim(p, f[3])
	}
	if err != nil {
		return nil, fmt.Errorf("fen %q: illegal position: %w", fen, err)
	}
	return p, nil
}

// castlingClaims checks each claimed right against the king's and rook's
// original squares (ParseFEN would drop the right without a word).
func castlingClaims(p *chess.Position, rights string) error {
	for _, c := range []struct {
		right      string
		king, rook string
		k, r       string
	}{{"K", "e1", "h1", "K", "R"}, {"Q", "e1", "a1", "K", "R"}, {"k", "e8", "h8", "k", "r"}, {"q", "e8", "a8", "k", "r"}} {
		if !strings.Contains(rights, c.right) {
			continue
		}
		if p.PieceAt(c.king) != c.k {
			return fmt.Errorf("castling right %s without the king on %s", c.right, c.king)
		}
		if p.PieceAt(c.rook) != c.r {
			return fmt.Errorf("castling right %s without the rook on %s", c.right, c.rook)
		}
	}
	return nil
}

// enPassantClaim checks that a pawn of the side not to move can just have
// double-stepped through the claimed square. A capture need not be possible:
// a FEN may name the square after every double step.
func enPassantClaim(p *chess.Position, sq string) error {
	if sq == "-" {
		return nil
	}
	file := sq[:1]
	rank, pawn, front, from := "6", "p", "5", "7" // white to move: black just moved
	if p.Turn() == chess.Black {
		rank, pawn, front, from = "3", "P", "4", "2"
	}
	switch {
	case sq[1:] != rank:
		return fmt.Errorf("en-passant square %s is not on rank %s with %s to move", sq, rank, sideName(p.Turn()))
	case p.PieceAt(file+front) != pawn:
		return fmt.Errorf("en-passant square %s without a pawn on %s that just double-stepped", sq, file+front)
	case p.PieceAt(sq) != "" || p.PieceAt(file+from) != "":
		return fmt.Errorf("en-passant square %s or %s, where the pawn came from, is occupied", sq, file+from)
	}
	return nil
}

func sideName(turn string) string {
	if turn == chess.White {
		return "white"
	}
	return "black"
}
