#!/usr/bin/env python3
"""The benchmark table of bench/gpt2/run.sh: PyTorch eager and torch.compile
(JSON lines of bench/torch_gpt2.py) and tcc (trun --metrics files, one per
precision) for the GPT-2 124M step, with ratios tcc / peer: step time
against eager and torch.compile, peak memory against torch.compile.

tcc's ms/step is the median step_ms of the steps after --warmup; its MFU
uses the same FLOPs per step and the same measured bf16 matmul peak as the
PyTorch rows (both come from torch_gpt2.py's JSON); its peak memory is the
GPU memory trun allocated at the peak (params, optimizer state, workspace
with gradients and activations, inputs, outputs: trun's "gpu memory" line in
the .log next to the metrics file), the PyTorch rows report
torch.cuda.max_memory_allocated.

With --llmc [NAME=]LOG (bench/gpt2/llmc.sh run's output; repeatable, one row
each, NAME the label in the parentheses after "llm.c"), llm.c is a row too,
and a column gives each row's step time against the fastest llm.c row (the
peer at its best setting): its ms/step is the median of
the "X ms" llm.c prints per step (CUDA events around the step) after
--warmup; its memory is its "device memory usage" line (cudaMemGetInfo after
its allocations: the CUDA context and cuDNN's and cuBLAS's workspaces
included, so it overstates what it allocated; marked with *).

    table.py --torch torch.jsonl --tcc NAME=metrics.jsonl [...] [--llmc [NAME=]LOG ...] [--warmup 5]

NAME is the row's label after "tcc " (e.g. "bf16 (tg-amp)").
"""
import argparse
import json
import os
import re
import statistics


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_llmc(spec, warmup):
    """llm.c's row: (name, median ms after warmup or None, memory or None)."""
    label, path = spec.split("=", 1) if "=" in spec else ("bf16, cuDNN attention", spec)
    ms, mem = [], None
    try:
        with open(path) as f:
            for line in f:
                m = re.match(r"step\s+(\d+)/\d+ \|.*\| ([0-9.]+) ms \|", line)
                if m and int(m.group(1)) > warmup:
                    ms.append(float(m.group(2)))
                m = re.search(r"device memory usage: (\d+) MiB", line)
                if m:
                    mem = float(m.group(1)) * 2 ** 20
    except OSError:
        pass
    return (f"llm.c ({label})", statistics.median(ms) if ms else None, mem)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--torch", required=True)
    p.add_argument("--tcc", action="append", default=[])
    p.add_argument("--llmc", action="append", default=[],
                   help="[NAME=]LOG: llm.c's log (bench/gpt2/llmc.sh run); repeatable")
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    torch_rows = [r for r in read_jsonl(a.torch) if r.get("status") == "ok"]
    if not torch_rows:
        raise SystemExit("no PyTorch results in " + a.torch)
    ref = torch_rows[0]
    flops, peak = ref["flops_per_step"], ref["matmul_peak"]["flops_per_s"]
    tokens = ref["tokens_per_step"]
    rows = []
    for r in torch_rows:
        rows.append((r["system"] + " (bf16 autocast)", r["ms_per_step"], r["peak_mem_bytes"]))
    for spec in a.llmc:
        rows.append(read_llmc(spec, a.warmup))
    for spec in a.tcc:
        name, path = spec.split("=", 1)
        recs = read_jsonl(path)
        ms = [r["step_ms"] for r in recs if r.get("kind") == "step" and r["step"] > a.warmup]
        end = [r for r in recs if r.get("kind") == "run" and r.get("event") == "end"]
        mem = None
        if end and "gpu_peak_bytes" in end[-1]:
            mem = float(end[-1]["gpu_peak_bytes"])
        else:  # trun's summary line next to the metrics: "gpu memory: ..., peak 38.50 GiB"
            try:
                with open(os.path.splitext(path)[0] + ".log") as f:
                    for line in f:
                        m = re.search(r"gpu memory: .*peak ([0-9.]+) (KiB|MiB|GiB)", line)
                        if m:
                            mem = float(m.group(1)) * 2 ** {"KiB": 10, "MiB": 20, "GiB": 30}[m.group(2)]
            except OSError:
                pass
        if not ms:
            rows.append((f"tcc {name}", None, mem))
            continue
        rows.append((f"tcc {name}", statistics.median(ms), mem))
    print(f"GPT-2 124M, B=16, T=1024, one training step; {ref['device']}, torch {ref['torch']}, "
          f"bf16 matmul peak {peak / 1e12:.1f} TFLOP/s (measured), {flops / 1e12:.3f} TFLOP/step")
    print()
    llmc = min((ms for n, ms, _ in rows if n.startswith("llm.c") and ms), default=None)
    print("| system | ms/step | tokens/s | MFU | peak GPU memory | ms/step vs eager "
          "| vs torch.compile | vs llm.c (fastest) | memory vs torch.compile |")
    print("|---|---|---|---|---|---|---|---|---|")
    eager = next((ms for n, ms, _ in rows if n.startswith("pytorch-eager")), None)
    comp, comp_mem = next(((ms, mem) for n, ms, mem in rows if n.startswith("pytorch-compile")),
                          (None, None))
    for name, ms, mem in rows:
        ratio = lambda value, peer: f"{value / peer:.2f}x" if value and peer else "-"
        memtxt = f"{mem / 2**30:.2f} GiB" if mem else "n/a"
        if mem and name.startswith("llm.c"):
            memtxt += "*"
        if ms is None:
            print(f"| {name} | failed | | | {memtxt} | | | | {ratio(mem, comp_mem)} |")
            continue
        print(f"| {name} | {ms:.2f} | {tokens / ms * 1e3:,.0f} | {flops / (ms / 1e3) / peak * 100:.1f}% "
              f"| {memtxt} | {ratio(ms, eager)} | {ratio(ms, comp)} | {ratio(ms, llmc)} "
              f"| {ratio(mem, comp_mem)} |")
    print()
    print("ratios are system / peer (above 1: slower, or more memory).")
    if a.llmc:
        print("* llm.c's memory is cudaMemGetInfo's use after its allocations (the CUDA "
              "context and library workspaces included), not its allocations alone.")


if __name__ == "__main__":
    main()
