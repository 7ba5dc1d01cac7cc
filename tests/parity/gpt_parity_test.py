#!/usr/bin/python3
"""Parity of a tcc-compiled GPT training step with PyTorch (CPU, float32).

For each configuration: tokenize a text with tcc-data, build the GPT with
tcc-models, compile it with tcc (once normally, once with --emit-gradients),
let trun write its initial weights, load them into the PyTorch reference
(gpt_reference.py) and feed both the same sequential batches. Asserts
  (a) the first-step loss agrees with the reference's in float64 to 1e-5
      relative (or 10x the reference's own float32 distance from float64,
      where that is larger),
  (b) every gradient of the first step likewise to 1e-4 relative (norm-wise:
      |g_tcc - g_64| <= 1e-4 |g_64|),
  (c) the losses of the first STEPS AdamW steps (warmup, cosine decay,
      clipping, weight decay), and the weights after them (norm-wise, per
      parameter), are as close to the reference's in float64 as 10x the
      spread of float32 runs of the reference (the rows of every batch in
      four orders) around it, + 1.9e-6: a tolerance from the run's own
      conditioning, so it holds on any CPU (tests/numerics/rounding_envelope.py),
  (d) loss and gradients as in (a) and (b) again, from the trained weights
      (at initialization the activations are small enough that some formula
      differences, e.g. GELU erf against tanh, stay below the tolerances).
Prints every number it compares; exits 1 if any configuration failed.

usage: gpt_parity_test.py --bin-dir BUILD/bin --text FILE [--work-dir DIR]
                          [--config NAME] [--steps N]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference as ref  # noqa: E402
import tcc_files  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "numerics"))
import rounding_envelope as R  # noqa: E402

LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4


def configs(vocab):
    """The configurations checked; the first is the nanoGPT-like default."""
    common = dict(vocab=vocab, context=32, layers=2, width=64, heads=4,
                  batch=4, lr=3e-3, beta1=0.9, beta2=0.99, eps=1e-8,
                  weight_decay=0.1, warmup=10, decay_steps=40, min_lr=3e-4)
    return {
        # GPT-2 style: LayerNorm, GELU (tanh), learned positions, tied
        # embeddings, biases. With clip 1.0 the gradient norm is above the
        # threshold in some steps and below in others (both paths checked).
        "gpt2": ref.GptConfig(**common, grad_clip=1.0),
        # LLaMA style: RMSNorm, SwiGLU, rotary, untied head, no biases,
        # embeddings without weight decay, 2 micro-batches per step.
        "llama": ref.GptConfig(**common, norm="rms", mlp="swiglu",
                               positions="rope", tied=False, bias=False,
                               no_decay=("norm", "embedding"), micro_batches=2,
                               grad_clip=1.0),
    }


class Failure(Exception):
    pass


def run(cmd, **kwargs):
    cmd = [str(c) for c in cmd]
    print("$ " + " ".join(cmd), flush=True)
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, **kwargs)
    if result.returncode != 0:
        raise Failure(f"command failed with exit status {result.returncode}:\n"
                      f"{' '.join(cmd)}\n{result.stdout}")
    return result.stdout


def sequential_window_starts(num_tokens, cfg, step):
    """Token offsets of the windows of 0-based `step` under trun
    --data-order sequential (runtime/trun/data/TokenBatches.h), for one
    shard of `num_tokens` tokens: the W = (num_tokens - 1) // T aligned
    windows start at 0, T, 2T, ...; an epoch is W // rows batches (rows =
    K * B), batch b of an epoch takes windows b*rows .. b*rows+rows-1, the
    W mod rows windows left over are skipped and the next epoch starts
    again at window 0. Batch `step` is batch step mod (W // rows) of its
    epoch."""
    T = cfg.context
    rows = cfg.batch * cfg.micro_batches
    windows = (num_tokens - 1) // T if num_tokens > T else 0
    per_epoch = windows // rows
    if per_epoch == 0:
        raise Failure(f"the text has {windows} windows of {T} tokens, "
                      f"a batch needs {rows}")
    first = (step % per_epoch) * rows
    return [(first + r) * T for r in range(rows)]


def batch_at(tokens, cfg, starts):
    """(tokens, targets) int64 [rows, T] of the windows at `starts`
    (tokens = window[:-1], targets = window[1:])."""
    T = cfg.context
    x = np.stack([tokens[i:i + T] for i in starts]).astype(np.int64)
    y = np.stack([tokens[i + 1:i + T + 1] for i in starts]).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def sequential_batches(tokens, cfg, steps):
    """The first `steps` batches of trun --data-order sequential on one
    shard, epoch after epoch (sequential_window_starts)."""
    return [batch_at(tokens, cfg, sequential_window_starts(len(tokens), cfg, s))
            for s in range(steps)]


def read_step_losses(metrics, steps):
    """Per-step losses, at full precision, from trun's --metrics file."""
    losses = {}
    with open(metrics) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") == "step":
                losses[rec["step"]] = rec["loss"]
    missing = [s for s in range(1, steps + 1) if s not in losses]
    if missing:
        raise Failure(f"{metrics}: no loss for steps {missing[:5]}...")
    return [losses[s] for s in range(1, steps + 1)]


def reference_runs(cfg, init, batches):
    """The reference trained on `batches` from `init`: in float32 with the
    rows as given and in three other orders, and in float64. Each run: its
    losses, gradient norms and trained weights (float64 numpy, key bias
    left out). Returns (float32 runs, float64 run)."""
    def one(dtype, perm):
        P = ref.make_params(cfg, init, dtype=dtype)
        b = batches if perm is None else [(x[torch.from_numpy(perm)], y[torch.from_numpy(perm)])
                                          for x, y in batches]
        losses, norms = ref.train(cfg, P, b)
        state = {n: without_key_bias(cfg, n, p.detach().double().numpy())
                 for n, p in P.items()}
        return dict(losses=losses, norms=norms, state=state)

    rows = len(batches[0][0])
    runs = [one(torch.float32, None)] + [one(torch.float32, p)
                                         for p in R.permutations(rows, 3)]
    return runs, one(torch.float64, None)


def without_key_bias(cfg, name, w):
    """The key bias (c_attn.bias[C:2C]) has an exactly zero gradient (it adds
    q . b_k to a whole row of scores, and softmax ignores a constant per
    row), so AdamW turns each side's rounding noise into full-size updates
    of it: its trained values are noise and are left out of the comparison."""
    if name.endswith(".attn.c_attn.bias"):
        C = cfg.width
        return np.concatenate([w[:C], w[2 * C:]])
    return w


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def compare_step(label, cfg, weights, batch, tcc_outputs):
    """Loss and gradients of one step on `batch` from `weights`: a step
    compiled with --emit-gradients against the reference in float64, each
    within max(LOSS_RTOL / GRAD_RTOL, 10x the reference's float32 distance
    from float64) (a nearly cancelling gradient is off by more in any
    float32, so its limit widens with the measured spread). Returns
    failures."""
    failures = []
    exact_loss, exact = ref.loss_and_grads(cfg, ref.make_params(cfg, weights, dtype=torch.float64),
                                           *batch)
    loss32, grads32 = ref.loss_and_grads(cfg, ref.make_params(cfg, weights), *batch)
    tcc_loss = float(tcc_outputs["loss"])
    r, r32 = relative(tcc_loss, exact_loss), relative(loss32, exact_loss)
    tol = R.step_limit(LOSS_RTOL, r32)
    print(f"{label} loss: tcc {tcc_loss:.8f}  float64 {exact_loss:.8f}  "
          f"relative {r:.2e} (torch float32 {r32:.1e}, limit {tol:.1e})")
    if not r <= tol:
        failures.append(f"{label} loss differs by {r:.2e} relative (limit {tol:.1e})")
    worst = 0.0
    for pname, g in exact.items():
        key = "grad:" + pname
        if key not in tcc_outputs:
            failures.append(f"{label}: tcc wrote no gradient '{key}'")
            continue
        gt = tcc_outputs[key].astype(np.float64)
        g = g.double().numpy()
        if tuple(gt.shape) != tuple(g.shape):
            failures.append(f"{label}: {key} has shape {tuple(gt.shape)}, "
                            f"torch {tuple(g.shape)}")
            continue
        r, r32 = R.relative(gt, g), R.relative(grads32[pname].double().numpy(), g)
        tol = R.step_limit(GRAD_RTOL, r32)
        worst = max(worst, r / tol)
        ok = r <= tol
        print(f"  grad {pname:28s} |g| {np.linalg.norm(g):.4e}  relative {r:.2e} "
              f"(torch float32 {r32:.1e}, limit {tol:.1e}){'' if ok else '  FAIL'}")
        if not ok:
            failures.append(f"{label}: gradient of {pname} differs by "
                            f"{r:.2e} relative (limit {tol:.1e})")
    extra = sorted(set(k for k in tcc_outputs if k.startswith("grad:")) -
                   set("grad:" + k for k in exact))
    if extra:
        failures.append(f"{label}: tcc has gradients of unknown parameters {extra}")
    print(f"{label} gradients: {len(exact)} parameters, at most {worst:.2f} of the limit")
    return failures


def check_config(name, cfg, args, shards, steps):
    work = os.path.join(args.work_dir, name)
    os.makedirs(work, exist_ok=True)
    files = {k: os.path.join(work, k) for k in (
        "gpt.pbtxt", "gpt.so", "gpt_grads.so", "init.safetensors", "metrics.jsonl",
        "trained.safetensors", "grads_init.safetensors",
        "grads_trained.safetensors")}
    tool = {t: os.path.join(args.bin_dir, t) for t in ("tcc", "tcc-models", "trun")}
    print(f"=== {name}: {cfg}", flush=True)

    run([tool["tcc-models"], "gpt", *cfg.tcc_models_args(), "-o", files["gpt.pbtxt"]])
    run([tool["tcc"], "compile", "--target", "cpu", files["gpt.pbtxt"], "-o", files["gpt.so"]])
    run([tool["tcc"], "compile", "--target", "cpu", files["gpt.pbtxt"], "-o", files["gpt_grads.so"],
         "--emit-gradients"])
    data = ["--data", shards["train"], "--data-order", "sequential"]
    # tcc's initial weights, then STEPS AdamW steps from them.
    run([tool["trun"], files["gpt.so"], *data, "--steps", 0, "--seed", 7,
         "--save-weights", files["init.safetensors"]])
    if os.path.exists(files["metrics.jsonl"]):
        os.remove(files["metrics.jsonl"])
    run([tool["trun"], files["gpt.so"], *data, "--steps", steps,
         "--init-from", files["init.safetensors"], "--log-every", 1,
         "--metrics", files["metrics.jsonl"], "--save-weights", files["trained.safetensors"]])
    # Gradients on the first batch, from the initial and the trained weights
    # (at initialization activations are small and some formula differences,
    # e.g. GELU erf against tanh, hide below the tolerance; after training
    # they do not).
    for weights in ("init", "trained"):
        run([tool["trun"], files["gpt_grads.so"], *data, "--steps", 1,
             "--init-from", files[f"{weights}.safetensors"],
             "--save-train-outputs", files[f"grads_{weights}.safetensors"]])

    tokens = tcc_files.read_shard(shards["train"])
    batches = sequential_batches(tokens, cfg, steps)
    init, _ = tcc_files.read_safetensors(files["init.safetensors"])
    trained, _ = tcc_files.read_safetensors(files["trained.safetensors"])
    failures = []

    # (a) and (b): the first step's loss and gradients; the same after training.
    for label, weights in (("first-step", init), ("trained-weights", trained)):
        outputs, _ = tcc_files.read_safetensors(
            files["grads_init.safetensors" if weights is init
                  else "grads_trained.safetensors"])
        failures += compare_step(label, cfg, weights, batches[0], outputs)

    # (c): losses of the first `steps` optimizer steps, and the weights after.
    runs, exact = reference_runs(cfg, init, batches)
    torch_norms = exact["norms"]
    tcc_losses = read_step_losses(files["metrics.jsonl"], steps)
    for s in range(steps):
        print(f"  step {s + 1:3d}  lr {ref.learning_rate(cfg, s):.3e}  "
              f"grad norm {torch_norms[s]:.3f}")
    clipped = sum(n > cfg.grad_clip for n in torch_norms) if cfg.grad_clip else 0
    print(f"{steps} steps: clipping active in {clipped} steps")
    failures += R.check_losses(name, tcc_losses, exact["losses"],
                               [r["losses"] for r in runs], ref32=runs[0]["losses"])
    got = {n: without_key_bias(cfg, n, trained[n].astype(np.float64)) for n in trained}
    failures += R.check_tensors(name, got, exact["state"], [r["state"] for r in runs],
                                what="weight")
    torch_losses = exact["losses"]
    if cfg.grad_clip and not 0 < clipped < steps:
        failures.append(f"clipping was active in {clipped} of {steps} steps: "
                        f"choose a threshold that exercises both paths")
    if torch_losses[-1] >= torch_losses[0]:
        failures.append("the loss did not fall over the run")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin-dir", required=True,
                        help="directory with tcc, tcc-models, tcc-data, trun")
    parser.add_argument("--text", required=True, help="text file to train on")
    parser.add_argument("--work-dir", help="keep files here (default: a temp dir)")
    parser.add_argument("--config", action="append",
                        help="check only these configurations")
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))

    with tempfile.TemporaryDirectory(prefix="tcc-parity-") as tmp:
        if not args.work_dir:
            args.work_dir = tmp
        os.makedirs(args.work_dir, exist_ok=True)
        prefix = os.path.join(args.work_dir, "text")
        try:
            run([os.path.join(args.bin_dir, "tcc-data"), "tokenize", "--level",
                 "char", "--val-fraction", "0.1", "-o", prefix, args.text])
            with open(prefix + "_vocab.json") as f:
                vocab = json.load(f)["vocab_size"]
            shards = {"train": prefix + "_train.bin"}
            all_configs = configs(vocab)
            names = args.config or list(all_configs)
            failed = False
            for name in names:
                failures = check_config(name, all_configs[name], args, shards,
                                        args.steps)
                for f in failures:
                    print(f"FAIL [{name}]: {f}")
                failed |= bool(failures)
                print(f"=== {name}: {'FAIL' if failures else 'PASS'}", flush=True)
        except Failure as e:
            print(f"FAIL: {e}")
            return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
