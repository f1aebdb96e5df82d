package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/rookscript/rookscript/engine/backend/cuda/internal/ptxsrc"
)

func main() {
	dir := flag.String("dir", "", "kernel source directory (default: . if it holds module.cu, else engine/backend/cuda/kernels)")
	check := flag.Bool("check", false, "compare the committed PTX with a fresh build instead of writing it")
	nvcc := flag.String("nvcc", "nvcc", "the nvcc to run")
	flag.Parse()
	if err := run(*dir, *nvcc, *check); err != nil {
		fmt.Fprintln(os.Stderr, "ptxgen:", err)
		os.Exit(1)
	}
}

func run(dir, nvcc string, check bool) error {
	if dir == "" {
		d, err := kernelsDir()
		if err != nil {
			return err
		}
		dir = d
	}
	hash, err := ptxsrc.SourceHash(os.DirFS(dir))
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "ptxgen")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	stale := 0
	for _, arch := range ptxsrc.Arches {
		out := filepath.Join(tmp, arch+".ptx")
		args := append(append([]string{}, ptxsrc.NVCCFlags...), "-arch="+arch, "-o", out, "module.cu")
		cmd := exec.Command(nvcc, args...)
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s %v: %w", nvcc, args, err)
		}
		body, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		ptx := append([]byte(ptxsrc.Header(arch, hash)), body...)
		dst := filepath.Join(dir, arch+".ptx")
		if !check {
			if err := os.WriteFile(dst, ptx, 0o644); err != nil {
				return err
			}
			fmt.Printf("wrote %s (%d bytes)\n", dst, len(ptx))
			continue
		}
		old, err := os.ReadFile(dst)
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "%s: %v\n", dst, err)
			stale++
		case !bytes.Equal(old, ptx):
			fmt.Fprintf(os.Stderr, "%s is not what nvcc makes from the sources now; run 'make ptx' and commit the result\n", dst)
			stale++
		default:
			fmt.Printf("%s is current\n", dst)
		}
	}
	if stale > 0 {
		return fmt.Errorf("%d PTX file(s) out of date", stale)
	}
	return nil
}

// kernelsDir finds the kernels package directory: go generate runs this command there, and
// make runs it from the repository root.
func kernelsDir() (string, error) {
	for _, d := range []string{".", "engine/backend/cuda/kernels"} {
		if _, err := os.Stat(filepath.Join(d, "module.cu")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("module.cu not found: run from the repository root or the kernels directory, or pass -dir")
}
