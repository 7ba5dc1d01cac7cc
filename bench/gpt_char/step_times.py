#!/usr/bin/python3
"""Per-step training times of the gpt_char sample for cpu_vs_eager.sh.

    step_times.py torch --init W.safetensors --data SHARD --threads N
                        [--warmup 5] [--steps 20]
        PyTorch eager on the CPU: tests/parity/gpt_reference.py's GPT with
        the sample's configuration (tests/gpu/amp_models.py gpt_char, which
        prepare.sh there checks writes exactly samples/gpt_char), from the
        weights W (trun's initial ones), on trun --data-order sequential's
        batches, with its recipe (torch.optim.AdamW, clip_grad_norm_, the
        warmup-cosine schedule); warmup + steps steps, fp32,
        torch.set_num_threads(N). A step's time runs from the end of the
        previous step (its loss read back) to the end of this one.
    step_times.py trun METRICS.jsonl --warmup 5 [--threads N]
        trun's own per-step times (the step_ms of its --metrics records:
        the step call alone, batch loading excluded) after the warm-up.
    step_times.py table RESULTS.jsonl
        the table: each system's median ms/step per round, the median over
        rounds, the fastest step, and the ratios PyTorch / tcc.

The first two print one JSON line: system, ms_per_step (median of the timed
steps), min, max, steps, threads, loss_first, loss_last.
"""
import argparse
import json
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "gpu"))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "parity"))


def summary(system, times_ms, losses, threads, **extra):
    return json.dumps({"system": system,
                       "ms_per_step": round(statistics.median(times_ms), 2),
                       "min": round(min(times_ms), 2), "max": round(max(times_ms), 2),
                       "steps": len(times_ms), "threads": threads,
                       "loss_first": losses[0], "loss_last": losses[-1], **extra})


def torch_main(a):
    import torch
    import amp_models
    import gpt_parity_test
    import gpt_reference as ref
    import tcc_files

    torch.set_num_threads(a.threads)
    cfg = amp_models.CONFIGS["gpt_char"]
    weights, _ = tcc_files.read_safetensors(a.init)
    P = ref.make_params(cfg, weights)
    batches = gpt_parity_test.sequential_batches(
        tcc_files.read_shard(a.data), cfg, a.warmup + a.steps)
    ends = [time.perf_counter()]
    losses, _ = ref.train(cfg, P, batches,
                          on_step=lambda *_: ends.append(time.perf_counter()))
    times = [1e3 * (b - e) for e, b in zip(ends, ends[1:])][a.warmup:]
    print(summary("pytorch-eager", times, losses, torch.get_num_threads(),
                  torch=torch.__version__))
    return 0


def trun_main(a):
    times, losses = [], []
    with open(a.metrics) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") == "step":
                losses.append(rec["loss"])
                if rec["step"] > a.warmup:
                    times.append(rec["step_ms"])
    if not times:
        sys.exit(f"step_times.py: {a.metrics} has no step after the {a.warmup} warm-up steps")
    print(summary("tcc-cpu", times, losses, a.threads))
    return 0


def table_main(a):
    with open(a.results) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    by_system = {}
    for run in runs:
        by_system.setdefault(run["system"], []).append(run)
    if set(by_system) != {"tcc-cpu", "pytorch-eager"}:
        sys.exit(f"step_times.py: {a.results} needs tcc-cpu and pytorch-eager runs, "
                 f"has {sorted(by_system)}")
    # The median over rounds of each round's median step; and the fastest
    # step of all rounds, which other processes on the cores disturb least.
    med = {k: statistics.median(r["ms_per_step"] for r in v) for k, v in by_system.items()}
    best = {k: min(r["min"] for r in v) for k, v in by_system.items()}
    print("| system | median ms/step of each round | median | fastest step | "
          "eager / this (median) | eager / this (fastest) |")
    print("|---|---|---|---|---|---|")
    for k in ("tcc-cpu", "pytorch-eager"):
        rounds = ", ".join(f"{r['ms_per_step']:.1f}" for r in by_system[k])
        print(f"| {k} | {rounds} | {med[k]:.1f} | {best[k]:.1f} | "
              f"{med['pytorch-eager'] / med[k]:.2f} | {best['pytorch-eager'] / best[k]:.2f} |")
    print(f"PyTorch eager / tcc, step time: {med['pytorch-eager'] / med['tcc-cpu']:.2f} "
          f"(medians), {best['pytorch-eager'] / best['tcc-cpu']:.2f} (fastest steps); "
          f"above 1: tcc is faster")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("torch")
    t.add_argument("--init", required=True)
    t.add_argument("--data", required=True)
    t.add_argument("--threads", type=int, required=True)
    t.add_argument("--warmup", type=int, default=5)
    t.add_argument("--steps", type=int, default=20)
    r = sub.add_parser("trun")
    r.add_argument("metrics")
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--threads", type=int)
    s = sub.add_parser("table")
    s.add_argument("results")
    a = p.parse_args()
    return {"torch": torch_main, "trun": trun_main, "table": table_main}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
