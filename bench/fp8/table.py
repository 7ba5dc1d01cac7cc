#!/usr/bin/env python3
"""Tables of bench/fp8/run.sh, from trun's --metrics files in OUT.

    table.py speed --out OUT [--warmup 5]
        per model, bf16 and fp8 (and fp8current: --fp8-scaling current,
        the 1B decoder only; and prepare.sh's VARIANT steps, bf16-NAME
        and fp8-NAME): the median step_ms after the warm-up
        steps, tokens/s (items_per_s's unit is tokens; the median), the
        ratio fp8 / bf16, and trun's peak GPU memory (its log's
        "gpu memory" line); then each --profile run's top launches by
        kind of kernel (the profile records of the metrics file).
    table.py rounds --out OUT [--warmup 5]
        run.sh's rounds: each step's median step_ms per round, the median
        over the rounds, fp8 / bf16 and a VARIANT step against its base.
    table.py loss --out OUT [--every 50]
        the 1B decoder's losses, bf16 and fp8, at every 50th step and the
        last: both losses and (fp8 - bf16) / bf16; the largest relative
        difference over those steps and the final one, against issue 37's
        bounds (0.5% at every 50th step, 0.25% at the end); then the same
        for the means over the 50 steps ending at each mark; and, where the
        runs have trun --eval-every records, the validation losses.
    table.py loss --out OUT --floor FILE
        the same with a second bf16 run (FILE: its metrics, e.g. the step
        compiled without --deterministic) beside fp8: bf16 against itself,
        the benchmark's own spread, on the same bounds.
"""
import argparse
import collections
import json
import os
import re
import statistics


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def peak_memory(log):
    try:
        with open(log) as f:
            for line in f:
                m = re.search(r"gpu memory: .*peak ([0-9.]+) (KiB|MiB|GiB)", line)
                if m:
                    return f"{m.group(1)} {m.group(2)}"
    except OSError:
        pass
    return "?"


def variants(out, model):
    """prepare.sh's VARIANT steps of `model` measured in OUT: ["bf16-NAME", ...]."""
    names = set()
    for f in os.listdir(out):
        m = re.fullmatch(rf"speed_{model}_((bf16|fp8)-[A-Za-z0-9_]+)\.jsonl", f)
        if m:
            names.add(m.group(1))
    return sorted(names, key=lambda n: (n.split("-", 1)[1], n))


def speed(out, warmup):
    print("| model | precision | ms/step | tokens/s | fp8 / bf16 | peak memory |")
    print("|---|---|---|---|---|---|")
    for model in ("gpt2", "llama1b"):
        rates = {}
        for p in ("bf16", "fp8current", "fp8") + tuple(variants(out, model)):
            recs = [r for r in read(f"{out}/speed_{model}_{p}.jsonl")
                    if r.get("kind") == "step" and r["step"] > warmup]
            if not recs and p == "fp8current":
                continue  # built for the 1B decoder only
            if not recs:
                print(f"| {model} | {p} | no steps (see speed_{model}_{p}.log) | | | |")
                continue
            ms = statistics.median(r["step_ms"] for r in recs)
            rate = statistics.median(r["items_per_s"] for r in recs)
            rates[p] = rate
            # A variant's fp8 against the same variant's bf16; a variant
            # against its base precision in brackets.
            base, _, variant = p.partition("-")
            bf16 = "bf16-" + variant if variant else "bf16"
            ratio = f"{rate / rates[bf16]:.3f}x" if base != "bf16" and bf16 in rates else ""
            if variant and base in rates:
                ratio += f" ({rate / rates[base]:.3f}x {base})"
            print(f"| {model} | {p} | {ms:.2f} | {rate:,.0f} | {ratio} | "
                  f"{peak_memory(f'{out}/speed_{model}_{p}.log')} |")
    for model in ("gpt2", "llama1b"):
        for p in ("bf16", "fp8current", "fp8") + tuple(variants(out, model)):
            prof = [r for r in read(f"{out}/profile_{model}_{p}.jsonl") if r.get("kind") == "profile"
                    and r.get("entry") == "train"]
            if not prof:
                continue
            by = collections.defaultdict(float)
            for r in prof:
                kind = re.sub(r"^tcc_k[0-9]+_", "", r["kernel"])
                by[kind] += r["ms_per_call"] * r["calls"]
            total = sum(by.values())
            top = sorted(by.items(), key=lambda kv: -kv[1])[:8]
            print(f"\n{model} {p} --profile (train, ms per step by kind, total {total:.2f}):")
            for kind, ms in top:
                print(f"  {kind:<40} {ms:8.2f}  {100 * ms / total:5.1f}%")


def loss_runs(out, floor):
    """step -> loss of the bf16 and fp8 runs in OUT, and of FLOOR (a second
    bf16 run's metrics file) when given."""
    paths = {p: f"{out}/loss_llama1b_{p}.jsonl" for p in ("bf16", "fp8")}
    if floor:
        paths["floor"] = floor
    records = {p: read(path) for p, path in paths.items()}
    runs = {p: {r["step"]: r["loss"] for r in recs if r.get("kind") == "step"}
            for p, recs in records.items()}
    for p, steps in runs.items():
        if not steps:
            raise SystemExit(f"loss: no steps in {paths[p]} (see its .log)")
    # trun --eval-every: the validation loss (the same held-out batches
    # each time) after those steps.
    evals = {p: {r["step"]: r["val_loss"] for r in recs
                 if r.get("kind") == "eval" and "val_loss" in r}
             for p, recs in records.items()}
    return runs, evals


