package dataset_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/rookscript/rookscript/engine/dataset"
)

const (
	bigEnv     = "ROOKSCRIPT_DATASET_BIG" // =1 runs TestBigParquetRSS
	bigReadEnv = "ROOKSCRIPT_DATASET_BIG_READ"
	bigRows    = 1_000_000
)

// TestBigParquetRSS writes a 1M-row parquet file of RookWorld-sized text rows in one row
// group, the case where a reader that loads a row group loads the whole file, then reads it
// through a Reader in a child process, whose peak RSS (VmHWM) counts the reading alone.
//
//	ROOKSCRIPT_DATASET_BIG=1 go test -run TestBigParquetRSS -v ./engine/dataset
func TestBigParquetRSS(t *testing.T) {
	if os.Getenv(bigEnv) != "1" {
		t.Skip("set " + bigEnv + "=1 to write and read a 1M-row parquet file")
	}
	path := filepath.Join(t.TempDir(), "big.parquet")
	textBytes := writeBig(t, path)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), bigReadEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reader process: %v\n%s", err, out)
	}
	var rows, hwmKB, rssBeforeKB int64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "rows=%d before_kb=%d vmhwm_kb=%d", &rows, &rssBeforeKB, &hwmKB); err != nil {
		t.Fatalf("reader process said %q: %v", out, err)
	}
	groups, pages := layout(t, path)
	t.Logf("%d rows, %.1f MiB of text, file %.1f MiB in %d row group(s), %d text pages: reader peak RSS %.1f MiB (%.1f MiB before the first row)",
		rows, float64(textBytes)/(1<<20), float64(st.Size())/(1<<20), groups, pages, float64(hwmKB)/1024, float64(rssBeforeKB)/1024)
	if rows != bigRows {
		t.Fatalf("read %d rows, want %d", rows, bigRows)
	}
	// A reader that held the file, even compressed, would need more than its size.
	if hwmKB*1024 >= st.Size() {
		t.Fatalf("peak RSS %d KiB for a file of %d bytes: the reader does not stream", hwmKB, st.Size())
	}
}

// layout counts the file's row groups and the pages of its text column.
func layout(t *testing.T, path string) (groups, pages int) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := pf.Schema().Lookup("text")
	for i := range pf.RowGroups() {
		pages += len(pf.OffsetIndexes()[i*len(pf.Schema().Columns())+leaf.ColumnIndex].PageLocations)
	}
	return len(pf.RowGroups()), pages
}

func writeBig(t *testing.T, path string) int64 {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[textRow](f, parquet.Compression(&parquet.Snappy))
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"r", "n", "b", "q", "k", "p", "R", "N", "B", "Q", "K", "P", "1", "2", "3", "8"}
	var total int64
	batch := make([]textRow, 0, 10_000)
	for i := 0; i < bigRows; i++ {
		var fen strings.Builder
		for rank := 0; rank < 8; rank++ {
			for range 5 {
				fen.WriteString(pieces[rng.IntN(len(pieces))])
			}
			if rank < 7 {
				fen.WriteByte('/')
			}
		}
		text := fmt.Sprintf("P: %-90sM: %-30sE: %-40sB: %s", fen.String()+" w - - 0 1",
			"e2e4 d2d4 g1f3 c2c4 e2e3", fmt.Sprintf("%.2f %.2f %.2f %.2f %.2f", rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64()), "e2e4")
		total += int64(len(text))
		batch = append(batch, textRow{Source: int64(i), Text: text})
		if len(batch) == cap(batch) {
			if _, err := w.Write(batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return total
}

// bigRead is the child process: it reads every row and prints its count and peak RSS.
func bigRead() int {
	r, err := dataset.Open(os.Getenv(bigReadEnv), dataset.Options{})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	before := procStatusKB("VmRSS")
	var n int64
	for {
		row, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil || !strings.HasPrefix(row.Text, "P: ") {
			fmt.Println("row", n+1, err)
			return 1
		}
		n++
	}
	r.Close()
	fmt.Printf("rows=%d before_kb=%d vmhwm_kb=%d\n", n, before, procStatusKB("VmHWM"))
	return 0
}

func procStatusKB(key string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key+":"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb
		}
	}
	return -1
}
