#!/usr/bin/env python3
"""tg-remat end to end on the CPU: a small GPT compiled under a
--memory-budget below what its step needs recomputes activations
(tcc compile -v and the tg-remat report say which), fits the budget, and
trains to exactly the same losses and weights as the unconstrained step
(recomputation runs the same ops on the same values: bit-identical).

  * without a budget: the step's need N (tcc compile -v);
  * with --memory-budget 0.8 N (and --loss-chunks 1: the loss head whole):
    at least one value recomputed, the step needs at most the budget, and
    30 steps give losses and final weights byte-identical to the
    unconstrained step's, in fp32 and bf16;
  * with --loss-chunks 4 (tg-chunk-loss-head: the logits in row chunks, dW
    summed in f32 across them): less memory in fp32, the first loss identical (the
    forward is row for row the same), the 30 losses in fp32 within 10x the
    distance of the whole step rounded another way (compiled with
    --cpu-arch none, run on another OpenBLAS core) + 1.9e-6 — dW summed over
    chunks is the same mathematics in another order
    (tests/numerics/rounding_envelope.py) — and the first 10 within 1e-3 in
    bf16, where the unchunked step rounds dW to bf16 once (2^-8 relative,
    four orders above any CPU's float32 differences): another trajectory,
    drifting apart later.

usage: remat_cpu_test.py TCC TCC_MODELS TCC_DATA TRUN WORKDIR
"""
import filecmp
import os
import re
import shutil
import sys

from e2e_steps import fail, losses, run
from fortunes_text import tokenize_fortunes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "numerics"))
import rounding_envelope as R  # noqa: E402

TCC, TCC_MODELS, TCC_DATA, TRUN, WORK = sys.argv[1:6]
STEPS = 30


def step_bytes(verbose_output):
    """The figure of tcc compile -v's 'the step needs ...: X on the device'."""
    m = re.search(r"tcc: the step needs .*: [0-9.]+ [KMG]?i?B \(([0-9]+) bytes\) on the device",
                  verbose_output)
    if not m:
        fail("tcc compile -v printed no step memory:\n" + verbose_output)
    return int(m.group(1))


def report(dump, pass_name="tg-remat"):
    for name in os.listdir(dump):
        if re.match(r"\d\d-%s-report\.txt$" % pass_name, name):
            with open(os.path.join(dump, name)) as f:
                return f.read()
    fail("no %s report in %s" % (pass_name, dump))


def train(step, data, tag, env=None):
    metrics = os.path.join(WORK, tag + ".jsonl")
    weights = os.path.join(WORK, tag + ".safetensors")
    run([TRUN, step, "--data", data, "--steps", str(STEPS), "--seed", "5",
         "--log-every", "10", "--metrics", metrics, "--save-weights", weights], env=env)
    return losses(metrics), weights


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    data, vocab = tokenize_fortunes(run, TCC_DATA, WORK)
    model = os.path.join(WORK, "gpt.pbtxt")
    run([TCC_MODELS, "gpt", "--vocab", str(vocab), "--context", "64", "--layers", "2",
         "--width", "64", "--heads", "2", "--batch", "8", "--lr", "3e-3", "-o", model])
    for precision in ("fp32", "bf16"):
        plain = os.path.join(WORK, "plain_%s.so" % precision)
        need = step_bytes(run([TCC, "compile", "--target", "cpu", "--precision", precision,
                               model, "-o", plain, "-v"]).stderr)
        budget = int(0.8 * need)
        remat = os.path.join(WORK, "remat_%s.so" % precision)
        dump = os.path.join(WORK, "dump_%s" % precision)
        out = run([TCC, "compile", "--target", "cpu", "--precision", precision, model,
                   "-o", remat, "-v", "--memory-budget", str(budget), "--loss-chunks", "1",
                   "--dump-dir", dump]).stderr
        fitted = step_bytes(out)
        text = report(dump)
        count = re.search(r"; (\d+) values recomputed", text)
        if not count or int(count.group(1)) == 0:
            fail("%s: nothing recomputed under a budget of %d bytes (need %d):\n%s"
                 % (precision, budget, need, text))
        if fitted > budget:
            fail("%s: the step needs %d bytes, over the budget %d" % (precision, fitted, budget))
        print("%s: step needs %d bytes unconstrained, %d under --memory-budget %d "
              "(%s values recomputed)" % (precision, need, fitted, budget, count.group(1)))
        base_losses, base_weights = train(plain, data + "_train.bin", "plain_" + precision)
        remat_losses, remat_weights = train(remat, data + "_train.bin", "remat_" + precision)
        if len(base_losses) != STEPS or base_losses != remat_losses:
            fail("%s: the losses differ:\n  plain %s\n  remat %s"
                 % (precision, base_losses, remat_losses))
        if not filecmp.cmp(base_weights, remat_weights, shallow=False):
            fail("%s: the weights after %d steps differ" % (precision, STEPS))
        print("%s: %d losses and the final weights identical" % (precision, STEPS))

        chunked = os.path.join(WORK, "chunked_%s.so" % precision)
        chunk_dump = os.path.join(WORK, "chunk_dump_%s" % precision)
        chunked_need = step_bytes(run([TCC, "compile", "--target", "cpu", "--precision",
                                       precision, model, "-o", chunked, "-v", "--loss-chunks",
                                       "4", "--dump-dir", chunk_dump]).stderr)
        chunk_report = report(chunk_dump, "tg-chunk-loss-head")
        if "chunked logits: 4 chunks of 128 rows" not in chunk_report:
            fail("%s: the loss head is not chunked:\n%s" % (precision, chunk_report))
        # In bf16 this small vocabulary's f32 dW sum outweighs its logits.
        if precision == "fp32" and chunked_need >= need:
            fail("%s: 4 chunks need %d bytes, not less than the whole head's %d"
                 % (precision, chunked_need, need))
        chunk_losses, _ = train(chunked, data + "_train.bin", "chunked_" + precision)
        # bf16: another rounding of dW is another trajectory; the two drift
        # apart as training goes on (a few % by step 20), so only the first
        # 10 steps are held to a bound.
        if precision == "fp32":
            compared = STEPS
            other = os.path.join(WORK, "other_fp32.so")
            run([TCC, "compile", "--target", "cpu", "--precision", precision, "--cpu-arch",
                 "none", model, "-o", other])
            other_losses, _ = train(other, data + "_train.bin", "other_fp32",
                                    env=dict(os.environ,
                                             OPENBLAS_CORETYPE=R.other_openblas_core()))
            failures = R.check_losses("fp32 --loss-chunks 4 vs whole", chunk_losses,
                                      base_losses, [other_losses], ref_name="whole",
                                      verbose=False)
        else:
            compared, failures = 10, []
        worst = max(abs(a - b) / abs(a)
                    for a, b in zip(base_losses[:compared], chunk_losses[:compared]))
        if precision == "bf16" and worst > 1e-3:
            failures.append("bf16: the first 10 losses differ by up to %.3g > 1e-3" % worst)
        if len(chunk_losses) != STEPS or chunk_losses[0] != base_losses[0] or failures:
            fail("%s: the chunked step's losses are not the step's (%s, or the first "
                 "differs):\n  whole   %s\n  chunked %s"
                 % (precision, "; ".join(failures), base_losses, chunk_losses))
        print("%s: --loss-chunks 4 needs %d bytes (whole: %d); the first %d losses within "
              "%.3g relative" % (precision, chunked_need, need, compared, worst))
    print("PASS")


if __name__ == "__main__":
    main()