def verdict(worst, final, at):
    return (f"largest |difference| {100 * worst:.3f}% "
            f"({'within' if worst <= 0.005 else 'OUTSIDE'} 0.5%); {at}: "
            f"{100 * final:+.3f}% ({'within' if abs(final) <= 0.0025 else 'OUTSIDE'} 0.25%)")


def loss(out, every, floor=None):
    runs, evals = loss_runs(out, floor)
    others = ["fp8"] + (["floor"] if floor else [])
    last = min(max(r) for r in runs.values())
    # Each other run against bf16: (other - bf16) / bf16. The floor column
    # is bf16 against itself (another run of the same precision, e.g. with
    # atomics): how far this benchmark's curves move without any change of
    # precision, the scale the fp8 column is to be read on.
    head = " | ".join(f"{o} loss" for o in others)
    rels = " | ".join(f"({o} - bf16) / bf16" for o in others)
    marks = [s for s in range(every, last + 1, every)] + ([last] if last % every else [])

    def table(title, points, value, what, at):
        """The rows (label, key) of value(run, key), then each other run's
        verdict on the bounds: its largest |difference|, and its last."""
        print(f"| {title} | bf16 loss | {head} | {rels} |")
        print("|---|---|" + "---|" * (2 * len(others)))
        worst = {o: 0.0 for o in others}
        final = {}
        for label, key in points:
            a = value("bf16", key)
            vals = {o: value(o, key) for o in others}
            if a is None or any(v is None for v in vals.values()):
                print(f"| {label} | missing |")
                continue
            rel = {o: (v - a) / a for o, v in vals.items()}
            for o in others:
                worst[o], final[o] = max(worst[o], abs(rel[o])), rel[o]
            print(f"| {label} | {a:.4f} | " + " | ".join(f"{vals[o]:.4f}" for o in others) +
                  " | " + " | ".join(f"{100 * rel[o]:+.3f}%" for o in others) + " |")
        print()
        for o in others:
            name = "fp8" if o == "fp8" else "the floor (bf16 again)"
            print(f"{name}{what}: " + (verdict(worst[o], final[o], at) if o in final
                                       else "no step has both runs"))

    table("step", [(s, s) for s in marks], lambda p, s: runs[p].get(s),
          f" at every {every}th step", f"at step {last}")
    # One batch's loss swings with the batch; the mean over the `every`
    # steps ending at each mark compares the curves.
    def mean(p, s):
        window = range(s - every + 1, s + 1)
        if any(i not in runs[p] for i in window):
            return None
        return sum(runs[p][i] for i in window) / every
    print()
    table("steps", [(f"{s - every + 1}-{s}", s) for s in range(every, last + 1, every)], mean,
          f", means over {every} steps", "the last")
    marks = sorted(set.intersection(*(set(e) for e in evals.values())))
    if marks:
        print()
        table("eval after step", [(s, s) for s in marks], lambda p, s: evals[p].get(s),
              ", validation loss", f"after step {marks[-1]}")


def rounds(out, warmup):
    """run.sh's rounds: per step and round the median step_ms; the median
    over rounds; fp8 against the same variant's bf16, a variant against
    its base precision (ratios of tokens/s, from the round medians)."""
    runs = collections.defaultdict(dict)  # (model, precision) -> round -> ms
    for f in sorted(os.listdir(out)):
        m = re.fullmatch(r"round(\d+)_(gpt2|llama1b)_([A-Za-z0-9_-]+)\.jsonl", f)
        if not m:
            continue
        recs = [r for r in read(f"{out}/{f}") if r.get("kind") == "step" and r["step"] > warmup]
        if recs:
            runs[(m.group(2), m.group(3))][int(m.group(1))] = statistics.median(
                r["step_ms"] for r in recs)
    if not runs:
        print("no rounds measured")
        return
    n = max(max(v) for v in runs.values())
    print("| model | step | " + " | ".join(f"round {i} ms" for i in range(1, n + 1)) +
          " | median ms | fp8 / bf16 | vs base |")
    print("|---|---|" + "---|" * n + "---|---|---|")
    med = {k: statistics.median(v.values()) for k, v in runs.items()}
    for (model, p), per in sorted(runs.items(), key=lambda kv: (kv[0][0], kv[0][1].split("-", 1)[1:], kv[0][1])):
        base, _, variant = p.partition("-")
        bf16 = (model, "bf16-" + variant if variant else "bf16")
        vs_bf16 = f"{med[bf16] / med[(model, p)]:.3f}x" if base != "bf16" and bf16 in med else ""
        vs_base = (f"{med[(model, base)] / med[(model, p)]:.3f}x {base}"
                   if variant and (model, base) in med else "")
        cells = " | ".join(f"{per[i]:.2f}" if i in per else "-" for i in range(1, n + 1))
        print(f"| {model} | {p} | {cells} | {med[(model, p)]:.2f} | {vs_bf16} | {vs_base} |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("part", choices=["speed", "rounds", "loss"])
    p.add_argument("--out", required=True)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--every", type=int, default=50)
    p.add_argument("--floor", help="loss: a second bf16 run's metrics file (e.g. the same "
                   "step with atomics), compared with bf16 beside fp8")
    a = p.parse_args()
    if a.part == "speed":
        speed(a.out, a.warmup)
    elif a.part == "rounds":
        rounds(a.out, a.warmup)
    else:
        loss(a.out, a.every, a.floor)


if __name__ == "__main__":
    main()
