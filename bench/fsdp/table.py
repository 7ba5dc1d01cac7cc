#!/usr/bin/env python3
"""The table of bench/fsdp/run.sh: per system ms/step (median after the
5th step), tokens/s over all ranks, memory per GPU (tcc: trun's measured
peak of rank 0, and its plan; PyTorch: max_memory_allocated per rank).

    table.py DIR OUT N
"""
import json
import os
import re
import statistics
import sys


def tcc_row(out, name, tokens_per_step):
    metrics, log = os.path.join(out, "tcc_%s.jsonl" % name), os.path.join(out, "tcc_%s.log" % name)
    if not os.path.exists(metrics):
        return None
    steps = [json.loads(l) for l in open(metrics)]
    steps = [s for s in steps if s.get("kind") == "step"]
    if len(steps) < 6:
        return None
    ms = statistics.median(s["step_ms"] for s in steps if s["step"] > 5)
    text = open(log).read()
    mem = re.search(r"gpu memory: ([\d.]+ \w+) allocated, peak ([\d.]+ \w+) \(planned ([\d.]+ \w+)\)", text)
    return dict(ms=ms, tps=tokens_per_step / (ms / 1e3),
                mem="%s (planned %s)" % (mem.group(2), mem.group(3)) if mem else "?",
                loss="%.4f -> %.4f" % (steps[0]["loss"], steps[-1]["loss"]))


def main():
    d, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    meta = json.load(open(os.path.join(d, "meta.json")))
    cfg = meta["config"]
    tokens = n * cfg["batch"] * cfg["context"]
    print("LLaMA-style, %.2fB parameters (%d layers, dim %d, %d/%d heads, SwiGLU %d, vocab %d), "
          "B=%d T=%d per GPU, %d GPUs, bf16\n" % (meta["params"] / 1e9, cfg["layers"], cfg["dim"],
                                                 cfg["heads"], cfg["kv_heads"], cfg["hidden"],
                                                 cfg["vocab"], cfg["batch"], cfg["context"], n))
    print("| system | ms/step | tokens/s | memory per GPU | loss |")
    print("|---|---|---|---|---|")
    rows = {}
    for name, label in (("z3", "tcc --shard-parameters %d (ZeRO-3)" % n),
                        ("dp", "tcc --data-parallel (replicated)")):
        r = tcc_row(out, name, tokens)
        rows[name] = r
        print("| %s | %s |" % (label, " | ".join(
            ["%.2f" % r["ms"], "%.0f" % r["tps"], r["mem"], r["loss"]] if r else ["failed"] * 4)))
    for red in ("f32", "bf16"):
        path = os.path.join(out, "fsdp_%s.json" % red)
        if not os.path.exists(path):  # not run (REDUCES)
            continue
        line = open(path).read().strip().splitlines()
        label = "PyTorch FSDP2 + torch.compile, reduce %s" % red
        if not line:
            print("| %s | failed | | | |" % label)
            continue
        r = json.loads(line[-1])
        rows["fsdp_" + red] = r
        print("| %s | %.2f | %d | %s GiB (max_memory_allocated) | %.4f -> %.4f |" % (
            label, r["ms_per_step"], r["tokens_per_s"],
            " / ".join("%.2f" % x for x in r["peak_mem_gib"]), r["loss_first"], r["loss_last"]))
    if rows.get("z3"):
        for red in ("f32", "bf16"):
            r = rows.get("fsdp_" + red)
            if r:
                print("\ntcc ZeRO-3 vs FSDP2+compile (reduce %s): %.2fx tokens/s" % (
                    red, rows["z3"]["tps"] / r["tokens_per_s"]))


if __name__ == "__main__":
    main()
