#!/usr/bin/env python3
"""PyTorch's side of issue 34's parameter-sharding benchmark: the same
LLaMA-style decoder as bench/fsdp/prepare.py (its OUT/meta.json config), on
N GPUs under torchrun, with FSDP2 (fully_shard on every block, then on the
root; parameters resharded after the forward), bf16 parameters in the
products (MixedPrecisionPolicy), AdamW (fused if it takes DTensors, else
foreach) with nanoGPT's groups, gradient clipping at 1.0, and optionally
torch.compile on each block (torchtitan's recipe).

    torchrun --standalone --nproc_per_node 2 fsdp_bench.py META.json
             [--compile] [--reduce-dtype f32|bf16] [--steps 20] [--warmup 5]

Rank 0 prints ONE JSON line: ms_per_step (median of the timed steps,
between CUDA events), tokens_per_s (all ranks), peak_mem_gib per rank
(torch.cuda.max_memory_allocated over the timed steps), first_step_s,
loss_first / loss_last, what ran.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "models"))
import torch_models as M  # noqa: E402

try:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
except ImportError:  # torch 2.4 / 2.5
    from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("meta")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--reduce-dtype", choices=("f32", "bf16"), default="f32")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    cfg = json.load(open(a.meta))["config"]

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)

    torch.manual_seed(0)
    with device:
        model = M.Llama(vocab=cfg["vocab"], context=cfg["context"], layers=cfg["layers"],
                        dim=cfg["dim"], heads=cfg["heads"], kv_heads=cfg["kv_heads"],
                        hidden=cfg["hidden"])
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                              reduce_dtype=torch.float32 if a.reduce_dtype == "f32"
                              else torch.bfloat16)
    for i, block in enumerate(model.layers):
        if a.compile:
            block = torch.compile(block)
            model.layers[i] = block
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    try:
        optimizer, opt_kind = M._adamw(model, fused=True), "adamw fused"
    except (RuntimeError, TypeError, ValueError) as e:
        optimizer, opt_kind = M._adamw(model, foreach=True), "adamw foreach (fused: %s)" % e
    trainable = [p for p in model.parameters() if p.requires_grad]

    g = torch.Generator(device=device).manual_seed(1 + rank)
    B, T, V = cfg["batch"], cfg["context"], cfg["vocab"]
    batches = []
    for _ in range(4):
        data = torch.randint(0, V, (B, T + 1), generator=g, device=device)
        batches.append((data[:, :-1].contiguous(), data[:, 1:].contiguous()))

    def step(i):
        x, y = batches[i % len(batches)]
        loss = M.loss_fn(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    losses = []
    t0 = time.perf_counter()
    for i in range(a.warmup):
        losses.append(step(i))
        if i == 0:
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    events = []
    for i in range(a.warmup, a.warmup + a.steps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        losses.append(step(i))
        e.record()
        events.append((s, e))
    torch.cuda.synchronize()
    ms = [s.elapsed_time(e) for s, e in events]
    peak = torch.cuda.max_memory_allocated(device)
    peaks = [None] * world
    dist.all_gather_object(peaks, peak)
    med = statistics.median(ms)
    if rank == 0:
        losses = [float(v) for v in losses]
        print(json.dumps(dict(
            system="pytorch-fsdp2" + ("+compile" if a.compile else ""), ranks=world,
            reduce_dtype=a.reduce_dtype, params=params, config=cfg, optimizer=opt_kind,
            torch=torch.__version__, device=torch.cuda.get_device_name(device),
            date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            ms_per_step=round(med, 3), ms_min=round(min(ms), 3), ms_max=round(max(ms), 3),
            tokens_per_s=round(world * B * T / (med / 1e3)),
            peak_mem_gib=[round(x / 2**30, 3) for x in peaks], first_step_s=round(first, 2),
            loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4))), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
