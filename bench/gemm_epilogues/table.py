#!/usr/bin/env python3
"""The table of bench/gemm_epilogues/run.sh: GPT-2 124M bf16 ms/step (median
of the steps after --warmup, each run) with the CUTLASS epilogue kernels
timed against cuBLASLt (default) and with cuBLASLt only (TCC_GEMM_CUTLASS=0),
the runs alternating; tokens/s from the mean of the medians; then the two
profiles' matmul+epilogue rows and the kernel bench's lines.

    table.py OUT [--warmup 5]
"""
import argparse
import glob
import json
import os
import statistics


def medians(out, variant, warmup):
    result = []
    for path in sorted(glob.glob(os.path.join(out, variant + "_*.jsonl"))):
        with open(path) as f:
            recs = [json.loads(line) for line in f if line.strip()]
        ms = [r["step_ms"] for r in recs if r.get("kind") == "step" and r["step"] > warmup]
        if ms:
            result.append(statistics.median(ms))
    return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    tokens = 16 * 1024
    rows = {}
    print("| GPT-2 124M bf16, B16 T1024 | runs: median ms/step | mean ms | tokens/s |")
    print("|---|---|---|---|")
    for variant, name in (("cutlass", "CUTLASS epilogues timed against cuBLASLt"),
                          ("cublaslt", "cuBLASLt only (TCC_GEMM_CUTLASS=0)")):
        m = medians(a.out, variant, a.warmup)
        if not m:
            print(f"| {name} | no steps recorded | | |")
            continue
        mean = statistics.mean(m)
        rows[variant] = mean
        print(f"| {name} | {', '.join(f'{x:.2f}' for x in m)} | {mean:.2f} | "
              f"{tokens / (mean / 1e3) / 1e3:.0f}K |")
    torch_path = os.path.join(a.out, "torch.jsonl")
    if os.path.exists(torch_path):
        with open(torch_path) as f:
            for line in f:
                if not line.strip():
                    continue
                r = json.loads(line)
                if r.get("status") == "ok":
                    ms = r["ms_per_step"]
                    rows["torch"] = ms
                    print(f"| {r['system']} (bf16 autocast), same call | {ms:.2f} | {ms:.2f} | "
                          f"{tokens / (ms / 1e3) / 1e3:.0f}K |")
    if "cutlass" in rows and "cublaslt" in rows:
        print(f"\nspeed-up with CUTLASS: {rows['cublaslt'] / rows['cutlass']:.3f}x")
    if "torch" in rows:
        for v in ("cutlass", "cublaslt"):
            if v in rows:
                print(f"tcc ({v}) vs torch.compile: {rows['torch'] / rows[v]:.3f}x")
    for variant in ("cutlass", "cublaslt"):
        path = os.path.join(a.out, f"profile_{variant}.txt")
        if os.path.exists(path):
            with open(path) as f:
                lines = [l.rstrip() for l in f
                         if "train step:" in l or l.startswith("  matmul")
                         or "CUTLASS sm90 kernels run" in l]
            print(f"\nprofile ({variant}):")
            for l in lines[:8]:
                print("  " + l.strip()[:160])
    path = os.path.join(a.out, "cutlass_gemm_test.txt")
    if os.path.exists(path):
        with open(path) as f:
            print("\nkernels (cutlass_gemm_test --bench):")
            for l in f:
                if l.startswith("bench") or "exit" in l or l.startswith("FAIL") or "passed" in l:
                    print("  " + l.rstrip()[:170])


if __name__ == "__main__":
    main()
