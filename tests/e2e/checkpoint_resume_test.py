#!/usr/bin/env python3
"""Checkpoints that never lose a run, on a real tcc-compiled GPT.

A small character-level GPT (AdamW, warmup + cosine, clipping, dropout,
two micro-batches) is compiled with tcc and trained on Debian's fortunes:

  reference   one uninterrupted run; its per-step losses (--metrics) and
              final weights are what every other run must reproduce.
  kill -9     a run with --ckpt-every 1 is killed at random moments
              (often inside a checkpoint write) and resumed, again and
              again; after every kill the checkpoint directory holds a
              valid checkpoint (once one was written), and the finished
              run's losses and weights equal the reference bit for bit.
  signals     SIGINT and SIGTERM: exit 130 / 143 after a final checkpoint
              at the step reached; resuming finishes the run exactly.
  disk full   a file-size limit (RLIMIT_FSIZE) makes a checkpoint write
              fail mid-file: a clear error naming the last good checkpoint,
              which still loads.
  corrupt     a truncated newest checkpoint: resume falls back to the
              previous one, says so, and still reproduces the reference.
  refused     a step.so compiled from a different model is refused.
  numpy       a checkpoint's model.safetensors parsed with numpy equals
              trun's --save-weights export of the same weights.

The kill times are random; the seed is printed so a failure can be
replayed with CHECKPOINT_TEST_SEED=N.

usage: checkpoint_resume_test.py TCC TCC_MODELS TCC_DATA TRUN WORKDIR
"""
import json
import os
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys

from fortunes_text import tokenize_fortunes
import time
import zlib

import numpy as np

