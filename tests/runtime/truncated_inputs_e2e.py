#!/usr/bin/env python3
"""trun on inputs cut short (an interrupted copy, a full disk).

Each of these, cut at 100 seeded random offsets, must make trun exit 1 with
exactly one line on stderr that names the cause, never die by a signal
(dlopen of a cut step.so used to end in SIGBUS, exit 135):

  1. the step library:        "... is truncated or not a step library: ..."
  2. --init-from weights:     "trun: error: PATH: ..."
  3. --resume checkpoints whose only checkpoint has one file cut:
                              "trun: error: --resume: no usable checkpoint ..."

and a newest checkpoint cut anywhere is skipped with a warning while the
previous one resumes (exit 0).

usage: truncated_inputs_e2e.py TRUN STEP WORKDIR   (STEP: the bigram fixture)
Set TRUNCATION_SEED to replay another draw of offsets.
"""
import os
import random
import shutil
import struct
import subprocess
import sys

SEED = int(os.environ.get("TRUNCATION_SEED", "20261124"))
CUTS = 100


def fail(message):
    print("FAIL (TRUNCATION_SEED=%d): %s" % (SEED, message))
    sys.exit(1)


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def run_ok(args):
    result = run(args)
    if result.returncode != 0:
        fail("%s exited %d: %s" % (" ".join(args), result.returncode,
                                   result.stderr))
    return result.stdout


def write_shard(path, tokens):
    with open(path, "wb") as f:
        f.write(struct.pack("<3i", 20240520, 1, len(tokens)) + bytes(1012))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))


def write_cut(source, target, cut):
    with open(source, "rb") as f:
        data = f.read(cut)
    with open(target, "wb") as f:
        f.write(data)


def content_size(path):
    """The bytes before a final newline: cutting only that one (state.json's)
    leaves the same JSON, a whole file."""
    with open(path, "rb") as f:
        return len(f.read().rstrip(b"\n"))


def check_refusals(what, size, attempt, expected):
    """attempt(cut) runs trun; every run must exit 1 with one stderr line
    holding `expected`. Lists every bad cut, not just the first."""
    cuts = sorted(random.Random("%d %s" % (SEED, what)).sample(range(size),
                                                               min(CUTS, size)))
    bad = []
    for cut in cuts:
        result = attempt(cut)
        lines = result.stderr.splitlines()
        if result.returncode != 1 or len(lines) != 1 or expected not in lines[0]:
            status = ("signal %d" % -result.returncode
                      if result.returncode < 0 else "exit %d" % result.returncode)
            bad.append("cut at %d: %s, stderr %r" % (cut, status, result.stderr))
    if bad:
        fail("%s (%d bytes), %d of %d cuts wrong:\n  %s" %
             (what, size, len(bad), len(cuts), "\n  ".join(bad)))
    print("ok: %s (%d bytes) cut at %d offsets: exit 1, one line" %
          (what, size, len(cuts)))


def main():
    trun, step, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    train = os.path.join(work, "train.bin")
    state, tokens = 12345, []
    for _ in range(3000):  # ids below the bigram fixture's 256
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        tokens.append((state >> 33) % 200)
    write_shard(train, tokens)

    # Whole weights and two checkpoints (steps 1 and 2) to cut.
    weights = os.path.join(work, "w.safetensors")
    ckpt = os.path.join(work, "ckpt")
    run_ok([trun, step, "--data", train, "--steps", "2", "--log-every", "0",
            "--save-weights", weights, "--ckpt-dir", ckpt, "--ckpt-every",
            "1"])
    steps = sorted(os.listdir(os.path.join(ckpt)))
    steps = [s for s in steps if s.startswith("step_")]
    if steps != ["step_000000001", "step_000000002"]:
        fail("expected two checkpoints, found %s" % steps)

    # 1. The step library.
    cut_step = os.path.join(work, "cut_step.so")
    def load_step(cut):
        write_cut(step, cut_step, cut)
        return run([trun, cut_step, "--data", train, "--steps", "1",
                    "--log-every", "0"])
    check_refusals("step library", os.path.getsize(step), load_step,
                   "cut_step.so is truncated or not a step library: ")

    # 2. --init-from weights.
    cut_weights = os.path.join(work, "cut.safetensors")
    def init_from(cut):
        write_cut(weights, cut_weights, cut)
        return run([trun, step, "--init-from", cut_weights, "--sample", "4"])
    check_refusals("--init-from weights", os.path.getsize(weights), init_from,
                   "trun: error: " + cut_weights + ": ")

    # 3. --resume with one checkpoint, one of its files cut.
    for name in ["model.safetensors", "optimizer.safetensors", "state.json"]:
        only = os.path.join(work, "only")
        original = os.path.join(ckpt, steps[0], name)
        def resume(cut):
            shutil.rmtree(only, ignore_errors=True)
            shutil.copytree(os.path.join(ckpt, steps[0]),
                            os.path.join(only, steps[0]))
            write_cut(original, os.path.join(only, steps[0], name), cut)
            return run([trun, step, "--data", train, "--steps", "3",
                        "--log-every", "0", "--ckpt-dir", only, "--resume"])
        check_refusals("--resume, only checkpoint's " + name,
                       content_size(original), resume,
                       "trun: error: --resume: no usable checkpoint in ")

    # A cut newest checkpoint is skipped; the previous one resumes.
    rng = random.Random("%d fallback" % SEED)
    for name in ["model.safetensors", "optimizer.safetensors", "state.json"]:
        both = os.path.join(work, "both")
        shutil.rmtree(both, ignore_errors=True)
        shutil.copytree(ckpt, both)
        newest = os.path.join(both, steps[1], name)
        cut = rng.randrange(content_size(newest))
        write_cut(os.path.join(ckpt, steps[1], name), newest, cut)
        out = run_ok([trun, step, "--data", train, "--steps", "3",
                      "--log-every", "0", "--ckpt-dir", both, "--resume"])
        if ("warning: %s is unusable: " % os.path.join(both, steps[1])
                not in out or "step_000000001" not in out):
            fail("newest %s cut at %d: no fallback in trun's output:\n%s" %
                 (name, cut, out))
    print("ok: a cut newest checkpoint falls back to the previous one")


if __name__ == "__main__":
    main()
