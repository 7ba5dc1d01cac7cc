#!/usr/bin/env python3
"""The reduction benchmark's table from reduce_bench's and torch_reduce.py's
JSON lines: per shape, tcc's ms and read bandwidth, its fraction of the
cudaMemcpy rate (and the fraction one launch that only streams through the
input reaches: about the most any one-launch reduction could), and PyTorch's sum / mean / var ms with tcc's speed-up over
each (> 1: tcc faster); all in CUDA graphs, then tcc and torch's sum issued
one by one on the stream (with the host's launch overhead).

usage: table.py TCC.jsonl TORCH.jsonl
"""
import json
import sys


def load(path):
    rows = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def main():
    tcc, torch = load(sys.argv[1]), load(sys.argv[2])
    peer = {(r["dtype"], r["shape"], r["axes"], r["system"]): r for r in torch}
    print("| dtype | shape | axes | MB | tcc ms | tcc GB/s read | % of copy rate | "
          "one-pass read: % of copy | "
          "torch sum ms | mean ms | var ms | tcc vs sum | tcc vs mean | "
          "stream: tcc ms | torch sum ms | phases |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in tcc:
        key = (r["dtype"], r["shape"], r["axes"])
        t = {op: peer.get(key + ("torch-" + op,)) for op in ("sum", "mean", "var")}
        ms = {op: (f"{v['ms']:.4f}" if v else "n/a") for op, v in t.items()}
        floor = f"{100 * r['floor_frac']:.0f}%" if "floor_frac" in r else "n/a"
        ratio = {op: (f"{v['ms'] / r['ms']:.2f}x" if v else "n/a") for op, v in t.items()}
        print(f"| {r['dtype']} | {r['shape']} | {r['axes']} | {r['mb']:.1f} | {r['ms']:.4f} | "
              f"{r['read_gbps']:.0f} | {100 * r['frac_of_copy']:.0f}% | {floor} | {ms['sum']} | "
              f"{ms['mean']} | {ms['var']} | {ratio['sum']} | {ratio['mean']} | "
              f"{r['stream_ms']:.4f} | {t['sum']['stream_ms'] if t['sum'] else 'n/a'} | "
              f"{r['phases']} |")


if __name__ == "__main__":
    main()
