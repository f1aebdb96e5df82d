package grpo

import "math"

// Scale is how advantages are divided after the group mean is subtracted.
type Scale string

const (
	ScaleGroup Scale = "group" // by the group's reward std (GRPO)
	ScaleBatch Scale = "batch" // by the whole batch's reward std (PPO Lite)
	ScaleNone  Scale = "none"  // not at all (Dr. GRPO)
)

// LossType is how token losses are summed into the loss.
type LossType string

const (
	LossGRPO   LossType = "grpo"    // mean over each sequence's tokens, then over sequences
	LossBNPO   LossType = "bnpo"    // sum over tokens / tokens that are not masked (TRL: of the device's batch)
	LossDAPO   LossType = "dapo"    // sum over tokens / tokens that are not masked (TRL: of the global batch)
	LossDrGRPO LossType = "dr_grpo" // sum over tokens / (sequences × max_new_tokens)
	// CISPO (MiniMax-M1) clips the importance weight, not the update: −sg(min(ρ, ε_high))·A·logp,
	// aggregated as dapo. SAPO gates it softly: −σ(τ(ρ−1))·4/τ·A with τ = sapo_temperature_pos
	// where A > 0 and sapo_temperature_neg elsewhere, aggregated as grpo. Both as TRL's
	// GRPOTrainer (v1.10.0.dev0) computes them.
	LossCISPO LossType = "cispo"
	LossSAPO  LossType = "sapo"
)

// Level is where the importance ratio is taken.
type Level string

const (
	LevelToken    Level = "token"    // one ratio per token (GRPO)
	LevelSequence Level = "sequence" // exp(mean log-ratio) per sequence (GSPO)
)

// KLEstimator estimates KL(π_θ‖π_ref) from one sampled token.
type KLEstimator string

const (
	KLK1 KLEstimator = "k1" // x − x_ref
	KLK2 KLEstimator = "k2" // ½(x − x_ref)²
	KLK3 KLEstimator = "k3" // e^{x_ref − x} − (x_ref − x) − 1
)

// EntropyAggregation is how the entropy bonus is summed over tokens.
type EntropyAggregation string

const (
	EntropyAsLoss    EntropyAggregation = "loss"       // with the loss's own weights (verl)
	EntropyTokenMean EntropyAggregation = "token_mean" // mean over the minibatch's unmasked tokens
)

