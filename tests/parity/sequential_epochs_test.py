#!/usr/bin/python3
"""trun --data-order sequential feeds, epoch after epoch, exactly the batches
gpt_parity_test.sequential_batches builds for PyTorch (the batches of
torch_amp_losses.py, whose long runs go past one epoch).

trun has no flag that prints its batches, so each batch is identified by its
loss under frozen weights: a small GPT is trained for a few steps (so that
different windows have clearly different losses), then trun runs its CPU
step from those weights with a learning rate of 1e-30 (the updates, about
1e-30, vanish in float32 weights) for two epochs and a few steps more,
writing each step's loss; the PyTorch reference computes the loss of each
batch of sequential_batches from the same weights. Asserts
  (a) the shard has windows left over at the end of an epoch (W mod rows
      != 0), so the epoch boundary is exercised,
  (b) every step's loss agrees to 1e-5 relative: in epoch 1, at the first
      batches of epoch 2 and of epoch 3,
  (c) the check can tell orders apart: the first batch of epoch 2 under the
      order that does not skip the leftover windows (batch s takes windows
      (s * rows + r) mod W) differs from trun's by more than 100 x the
      tolerance.

usage: sequential_epochs_test.py --bin-dir BUILD/bin --text FILE [--work-dir DIR]
"""

import argparse
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_parity_test as parity  # noqa: E402
import gpt_reference as ref  # noqa: E402
import tcc_files  # noqa: E402

LOSS_RTOL = 1e-5
# Characters of the text to train on: (N - 1) // 32 = 51 windows of 32
# tokens, 12 batches of 4 per epoch and 3 windows left over.
TEXT_CHARS = 1650
FROZEN_LR = 1e-30


def config(vocab):
    # Constant learning rate (decay_steps 0): --lr sets it for every step.
    return ref.GptConfig(vocab=vocab, context=32, layers=2, width=64, heads=4,
                         batch=4, lr=3e-3, warmup=0, decay_steps=0)


def metrics_losses(path, steps):
    losses = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") == "step":
                losses[rec["step"]] = rec["loss"]
    missing = [s for s in range(1, steps + 1) if s not in losses]
    if missing:
        raise parity.Failure(f"{path} has no loss for steps {missing[:5]}")
    return [losses[s] for s in range(1, steps + 1)]


def torch_loss(cfg, P, batch):
    with torch.no_grad():
        loss, _ = ref.forward(cfg, P, *batch)
    return loss.item()


def check(args):
    bins = {t: os.path.join(args.bin_dir, t) for t in ("tcc", "tcc-models", "tcc-data", "trun")}
    work = args.work_dir
    with open(args.text, encoding="utf-8", errors="replace") as f:
        text = f.read(TEXT_CHARS)
    if len(text) != TEXT_CHARS or not text.isascii():
        raise parity.Failure(f"{args.text}: need {TEXT_CHARS} ASCII characters at its start")
    text_path = os.path.join(work, "text.txt")
    with open(text_path, "w") as f:
        f.write(text)
    prefix = os.path.join(work, "text")
    parity.run([bins["tcc-data"], "tokenize", "--level", "char", "--val-fraction", "0",
                "-o", prefix, text_path])
    with open(prefix + "_vocab.json") as f:
        vocab = json.load(f)["vocab_size"]
    shard = prefix + "_train.bin"
    tokens = tcc_files.read_shard(shard)
    cfg = config(vocab)
    rows = cfg.batch * cfg.micro_batches
    windows = (len(tokens) - 1) // cfg.context
    per_epoch = windows // rows
    failures = []
    print(f"{len(tokens)} tokens: {windows} windows of {cfg.context}, "
          f"{per_epoch} batches of {rows} per epoch, {windows % rows} left over")
    if windows % rows == 0:  # (a)
        failures.append("no windows left over at the end of an epoch: the "
                        "boundary is not exercised (change TEXT_CHARS)")
    steps = 2 * per_epoch + 3

    model, step = os.path.join(work, "gpt.pbtxt"), os.path.join(work, "gpt.so")
    trained = os.path.join(work, "trained.safetensors")
    metrics = os.path.join(work, "frozen.jsonl")
    parity.run([bins["tcc-models"], "gpt", *cfg.tcc_models_args(), "-o", model])
    parity.run([bins["tcc"], "compile", "--target", "cpu", model, "-o", step])
    parity.run([bins["trun"], step, "--data", shard, "--steps", 40, "--seed", 7,
                "--save-weights", trained])
    if os.path.exists(metrics):
        os.remove(metrics)  # trun appends
    parity.run([bins["trun"], step, "--data", shard, "--data-order", "sequential",
                "--init-from", trained, "--lr", FROZEN_LR, "--steps", steps,
                "--log-every", 0, "--metrics", metrics])
    tcc_losses = metrics_losses(metrics, steps)

    weights, _ = tcc_files.read_safetensors(trained)
    P = ref.make_params(cfg, weights)
    batches = parity.sequential_batches(tokens, cfg, steps)
    torch_losses = [torch_loss(cfg, P, b) for b in batches]
    worst, worst_step = 0.0, 0
    for s, (a, b) in enumerate(zip(tcc_losses, torch_losses)):  # (b)
        r = parity.relative(a, b)
        if r > worst or worst_step == 0:
            worst, worst_step = r, s + 1
        epoch, batch = divmod(s, per_epoch)
        print(f"  step {s + 1:3d} (epoch {epoch + 1}, batch {batch + 1:2d}, windows "
              f"{batch * rows}-{batch * rows + rows - 1})  loss trun {a:.6f}  "
              f"torch {b:.6f}  relative {r:.1e}")
    print(f"{steps} steps over 3 epochs: worst relative difference {worst:.2e} "
          f"at step {worst_step} (limit {LOSS_RTOL:.0e})")
    if not worst <= LOSS_RTOL:
        failures.append(f"losses differ by {worst:.2e} relative at step {worst_step}: "
                        f"trun's batches are not sequential_batches'")

    # (c): the order without skipping, at the first batch of epoch 2.
    s = per_epoch
    starts = [((s * rows + r) % windows) * cfg.context for r in range(rows)]
    other = torch_loss(cfg, P, parity.batch_at(tokens, cfg, starts))
    r = parity.relative(tcc_losses[s], other)
    print(f"first batch of epoch 2 without skipping the leftover windows: loss "
          f"{other:.6f}, relative difference from trun {r:.1e} (must exceed "
          f"{100 * LOSS_RTOL:.0e})")
    if not r > 100 * LOSS_RTOL:
        failures.append("the frozen-weight losses cannot tell the two orders "
                        "apart at the epoch boundary: the check proves nothing")
    spread = max(torch_losses) / min(torch_losses) - 1
    print(f"losses of the {steps} batches spread by {spread:.1%}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin-dir", required=True,
                        help="directory with tcc, tcc-models, tcc-data, trun")
    parser.add_argument("--text", required=True, help="text file to train on")
    parser.add_argument("--work-dir", help="keep files here (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tcc-epochs-") as tmp:
        if not args.work_dir:
            args.work_dir = tmp
        os.makedirs(args.work_dir, exist_ok=True)
        try:
            failures = check(args)
        except parity.Failure as e:
            print(f"FAIL: {e}")
            return 1
    for f in failures:
        print(f"FAIL: {f}")
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
