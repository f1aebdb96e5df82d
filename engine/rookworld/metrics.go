package rookworld

import "context"

// Metrics are the evaluation metrics of DESIGN §4 over a set of answers; see
// doc.go for the exact definitions. Each is a mean over the answers of its
// task (malformed answers count as failures); with no answers of a task its
// metrics are 0 and its count says so.
type Metrics struct {
	PFormat      float64 `json:"p_format"`
	PLegalBest   float64 `json:"p_legal_best"`
	PBestAcc     float64 `json:"p_best_acc"`
	PTop5Legal   float64 `json:"p_top5_legal"`
	PTop5Overlap float64 `json:"p_top5_overlap"`
	PCount       int     `json:"p_count"`
	AFormat      float64 `json:"a_format"`
	AFENExact    float64 `json:"a_fen_exact"`
	AFlagsAcc    float64 `json:"a_flags_acc"`
	ARewardAcc   float64 `json:"a_reward_acc"`
	ACount       int     `json:"a_count"`
}

// MetricNames lists the metric names in a fixed order.
var MetricNames = []string{"p_format", "p_legal_best", "p_best_acc", "p_top5_legal", "p_top5_overlap",
	"a_format", "a_fen_exact", "a_flags_acc", "a_reward_acc"}

// Map returns the metrics by their DESIGN names (counts as p_count, a_count).
func (m Metrics) Map() map[string]float64 {
	return map[string]float64{
		"p_format": m.PFormat, "p_legal_best": m.PLegalBest, "p_best_acc": m.PBestAcc,
		"p_top5_legal": m.PTop5Legal, "p_top5_overlap": m.PTop5Overlap, "p_count": float64(m.PCount),
		"a_format": m.AFormat, "a_fen_exact": m.AFENExact, "a_flags_acc": m.AFlagsAcc,
		"a_reward_acc": m.ARewardAcc, "a_count": float64(m.ACount),
	}
}

// ComputeMetrics aggregates scored results. Results carrying an Error are
// skipped: they say nothing about the model.
func ComputeMetrics(results []Result) Metrics {
	var m Metrics
	for _, r := range results {
		if r.Error != "" {
			continue
		}
		c, d := r.Components, r.Detail
		switch r.Task {
		case TaskPolicy:
			m.PCount++
			m.PFormat += b2f(c.Format == 1)
			m.PLegalBest += c.BestLegal
			m.PBestAcc += b2f(d.BestIsTop)
			if n := min(MaxCandidates, d.LegalInPos); n > 0 {
				m.PTop5Legal += float64(min(d.LegalDistinct, n)) / float64(n)
			}
			m.PTop5Overlap += c.Candidates
		case TaskEnv:
			m.ACount++
			m.AFormat += b2f(c.Format == 1)
			m.AFENExact += c.FENExact
			m.AFlagsAcc += b2f(d.FlagsBoth)
			m.ARewardAcc += c.RewardField
		}
	}
	if m.PCount > 0 {
		n := float64(m.PCount)
		m.PFormat /= n
		m.PLegalBest /= n
		m.PBestAcc /= n
		m.PTop5Legal /= n
		m.PTop5Overlap /= n
	}
	if m.ACount > 0 {
		n := float64(m.ACount)
		m.AFormat /= n
		m.AFENExact /= n
		m.AFlagsAcc /= n
		m.ARewardAcc /= n
	}
	return m
}

// Evaluate scores the answers and aggregates the metrics.
func (s *Scorer) Evaluate(ctx context.Context, ins []Input) (Metrics, []Result, error) {
	rs, err := s.ScoreBatch(ctx, ins)
	return ComputeMetrics(rs), rs, err
}