TCC, TCC_MODELS, TCC_DATA, TRUN, WORK = sys.argv[1:6]
STEPS = 120
SEED = 7


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(args, expect_rc=0, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if result.returncode != expect_rc:
        fail("%s exited %d (expected %d):\n%s%s" %
             (" ".join(args), result.returncode, expect_rc, result.stdout,
              result.stderr))
    return result


def step_losses(metrics_path):
    """step -> loss text; the last record of each step wins (a resumed run
    redoes the steps after its checkpoint)."""
    losses = {}
    with open(metrics_path) as f:
        for number, line in enumerate(f, 1):
            try:
                record = json.loads(line)
            except ValueError:
                fail("%s:%d is not JSON: %r" % (metrics_path, number, line))
            if record.get("kind") == "step":
                # Compare the exact float32 values, not rounded text.
                losses[record["step"]] = np.float32(record["loss"])
    return losses


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    data = blob[8 + size:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            fail("%s: %s has dtype %s" % (path, name, entry["dtype"]))
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(
            entry["shape"])
    return tensors, header.get("__metadata__", {})


def checkpoints(directory):
    if not os.path.isdir(directory):
        return []
    names = sorted(n for n in os.listdir(directory)
                   if re.fullmatch(r"step_\d{9}", n))
    return [os.path.join(directory, n) for n in names]


def check_checkpoint(path):
    """Independent validation of one checkpoint directory; returns its step."""
    with open(os.path.join(path, "state.json")) as f:
        state = json.load(f)
    for name, expected in state["files"].items():
        with open(os.path.join(path, name), "rb") as f:
            blob = f.read()
        if len(blob) != expected["bytes"]:
            fail("%s/%s: %d bytes, state.json says %d" %
                 (path, name, len(blob), expected["bytes"]))
        if zlib.crc32(blob) != expected["crc32"]:
            fail("%s/%s: CRC32 mismatch" % (path, name))
    read_safetensors(os.path.join(path, "model.safetensors"))
    if os.path.basename(path) != "step_%09d" % state["step"]:
        fail("%s holds step %d" % (path, state["step"]))
    return state["step"]


def compare_runs(reference, metrics, label, first_step=1):
    ref, got = step_losses(reference), step_losses(metrics)
    for step in range(first_step, STEPS + 1):
        if step not in got:
            fail("%s: no loss for step %d" % (label, step))
        if ref[step] != got[step] or np.isnan(got[step]):
            fail("%s: step %d loss %r, uninterrupted run %r" %
                 (label, step, got[step], ref[step]))


def compare_weights(a, b, label):
    wa, _ = read_safetensors(a)
    wb, _ = read_safetensors(b)
    if sorted(wa) != sorted(wb):
        fail("%s: tensor names differ: %s vs %s" % (label, sorted(wa),
                                                     sorted(wb)))
    for name in wa:
        if not np.array_equal(wa[name], wb[name]):
            fail("%s: tensor %s differs" % (label, name))


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    test_seed = int(os.environ.get("CHECKPOINT_TEST_SEED",
                                   random.randrange(1 << 30)))
    print("kill-time seed: %d (CHECKPOINT_TEST_SEED=%d replays it)" %
          (test_seed, test_seed))
    rng = random.Random(test_seed)

    # Data and model.
    data, vocab = tokenize_fortunes(run, TCC_DATA, WORK)
    train = data + "_train.bin"

    def compile_gpt(name, width):
        model = os.path.join(WORK, name + ".pbtxt")
        run([TCC_MODELS, "gpt", "--vocab", str(vocab), "--context", "32",
             "--layers", "2", "--width", str(width), "--heads", "2",
             "--batch", "4", "--micro-batches", "2", "--dropout", "0.1",
             "-o", model])
        step = os.path.join(WORK, name + ".so")
        run([TCC, "compile", "--target", "cpu", model, "-o", step])
        return step

    step = compile_gpt("gpt", 48)
    other_step = compile_gpt("gpt_wider", 64)

    def trun(extra, metrics, steps=STEPS, **kwargs):
        return [TRUN, step, "--data", train, "--steps", str(steps), "--seed",
                str(SEED), "--log-every", "20", "--metrics", metrics] + extra

    # 1. The uninterrupted reference, with its final weights.
    reference = os.path.join(WORK, "reference.jsonl")
    reference_weights = os.path.join(WORK, "reference.safetensors")
    run(trun(["--save-weights", reference_weights], reference))
    if len(step_losses(reference)) != STEPS:
        fail("reference run: %d step records, expected %d" %
             (len(step_losses(reference)), STEPS))

    # 2. kill -9 at random moments, resume, repeat.
    ckpt = os.path.join(WORK, "killed")
    metrics = os.path.join(WORK, "killed.jsonl")
    kills, written_before = 0, False
    for attempt in range(12):
        process = subprocess.Popen(
            trun(["--ckpt-dir", ckpt, "--ckpt-every", "1", "--keep", "3",
                  "--resume"], metrics),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.05, 0.6))
        if process.poll() is not None:
            if process.returncode != 0:
                fail("run %d exited %d: %s" % (attempt, process.returncode,
                                                process.stderr.read()))
            break
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stderr.close()
        kills += 1
        found = checkpoints(ckpt)
        if written_before and not found:
            fail("after kill %d no checkpoint is left in %s" % (kills, ckpt))
        if found:
            written_before = True
            check_checkpoint(found[-1])  # the newest one is always whole
    result = run(trun(["--ckpt-dir", ckpt, "--ckpt-every", "1", "--keep", "3",
                       "--resume"], metrics))
    compare_runs(reference, metrics, "after %d kills" % kills)
    newest = checkpoints(ckpt)[-1]
    if check_checkpoint(newest) != STEPS:
        fail("newest checkpoint %s is not step %d" % (newest, STEPS))
    if len(checkpoints(ckpt)) > 3:
        fail("--keep 3 left %d checkpoints" % len(checkpoints(ckpt)))
    leftovers = [n for n in os.listdir(ckpt) if n.startswith(".tmp")]
    if leftovers:
        fail("temporary directories left in %s: %s" % (ckpt, leftovers))
    compare_weights(reference_weights,
                    os.path.join(newest, "model.safetensors"),
                    "weights after %d kills" % kills)
    print("kill -9: %d kills, resumed to step %d, losses and weights equal "
          "the uninterrupted run" % (kills, STEPS))

    # 2b. A run killed after its last checkpoint and before --keep deleted
    # the old ones (the window the kills above may hit): here every
    # checkpoint kept, then a resume with --keep 3 that has no step left
    # to train must still leave 3.
    kept = os.path.join(WORK, "keep_all")
    run(trun(["--ckpt-dir", kept, "--ckpt-every", "10"], kept + ".jsonl"))
    if len(checkpoints(kept)) <= 3:
        fail("--ckpt-every 10 without --keep left %d checkpoints" %
             len(checkpoints(kept)))
    result = run(trun(["--ckpt-dir", kept, "--keep", "3", "--resume"],
                      kept + ".jsonl"))
    if len(checkpoints(kept)) != 3 or \
            check_checkpoint(checkpoints(kept)[-1]) != STEPS:
        fail("a resume with --keep 3 left %s" %
             [os.path.basename(c) for c in checkpoints(kept)])
    if "removed" not in result.stdout or "beyond --keep 3" not in result.stdout:
        fail("the resume did not say it removed checkpoints: %s" %
             result.stdout)

    # 3. SIGINT and SIGTERM: final checkpoint, 128 + signal, exact resume.
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        directory = os.path.join(WORK, "signal_%d" % sig)
        sig_metrics = directory + ".jsonl"
        process = subprocess.Popen(
            trun(["--ckpt-dir", directory], sig_metrics),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while time.time() < deadline:  # until some steps are done
            if os.path.exists(sig_metrics) and len(
                    step_losses(sig_metrics)) >= 10:
                break
            time.sleep(0.01)
        process.send_signal(sig)
        out, err = process.communicate(timeout=60)
        if process.returncode == 0:
            print("note: the run finished before %s arrived" % sig.name)
            continue
        if process.returncode != code:
            fail("%s: exit %d, expected %d: %s" % (sig.name,
                                                   process.returncode, code,
                                                   err))
        match = re.search(r"interrupted by %s after step (\d+)" % sig.name,
                          err)
        if not match:
            fail("%s: stderr says %r" % (sig.name, err))
        stopped = int(match.group(1))
        if check_checkpoint(checkpoints(directory)[-1]) != stopped:
            fail("%s: no checkpoint at step %d" % (sig.name, stopped))
        run(trun(["--ckpt-dir", directory, "--resume"], sig_metrics))
        compare_runs(reference, sig_metrics, sig.name)
        print("%s: stopped at step %d with a checkpoint; resumed exactly" %
              (sig.name, stopped))

    # 4. Disk full during a checkpoint write.
    directory = os.path.join(WORK, "full")
    full_metrics = directory + ".jsonl"
    run(trun(["--ckpt-dir", directory, "--ckpt-every", "10"], full_metrics,
             steps=20))
    model_bytes = os.path.getsize(
        os.path.join(directory, "step_000000020", "model.safetensors"))

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE,
                           (model_bytes // 2, model_bytes // 2))

    result = run([TRUN, step, "--data", train, "--steps", "40", "--seed",
                  str(SEED), "--ckpt-dir", directory, "--ckpt-every", "10",
                  "--resume"], expect_rc=1, preexec_fn=small_files)
    expected = ("checkpoint failed: .*File too large.*last good checkpoint: "
                ".*step_000000020")
    if not re.search(expected, result.stderr):
        fail("disk full: stderr %r does not match %r" % (result.stderr,
                                                         expected))
    if os.path.basename(checkpoints(directory)[-1]) != "step_000000020":
        fail("disk full: newest checkpoint is %s" % checkpoints(directory)[-1])
    check_checkpoint(checkpoints(directory)[-1])
    if [n for n in os.listdir(directory) if n.startswith(".tmp")]:
        fail("disk full: a temporary directory was left behind")
    print("disk full: %s" % result.stderr.strip())

    # 5. A truncated newest checkpoint: fall back to the previous one.
    run(trun(["--ckpt-dir", directory, "--ckpt-every", "10", "--resume"],
             full_metrics, steps=40))
    newest = os.path.join(directory, "step_000000040", "model.safetensors")
    with open(newest, "r+b") as f:
        f.truncate(os.path.getsize(newest) - 100)
    result = run(trun(["--ckpt-dir", directory, "--ckpt-every", "10",
                       "--resume"], full_metrics, steps=STEPS))
    if not re.search(r"warning: .*step_000000040 is unusable: .*trying the "
                     r"previous one", result.stdout):
        fail("corrupt checkpoint: no fallback warning in:\n" + result.stdout)
    if "resumed from %s" % os.path.join(directory, "step_000000030") \
            not in result.stdout:
        fail("corrupt checkpoint: did not resume from step 30:\n" +
             result.stdout)
    compare_runs(reference, full_metrics, "after a corrupt checkpoint")
    print("corrupt checkpoint: fell back to step 30, finished exactly")

    # 6. A different model is refused, the checkpoint untouched.
    result = run([TRUN, other_step, "--data", train, "--steps", str(STEPS),
                  "--ckpt-dir", directory, "--resume"], expect_rc=1)
    if "refusing to resume" not in result.stderr:
        fail("incompatible step.so: stderr %r" % result.stderr)
    check_checkpoint(checkpoints(directory)[-1])
    print("incompatible step.so: %s" % result.stderr.strip())

    # 7. numpy reads a checkpoint: equal to trun's own export.
    exported = os.path.join(WORK, "exported.safetensors")
    run([TRUN, step, "--init-from",
         os.path.join(checkpoints(directory)[-1], "model.safetensors"),
         "--data", train, "--steps", "0", "--save-weights", exported])
    compare_weights(exported,
                    os.path.join(checkpoints(directory)[-1],
                                 "model.safetensors"), "numpy read")
    print("numpy: checkpoint weights equal trun's --save-weights export")
    print("PASS")


if __name__ == "__main__":
    main()
