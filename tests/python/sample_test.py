"""samples/python_mlp end to end on the CPU: model.py writes the model
(tcc.nn), `tcc compile --target cpu` compiles it, trun trains a short run on
Fashion-MNIST; the loss must fall well below its start and the test
accuracy must beat chance (10 classes) by far.

usage: sample_test.py TCC TRUN MODEL_PY WORK_DIR
"""

import json
import os
import subprocess
import sys

STEPS = 80


def main():
    tcc, trun, model_py, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "python_mlp.pbtxt")
    step = os.path.join(work, "python_mlp.so")
    metrics = os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    subprocess.run([sys.executable, model_py, "-o", model, "--batch", "64",
                    "--steps", str(STEPS)], check=True)
    subprocess.run([tcc, "compile", "--target", "cpu", model, "-o", step],
                   check=True)
    subprocess.run([trun, step, "--data", "/usr/share/datasets/fashion-mnist",
                    "--steps", str(STEPS), "--seed", "0", "--metrics", metrics],
                   check=True)
    records = [json.loads(line) for line in open(metrics)]
    losses = [r["loss"] for r in records if r.get("kind") == "step"]
    evals = [r for r in records if r.get("kind") == "eval"]
    if len(losses) != STEPS or not evals:
        print(f"FAIL: {len(losses)} step records (want {STEPS}), "
              f"{len(evals)} eval records")
        return 1
    first, last = sum(losses[:5]) / 5, sum(losses[-10:]) / 10
    accuracy = evals[-1]["accuracy"]
    print(f"loss: first 5 steps {first:.4f}, last 10 {last:.4f}; "
          f"test accuracy {accuracy:.4f}")
    ok = last < 0.6 * first and accuracy > 0.5
    print("ok" if ok else "FAIL: the loss did not fall (last 10 < 0.6 x "
          "first 5) or accuracy <= 0.5")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
