"""Reads a run's tb/ with TensorBoard's EventAccumulator and checks every scalar against its
metrics.jsonl (as float32, the event files' precision): the one real TensorBoard reader the
project's checks reach. bench/gpu_check.sh runs it where the tensorboard package is installed.

    python3 bench/tb_check.py RUN_DIR
"""
import json
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def main(run):
    ea = event_accumulator.EventAccumulator(os.path.join(run, "tb"), size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    got = {(tag, e.step): e.value for tag in ea.Tags()["scalars"] for e in ea.Scalars(tag)}
    checked, missing = 0, []
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            m = json.loads(line)
            for k, v in m.items():
                if k == "step" or not isinstance(v, (int, float)) or isinstance(v, bool):
                    continue
                checked += 1
                if got.get((k, m["step"])) != f32(v):
                    missing.append((k, m["step"], v, got.get((k, m["step"]))))
    print(f"tb_check: {checked} scalars of metrics.jsonl, {len(missing)} not as TensorBoard reads them")
    for k, step, want, have in missing[:10]:
        print(f"  {k} at step {step}: metrics.jsonl {want}, TensorBoard {have}")
    return 1 if missing or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
