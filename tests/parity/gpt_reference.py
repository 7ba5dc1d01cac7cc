"""The GPT of models/Gpt.cpp, written independently in PyTorch (Debian's
1.13 on the CPU; 2.x on the GPU machine).

Same function as the model file `tcc-models gpt` writes: same parameter
names and layouts (linear weights stored (in, out), as GPT-2's Conv1D), the
same op order and formulas (GELU tanh approximation, LayerNorm/RMSNorm eps,
causal softmax attention scaled after q k^T, rotary tables from
exp(i * -2 ln(theta) / D), tied output embedding), and the same training
recipe: torch.optim.AdamW with weight decay only on the decayed group,
torch.nn.utils.clip_grad_norm_, and the warmup + cosine schedule of
runtime/include/tcc/step_abi.h. Dropout is not modelled (parity runs use 0).

The parameters live on the device they are made on (make_params(...,
device)); train(..., autocast_dtype=torch.bfloat16) runs each forward under
torch.autocast on that device (fp32 master weights, products in bf16,
softmax / norms / cross-entropy as autocast decides), the PyTorch AMP
recipe that tcc's --precision bf16 is compared with (tests/gpu/).
"""

import contextlib
import dataclasses
import math

import torch
import torch.nn.functional as F


@dataclasses.dataclass
class GptConfig:
    """Mirrors tcc::models::GptOptions and the tcc-models gpt flags."""
    vocab: int = 256
    context: int = 128
    layers: int = 4
    width: int = 128
    heads: int = 4
    norm: str = "layer"          # layer | rms
    norm_eps: float = 0.0        # 0: 1e-5 (layer) / 1e-6 (rms)
    mlp: str = "gelu"            # gelu | swiglu
    mlp_hidden: int = 0          # 0: 4C (gelu) / ceil(8C/3) rounded up to 8
    positions: str = "learned"   # learned | rope
    rope_theta: float = 10000.0
    tied: bool = True
    bias: bool = True
    batch: int = 32
    micro_batches: int = 1
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8
    weight_decay: float = 0.1
    no_decay: tuple = ("bias", "norm")  # groups: bias, norm, embedding
    grad_clip: float = 1.0
    warmup: int = 0
    decay_steps: int = 0
    min_lr: float = -1.0         # < 0: lr / 10

    def tcc_models_args(self):
        """The tcc-models gpt flags that build the same model."""
        args = ["--vocab", self.vocab, "--context", self.context,
                "--layers", self.layers, "--width", self.width,
                "--heads", self.heads, "--norm", self.norm, "--mlp", self.mlp,
                "--positions", self.positions, "--rope-theta", self.rope_theta,
                "--batch", self.batch, "--micro-batches", self.micro_batches,
                "--lr", self.lr, "--beta1", self.beta1, "--beta2", self.beta2,
                "--eps", self.eps, "--weight-decay", self.weight_decay,
                "--no-decay", ",".join(self.no_decay) or "none",
                "--grad-clip", self.grad_clip, "--warmup", self.warmup,
                "--decay-steps", self.decay_steps]
        if self.norm_eps > 0:
            args += ["--norm-eps", self.norm_eps]
        if self.mlp_hidden > 0:
            args += ["--mlp-hidden", self.mlp_hidden]
        if self.min_lr >= 0:
            args += ["--min-lr", self.min_lr]
        if not self.tied:
            args.append("--untied")
        if not self.bias:
            args.append("--no-bias")
        return [repr(a) if isinstance(a, float) else str(a) for a in args]

    @property
    def head_size(self):
        return self.width // self.heads

    @property
    def hidden(self):
        if self.mlp_hidden > 0:
            return self.mlp_hidden
        if self.mlp == "gelu":
            return 4 * self.width
        return ((8 * self.width + 2) // 3 + 7) // 8 * 8

    @property
    def eps_norm(self):
        if self.norm_eps > 0:
            return self.norm_eps
        return 1e-5 if self.norm == "layer" else 1e-6

    @property
    def floor_lr(self):
        return self.min_lr if self.min_lr >= 0 else self.lr / 10


def param_specs(cfg):
    """(name, shape, group) of every parameter; group is weight, bias, norm
    or embedding (the weight-decay groups)."""
    C, V, T = cfg.width, cfg.vocab, cfg.context
    specs = [("wte", (V, C), "embedding")]
    if cfg.positions == "learned":
        specs.append(("wpe", (T, C), "embedding"))

    def linear(name, n_in, n_out):
        specs.append((name + ".weight", (n_in, n_out), "weight"))
        if cfg.bias:
            specs.append((name + ".bias", (n_out,), "bias"))

    def norm(name):
        specs.append((name + ".weight", (C,), "norm"))
        if cfg.norm == "layer" and cfg.bias:
            specs.append((name + ".bias", (C,), "norm"))

    for layer in range(cfg.layers):
        p = f"h.{layer}"
        norm(p + ".ln_1")
        linear(p + ".attn.c_attn", C, 3 * C)
        linear(p + ".attn.c_proj", C, C)
        norm(p + ".ln_2")
        if cfg.mlp == "gelu":
            linear(p + ".mlp.c_fc", C, cfg.hidden)
        else:
            linear(p + ".mlp.w_gate", C, cfg.hidden)
            linear(p + ".mlp.w_up", C, cfg.hidden)
        linear(p + ".mlp.c_proj", cfg.hidden, C)
    norm("ln_f")
    if not cfg.tied:
        specs.append(("lm_head.weight", (C, V), "weight"))
    return specs


def _norm(cfg, P, name, x):
    w = P[name + ".weight"]
    if cfg.norm == "layer":
        b = P.get(name + ".bias")
        return F.layer_norm(x, (cfg.width,), w, b, cfg.eps_norm)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.eps_norm) * w


