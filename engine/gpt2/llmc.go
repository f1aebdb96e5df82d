package gpt2

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/rookscript/rookscript/engine/atomicfile"
	"github.com/rookscript/rookscript/engine/safetensors"
)

// llm.c model checkpoints (train_gpt2.py write_model, train_gpt2.c gpt2_build_from_checkpoint):
// a header of 256 little-endian int32s, then every parameter in llm.c order, which is exactly
// our Layout order, with wte padded to PaddedVocab rows:
//
//	[0] magic 20240326  [1] version: 3 = fp32, 5 = bf16  [2] max_seq_len  [3] vocab_size
//	[4] num_layers  [5] num_heads  [6] channels  [7] padded_vocab_size  [8..255] zero
const (
	LLMCMagic       = 20240326
	llmcHeaderInts  = 256
	llmcHeaderBytes = 4 * llmcHeaderInts
	llmcVersionF32  = 3
	llmcVersionBF16 = 5
	// LLMCPadMultiple is llm.c's vocabulary padding: 50257 -> 50304.
	LLMCPadMultiple = 128
)

// LoadLLMC reads an llm.c checkpoint (version 3, fp32, or 5, bf16). The padded vocabulary
// rows of wte are dropped. llm.c hard-codes LayerNorm epsilon 1e-5. A tensor holding NaN or
// ±Inf is an error naming it.
func LoadLLMC(path string) (Config, []float32, error) {
	fail := func(kind LoadKind, err error, format string, a ...any) (Config, []float32, error) {
		return Config{}, nil, &LoadError{Kind: kind, File: path, Format: "llm.c checkpoint", Reason: fmt.Sprintf(format, a...), Err: err}
	}
	f, err := os.Open(path)
	if err != nil {
		return Config{}, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Config{}, nil, err
	}
	size := fi.Size()
	r := bufio.NewReaderSize(f, 1<<20)
	var hdr [llmcHeaderInts]int32
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return fail(BadHeader, nil, "file is %d bytes, shorter than the %d-byte header", size, llmcHeaderBytes)
	}
	if hdr[0] != LLMCMagic {
		return fail(BadHeader, nil, "bad magic %d, want %d (not an llm.c model file)", hdr[0], LLMCMagic)
	}
	var elt int64
	switch hdr[1] {
	case llmcVersionF32:
		elt = 4
	case llmcVersionBF16:
		elt = 2
	default:
		return fail(BadHeader, nil, "unsupported version %d; want %d (fp32) or %d (bf16), as written by current llm.c",
			hdr[1], llmcVersionF32, llmcVersionBF16)
	}
	cfg := Config{MaxSeqLen: int(hdr[2]), VocabSize: int(hdr[3]), NumLayers: int(hdr[4]),
		NumHeads: int(hdr[5]), Channels: int(hdr[6]), LayerNormE: 1e-5}
	vp := int(hdr[7])
	if err := cfg.Validate(); err != nil {
		return fail(BadConfig, err, "header")
	}
	if vp < cfg.VocabSize {
		return fail(BadConfig, &ConfigError{Key: "padded_vocab_size", Value: vp, Reason: fmt.Sprintf("at least vocab_size (%d)", cfg.VocabSize)}, "header")
	}
	// Check the size in float64 first: absurd header values must not overflow int arithmetic.
	c := float64(cfg.Channels)
	approx := float64(llmcHeaderBytes) + float64(elt)*(float64(vp)*c+float64(cfg.MaxSeqLen)*c+
		float64(cfg.NumLayers)*(12*c*c+13*c)+2*c)
	if approx > 1<<52 || approx > 2*float64(size)+1 {
		return fail(BadSize, nil, "file is %d bytes but the header (%s) implies %.4g", size, llmcDescribe(cfg, vp, hdr[1]), approx)
	}
	l := NewLayout(cfg)
	pad := (vp - cfg.VocabSize) * cfg.Channels
	if want := llmcHeaderBytes + elt*int64(l.Total+pad); size != want {
		return fail(BadSize, nil, "file is %d bytes but the header (%s) implies %d", size, llmcDescribe(cfg, vp, hdr[1]), want)
	}

	params := make([]float32, l.Total)
	buf := make([]byte, 1<<16)
	read := func(dst []float32) error {
		for len(dst) > 0 {
			n := min(len(dst), len(buf)/int(elt))
			b := buf[:n*int(elt)]
			if _, err := io.ReadFull(r, b); err != nil {
				return err
			}
			for i := range n {
				if elt == 4 {
					dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
				} else {
					dst[i] = safetensors.BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
				}
			}
			dst = dst[n:]
		}
		return nil
	}
	wte, _ := l.Lookup("wte.weight")
	if err := read(params[:wte.Size]); err != nil {
		return fail(BadSize, err, "reading wte")
	}
	if _, err := r.Discard(pad * int(elt)); err != nil {
		return fail(BadSize, err, "reading wte padding")
	}
	if err := read(params[wte.Size:]); err != nil {
		return fail(BadSize, err, "reading parameters")
	}
	for _, t := range l.Tensors {
		if err := checkFinite(t.Name, params[t.Off:t.Off+t.Size]); err != nil {
			return Config{}, nil, &LoadError{Kind: NonFinite, File: path, Format: "llm.c checkpoint", Tensor: t.Name, Err: err}
		}
	}
	return cfg, params, nil
}

