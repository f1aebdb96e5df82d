package stockfish

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Fuzz targets for every parser. Each asserts no panic plus the round trip
// the format allows. Seeds: f.Add below and testdata/fuzz.

func FuzzParseInfo(f *testing.F) {
	f.Add("info depth 10 seldepth 15 multipv 2 score cp -250 nodes 44279 pv a6c7 d5c6")
	f.Add("info score mate -3 lowerbound")
	f.Add("info string x")
	f.Fuzz(func(t *testing.T, line string) {
		in, err := ParseInfo(line)
		if err != nil {
			return
		}
		if in.MultiPV < 1 {
			t.Fatalf("multipv %d", in.MultiPV)
		}
	})
}

func FuzzDecodeCacheEntry(f *testing.F) {
	f.Add(`{"fen":"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1","depth":1,"multipv":1,"engine":"x","lines":[{"move":"e2e4","score":{"value":35},"depth":1}]}`)
	f.Add(`{"fen":"7k/8/8/8/8/8/6q1/7K w - - 0 1","depth":3,"multipv":5,"lines":[{"move":"h1g2","score":{"mate":true,"value":-1},"depth":3,"pv":["h1g2"]}]}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, line string) {
		a, ce := decodeCacheEntry([]byte(line))
		if ce != nil {
			return
		}
		// What the file accepts, it writes back identically.
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		again, ce := decodeCacheEntry(b)
		if ce != nil || !reflect.DeepEqual(again, a) {
			t.Fatalf("%s -> %s: %v", line, b, ce)
		}
	})
}
