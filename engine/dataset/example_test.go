package dataset_test

import (
	"errors"
	"fmt"
	"io"
	"log"

	"github.com/rookscript/rookscript/engine/dataset"
)

func Example() {
	r, err := dataset.Open("testdata/npm_fen.parquet", dataset.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for {
		row, err := r.Next()
		if err == io.EOF {
			break
		}
		var bad *dataset.Error
		if errors.As(err, &bad) && bad.Skippable() {
			log.Print(err) // or stop: the caller decides
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d %q %s\n", row.Row, row.Task, row.FEN)
	}
	fmt.Printf("resume at %+v\n", r.Cursor())
	// Output:
	// 1 "P" rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1
	// 2 "A" r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6
	// 3 "" 5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58
	// 4 "P" 8/8/8/8/8/5k2/8/5K1q w - - 0 80
	// 5 "A" rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1
	// resume at {File:npm_fen.parquet Row:5}
}
