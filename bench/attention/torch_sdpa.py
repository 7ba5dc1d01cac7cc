#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention with each backend forced in
turn (torch.nn.attention.sdpa_kernel: FLASH_ATTENTION, CUDNN_ATTENTION,
EFFICIENT_ATTENTION), bf16, forward and backward, the peers of tcc's flash
attention kernels (bench/attention/attention_bench.cu).

FLOPs convention (as attention_bench.cu): forward 4*B*H*T*S*D, halved when
causal; backward 2.5 x forward. Timing: CUDA events around each call,
`--warmup` calls first, median of `--iters`. The backward is timed alone:
out.backward(dout, retain_graph=True) on a graph made once (no forward in
the timed region). One line a (backend, shape):
  RESULT sdpa-<backend> B H T D causal fwd_ms bwd_ms fwd_tflops bwd_tflops
(a backend that refuses a shape prints 'SKIP' with the reason).
"""
import argparse
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = [
    ("sdpa-flash", SDPBackend.FLASH_ATTENTION),
    ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION),
    ("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION),
]


def median_ms(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def bench(backend, B, H, T, D, causal, warmup, iters):
    g = torch.Generator(device="cuda").manual_seed(0)
    mk = lambda: (torch.rand(B, H, T, D, device="cuda", generator=g) * 2 - 1).to(
        torch.bfloat16
    )
    q, k, v, dout = mk(), mk(), mk(), mk()
    for t in (q, k, v):
        t.requires_grad_(True)
    with sdpa_kernel([backend]):
        def fwd():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        fwd_ms = median_ms(fwd, warmup, iters)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def bwd():
            q.grad = k.grad = v.grad = None
            out.backward(dout, retain_graph=True)

        bwd_ms = median_ms(bwd, warmup, iters)
    return fwd_ms, bwd_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    shapes = [(16, 12, 1024, 64, True), (8, 16, 2048, 128, True)]
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"bf16, median of {args.iters} after {args.warmup} warmup")
    for name, backend in BACKENDS:
        for B, H, T, D, causal in shapes:
            try:
                fwd_ms, bwd_ms = bench(backend, B, H, T, D, causal, args.warmup,
                                       args.iters)
            except RuntimeError as e:
                print(f"SKIP {name} {B} {H} {T} {D} {int(causal)}: "
                      f"{str(e).splitlines()[0]}")
                continue
            flops = 4.0 * B * H * T * T * D * (0.5 if causal else 1.0)
            print(f"RESULT {name} {B} {H} {T} {D} {int(causal)} {fwd_ms:.4f} "
                  f"{bwd_ms:.4f} {flops / fwd_ms * 1e-9:.1f} "
                  f"{2.5 * flops / bwd_ms * 1e-9:.1f}", flush=True)


if __name__ == "__main__":
    main()
