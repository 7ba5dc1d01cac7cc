"""samples/cnn and samples/vit end to end on the CPU: model.py writes the
model (tcc.nn), `tcc compile --target cpu` compiles it, trun trains a short
run on Fashion-MNIST and evaluates the 10000 test images; the loss must
fall well below its start and the test accuracy must clear a bar far above
chance (10 classes) that a model whose gradients or layout are wrong does
not reach in that many steps.

usage: vision_sample_test.py TCC TRUN MODEL_PY WORK_DIR STEPS BATCH MIN_ACCURACY [model.py args...]
"""

import json
import os
import subprocess
import sys
import time


def main():
    tcc, trun, model_py, work = sys.argv[1:5]
    steps, batch, bar = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
    extra = sys.argv[8:]
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model.pbtxt")
    step = os.path.join(work, "step.so")
    metrics = os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    subprocess.run([sys.executable, model_py, "-o", model, "--batch", str(batch),
                    "--steps", str(steps)] + extra, check=True)
    subprocess.run([tcc, "compile", "--target", "cpu", model, "-o", step],
                   check=True)
    # One OpenMP thread: ctest runs tests side by side (scripts/test.sh: -j2
    # on 2 cores), and spinning OpenMP threads of two processes sharing the
    # cores slow both many times over. The results do not depend on it.
    env = dict(os.environ, OMP_NUM_THREADS="1")
    start = time.time()
    subprocess.run([trun, step, "--data", "/usr/share/datasets/fashion-mnist",
                    "--steps", str(steps), "--seed", "0", "--metrics", metrics],
                   check=True, env=env)
    seconds = time.time() - start
    records = [json.loads(line) for line in open(metrics)]
    losses = [r["loss"] for r in records if r.get("kind") == "step"]
    evals = [r for r in records if r.get("kind") == "eval"]
    if len(losses) != steps or not evals:
        print(f"FAIL: {len(losses)} step records (want {steps}), "
              f"{len(evals)} eval records")
        return 1
    first, last = sum(losses[:5]) / 5, sum(losses[-10:]) / 10
    accuracy = evals[-1]["accuracy"]
    print(f"{os.path.basename(os.path.dirname(model_py))}: {steps} steps of "
          f"{batch} in {seconds:.1f} s (with the test pass); loss first 5 "
          f"steps {first:.4f}, last 10 {last:.4f}; test accuracy {accuracy:.4f}")
    ok = last < 0.5 * first and accuracy >= bar
    print("ok" if ok else f"FAIL: the loss did not fall (last 10 < 0.5 x "
          f"first 5) or test accuracy < {bar}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
