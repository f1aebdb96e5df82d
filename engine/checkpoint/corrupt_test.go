package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/safetensors"
)

// copyDir copies a directory tree of regular files.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if at < 0 {
		at += int64(len(b))
	}
	b[at] ^= 0x20
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// rewriteSafetensors replaces one tensor of a safetensors file.
func rewriteSafetensors(t *testing.T, path, name string, replace func(safetensors.Tensor) safetensors.Tensor) {
	t.Helper()
	st, err := safetensors.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, n := range st.Names() {
		tn := st.Tensors[n]
		if n == name {
			tn = replace(tn)
		}
		ts = append(ts, tn)
	}
	if err := safetensors.Write(path, ts, st.Metadata); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptCheckpointsAreRefused is issue 6 item 4(d): truncated, corrupted and wrong-shape
// files, missing files and a garbage state.json are refused, naming the file and saying what
// is wrong. "Sealed" cases re-seal the manifest, so the check behind it must catch them.
func TestCorruptCheckpointsAreRefused(t *testing.T) {
	refDir := writeModel(t, tinyConfig, 5)
	good := filepath.Join(t.TempDir(), "good")
	run, err := Create(good, Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, refDir, 0) // synced at step 0, so reference/ is in the checkpoint
	h.trainStep()
	name := mustSave(t, run, h.state())
	st0, err := run.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	total := len(st0.Params)

	cases := []struct {
		name   string
		damage func(t *testing.T, ck string)
		want   []string
	}{
		{"truncated model", func(t *testing.T, ck string) { truncate(t, filepath.Join(ck, "model", "model.safetensors")) },
			[]string{"model/model.safetensors", "bytes, expected", "truncated"}},
		{"truncated optimizer", func(t *testing.T, ck string) { truncate(t, filepath.Join(ck, "optimizer.safetensors")) },
			[]string{"optimizer.safetensors", "bytes, expected"}},
		{"flipped byte in optimizer", func(t *testing.T, ck string) { flipByte(t, filepath.Join(ck, "optimizer.safetensors"), -5) },
			[]string{"optimizer.safetensors", "sha256", "expected", "corrupted"}},
		{"flipped byte in model", func(t *testing.T, ck string) { flipByte(t, filepath.Join(ck, "model", "model.safetensors"), -100) },
			[]string{"model/model.safetensors", "sha256", "corrupted"}},
		{"flipped byte in reference", func(t *testing.T, ck string) {
			flipByte(t, filepath.Join(ck, "reference", "model.safetensors"), -100)
		}, []string{"reference/model.safetensors", "sha256", "corrupted"}},
		{"flipped byte in model config", func(t *testing.T, ck string) { flipByte(t, filepath.Join(ck, "model", "config.json"), 10) },
			[]string{"model/config.json", "sha256"}},
		{"missing optimizer", func(t *testing.T, ck string) { os.Remove(filepath.Join(ck, "optimizer.safetensors")) },
			[]string{"optimizer.safetensors: missing"}},
		{"missing model", func(t *testing.T, ck string) { os.RemoveAll(filepath.Join(ck, "model")) },
			[]string{"model/config.json: missing"}},
		{"missing state.json", func(t *testing.T, ck string) { os.Remove(filepath.Join(ck, "state.json")) },
			[]string{"state.json: missing"}},
		{"garbage state.json", func(t *testing.T, ck string) {
			os.WriteFile(filepath.Join(ck, "state.json"), []byte("\x00\x01 not json at all"), 0o644)
		}, []string{"state.json", "not a checkpoint state file"}},
		{"truncated state.json", func(t *testing.T, ck string) { truncate(t, filepath.Join(ck, "state.json")) },
			[]string{"state.json", "not a checkpoint state file"}},
		{"state.json edited", func(t *testing.T, ck string) {
			p := filepath.Join(ck, "state.json")
			b, _ := os.ReadFile(p)
			edited := strings.Replace(string(b), `"cursor": 2`, `"cursor": 3`, 1)
			if edited == string(b) {
				t.Fatal("no cursor to edit in state.json")
			}
			os.WriteFile(p, []byte(edited), 0o644)
		}, []string{"state.json", "content sha256", "corrupted"}},
		{"sealed: wrong-shape optimizer moment", func(t *testing.T, ck string) {
			rewriteSafetensors(t, filepath.Join(ck, "optimizer.safetensors"), "m", func(safetensors.Tensor) safetensors.Tensor {
				return safetensors.F32("m", []int{total - 1}, make([]float32, total-1))
			})
			rewriteState(t, ck, nil)
		}, []string{"optimizer.safetensors", `tensor "m"`, fmt.Sprintf("[%d]", total-1), fmt.Sprintf("want F32 [%d]", total)}},
		{"sealed: wrong-shape model tensor", func(t *testing.T, ck string) {
			rewriteSafetensors(t, filepath.Join(ck, "model", "model.safetensors"), "transformer.ln_f.bias", func(safetensors.Tensor) safetensors.Tensor {
				return safetensors.F32("transformer.ln_f.bias", []int{17}, make([]float32, 17))
			})
			rewriteState(t, ck, nil)
		}, []string{"model.safetensors", "ln_f.bias", "shape [17]", "want [16]"}},
		{"sealed: wrong-shape reference tensor", func(t *testing.T, ck string) {
			rewriteSafetensors(t, filepath.Join(ck, "reference", "model.safetensors"), "transformer.wpe.weight", func(safetensors.Tensor) safetensors.Tensor {
				return safetensors.F32("transformer.wpe.weight", []int{47, 16}, make([]float32, 47*16))
			})
			rewriteState(t, ck, nil)
		}, []string{"reference/model.safetensors", "wpe.weight", "shape [47 16]", "want [48 16]"}},
		{"sealed: other weights in the model", func(t *testing.T, ck string) {
			gpt2.SaveHF(filepath.Join(ck, "model"), tinyConfig, gpt2.RandomParams(tinyConfig, 1))
			rewriteState(t, ck, nil)
		}, []string{"model/model.safetensors", "policy content hash", st0.ParamsHash}},
		{"sealed: model architecture differs", func(t *testing.T, ck string) {
			cfg := tinyConfig
			cfg.LayerNormE = 1e-6
			gpt2.SaveHF(filepath.Join(ck, "model"), cfg, st0.Params)
			rewriteState(t, ck, nil)
		}, []string{"model/config.json", "architecture"}},
		{"sealed: manifest lacks a file", func(t *testing.T, ck string) {
			rewriteState(t, ck, func(fs *fileState) { delete(fs.Files, "optimizer.safetensors") })
		}, []string{"does not list optimizer.safetensors"}},
		{"sealed: optimizer steps disagree", func(t *testing.T, ck string) {
			rewriteState(t, ck, func(fs *fileState) { fs.Optimizer.Steps++ })
		}, []string{"optimizer.safetensors", "steps"}},
		{"checkpoint in the wrong directory", func(t *testing.T, ck string) {
			rewriteState(t, ck, func(fs *fileState) { fs.Step = 7 })
		}, []string{"holds step 7", name}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			copyDir(t, good, dir)
			r, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			c.damage(t, filepath.Join(dir, "checkpoints", name))
			_, err = r.Latest()
			wantErr(t, err, c.want...)
			t.Log(err)
		})
	}

	t.Run("pointers", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		copyDir(t, good, dir)
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		latest := filepath.Join(dir, "checkpoints", "LATEST")
		os.WriteFile(latest, []byte("../../etc\n"), 0o644)
		_, err = r.Latest()
		wantErr(t, err, "LATEST", "not a checkpoint name")
		os.WriteFile(latest, []byte("step-00000099\n"), 0o644)
		_, err = r.Latest()
		wantErr(t, err, "step-00000099", "no such checkpoint")
		os.Remove(latest)
		_, err = r.Latest()
		if !errors.Is(err, ErrNoCheckpoint) {
			t.Fatalf("no LATEST: %v, want ErrNoCheckpoint", err)
		}
		_, err = r.Load("../good")
		wantErr(t, err, "not a checkpoint name")
	})
}

// TestGarbageStateDoesNotBreakOpen: Open of a run whose newest state.json is garbage still
// opens (with default options); Latest reports the damage.
func TestGarbageStateDoesNotBreakOpen(t *testing.T) {
	id := smallIdentity(t)
	dir := filepath.Join(t.TempDir(), "run")
	run, err := Create(dir, Options{KeepLast: 5})
	if err != nil {
		t.Fatal(err)
	}
	name := mustSave(t, run, plainState(t, 1, id, nil))
	run.Close()
	os.WriteFile(filepath.Join(dir, "checkpoints", name, "state.json"), []byte("{}"), 0o644)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Options().KeepLast != DefaultKeepLast {
		t.Fatalf("options %+v", r.Options())
	}
	_, err = r.Latest()
	wantErr(t, err, "state.json", "format")
}

// smallIdentity is the identity of a tinyConfig model saved as an HF dir.
func smallIdentity(t *testing.T) Identity {
	t.Helper()
	id, _, _, err := NewReference(writeModel(t, tinyConfig, 5))
	if err != nil {
		t.Fatal(err)
	}
	return id
}
