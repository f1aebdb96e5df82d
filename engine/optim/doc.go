// Package optim updates a gpt2.Model's parameters from its gradients: AdamW with decoupled
// weight decay (torch.optim.AdamW semantics), global gradient-norm clipping with per-layer
// norms for metrics, and learning-rate schedules.
//
// The optimizer's moments are two flat buffers in the model's parameter Layout order, next
// to the parameters and gradients, so a checkpoint stores them as they are.
package optim
