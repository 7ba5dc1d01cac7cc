#!/usr/bin/env python3
"""PyTorch's sum, mean and var over the shapes of bench/reduce/shapes.txt on
this machine's GPU, timed as reduce_bench.cu times tcc (the median over 7
repeats of 50 calls between two CUDA events, / 50: ms with the calls
captured in a CUDA graph, stream_ms issued one by one), one JSON line per
(shape, op) on stdout. Calls rotate through copies of the input (>= 512 MB
in all, at most 64) so each reads from HBM, not from the L2.

usage: torch_reduce.py [shapes.txt] [--iters N]
"""
import argparse
import json
import sys

import torch


def time_ms(fn, iters, graph):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture
        for k in range(3):
            fn(k)
    torch.cuda.current_stream().wait_stream(side)
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for k in range(iters):
                fn(k)
        run = g.replay
    else:
        def run():
            for k in range(iters):
                fn(k)
    run()
    times = []
    for _ in range(7):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / iters)
    return sorted(times)[len(times) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("shapes", nargs="?", default="bench/reduce/shapes.txt")
    p.add_argument("--iters", type=int, default=50)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_reduce.py: no GPU", file=sys.stderr)
        return 77
    dtypes = {"bf16": torch.bfloat16, "f32": torch.float32}
    for line in open(a.shapes):
        line = line.split("#")[0].split()
        if not line:
            continue
        dtype, shape = line[0], [int(s) for s in line[1].split(",")]
        axes = [int(s) for s in line[2].split(",")] if len(line) > 2 and line[2] != "-" else []
        x = torch.rand(shape, device="cuda", dtype=dtypes[dtype])
        mb = x.numel() * x.element_size() / 1e6
        xs = [x] + [torch.rand_like(x) for _ in range(min(63, int(512 / mb)))]
        for op, fn in (("sum", lambda k: xs[k % len(xs)].sum(axes)),
                       ("mean", lambda k: xs[k % len(xs)].mean(axes)),
                       ("var", lambda k: xs[k % len(xs)].var(axes, unbiased=False))):
            ms, stream_ms = time_ms(fn, a.iters, True), time_ms(fn, a.iters, False)
            print(json.dumps({"system": "torch-" + op, "dtype": dtype,
                              "shape": ",".join(map(str, shape)),
                              "axes": ",".join(map(str, axes)), "mb": round(mb, 3),
                              "ms": round(ms, 5), "stream_ms": round(stream_ms, 5), "read_gbps": round(mb / 1e3 / (ms / 1e3), 1),
                              "torch": torch.__version__}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
