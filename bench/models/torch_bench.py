#!/usr/bin/env python3
"""PyTorch's training step for one model of bench/models (torch_models.py),
eager or under torch.compile, timed; ONE JSON line on stdout, the rest on
stderr.

The step: forward and mean cross-entropy (in the compiled region with
--mode compile: a wrapper module returns the loss), backward, the Spec's
gradient clipping (clip_grad_norm_), optimizer.step(), zero_grad(
set_to_none=True). On CUDA: bf16 autocast (fp32 master weights),
channels_last for the conv nets (model and images), AdamW(fused=True) or
SGD(foreach=True), a few random batches made on the GPU up front (the timed
step has no host-to-device copy), each step timed between two CUDA events.
On the CPU: fp32, no autocast, torch.set_num_threads(--threads), the wall
clock. A missing feature (fused AdamW, foreach, torch.compile) is a fallback
named in the record, or with --strict an error.

    torch_bench.py --model NAME --mode eager|compile [--config gpu|cpu]
                   [--device cuda|cpu] [--steps 20] [--warmup 5] [--threads N]
    torch_bench.py --model NAME --config cpu --export-init W.safetensors

Record fields: model, system (pytorch-eager / pytorch-compile), status (ok,
error, unavailable), error, ms_per_step (median of the timed steps;
_mean/_min/_max), items_per_s (images or tokens per second at the median),
unit, peak_mem_bytes / peak_mem_gib (torch.cuda.max_memory_allocated over
the timed steps, after reset_peak_memory_stats: weights, gradients,
optimizer state, activations), first_step_s (compilation included),
loss_first / loss_last, params, threads, and what ran (device, torch,
precision, optimizer, channels_last, attention).

--export-init writes the module's initial weights (seed 0) as trun
--init-from reads them: tcc.export_torch_weights' layout (named_parameters,
tied tensors once; batch norm's running statistics), through
python/tcc/safetensors.py loaded by path (numpy only, no protobuf needed).
"""
import argparse
import contextlib
import datetime
import importlib.util
import inspect
import json
import math
import os
import statistics
import sys
import time
import traceback

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import torch_models as M  # noqa: E402


def log(msg):
    print(f"torch_bench: {msg}", file=sys.stderr, flush=True)


def export_init(module, path):
    spec = importlib.util.spec_from_file_location(
        "tcc_safetensors", os.path.join(here, "..", "..", "python", "tcc", "safetensors.py"))
    st = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(st)
    tensors = {n: p.detach().cpu().contiguous().numpy() for n, p in module.named_parameters()}
    for prefix, m in module.named_modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats:
            for leaf in ("running_mean", "running_var", "num_batches_tracked"):
                tensors[f"{prefix}.{leaf}"] = getattr(m, leaf).detach().cpu().numpy()
    st.save_file(tensors, path, metadata={"producer": "bench/models/torch_bench.py",
                                          "model": type(module).__name__})


class WithLoss(torch.nn.Module):
    """The model and its loss as one module, so torch.compile sees the
    cross-entropy too (as tcc's step has it)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        return M.loss_fn(self.model(x), y)


def make_optimizer(spec, model, device, strict):
    """The Spec's optimizer, fused (AdamW) or foreach (SGD) on CUDA."""
    probe = spec.optimizer(model)
    kind = type(probe).__name__
    params = inspect.signature(type(probe)).parameters
    want = "fused" if kind == "AdamW" else "foreach"
    if device.type != "cuda":
        return probe, f"{kind.lower()} (default implementation)"
    if want in params:
        try:
            return spec.optimizer(model, **{want: True}), f"{kind.lower()} {want}"
        except (RuntimeError, ValueError, TypeError) as e:
            why = f"{want}=True refused: {e}"
    else:
        why = f"torch {torch.__version__} has no {kind}({want}=)"
    if strict:
        raise RuntimeError(f"--strict: {why}")
    log(f"{kind} runs without {want} ({why})")
    return probe, f"{kind.lower()} ({why})"