func llmcDescribe(cfg Config, vp int, version int32) string {
	return fmt.Sprintf("version %d, T=%d V=%d Vp=%d L=%d NH=%d C=%d", version,
		cfg.MaxSeqLen, cfg.VocabSize, vp, cfg.NumLayers, cfg.NumHeads, cfg.Channels)
}

// SaveLLMC writes an llm.c version 3 (fp32) checkpoint with the vocabulary padded with zero
// rows to a multiple of LLMCPadMultiple, as llm.c's own export does.
func SaveLLMC(path string, cfg Config, params []float32) error {
	return SaveLLMCPadded(path, cfg, params, LLMCPadMultiple)
}

// SaveLLMCPadded is SaveLLMC with the vocabulary padded to a multiple of multiple (1: none).
// Non-finite weights are refused, as they are at load.
func SaveLLMCPadded(path string, cfg Config, params []float32, multiple int) error {
	if err := checkSave(cfg, params); err != nil {
		return &SaveError{File: path, Err: err}
	}
	l := NewLayout(cfg)
	if multiple < 1 {
		return &SaveError{File: path, Reason: fmt.Sprintf("padding multiple %d must be positive", multiple)}
	}
	vp := (cfg.VocabSize + multiple - 1) / multiple * multiple
	for _, v := range []int{cfg.MaxSeqLen, vp, cfg.NumLayers, cfg.NumHeads, cfg.Channels} {
		if v > math.MaxInt32 {
			return &SaveError{File: path, Reason: fmt.Sprintf("dimension %d does not fit the int32 header", v)}
		}
	}
	var hdr [llmcHeaderInts]int32
	hdr[0], hdr[1] = LLMCMagic, llmcVersionF32
	hdr[2], hdr[3], hdr[4] = int32(cfg.MaxSeqLen), int32(cfg.VocabSize), int32(cfg.NumLayers)
	hdr[5], hdr[6], hdr[7] = int32(cfg.NumHeads), int32(cfg.Channels), int32(vp)
	wte, _ := l.Lookup("wte.weight")
	return atomicfile.Write(path, func(w io.Writer) error {
		if err := binary.Write(w, binary.LittleEndian, hdr[:]); err != nil {
			return err
		}
		buf := make([]byte, 1<<16)
		write := func(src []float32) error {
			for len(src) > 0 {
				n := min(len(src), len(buf)/4)
				for i, v := range src[:n] {
					binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
				}
				if _, err := w.Write(buf[:4*n]); err != nil {
					return err
				}
				src = src[n:]
			}
			return nil
		}
		if err := write(params[:wte.Size]); err != nil {
			return err
		}
		if err := write(make([]float32, (vp-cfg.VocabSize)*cfg.Channels)); err != nil {
			return err
		}
		return write(params[wte.Size:])
	})
}
