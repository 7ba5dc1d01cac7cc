"""tcc-models' builders written with tcc.nn: `gpt(...)` and `mlp(...)` take
the options of `tcc-models gpt` / `tcc-models mlp` (as keywords, dashes as
underscores) and return the tcc.Model; its message equals the file the C++
builder writes for the same options (tests/python/models_equal_test.py).

    m = tcc.models.gpt(layers=2, positions="rope", norm="rms", mlp="swiglu")
    m.save("gpt.pbtxt")
"""

import math
from typing import Optional, Sequence

from tcc import nn, ops
from tcc.model import (AdamW, Model, SGD, TccError, WarmupCosine, normal)

__all__ = ["GPT", "Block", "GptMlp", "MLP", "gpt", "mlp", "gpt_mlp_hidden"]


def _norm(kind: str, width: int, eps: float, bias: bool) -> nn.Module:
    if kind == "layer":
        return nn.LayerNorm(width, eps or 1e-5, bias=bias)
    return nn.RMSNorm(width, eps or 1e-6)


def gpt_mlp_hidden(width: int, mlp: str = "gelu", mlp_hidden: int = 0) -> int:
    """4C for gelu, 8C/3 rounded up to a multiple of 8 for swiglu."""
    if mlp_hidden > 0:
        return mlp_hidden
    if mlp == "gelu":
        return 4 * width
    return ((8 * width + 2) // 3 + 7) // 8 * 8


class GptMlp(nn.Module):
    """c_fc -> tanh GELU -> c_proj, or SwiGLU: silu(w_gate x) * w_up x."""

    def __init__(self, width, hidden, kind="gelu", bias=True, dropout=0.0,
                 proj_init=None):
        super().__init__()
        self.kind = kind
        if kind == "gelu":
            self.c_fc = nn.Conv1D(width, hidden, bias=bias)
            self.gelu = nn.GELU("tanh")
        else:
            self.w_gate = nn.Conv1D(width, hidden, bias=bias)
            self.w_up = nn.Conv1D(width, hidden, bias=bias)
            self.silu = nn.SiLU()
        self.c_proj = nn.Conv1D(hidden, width, bias=bias, init=proj_init)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        if self.kind == "gelu":
            h = self.gelu(self.c_fc(x))
        else:
            gate, up = self.w_gate(x), self.w_up(x)
            h = ops.mul(self.silu(gate), up, name=self.node_name("swiglu"))
        return self.dropout(self.c_proj(h))


class Block(nn.Module):
    """x += attn(ln_1(x)); x += mlp(ln_2(x))."""

    def __init__(self, width, heads, hidden, norm="layer", norm_eps=0.0,
                 mlp="gelu", bias=True, dropout=0.0, proj_init=None):
        super().__init__()
        self.ln_1 = _norm(norm, width, norm_eps, bias)
        self.attn = nn.CausalSelfAttention(width, heads, bias=bias,
                                           dropout=dropout,
                                           init=normal(0.02),
                                           proj_init=proj_init)
        self.ln_2 = _norm(norm, width, norm_eps, bias)
        self.mlp = GptMlp(width, hidden, mlp, bias, dropout, proj_init)

    def forward(self, x, rope=None):
        x = ops.add(x, self.attn(self.ln_1(x), rope),
                    name=self.node_name("attn_residual"))
        return ops.add(x, self.mlp(self.ln_2(x)),
                       name=self.node_name("mlp_residual"))


class GPT(nn.Module):
    """tokens (B, T) -> logits (B, T, V); models/Gpt.h's layout: wte, wpe
    (learned positions) or rotary tables, h.0 .. h.{L-1}, ln_f, and
    lm_head.weight when untied. Init like nanoGPT: normal(0.02), residual
    projections normal(0.02 / sqrt(2 L))."""

    def __init__(self, vocab=256, context=128, layers=4, width=128, heads=4,
                 norm="layer", norm_eps=0.0, mlp="gelu", mlp_hidden=0,
                 positions="learned", rope_theta=10000.0, tied=True,
                 bias=True, dropout=0.0):
        super().__init__()
        self.positions, self.tied = positions, tied
        self.context, self.head_size = context, width // heads
        self.rope_theta = rope_theta
        self.wte = nn.Parameter((vocab, width), normal(0.02))
        if positions == "learned":
            self.wpe = nn.Parameter((context, width), normal(0.02))
        self.emb_dropout = nn.Dropout(dropout)
        proj = normal(0.02 / math.sqrt(2.0 * layers))
        hidden = gpt_mlp_hidden(width, mlp, mlp_hidden)
        self.h = nn.ModuleList([
            Block(width, heads, hidden, norm, norm_eps, mlp, bias, dropout,
                  proj) for _ in range(layers)])
        self.ln_f = _norm(norm, width, norm_eps, bias)
        if not tied:
            self.lm_head = nn.Conv1D(width, vocab, bias=False)

    def forward(self, tokens):
        m = tokens.model
        x = ops.embedding(self.wte, tokens, name=self.node_name("tok_emb"))
        rope = None
        if self.positions == "learned":
            x = ops.add(x, self.wpe, name=self.node_name("emb"))
        else:
            with m.scope(self.node_name("rope"), absolute=True):
                rope = nn.rotary_tables(m, self.context, self.head_size,
                                        self.rope_theta)
        x = self.emb_dropout(x)
        for block in self.h:
            x = block(x, rope)
        x = self.ln_f(x)
        if self.tied:
            return ops.matmul(x, self.wte, transpose_b=True,
                              name=self.node_name("logits"))
        return ops.matmul(x, self.lm_head.weight, name=self.node_name("logits"))


def _positive(**values):
    for k, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise TccError(f"{k} must be a positive integer, got {v!r}")


def _check_gpt(o: dict):
    """validateGptOptions (models/Gpt.cpp), as TccErrors."""
    _positive(vocab=o["vocab"], context=o["context"], layers=o["layers"],
              width=o["width"], heads=o["heads"], batch=o["batch"],
              micro_batches=o["micro_batches"])
    for key, allowed in (("norm", ("layer", "rms")), ("mlp", ("gelu", "swiglu")),
                         ("positions", ("learned", "rope"))):
        if o[key] not in allowed:
            raise TccError(f"{key} must be {' or '.join(allowed)}, got "
                           f"{o[key]!r}")
    checks = [
        (o["vocab"] <= 65536, f"vocab {o['vocab']} is larger than token "
         "shards can hold (65536)"),
        (o["width"] % o["heads"] == 0, f"width {o['width']} does not divide "
         f"into {o['heads']} heads"),
        (o["positions"] != "rope" or (o["width"] // o["heads"]) % 2 == 0,
         f"rope needs an even head size, got {o['width'] // o['heads']}"),
        (o["rope_theta"] > 1, "rope theta must be > 1"),
        (0 <= o["dropout"] < 1, "dropout must be in [0, 1)"),
        (o["norm_eps"] >= 0, "norm eps must be >= 0"),
        (o["lr"] > 0, "learning rate must be > 0"),
        (0 <= o["beta1"] < 1 and 0 <= o["beta2"] < 1,
         "AdamW betas must be in [0, 1)"),
        (o["eps"] > 0, "AdamW eps must be > 0"),
        (o["weight_decay"] >= 0, "weight decay must be >= 0"),
        (o["grad_clip"] >= 0, "grad clip must be >= 0 (0 = off)"),
        (o["warmup"] >= 0 and o["decay_steps"] >= 0,
         "warmup and decay steps must be >= 0"),
        (o["decay_steps"] == 0 or o["decay_steps"] >= o["warmup"],
         f"decay steps ({o['decay_steps']}) must be at least the warmup "
         f"steps ({o['warmup']})"),
        (o["decay_steps"] > 0 or o["warmup"] == 0,
         "warmup needs a cosine schedule (decay steps > 0)"),
        (0 <= o["min_lr"] <= o["lr"],
         "min learning rate must be in [0, learning rate]"),
    ]
    for ok, message in checks:
        if not ok:
            raise TccError(message)
    for g in o["no_decay"]:
        if g not in ("bias", "norm", "embedding"):
            raise TccError(f"no_decay takes bias, norm, embedding, got {g!r}")


def gpt(vocab=256, context=128, layers=4, width=128, heads=4, norm="layer",
        norm_eps=0.0, mlp="gelu", mlp_hidden=0, positions="learned",
        rope_theta=10000.0, untied=False, no_bias=False, dropout=0.0,
        batch=32, micro_batches=1, lr=1e-3, beta1=0.9, beta2=0.99, eps=1e-8,
        weight_decay=0.1, no_decay: Sequence[str] = ("bias", "norm"),
        grad_clip=1.0, warmup=0, decay_steps=0,
        min_lr: Optional[float] = None, lora=None) -> Model:
    """`tcc-models gpt`'s model: inputs tokens, targets (B, T) i32, eval
    output logits, loss = cross_entropy, AdamW with the no-decay groups
    (`no_decay`: any of bias, norm, embedding; () for none), clipping,
    micro-batches, warmup + cosine to min_lr (default lr / 10) when
    decay_steps > 0, else a constant rate. `lora`: a tcc.lora.LoRA (rank,
    alpha, targets): adapters on those layers, the base frozen (not a
    tcc-models option)."""
    o = dict(locals())
    o["min_lr"] = lr / 10 if min_lr is None else min_lr
    o["no_decay"] = tuple(no_decay)
    _check_gpt(o)
    m = Model("gpt")
    tokens = m.input("tokens", (batch, context), "i32")
    targets = m.input("targets", (batch, context), "i32")
    net = GPT(vocab, context, layers, width, heads, norm, norm_eps, mlp,
              mlp_hidden, positions, rope_theta, not untied, not no_bias,
              dropout)
    if lora is not None:
        from tcc import lora as lora_module
        lora_module.apply(net, lora)
    logits = net(tokens)
    loss = ops.cross_entropy(logits, targets, name="loss")
    m.output("logits", logits)
    m.train(loss, AdamW(lr, (beta1, beta2), eps, weight_decay),
            grad_clip=grad_clip, micro_batches=micro_batches,
            schedule=WarmupCosine(warmup, decay_steps, o["min_lr"])
            if decay_steps > 0 else None,
            constant_schedule=decay_steps <= 0)
    # The optimizer's groups, chosen by module kind as nanoGPT does.
    for path, module in net.named_modules():
        prefix = f"{path}." if path else ""
        if isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
            names = list(module._parameters) if "norm" in o["no_decay"] else []
        elif isinstance(module, nn.Linear):
            names = ["bias"] if "bias" in o["no_decay"] else []
        elif module is net:
            names = [n for n in ("wte", "wpe") if n in module._parameters
                     and "embedding" in o["no_decay"]]
        else:
            names = []
        for n in names:
            if n in module._parameters:
                m.no_weight_decay(prefix + n)
    return m


class MLP(nn.Module):
    """x -> [fc_i (nn.Linear), relu] per hidden width -> fc_last -> logits."""

    def __init__(self, inputs=784, hidden: Sequence[int] = (256,), classes=10):
        super().__init__()
        widths = list(hidden) + [classes]
        self.layers = len(widths)
        fan_in = inputs
        for i, w in enumerate(widths):
            setattr(self, f"fc{i + 1}", nn.Linear(fan_in, w))
            fan_in = w

    def forward(self, x):
        for i in range(1, self.layers + 1):
            last = i == self.layers
            x = getattr(self, f"fc{i}")(x, name="logits" if last else None)
            if not last:
                x = ops.relu(x, name=self.node_name(f"fc{i}.relu"))
        return x


def mlp(batch=64, hidden: Sequence[int] = (256,), inputs=784, classes=10,
        lr=0.1) -> Model:
    """`tcc-models mlp`'s model: image (B, inputs) f32, label (B) i32,
    loss = mean softmax cross-entropy, SGD. hidden=() is a linear model."""
    _positive(batch=batch, inputs=inputs, classes=classes)
    for w in hidden:
        _positive(hidden_width=w)
    if not lr > 0:
        raise TccError(f"lr must be positive, got {lr!r}")
    m = Model("mlp")
    x = m.input("image", (batch, inputs))
    labels = m.input("label", (batch,), "i32")
    logits = MLP(inputs, hidden, classes)(x)
    per_sample = ops.softmax_cross_entropy(logits, labels, name="xent")
    loss = ops.mean(per_sample, name="loss")
    m.output("logits", logits)
    m.train(loss, SGD(lr))
    return m