// Config holds every setting of a GRPO step. Each field's json tag is its one name in
// option tables, recipe configs, checkpoints and metrics, TRL's where TRL has the setting.
type Config struct {
	// Advantages.
	ScaleRewards Scale   `json:"scale_rewards"`
	StdEps       float64 `json:"std_eps"`  // added to the std before dividing; > 0
	StdDDOF      int     `json:"std_ddof"` // 0: population std (divide by G); 1: unbiased (G−1), as torch.std and TRL
	DropZeroStd  bool    `json:"drop_zero_std"`

	// Policy loss.
	Epsilon                 float64     `json:"epsilon"`
	EpsilonHigh             float64     `json:"epsilon_high"` // 0: the same as epsilon (TRL's None)
	ImportanceSamplingLevel Level       `json:"importance_sampling_level"`
	LossType                LossType    `json:"loss_type"`
	SAPOTemperaturePos      float64     `json:"sapo_temperature_pos"` // sapo's τ where A > 0
	SAPOTemperatureNeg      float64     `json:"sapo_temperature_neg"` // and where A ≤ 0
	Beta                    float64     `json:"beta"`                 // KL coefficient; 0 never runs the reference
	KLEstimator             KLEstimator `json:"kl_estimator"`
	// KLClamp bounds each token's KL estimate to [−kl_clamp, kl_clamp], with no gradient
	// where it binds; 0 leaves it unbounded (TRL). k3 is unbounded above: one sampled token
	// the reference finds e^9 times likelier than the policy does weighs as much as the
	// rest of a batch, in the KL reported and in the gradient (verl's low_var_kl clamps at 10).
	KLClamp            float64            `json:"kl_clamp"`
	EntropyCoef        float64            `json:"entropy_coef"` // adds −entropy_coef·H to the loss
	EntropyAggregation EntropyAggregation `json:"entropy_aggregation"`
	// TopEntropyQuantile ρ keeps the policy term (and the entropy term) on the tokens whose
	// entropy is at or above the (1−ρ) quantile of the minibatch's trained tokens (TRL's
	// top_entropy_quantile, after "Beyond the 80/20 rule"); 1 keeps every token. The KL term
	// keeps every token. See entropymask.go.
	TopEntropyQuantile float64 `json:"top_entropy_quantile"`
	// MaskTruncated leaves completions cut by max_new_tokens out of the loss.
	MaskTruncated bool `json:"mask_truncated_completions"`
	// MaskedInDenominator keeps completions left out by drop_zero_std or
	// mask_truncated_completions in the sequence count of the grpo and dr_grpo losses, as
	// TRL's completion mask does. False removes them from it too. Token counts (dapo, bnpo)
	// never count them (TRL's dapo did until v1.9.0, huggingface/trl#6439).
	MaskedInDenominator bool `json:"masked_in_denominator"`

	// Update.
	NumIterations int     `json:"num_iterations"` // μ: passes over the batch
	Minibatches   int     `json:"minibatches"`    // optimizer updates per pass
	MicroBatch    int     `json:"micro_batch"`    // completions per forward/backward (memory only); 0: a whole minibatch
	MaxGradNorm   float64 `json:"max_grad_norm"`  // global gradient-norm clip; 0 disables it

	// AllowGreedy lets a step train on a batch sampled greedily (by default an error: every
	// completion of a group is the same, and the recorded logprobs are not what was drawn).
	AllowGreedy bool `json:"allow_greedy"`
	// TRLCompat marks a configuration that follows TRL's conventions (see TRLConfig):
	// Validate refuses a convention setting that contradicts it, and the zero-std rule is
	// TRL's (see tie).
	TRLCompat bool `json:"trl_compat"`
}

// DefaultConfig returns this project's conventions and conservative settings: group scaling
// with the population std, symmetric clip 0.2, grpo loss, no KL, one pass of one minibatch,
// gradient clip 1.
func DefaultConfig() Config {
	return Config{ScaleRewards: ScaleGroup, StdEps: 1e-4, Epsilon: 0.2, ImportanceSamplingLevel: LevelToken,
		LossType: LossGRPO, KLEstimator: KLK3, EntropyAggregation: EntropyAsLoss, NumIterations: 1,
		Minibatches: 1, MaxGradNorm: 1, SAPOTemperaturePos: 1, SAPOTemperatureNeg: 1.05, TopEntropyQuantile: 1}
}

// TRLConfig returns TRL's defaults and conventions (GRPOConfig of TRL v1.9.0): the dapo loss,
// advantages divided by the unbiased (ddof 1) std, TRL's zero-std rule (torch.isclose(std, 0),
// see tie), masked completions kept in the grpo and dr_grpo losses' sequence counts, and the
// entropy term weighted by a token mean, as TRL's entropy_coef.
func TRLConfig() Config {
	c := DefaultConfig()
	c.LossType, c.StdDDOF, c.EntropyAggregation, c.MaskedInDenominator, c.TRLCompat = LossDAPO, 1, EntropyTokenMean, true, true
	return c
}

// EpsilonHi is the upper clip ε_high in effect.
func (c Config) EpsilonHi() float64 {
	if c.EpsilonHigh == 0 {
		return c.Epsilon
	}
	return c.EpsilonHigh
}

