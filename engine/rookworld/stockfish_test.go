package rookworld

import (
	"context"
	"os"
	"reflect"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
)

// requireStockfish skips only when ROOKSCRIPT_NO_STOCKFISH=1 is set: in CI a
// missing engine must fail the tests, not hide them.
func requireStockfish(t testing.TB) {
	t.Helper()
	if os.Getenv("ROOKSCRIPT_NO_STOCKFISH") == "1" {
		t.Skip("ROOKSCRIPT_NO_STOCKFISH=1: skipping a test that needs Stockfish")
	}
}

func newTestPool(t testing.TB, cfg stockfish.Config) *stockfish.Pool {
	t.Helper()
	requireStockfish(t)
	p, err := stockfish.NewPool(context.Background(), testConfig(cfg))
	if err != nil {
		t.Fatalf("NewPool: %v (install Stockfish with `make setup`, or set ROOKSCRIPT_NO_STOCKFISH=1 to skip)", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// testConfig is the default configuration at depth 6 with the fields set in
// over replacing it (tests name only what they change).
func testConfig(over stockfish.Config) stockfish.Config {
	c := stockfish.DefaultConfig()
	c.Depth = 6
	dst, src := reflect.ValueOf(&c).Elem(), reflect.ValueOf(over)
	for i := range src.NumField() {
		if !src.Field(i).IsZero() {
			dst.Field(i).Set(src.Field(i))
		}
	}
	return c
}

var testFENs = []string{
	chess.StartFEN,
	"r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6",
	"r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
	"8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
	"r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
}
