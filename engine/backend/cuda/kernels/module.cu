// The one translation unit nvcc compiles to PTX (and the emulator compiles as C++): every
// kernel file, so the backend loads a single module.
#include "elementwise.cu"
#include "encoder.cu"
#include "layernorm.cu"
#include "attention.cu"
#include "logprobs.cu"
#include "optimizer.cu"
#include "matmul.cu"
#include "sample.cu"