def _linear(cfg, P, name, x):
    y = x @ P[name + ".weight"]
    if cfg.bias:
        y = y + P[name + ".bias"]
    return y


def rope_tables(cfg, device="cpu", dtype=torch.float32):
    """cos, sin (T, D): angle[t, i] = t * exp(i * (-2 ln(theta) / D))."""
    T, D = cfg.context, cfg.head_size
    half = D // 2
    pos = torch.arange(T, dtype=dtype, device=device)[:, None].expand(T, half)
    idx = torch.arange(half, dtype=dtype, device=device)[None, :].expand(T, half)
    k = torch.tensor(-2.0 * math.log(cfg.rope_theta) / D, dtype=dtype,
                     device=device)
    angle = pos * torch.exp(idx * k)
    c, s = torch.cos(angle), torch.sin(angle)
    return torch.cat([c, c], dim=1), torch.cat([s, s], dim=1)


def _rope(x, cos, sin):
    # x is (B, H, T, D); rotate_half(x) = [-x2, x1]
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def _attention(cfg, P, name, x, rope):
    B, T, C = x.shape
    H, D = cfg.heads, cfg.head_size
    qkv = _linear(cfg, P, name + ".c_attn", x)              # (B, T, 3C)
    q, k, v = qkv.split(C, dim=2)
    q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in (q, k, v))
    if rope is not None:
        q, k = _rope(q, *rope), _rope(k, *rope)
    scores = (q @ k.transpose(-2, -1)) * torch.tensor(1.0 / math.sqrt(D),
                                                      device=x.device)
    mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))         # (B, H, T, T)
    y = torch.softmax(scores, dim=-1) @ v                    # (B, H, T, D)
    y = y.transpose(1, 2).reshape(B, T, C)
    return _linear(cfg, P, name + ".c_proj", y)


def _mlp(cfg, P, name, x):
    if cfg.mlp == "gelu":
        h = F.gelu(_linear(cfg, P, name + ".c_fc", x), approximate="tanh")
    else:
        h = F.silu(_linear(cfg, P, name + ".w_gate", x)) * \
            _linear(cfg, P, name + ".w_up", x)
    return _linear(cfg, P, name + ".c_proj", h)


def forward(cfg, P, tokens, targets):
    """tokens, targets: (B, T) int64. Returns (loss, logits (B, T, V))."""
    x = F.embedding(tokens, P["wte"])                        # (B, T, C)
    rope = None
    if cfg.positions == "learned":
        x = x + P["wpe"]
    else:
        rope = rope_tables(cfg, tokens.device, P["wte"].dtype)
    for layer in range(cfg.layers):
        p = f"h.{layer}"
        x = x + _attention(cfg, P, p + ".attn", _norm(cfg, P, p + ".ln_1", x), rope)
        x = x + _mlp(cfg, P, p + ".mlp", _norm(cfg, P, p + ".ln_2", x))
    x = _norm(cfg, P, "ln_f", x)
    logits = x @ (P["wte"].t() if cfg.tied else P["lm_head.weight"])
    loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1))
    return loss, logits