// Validate reports the first unusable value: a *ConfigError naming its key.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"std_eps", c.StdEps}, {"epsilon", c.Epsilon}, {"epsilon_high", c.EpsilonHigh}, {"beta", c.Beta},
		{"kl_clamp", c.KLClamp}, {"entropy_coef", c.EntropyCoef}, {"max_grad_norm", c.MaxGradNorm}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return &ConfigError{Key: f.name, Value: f.v, Reason: "a finite number ≥ 0"}
		}
	}
	switch {
	case c.StdEps == 0:
		return &ConfigError{Key: "std_eps", Value: c.StdEps, Reason: "> 0 (it keeps a near-tie group's advantages finite)"}
	case c.Epsilon >= 1:
		return &ConfigError{Key: "epsilon", Value: c.Epsilon, Reason: "< 1"}
	case c.StdDDOF != 0 && c.StdDDOF != 1:
		return &ConfigError{Key: "std_ddof", Value: c.StdDDOF, Reason: "0 or 1"}
	case c.NumIterations < 1:
		return &ConfigError{Key: "num_iterations", Value: c.NumIterations, Reason: "≥ 1"}
	case c.Minibatches < 1:
		return &ConfigError{Key: "minibatches", Value: c.Minibatches, Reason: "≥ 1"}
	case c.MicroBatch < 0:
		return &ConfigError{Key: "micro_batch", Value: c.MicroBatch, Reason: "≥ 0"}
	case !(c.SAPOTemperaturePos > 0) || math.IsInf(c.SAPOTemperaturePos, 0):
		return &ConfigError{Key: "sapo_temperature_pos", Value: c.SAPOTemperaturePos, Reason: "a finite number > 0"}
	case !(c.SAPOTemperatureNeg > 0) || math.IsInf(c.SAPOTemperatureNeg, 0):
		return &ConfigError{Key: "sapo_temperature_neg", Value: c.SAPOTemperatureNeg, Reason: "a finite number > 0"}
	case !(c.TopEntropyQuantile >= 0 && c.TopEntropyQuantile <= 1):
		return &ConfigError{Key: "top_entropy_quantile", Value: c.TopEntropyQuantile, Reason: "in [0, 1] (1 keeps every token)"}
	}
	for _, err := range []error{
		oneOf("scale_rewards", c.ScaleRewards, ScaleGroup, ScaleBatch, ScaleNone),
		oneOf("importance_sampling_level", c.ImportanceSamplingLevel, LevelToken, LevelSequence),
		oneOf("loss_type", c.LossType, LossGRPO, LossBNPO, LossDAPO, LossDrGRPO, LossCISPO, LossSAPO),
		oneOf("kl_estimator", c.KLEstimator, KLK1, KLK2, KLK3),
		oneOf("entropy_aggregation", c.EntropyAggregation, EntropyAsLoss, EntropyTokenMean),
	} {
		if err != nil {
			return err
		}
	}
	if c.TRLCompat {
		t := TRLConfig()
		switch {
		case c.StdDDOF != t.StdDDOF:
			return &ConfigError{Key: "std_ddof", Value: c.StdDDOF, Reason: "1 (TRL divides by torch.std)", FixedBy: trlCompat}
		case c.EntropyAggregation != t.EntropyAggregation:
			return &ConfigError{Key: "entropy_aggregation", Value: string(c.EntropyAggregation), Reason: value(string(t.EntropyAggregation)), FixedBy: trlCompat}
		case !c.MaskedInDenominator:
			return &ConfigError{Key: "masked_in_denominator", Value: c.MaskedInDenominator, FixedBy: trlCompat,
				Reason: "true (TRL's grpo and dr_grpo losses count masked completions in their sequence counts)"}
		case c.KLClamp != 0:
			return &ConfigError{Key: "kl_clamp", Value: c.KLClamp, Reason: "0 (TRL does not bound the KL estimate)", FixedBy: trlCompat}
		}
	}
	return nil
}

// trlCompat is what fixes the settings TRL has no choice in.
const trlCompat = "trl_compat = true"

func oneOf[T ~string](key string, v T, allowed ...T) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return &ConfigError{Key: key, Value: string(v), Choices: names}
}
