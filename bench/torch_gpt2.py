#!/usr/bin/env python3
"""PyTorch reference for the issue-5 benchmark: a GPT-2 124M training step.

The model is the one of samples/gpt2/gpt2_124m.pbtxt (written by
`tcc-models gpt`), in plain PyTorch: 12 layers, width 768, 12 heads, vocab
50304, context 1024, learned positions, pre-norm LayerNorm (eps 1e-5), GELU
(tanh), biases, the output projection tied to the token embedding, no dropout.
Initialization as GPT-2: N(0, 0.02) for linears and embeddings,
N(0, 0.02 / sqrt(2 L)) for the two residual projections of each block, zero
biases, LayerNorm 1 / 0.

One training step on a (B, T) batch of random tokens:
  forward + mean cross-entropy under bf16 autocast (CUDA only; fp32 master
  weights), backward, clip_grad_norm_(1.0), learning rate of the warmup +
  cosine schedule of runtime/include/tcc/step_abi.h, AdamW (fused on CUDA;
  betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices and embeddings only,
  as the sample's no-decay groups bias,norm), zero_grad(set_to_none=True).
Attention is F.scaled_dot_product_attention(is_causal=True).

Modes: eager, and compile (the model under torch.compile; the optimizer and
clipping stay eager). Each mode builds a fresh model, runs --warmup steps
(the first one includes torch.compile's compilation, reported as
first_step_s), then times --steps steps, each between two CUDA events
(wall clock on the CPU), and prints ONE JSON line on stdout:
  ms_per_step      median over the timed steps
  tokens_per_s     B * T / median step time
  peak_mem_bytes   torch.cuda.max_memory_allocated over the timed steps
                   (parameters, gradients, AdamW state and activations)
  mfu              model FLOPs per step / median step time / measured peak
Everything else goes to stderr.

Model FLOPs per step (the PaLM / nanoGPT convention; the harness uses the
same formula for every system so the MFUs compare):
  flops_per_step = B * T * (6 * N + 12 * L * C * T)
  N: parameters excluding the position embedding wpe (a lookup, no
     matmul). Each of the other weights is multiplied once per token in the
     forward (2 FLOPs a multiply-add; the tied wte through the output
     projection) and twice in the backward (input and weight gradients):
     6 N per token. Biases and norms are counted in N too (negligible).
  12 L C T: attention scores q k^T and the weighted sum p v, each
     2 * T * C FLOPs per token and layer forward, times 3 for forward +
     backward. The full T x T matrix is counted, not the causal half (as
     PaLM and nanoGPT do), so this is a convention, not executed FLOPs.
For GPT-2 124M at B=16, T=1024: N = 123,689,472, 855.4 MFLOP per token,
1.4015e13 FLOP per step.

The peak is measured in the same run: an 8192^3 bf16 matmul (random normal
inputs) timed with CUDA events, the median of --peak-iters repeats after 3
warm-ups, 2 * n^3 / t. On the CPU (smoke tests) it is an fp32 matmul of
--peak-size (default 1024) timed with the wall clock.

Feature checks: without F.scaled_dot_product_attention (torch < 2.0) the
attention is written out (mask + softmax); without torch.compile the compile
mode is reported unavailable; without fused AdamW (torch < 2.0, or on the
CPU) AdamW runs unfused. Each such fallback is printed on stderr and named
in the JSON line; --strict turns each into an error (the benchmark run uses
it). --check-attention first checks the SDPA path against the written-out
attention on a small fp32 model (loss and gradients within 1e-4 relative).
The exit status is 0 only when every requested mode ran.

Smoke test (CPU, Debian's torch 1.13):
  python3 bench/torch_gpt2.py --device cpu --mode eager --layers 2 \\
      --width 64 --heads 2 --context 32 --batch 2 --vocab 128 --steps 3 \\
      --warmup 1
"""

import argparse
import contextlib
import datetime
import gc
import inspect
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")
HAVE_COMPILE = hasattr(torch, "compile")
ADAMW_HAS_FUSED = "fused" in inspect.signature(torch.optim.AdamW).parameters