def learning_rate(cfg, step):
    """The schedule of step_abi.h (TCC_LR_WARMUP_COSINE / CONSTANT)."""
    if cfg.decay_steps <= 0:
        return cfg.lr
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    if step >= cfg.decay_steps:
        return cfg.floor_lr
    r = (step - cfg.warmup) / (cfg.decay_steps - cfg.warmup)
    return cfg.floor_lr + 0.5 * (1 + math.cos(math.pi * r)) * (cfg.lr - cfg.floor_lr)


def make_params(cfg, weights, device="cpu", dtype=torch.float32):
    """weights: name -> float32 numpy array. Returns name -> leaf tensor
    (`dtype`: float32, or float64 for the exact reference; on `device`)."""
    names = {name for name, _, _ in param_specs(cfg)}
    if names != set(weights):
        raise ValueError(f"parameter names differ: only in the reference "
                         f"{sorted(names - set(weights))}, only in the file "
                         f"{sorted(set(weights) - names)}")
    P = {}
    for name, shape, _ in param_specs(cfg):
        w = weights[name]
        if tuple(w.shape) != tuple(shape):
            raise ValueError(f"{name}: shape {w.shape}, expected {shape}")
        P[name] = torch.tensor(w, dtype=dtype, device=device,
                               requires_grad=True)
    return P


def loss_and_grads(cfg, P, tokens, targets):
    """One step's loss and gradients (mean over micro-batches, like tcc)."""
    for p in P.values():
        p.grad = None
    K = cfg.micro_batches
    total = 0.0
    for mb_tokens, mb_targets in zip(tokens.chunk(K), targets.chunk(K)):
        loss, _ = forward(cfg, P, mb_tokens, mb_targets)
        (loss / K).backward()
        total += loss.item() / K
    return total, {name: p.grad.detach().clone() for name, p in P.items()}


def _autocast(device, dtype):
    """torch.autocast on `device` to `dtype`, or nothing when dtype is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def train(cfg, P, batches, autocast_dtype=None, on_step=None):
    """AdamW on `batches` [(tokens, targets)], one step each, on the device
    of the parameters (batches are moved there). autocast_dtype: run each
    forward under torch.autocast to this type (e.g. torch.bfloat16); the
    backward, clipping and AdamW stay outside it, on fp32 master weights, as
    in PyTorch's AMP recipe. on_step(step, loss, grad_norm), if given, is
    called after each step (1-based). Returns the per-step losses (before
    each update) and the gradient norms."""
    groups = {g: [] for g in ("decay", "no_decay")}
    for name, _, group in param_specs(cfg):
        groups["no_decay" if group in cfg.no_decay else "decay"].append(P[name])
    opt = torch.optim.AdamW(
        [{"params": groups["decay"], "weight_decay": cfg.weight_decay},
         {"params": groups["no_decay"], "weight_decay": 0.0}],
        lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps)
    params = [P[name] for name, _, _ in param_specs(cfg)]
    device = params[0].device
    losses, norms = [], []
    for step, (tokens, targets) in enumerate(batches):
        tokens, targets = tokens.to(device), targets.to(device)
        for group in opt.param_groups:
            group["lr"] = learning_rate(cfg, step)
        opt.zero_grad(set_to_none=True)
        K = cfg.micro_batches
        total = 0.0
        for mb_tokens, mb_targets in zip(tokens.chunk(K), targets.chunk(K)):
            with _autocast(device, autocast_dtype):
                loss, _ = forward(cfg, P, mb_tokens, mb_targets)
            (loss / K).backward()
            total += loss.item() / K
        if cfg.grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        else:
            norm = torch.norm(torch.stack([p.grad.norm() for p in params]))
        opt.step()
        losses.append(total)
        norms.append(norm.item())
        if on_step is not None:
            on_step(step + 1, total, norms[-1])
    return losses, norms
