package gpt2

import "fmt"

// Tensor names one parameter tensor inside the flat parameter buffer.
//
// Names are Hugging Face GPT-2 names without the "transformer." prefix. Matrices are stored
// (out, in) row-major, as llm.c and PyTorch nn.Linear do; Hugging Face's Conv1D stores
// (in, out), so the loaders transpose.
type Tensor struct {
	Name  string
	Shape []int // (out, in) for matrices
	Off   int   // offset in the flat buffer, in floats
	Size  int   // product of Shape
	Layer int   // transformer block index, -1 for wte, wpe and ln_f
}

// Layout lists every parameter tensor in checkpoint order, the order of llm.c's
// train_gpt2.c: all blocks' ln_1.weight, then all blocks' ln_1.bias, and so on. Each block's
// slice of a group is contiguous, so per-layer views are plain sub-slices.
type Layout struct {
	Config  Config
	Tensors []Tensor
	byName  map[string]int
	Total   int // number of floats
}

// The per-block parameter groups in llm.c order, with their shapes as a function of C.
var blockGroups = []struct {
	name  string
	shape func(c int) []int
}{
	{"ln_1.weight", func(c int) []int { return []int{c} }},
	{"ln_1.bias", func(c int) []int { return []int{c} }},
	{"attn.c_attn.weight", func(c int) []int { return []int{3 * c, c} }},
	{"attn.c_attn.bias", func(c int) []int { return []int{3 * c} }},
	{"attn.c_proj.weight", func(c int) []int { return []int{c, c} }},
	{"attn.c_proj.bias", func(c int) []int { return []int{c} }},
	{"ln_2.weight", func(c int) []int { return []int{c} }},
	{"ln_2.bias", func(c int) []int { return []int{c} }},
	{"mlp.c_fc.weight", func(c int) []int { return []int{4 * c, c} }},
	{"mlp.c_fc.bias", func(c int) []int { return []int{4 * c} }},
	{"mlp.c_proj.weight", func(c int) []int { return []int{c, 4 * c} }},
	{"mlp.c_proj.bias", func(c int) []int { return []int{c} }},
}

// NewLayout computes the parameter layout of cfg.
func NewLayout(cfg Config) *Layout {
	l := &Layout{Config: cfg, byName: map[string]int{}}
	add := func(name string, layer int, shape ...int) {
		size := 1
		for _, d := range shape {
			size *= d
		}
		l.byName[name] = len(l.Tensors)
		l.Tensors = append(l.Tensors, Tensor{Name: name, Shape: shape, Off: l.Total, Size: size, Layer: layer})
		l.Total += size
	}
	c := cfg.Channels
	add("wte.weight", -1, cfg.VocabSize, c)
	add("wpe.weight", -1, cfg.MaxSeqLen, c)
	for _, g := range blockGroups {
		for i := 0; i < cfg.NumLayers; i++ {
			add(fmt.Sprintf("h.%d.%s", i, g.name), i, g.shape(c)...)
		}
	}
	add("ln_f.weight", -1, c)
	add("ln_f.bias", -1, c)
	return l
}

// Lookup returns the tensor called name.
func (l *Layout) Lookup(name string) (Tensor, bool) {
	i, ok := l.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return l.Tensors[i], true
}

// Block returns the tensor of group (e.g. "attn.c_attn.weight") in block i.
func (l *Layout) Block(i int, group string) Tensor {
	t, ok := l.Lookup(fmt.Sprintf("h.%d.%s", i, group))
	if !ok {
		panic("gpt2: no tensor " + group)
	}
	return t
}

// IsMatrix reports whether t has two or more dimensions (the tensors weight decay applies to
// when decay is restricted to matrices, as in nanoGPT and most GPT-2 trainers).
func (t Tensor) IsMatrix() bool { return len(t.Shape) >= 2 }

// NumParams is the number of floats in the layout.
func (l *Layout) NumParams() int { return l.Total }