# The training recipe of samples/gpt2/gpt2_124m.pbtxt.
LR, BETAS, ADAM_EPS, WEIGHT_DECAY, GRAD_CLIP = 6e-4, (0.9, 0.95), 1e-8, 0.1, 1.0
WARMUP_STEPS, DECAY_STEPS, MIN_LR = 715, 19073, 6e-5


def log(msg):
    print(f"torch_gpt2: {msg}", file=sys.stderr, flush=True)


def lr_at(step):
    """step_abi.h's warmup + cosine, step 0-based."""
    if step < WARMUP_STEPS:
        return LR * (step + 1) / WARMUP_STEPS
    if step >= DECAY_STEPS:
        return MIN_LR
    r = (step - WARMUP_STEPS) / (DECAY_STEPS - WARMUP_STEPS)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * r)) * (LR - MIN_LR)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg, use_sdpa):
        super().__init__()
        self.heads = cfg.heads
        self.use_sdpa = use_sdpa
        self.c_attn = nn.Linear(cfg.width, 3 * cfg.width)
        self.c_proj = nn.Linear(cfg.width, cfg.width)
        self.c_proj.residual_projection = True
        if not use_sdpa:
            mask = torch.ones(cfg.context, cfg.context, dtype=torch.bool)
            self.register_buffer("future", mask.triu(diagonal=1),
                                 persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        H = self.heads
        q, k, v = self.c_attn(x).split(C, dim=2)
        # (B, T, C) -> (B, H, T, D)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            scores = scores.masked_fill(self.future[:T, :T], float("-inf"))
            y = torch.softmax(scores, dim=-1) @ v            # (B, H, T, D)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.width, 4 * cfg.width)
        self.c_proj = nn.Linear(4 * cfg.width, cfg.width)
        self.c_proj.residual_projection = True

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg, use_sdpa):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.width, eps=1e-5)
        self.attn = CausalSelfAttention(cfg, use_sdpa)
        self.ln_2 = nn.LayerNorm(cfg.width, eps=1e-5)
        self.mlp = Mlp(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    def __init__(self, cfg, use_sdpa):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.width)
        self.wpe = nn.Embedding(cfg.context, cfg.width)
        self.h = nn.ModuleList(Block(cfg, use_sdpa) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.width, eps=1e-5)
        self.lm_head = nn.Linear(cfg.width, cfg.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        # --checkpoint: activation checkpointing, each block's activations
        # recomputed in the backward (torch.utils.checkpoint).
        self.checkpoint_blocks = False
        resid_std = 0.02 / math.sqrt(2 * cfg.layers)
        for m in self.modules():
            if isinstance(m, nn.Linear) and m is not self.lm_head:
                std = resid_std if getattr(m, "residual_projection",
                                           False) else 0.02
                nn.init.normal_(m.weight, mean=0.0, std=std)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, tokens, targets):
        """tokens, targets: (B, T) int64 -> mean cross-entropy (nats)."""
        T = tokens.shape[1]
        pos = torch.arange(T, device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)                  # (B, T, C)
        for block in self.h:
            if self.checkpoint_blocks and self.training:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = self.lm_head(self.ln_f(x))                   # (B, T, V)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(),
                               targets.view(-1))


def num_params(model):
    return sum(p.numel() for p in model.parameters())  # tied counted once


def model_flops_per_step(cfg, n_params):
    n = n_params - cfg.context * cfg.width  # without wpe
    per_token = 6 * n + 12 * cfg.layers * cfg.width * cfg.context
    return per_token * cfg.batch * cfg.context


