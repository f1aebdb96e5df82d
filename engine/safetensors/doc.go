// Package safetensors reads, validates and writes the safetensors file format
// (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of JSON mapping
// tensor names to {dtype, shape, data_offsets} plus an optional "__metadata__" string map,
// then the data section. Offsets are relative to the data section, and the tensors must tile
// it exactly.
//
// It knows nothing about models: engine/gpt2 maps GPT-2 parameters onto tensors, and
// engine/checkpoint stores optimizer state in the same format.
//
//	Parse, Read   validate a whole file: header length, one JSON object without duplicate
//	              keys, known dtypes, byte counts that match shape×dtype, exact tiling
//	Write         the reference writer's layout (widest dtype first, then name; header padded
//	              to 8 bytes), written atomically
//	Tensor        raw little-endian bytes plus dtype and shape; Float32s, DecodeFloat32 and
//	              Ints convert (F16 and BF16 widen exactly)
package safetensors
