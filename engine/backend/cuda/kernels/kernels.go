package kernels

//go:generate go run ../internal/ptxgen

import (
	"embed"
	"fmt"
)

// Sources are the CUDA C sources. Embedding them also makes them inputs of this package for
// the go command, so the emulator (which compiles them through #include, invisible to the
// build cache) is rebuilt when one changes: package emu imports this one.
//
//go:embed *.cu *.cuh
var Sources embed.FS

// Kernel names an extern "C" kernel of module.cu and its parameter types, one letter per
// parameter: F float*, I int*, L long long*, D double*, f float, i int, l long long.
type Kernel struct {
	Name string
	Sig  string
}

// The kernels, with the same names and parameter lists as in the .cu files.
var (
	Fill                = Kernel{"rkcu_fill", "Ffl"}
	Copy                = Kernel{"rkcu_copy", "FFl"}
	Add                 = Kernel{"rkcu_add", "FFFl"}
	AddTo               = Kernel{"rkcu_add_to", "FFl"}
	Scale               = Kernel{"rkcu_scale", "Ffl"}
	AddI32              = Kernel{"rkcu_add_i32", "Iil"}
	GELUForward         = Kernel{"rkcu_gelu_forward", "FFl"}
	GELUBackward        = Kernel{"rkcu_gelu_backward", "FFFl"}
	GatherRows          = Kernel{"rkcu_gather_rows", "FFIii"}
	ScatterRows         = Kernel{"rkcu_scatter_rows", "FFIii"}
	ColumnSums          = Kernel{"rkcu_column_sums", "FFiii"}
	AccumulatePartials  = Kernel{"rkcu_accumulate_partials", "FFiii"}
	EncoderForward      = Kernel{"rkcu_encoder_forward", "FIIFFii"}
	EncoderBackward     = Kernel{"rkcu_encoder_backward", "FFFIIii"}
	LayerNormForward    = Kernel{"rkcu_layernorm_forward", "FFFFFFiif"}
	LayerNormBackward   = Kernel{"rkcu_layernorm_backward", "FFFFFFFiii"}
	AttentionForward    = Kernel{"rkcu_attention_forward", "FFFIiiii"}
	AttentionBackwardDQ = Kernel{"rkcu_attention_backward_dq", "FFFFFFIiiii"}
	AttentionBackwardKV = Kernel{"rkcu_attention_backward_dkv", "FFFFFIiiii"}
	KVWrite             = Kernel{"rkcu_kv_write", "FFFIIiiii"}
	AttentionDecode     = Kernel{"rkcu_attention_decode", "FFFFIIIiiiii"}
	LogProbsForward     = Kernel{"rkcu_logprobs_forward", "FFFFIiif"}
	LogProbsBackward    = Kernel{"rkcu_logprobs_backward", "FFFFFIiif"}
	Softmax             = Kernel{"rkcu_softmax", "FFFiif"}
	AdamW               = Kernel{"rkcu_adamw", "FFFFlLiffffff"}
	SumSquares          = Kernel{"rkcu_sumsq", "DFLii"}
	MatMulNT            = Kernel{"rkcu_matmul_nt", "FFFFFFiii"}
	MatMulNT16          = Kernel{"rkcu_matmul_nt16", "FFFFFFiii"}
	Sample              = Kernel{"rkcu_sample", "IFFFFIIIiilif"}
)

// All lists every kernel; the backend resolves each one when it loads the module.
var All = []Kernel{
	Fill, Copy, Add, AddTo, Scale, AddI32, GELUForward, GELUBackward, GatherRows, ScatterRows,
	ColumnSums, AccumulatePartials, EncoderForward, EncoderBackward,
	LayerNormForward, LayerNormBackward, AttentionForward, AttentionBackwardDQ,
	AttentionBackwardKV, KVWrite, AttentionDecode, LogProbsForward, LogProbsBackward, Softmax, AdamW,
	SumSquares, MatMulNT, MatMulNT16, Sample,
}

//go:embed sm_80.ptx
var ptx80 string

// PTX returns the PTX module for a device of compute capability major.minor and the target
// it was compiled for. PTX is forward compatible: the driver JIT-compiles the sm_80 PTX for
// every 8.x device and every later architecture (Hopper, Blackwell, ...).
func PTX(major, minor int) (ptx, arch string, err error) {
	if major >= 8 {
		return ptx80, "sm_80", nil
	}
	return "", "", fmt.Errorf("compute capability %d.%d is not supported: the kernels are built for sm_80 (Ampere) and newer", major, minor)
}

// Source returns the embedded PTX of arch (only "sm_80").
func Source(arch string) (string, bool) {
	if arch == "sm_80" {
		return ptx80, true
	}
	return "", false
}