def run(spec, cfg, a, device):
    rec = {}
    cuda = device.type == "cuda"
    model = M.build(spec, cfg).to(device)
    rec["params"] = M.param_count(model)
    channels_last = cuda and spec.channels_last
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer, rec["optimizer"] = make_optimizer(spec, model, device, a.strict)
    step_model = WithLoss(model)
    if a.mode == "compile":
        kw = {"mode": a.compile_mode} if a.compile_mode else {}
        step_model = torch.compile(step_model, **kw)
    trainable = [p for p in model.parameters() if p.requires_grad]
    clip_kw = {}
    if "foreach" in inspect.signature(torch.nn.utils.clip_grad_norm_).parameters and cuda:
        clip_kw["foreach"] = True

    g = torch.Generator(device=device).manual_seed(1)
    batches = []
    for _ in range(min(4, a.steps + a.warmup)):
        (x,), y = spec.example(cfg, device=device, generator=g)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        batches.append((x, y))
    rec.update(channels_last=channels_last,
               attention="sdpa" if M.HAVE_SDPA else "written out",
               precision="bf16 autocast" if cuda else "fp32")

    def step(i):
        x, y = batches[i % len(batches)]
        # No autocast context on the CPU (fp32; torch 1.13 built without
        # CUDA asserts on a disabled CUDA autocast).
        amp = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()
        with amp:
            loss = step_model(x, y)
        loss.backward()
        if spec.grad_clip:
            torch.nn.utils.clip_grad_norm_(trainable, spec.grad_clip, **clip_kw)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    losses = []
    t0 = time.perf_counter()
    for i in range(a.warmup):
        losses.append(step(i))
        if i == 0:
            sync()
            rec["first_step_s"] = round(time.perf_counter() - t0, 3)
            log(f"{spec.name} {a.mode}: first step {rec['first_step_s']} s")
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for i in range(a.warmup, a.warmup + a.steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            losses.append(step(i))
            end.record()
            times.append((start, end))
        else:
            t = time.perf_counter()
            losses.append(step(i))
            times.append(time.perf_counter() - t)
    sync()
    if cuda:
        times = [s.elapsed_time(e) / 1e3 for s, e in times]
    losses = [float(v) for v in losses]
    if not all(math.isfinite(v) for v in losses):
        raise RuntimeError(f"non-finite loss: {losses}")
    med = statistics.median(times)
    rec.update(status="ok", steps=a.steps, warmup=a.warmup,
               ms_per_step=round(med * 1e3, 3),
               ms_per_step_mean=round(statistics.mean(times) * 1e3, 3),
               ms_per_step_min=round(min(times) * 1e3, 3),
               ms_per_step_max=round(max(times) * 1e3, 3),
               items_per_s=round(spec.items_per_step(cfg) / med, 1),
               loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4))
    if cuda:
        rec["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
        rec["peak_mem_gib"] = round(rec["peak_mem_bytes"] / 2**30, 3)
        rec["peak_mem_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
    return rec


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, choices=list(M.MODELS))
    p.add_argument("--mode", choices=("eager", "compile"), default="eager")
    p.add_argument("--config", choices=("gpu", "cpu"), default=None,
                   help="default: gpu on cuda, cpu on the CPU")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=0,
                   help="CPU: torch.set_num_threads (0: leave torch's default)")
    p.add_argument("--compile-mode", default=None)
    p.add_argument("--strict", action="store_true",
                   help="a missing fused/foreach optimizer is an error, not a fallback")
    p.add_argument("--scenario", default="", help="a label copied into the record")
    p.add_argument("--round", type=int, default=0, help="copied into the record")
    p.add_argument("--export-init", metavar="PATH",
                   help="write the initial weights for trun --init-from and exit")
    a = p.parse_args()
    spec = M.MODELS[a.model]
    if a.export_init:
        export_init(M.build(spec, spec.config(a.config or "gpu")), a.export_init)
        return 0
    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cfg = spec.config(a.config or ("gpu" if device.type == "cuda" else "cpu"))
    if a.threads:
        torch.set_num_threads(a.threads)
    rec = dict(model=a.model, system=f"pytorch-{a.mode}", mode=a.mode, scenario=a.scenario,
               round=a.round,
               config=cfg, unit="tokens" if spec.kind == "tokens" else "images",
               items_per_step=spec.items_per_step(cfg), threads=torch.get_num_threads(),
               device=torch.cuda.get_device_name(device) if device.type == "cuda"
               else "cpu", torch=torch.__version__,
               date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    if a.mode == "compile" and not hasattr(torch, "compile"):
        rec.update(status="unavailable",
                   error=f"torch {torch.__version__} has no torch.compile")
    else:
        try:
            rec.update(run(spec, cfg, a, device))
        except Exception as e:  # one line in the table, the trace on stderr
            traceback.print_exc()
            msg = str(e).strip().splitlines()
            rec.update(status="error",
                       error=f"{type(e).__name__}: {msg[0] if msg else ''}"[:500])
    print(json.dumps(rec), flush=True)
    return 0 if rec["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