def make_optimizer(model, device, strict):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY},
              {"params": no_decay, "weight_decay": 0.0}]
    kwargs = dict(lr=lr_at(0), betas=BETAS, eps=ADAM_EPS)
    why = None
    if not ADAMW_HAS_FUSED:
        why = f"torch {torch.__version__} has no fused AdamW"
    elif device.type != "cuda":
        why = "fused AdamW is benchmarked on CUDA only"
    else:
        try:
            return torch.optim.AdamW(groups, fused=True, **kwargs), "fused"
        except (RuntimeError, ValueError) as e:
            why = f"fused AdamW refused: {e}"
    if strict:
        raise RuntimeError(f"--strict: {why}")
    log(f"AdamW runs unfused ({why})")
    return torch.optim.AdamW(groups, **kwargs), f"unfused ({why})"


def measure_matmul_peak(device, size, iters):
    """FLOP/s of a size^3 matmul: bf16 on CUDA (CUDA events), fp32 on CPU."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=dtype, generator=g)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=g)
    for _ in range(3):
        c = a @ b
    times = []
    for _ in range(iters):
        if device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            c = a @ b
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            c = a @ b
            times.append(time.perf_counter() - t0)
    del a, b, c
    t = statistics.median(times)
    return {"dtype": str(dtype).replace("torch.", ""), "size": size,
            "iters": iters, "median_s": t, "flops_per_s": 2 * size**3 / t}


def check_attention(device):
    """Loss and gradients of a small fp32 model with SDPA against the same
    model with the attention written out; returns the worse relative
    difference (an error above 1e-4 means the SDPA path is not the model)."""
    cfg = argparse.Namespace(batch=2, context=64, layers=2, width=64, heads=4,
                             vocab=97)
    torch.manual_seed(0)
    sdpa = Gpt2(cfg, True).to(device)
    manual = Gpt2(cfg, False).to(device)
    manual.load_state_dict(sdpa.state_dict())
    data = torch.randint(0, cfg.vocab, (cfg.batch, cfg.context + 1),
                         device=device)
    tokens, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    losses = []
    for m in (sdpa, manual):
        loss = m(tokens, targets)
        loss.backward()
        losses.append(loss.item())
    worst = abs(losses[0] - losses[1]) / abs(losses[1])
    for (name, a), b in zip(sdpa.named_parameters(), manual.parameters()):
        scale = b.grad.abs().max().item() or 1.0
        worst = max(worst, (a.grad - b.grad).abs().max().item() / scale)
    return worst


class StepTimer:
    """Per-step times: CUDA events on the GPU (read at the end, so timing
    adds no synchronization), perf_counter on the CPU."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.marks = []

    def start(self):
        self.marks.append([self._mark(), None])

    def stop(self):
        self.marks[-1][1] = self._mark()

    def _mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def seconds(self):
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in self.marks]
        return [b - a for a, b in self.marks]


