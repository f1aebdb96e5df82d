package tbevents_test

import (
	"log"
	"time"

	"github.com/rookscript/rookscript/engine/tbevents"
)

// A resumed run opens a new file in the run's tb directory and starts its session at the
// first step it will write; TensorBoard then drops the first session's values from that
// step on.
func Example() {
	w, err := tbevents.Open("runs/grpo_stable/tb")
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	start := int64(51) // the checkpoint holds step 50
	now := time.Now()
	if err := w.SessionStart(start, now); err != nil {
		log.Fatal(err)
	}
	if err := w.HParams(map[string]any{"lr": 1e-6, "group": 8, "loss_type": "grpo"}, now); err != nil {
		log.Fatal(err)
	}
	for step := start; step <= 60; step++ {
		now := time.Now()
		w.Scalar("train/reward_mean", step, now, 0.42)
		w.Text("samples", step, now, "`P: 8/8/8/8/8/8/8/8 w - - 0 1` → …")
		w.Flush()
	}
}
