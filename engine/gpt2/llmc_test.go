package gpt2

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLLMCRoundTrip(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	path := filepath.Join(t.TempDir(), "model.bin")
	if err := SaveLLMC(path, cfg, params); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hdr := make([]int32, 8)
	for i := range hdr {
		hdr[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	if want := []int32{20240326, 3, 5, 11, 2, 2, 4, 128}; !slices.Equal(hdr, want) {
		t.Errorf("header %v, want %v", hdr, want)
	}
	l := NewLayout(cfg)
	if want := 1024 + 4*(l.Total+(128-11)*4); len(b) != want {
		t.Errorf("file is %d bytes, want %d", len(b), want)
	}
	// wte rows, then zero padding rows, then wpe.
	wteEnd := 1024 + 4*11*4
	for i := wteEnd; i < wteEnd+4*(128-11)*4; i++ {
		if b[i] != 0 {
			t.Fatalf("padding byte %d is %d", i, b[i])
		}
	}
	wpe, _ := l.Lookup("wpe.weight")
	if got := math.Float32frombits(binary.LittleEndian.Uint32(b[wteEnd+4*(128-11)*4:])); got != params[wpe.Off] {
		t.Errorf("first wpe value %g, want %g", got, params[wpe.Off])
	}

	gotCfg, got, err := LoadLLMC(path)
	if err != nil {
		t.Fatal(err)
	}
	if gotCfg != cfg || !bitsEqual(got, params) {
		t.Errorf("round trip changed the model: %+v", gotCfg)
	}

	unpadded := filepath.Join(t.TempDir(), "unpadded.bin")
	if err := SaveLLMCPadded(unpadded, cfg, params, 1); err != nil {
		t.Fatal(err)
	}
	if _, got, err := LoadLLMC(unpadded); err != nil || !bitsEqual(got, params) {
		t.Errorf("unpadded: %v", err)
	}
}

// llmcTestFile builds an llm.c file by hand: header ints then raw values.
func llmcTestFile(hdr []int32, values []byte) []byte {
	b := make([]byte, 1024, 1024+len(values))
	for i, v := range hdr {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return append(b, values...)
}

func TestLLMCBF16(t *testing.T) {
	cfg := ioTestConfig
	l := NewLayout(cfg)
	vp := 16
	want := make([]float32, l.Total)
	var vals []byte
	for i := 0; i < l.Total+(vp-cfg.VocabSize)*cfg.Channels; i++ {
		h := uint16(0x3c00 + i%300) // bf16 values around 0.008..0.05
		j := i
		if i >= cfg.VocabSize*cfg.Channels {
			j -= (vp - cfg.VocabSize) * cfg.Channels
			if j < cfg.VocabSize*cfg.Channels {
				h = 0xffff // a padding row: must be dropped
				j = -1
			}
		}
		if j >= 0 {
			want[j] = math.Float32frombits(uint32(h) << 16)
		}
		vals = binary.LittleEndian.AppendUint16(vals, h)
	}
	path := filepath.Join(t.TempDir(), "bf16.bin")
	hdr := []int32{20240326, 5, 5, 11, 2, 2, 4, int32(vp)}
	if err := os.WriteFile(path, llmcTestFile(hdr, vals), 0o644); err != nil {
		t.Fatal(err)
	}
	gotCfg, got, err := LoadLLMC(path)
	if err != nil {
		t.Fatal(err)
	}
	if gotCfg != cfg || !bitsEqual(got, want) {
		t.Error("bf16 checkpoint loaded wrongly")
	}
}

func TestLLMCErrors(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	good := filepath.Join(t.TempDir(), "good.bin")
	if err := SaveLLMC(good, cfg, params); err != nil {
		t.Fatal(err)
	}
	valid, _ := os.ReadFile(good)
	set := func(i int, v int32) []byte {
		b := append([]byte(nil), valid...)
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		return b
	}
	for _, c := range []struct {
		name string
		file []byte
		kind LoadKind
		key  string // BadConfig: the setting at fault
		val  int
	}{
		{"short header", valid[:100], BadHeader, "", 0},
		{"magic", set(0, 20240520), BadHeader, "", 0},
		{"old version", set(1, 2), BadHeader, "", 0},
		{"truncated", valid[:len(valid)-4], BadSize, "", 0},
		{"trailing", append(append([]byte(nil), valid...), 0, 0, 0, 0), BadSize, "", 0},
		{"header lies", set(4, 3), BadSize, "", 0},
		{"huge channels", set(6, 1<<30), BadConfig, "n_embd", 1 << 30},
		{"channels the file lacks", set(6, 1<<14), BadSize, "", 0},
		{"odd channels", set(6, 5), BadConfig, "n_embd", 5},
		{"huge layers", set(4, 1<<30), BadConfig, "n_layer", 1 << 30},
		{"huge positions", set(2, 1<<30), BadConfig, "n_positions", 1 << 30},
		{"huge vocabulary", set(3, 1<<30), BadConfig, "vocab_size", 1 << 30},
		{"padded smaller", set(7, 10), BadConfig, "padded_vocab_size", 10},
		{"zero heads", set(5, 0), BadConfig, "n_head", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.bin")
			if err := os.WriteFile(path, c.file, 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := LoadLLMC(path)
			if le := wantLoadError(t, err, c.kind, path); le.Format != "llm.c checkpoint" {
				t.Errorf("format %q", le.Format)
			}
			if c.key != "" {
				wantConfigError(t, err, c.key, c.val)
			}
		})
	}
	if _, _, err := LoadLLMC(filepath.Join(t.TempDir(), "none.bin")); err == nil || !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
	if err := SaveLLMC(filepath.Join(t.TempDir(), "x.bin"), cfg, params[1:]); err == nil {
		t.Error("wrong parameter count accepted")
	}
}
