#!/usr/bin/env python3
"""RoPE caching end to end on the CPU: a small LLaMA-style GPT (rotary
positions, RMS norm, SwiGLU) compiles with its rotary tables computed at
compile time and each rotation one tg.rope, and trains.

  * the tg-cache-rope report lists the cos and sin tables as cached and
    every q / k rotation as fused, nothing left unfused; the kern dump has
    one kern.rope per rotation (forward, backward and eval) and no sine
    or cosine left in any kernel;
  * trun --info reports the constant-table bytes: 2 tables of (T, D) f32;
  * training on Debian's fortunes makes the loss fall by at least 20%
    (mean of the last 10 steps against the first 10) in fp32 and bf16.

usage: rope_cpu_test.py TCC TCC_MODELS TCC_DATA TRUN WORKDIR
"""
import os
import re
import shutil
import sys

from e2e_steps import fail, losses, run
from fortunes_text import tokenize_fortunes

TCC, TCC_MODELS, TCC_DATA, TRUN, WORK = sys.argv[1:6]
STEPS = 60
LAYERS, WIDTH, HEADS, CONTEXT = 2, 64, 2, 32


def dump_file(dump, stem):
    for name in os.listdir(dump):
        if re.match(r"\d\d-%s$" % re.escape(stem), name):
            with open(os.path.join(dump, name)) as f:
                return f.read()
    fail("no %s in %s" % (stem, dump))


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    data, vocab = tokenize_fortunes(run, TCC_DATA, WORK)
    model = os.path.join(WORK, "llama.pbtxt")
    run([TCC_MODELS, "gpt", "--vocab", str(vocab), "--context", str(CONTEXT),
         "--layers", str(LAYERS), "--width", str(WIDTH), "--heads", str(HEADS),
         "--batch", "8", "--positions", "rope", "--norm", "rms", "--mlp", "swiglu",
         "--lr", "3e-3", "-o", model])
    head = WIDTH // HEADS
    table_bytes = 2 * CONTEXT * head * 4
    for precision in ("fp32", "bf16"):
        step = os.path.join(WORK, "llama_%s.so" % precision)
        dump = os.path.join(WORK, "dump_%s" % precision)
        run([TCC, "compile", "--target", "cpu", "--precision", precision, model,
             "-o", step, "--dump-dir", dump])
        report = dump_file(dump, "tg-cache-rope-report.txt")
        summary = ("# summary: 2 tables cached (%.1f KiB of constant data), %d "
                   "rotations fused into tg.rope, 0 not cached, 0 not fused"
                   % (table_bytes / 1024, 2 * LAYERS))
        if summary not in report:
            fail("%s: the tg-cache-rope report does not say %r:\n%s"
                 % (precision, summary, report))
        for node in ("rope.cos", "rope.sin"):
            if not re.search(r"^%s\s+tg.constant\s+cached: \[%d, %d\] f32"
                             % (re.escape(node), CONTEXT, head), report, re.M):
                fail("%s: %s is not reported cached as [%d, %d] f32:\n%s"
                     % (precision, node, CONTEXT, head, report))
        plan = dump_file(dump, "kern-plan-memory.mlir")
        # (ops only: "kern.rope %"; kern.fold_layout reports name readers too)
        ropes = len(re.findall(r"kern\.rope %", plan))
        # q and k per layer: forward and backward in train, forward in eval.
        if ropes != 2 * LAYERS * 3:
            fail("%s: %d kern.rope in the plan, expected %d" % (precision, ropes,
                                                                 2 * LAYERS * 3))
        if re.search(r"math\.(sin|cos)", plan):
            fail("%s: a kernel still computes sin / cos" % precision)
        info = run([TRUN, step, "--info"]).stdout
        if "constant tables: %d bytes" % table_bytes not in info:
            fail("%s: trun --info does not report 'constant tables: %d bytes':\n%s"
                 % (precision, table_bytes, info))
        metrics = os.path.join(WORK, "%s.jsonl" % precision)
        run([TRUN, step, "--data", data + "_train.bin", "--steps", str(STEPS),
             "--seed", "3", "--log-every", "20", "--metrics", metrics])
        curve = losses(metrics)
        if len(curve) != STEPS:
            fail("%s: %d step records, expected %d" % (precision, len(curve), STEPS))
        first, last = sum(curve[:10]) / 10, sum(curve[-10:]) / 10
        print("%s: mean loss of the first 10 steps %.4f, last 10 %.4f"
              % (precision, first, last))
        if not last < 0.8 * first:
            fail("%s: the loss did not fall by 20%% (%.4f -> %.4f)"
                 % (precision, first, last))
    print("PASS")


if __name__ == "__main__":
    main()