def run_mode(mode, cfg, args, device, env):
    """Builds, warms up and times one mode; returns its JSON record."""
    rec = dict(env, system=f"pytorch-{mode}" + ("+checkpoint" if args.checkpoint else ""),
               mode=mode, checkpoint=args.checkpoint)
    if mode == "compile" and not HAVE_COMPILE:
        rec.update(status="unavailable",
                   error=f"torch {torch.__version__} has no torch.compile "
                         "(needs torch >= 2.0)")
        return rec
    torch.manual_seed(args.seed)
    model = Gpt2(cfg, env["attention"] == "sdpa").to(device)
    model.checkpoint_blocks = args.checkpoint
    n_params = num_params(model)
    flops = model_flops_per_step(cfg, n_params)
    optimizer, opt_kind = make_optimizer(model, device, args.strict)
    step_model = model
    if args.ddp:
        # PyTorch DDP: gradients all-reduced in buckets during the backward
        # (the peer of tcc compile --data-parallel); compiled around DDP, as
        # the PyTorch docs advise (DDPOptimizer splits the graph at buckets).
        step_model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index])
    if mode == "compile":
        kw = {"mode": args.compile_mode} if args.compile_mode else {}
        step_model = torch.compile(step_model, **kw)
    rec.update(params=n_params, flops_per_step=flops,
               optimizer=f"adamw {opt_kind}")

    # A few distinct random batches, made on the device up front: the timed
    # step is the training step alone, no host-to-device copy.
    g = torch.Generator(device=device).manual_seed(args.seed + 1 + env["rank"])
    batches = []
    for _ in range(min(4, args.steps + args.warmup)):
        data = torch.randint(0, cfg.vocab, (cfg.batch, cfg.context + 1),
                             device=device, generator=g)
        batches.append((data[:, :-1].contiguous(), data[:, 1:].contiguous()))
    use_amp = device.type == "cuda"

    def train_step(step):
        tokens, targets = batches[step % len(batches)]
        # No autocast context at all on the CPU: torch 1.13 asserts on a
        # disabled CUDA autocast when it was built without CUDA.
        amp = (torch.autocast(device_type="cuda", dtype=torch.bfloat16)
               if use_amp else contextlib.nullcontext())
        with amp:
            loss = step_model(tokens, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach(), norm.detach()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    losses = []
    t0 = time.perf_counter()
    for step in range(args.warmup):
        losses.append(train_step(step)[0])
        if step == 0:
            sync()
            rec["first_step_s"] = round(time.perf_counter() - t0, 3)
            log(f"{mode}: first step {rec['first_step_s']} s "
                "(includes compilation in compile mode)")
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    timer = StepTimer(device)
    norms = []
    for step in range(args.warmup, args.warmup + args.steps):
        timer.start()
        loss, norm = train_step(step)
        timer.stop()
        losses.append(loss)
        norms.append(norm)
    times = timer.seconds()
    med = statistics.median(times)
    losses = [float(x) for x in losses]
    if not all(math.isfinite(x) for x in losses):
        raise RuntimeError(f"non-finite loss in {mode} mode: {losses}")
    rec.update(
        status="ok",
        steps=args.steps, warmup=args.warmup,
        ms_per_step=round(med * 1e3, 3),
        ms_per_step_mean=round(statistics.mean(times) * 1e3, 3),
        ms_per_step_min=round(min(times) * 1e3, 3),
        ms_per_step_max=round(max(times) * 1e3, 3),
        # every rank's tokens: the global batch
        tokens_per_s=round(cfg.batch * cfg.context * env["world_size"] / med, 1),
        model_tflops_per_s=round(flops / med / 1e12, 3),
        mfu=round(flops / med / env["matmul_peak"]["flops_per_s"], 4),
        loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4),
        grad_norm_last=round(float(norms[-1]), 4))
    if device.type == "cuda":
        rec["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
        rec["peak_mem_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
        rec["peak_mem_gib"] = round(rec["peak_mem_bytes"] / 2**30, 3)
    else:
        rec["peak_mem_bytes"] = None  # no allocator statistics on the CPU
    del model, step_model, optimizer, batches
    return rec


def main(argv=None):
    p = argparse.ArgumentParser(
        description="PyTorch GPT-2 124M training-step benchmark "
                    "(see the module docstring and bench/README.md)")
    p.add_argument("--mode", choices=["eager", "compile", "both"],
                   default="both", help="both: eager, then compile")
    p.add_argument("--device", default=None,
                   help="cuda or cpu (default: cuda when available)")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5,
                   help="untimed steps first (>= 1)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--peak-size", type=int, default=None,
                   help="n of the n^3 peak matmul (default 8192 on CUDA, "
                        "1024 on the CPU)")
    p.add_argument("--peak-iters", type=int, default=10)
    p.add_argument("--compile-mode", default=None,
                   help="torch.compile mode (default: torch's default)")
    p.add_argument("--check-attention", action="store_true",
                   help="first compare a small fp32 model's loss and "
                        "gradients with SDPA and with the attention written "
                        "out; exit 2 above 1e-4 relative")
    p.add_argument("--checkpoint", action="store_true",
                   help="activation checkpointing: every transformer block's "
                        "activations recomputed in the backward "
                        "(torch.utils.checkpoint, non-reentrant)")
    p.add_argument("--ddp", action="store_true",
                   help="data parallel under torchrun (RANK, WORLD_SIZE, "
                        "LOCAL_RANK): DistributedDataParallel over NCCL, "
                        "--batch per GPU, tokens_per_s counting every rank's "
                        "tokens; rank 0 alone prints")
    p.add_argument("--strict", action="store_true",
                   help="a missing SDPA or fused AdamW is an error, "
                        "not a fallback")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 1:
        p.error("--steps and --warmup must be >= 1")
    if args.width % args.heads:
        p.error(f"--heads {args.heads} does not divide --width {args.width}")
    for name in ("batch", "context", "layers", "width", "heads", "vocab"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")

    rank, world = 0, 1
    if args.ddp:
        if "LOCAL_RANK" not in os.environ:
            p.error("--ddp runs under torchrun (LOCAL_RANK is not set)")
        import torch.distributed as dist
        dist.init_process_group("nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
        args.device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    device = torch.device(args.device or
                          ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        log("error: --device cuda but torch.cuda.is_available() is False")
        return 2
    if device.type not in ("cuda", "cpu"):
        p.error(f"--device {device.type}: only cuda and cpu")
    if not HAVE_SDPA and args.strict:
        log(f"error: --strict: torch {torch.__version__} has no "
            "F.scaled_dot_product_attention")
        return 2
    if not HAVE_SDPA:
        log(f"torch {torch.__version__} has no F.scaled_dot_product_attention:"
            " attention is written out (mask + softmax)")
    attention_check = "not run"
    if args.check_attention and not HAVE_SDPA:
        attention_check = "skipped (no SDPA to check)"
    elif args.check_attention:
        # Before TF32 is allowed: the check compares in full fp32.
        diff = check_attention(device)
        attention_check = f"sdpa vs written-out, fp32: rel diff {diff:.2e}"
        log(attention_check)
        if not diff <= 1e-4:
            log("error: SDPA attention differs from the written-out one")
            return 2
    if device.type == "cuda":
        # Only fp32 matmuls outside autocast are affected (none in the step).
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    cfg = argparse.Namespace(batch=args.batch, context=args.context,
                             layers=args.layers, width=args.width,
                             heads=args.heads, vocab=args.vocab)
    peak_size = args.peak_size or (8192 if device.type == "cuda" else 1024)
    peak = measure_matmul_peak(device, peak_size, args.peak_iters)
    log(f"matmul peak ({peak['dtype']} {peak_size}^3): "
        f"{peak['flops_per_s'] / 1e12:.1f} TFLOP/s")
    env = {
        "date": datetime.datetime.now(datetime.timezone.utc)
                .isoformat(timespec="seconds"),
        "device": (torch.cuda.get_device_name(device)
                   if device.type == "cuda" else
                   f"cpu ({platform.processor() or platform.machine()}, "
                   f"{torch.get_num_threads()} threads)"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if device.type == "cuda" else None,
        "config": vars(cfg),
        "tokens_per_step": cfg.batch * cfg.context,
        "precision": ("bf16 autocast, fp32 weights" if device.type == "cuda"
                      else "fp32"),
        "attention": "sdpa" if HAVE_SDPA else "manual",
        "attention_check": attention_check,
        "grad_clip": GRAD_CLIP,
        "matmul_peak": peak,
        "flops_formula": "B*T*(6*N + 12*L*C*T), N = params without wpe",
        "rank": rank,
        "world_size": world,
    }

    modes = ["eager", "compile"] if args.mode == "both" else [args.mode]
    failed = False
    for mode in modes:
        try:
            rec = run_mode(mode, cfg, args, device, env)
        except Exception as e:  # one mode failing must not lose the others
            traceback.print_exc(file=sys.stderr)
            rec = dict(env, system=f"pytorch-{mode}", mode=mode,
                       status="error", error=f"{type(e).__name__}: {e}")
        if rec["status"] != "ok":
            failed = True
            log(f"{mode}: {rec['status']}: {rec['error']}")
        if args.ddp:
            rec["system"] += "+ddp"
        if rank == 0:
            print(json.dumps(rec), flush=True)
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if mode == "compile" and HAVE_COMPILE:
            torch._dynamo.reset()
    if args.ddp:
        torch.distributed.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
