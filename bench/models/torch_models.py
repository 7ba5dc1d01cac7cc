"""The model families of bench/models (issue 33), in plain PyTorch (no
torchvision): one definition that tcc.from_torch imports (prepare.py, traced
on the development machine's torch 1.13) and that torch_bench.py runs in
eager mode and under torch.compile (torch 2.x on the GPU machine).

Each entry of MODELS is a Spec: how to build the module for a config, the
example inputs and target, the loss and optimizer a user would pick, a GPU
config and a small CPU config.

Written within what tcc.from_torch maps today (docs/pytorch-import.md):
  * global average pooling is x.mean((2, 3)) (nn.AdaptiveAvgPool2d is not
    mapped);
  * the UNet's 2x nearest upsampling is written as index/expand/reshape
    (nn.Upsample, F.interpolate and nn.ConvTranspose2d are not mapped; the
    exact errors are in README.md);
  * RMSNorm is written out (torch 1.13 has no nn.RMSNorm, and from_torch
    maps none);
  * `llama`'s rotary cos / sin tables are frozen parameters (requires_grad=False,
    outside the optimizer; trun --init-from init.safetensors loads their
    values); `llama_hf` registers them as buffers (persistent=False), as
    HuggingFace's code does: constants of the model file since issue 35.
    tcc fuses each rotation into one tg.rope either way;
  * grouped-query attention repeats k / v with expand + reshape (repeat_kv)
    before the written-out attention (SDPA's enable_gqa is refused).
Attention uses F.scaled_dot_product_attention where torch has it (the
PyTorch runs on the GPU machine), else it is written out (q kᵀ, scale,
causal mask, softmax, · v), which tcc fuses into flash attention.
"""

import math
from dataclasses import dataclass, field
from typing import Callable, Dict

import torch
import torch.nn as nn
import torch.nn.functional as F

HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


# -- ResNets -------------------------------------------------------------------

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, width, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.shortcut = _shortcut(cin, width, stride)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        out = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)  # v1.5
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.shortcut = _shortcut(cin, out, stride)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + self.shortcut(x))


def _shortcut(cin, cout, stride):
    if stride == 1 and cin == cout:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                         nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    """torchvision's ResNet layout. cifar=True: the CIFAR stem (one 3x3
    conv, stride 1, no max pool); else the ImageNet stem (7x7 stride 2 conv,
    3x3 stride 2 max pool). `width` scales every stage (64 is the paper's)."""

    def __init__(self, block, layers, classes, cifar, width=64):
        super().__init__()
        if cifar:
            self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False),
                                      nn.BatchNorm2d(width), nn.ReLU())
        else:
            self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False),
                                      nn.BatchNorm2d(width), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
        stages, cin = [], width
        for i, n in enumerate(layers):
            w = width * 2 ** i
            blocks = []
            for j in range(n):
                blocks.append(block(cin, w, 2 if (j == 0 and i > 0) else 1))
                cin = w * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.layers = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, images):
        x = self.layers(self.stem(images))
        return self.fc(x.mean((2, 3)))  # global average pool


# -- ViT -----------------------------------------------------------------------

class Attention(nn.Module):
    """Multi-head self-attention; kv_heads < heads: grouped-query attention
    (k and v repeated per group before the product: repeat_kv)."""

    def __init__(self, dim, heads, kv_heads=None, causal=False, bias=True,
                 context=0):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads or heads
        self.head_dim = dim // heads
        self.causal = causal
        kv_dim = self.kv_heads * self.head_dim
        self.qkv = nn.Linear(dim, dim + 2 * kv_dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)
        self.sdpa = HAVE_SDPA
        if causal and not self.sdpa:
            # The written-out causal mask: a registered triangular buffer
            # (tcc makes it a causal_mask).
            future = torch.ones(context, context, dtype=torch.bool).triu(1)
            self.register_buffer("future", future, persistent=False)

    def forward(self, x, rope=None):
        B, T, C = x.shape
        H, KV, D = self.heads, self.kv_heads, self.head_dim
        q, k, v = self.qkv(x).split([H * D, KV * D, KV * D], dim=2)
        q = q.view(B, T, H, D).transpose(1, 2)      # (B, H, T, D)
        k = k.view(B, T, KV, D).transpose(1, 2)     # (B, KV, T, D)
        v = v.view(B, T, KV, D).transpose(1, 2)
        if rope is not None:
            q, k = rotate(q, *rope), rotate(k, *rope)
        if KV != H:
            k, v = repeat_kv(k, H // KV), repeat_kv(v, H // KV)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            if self.causal:
                s = s.masked_fill(self.future[:T, :T], float("-inf"))
            y = s.softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


def repeat_kv(x, groups):
    """(B, KV, T, D) -> (B, KV * groups, T, D), each kv head repeated."""
    B, KV, T, D = x.shape
    return x[:, :, None, :, :].expand(B, KV, groups, T, D).reshape(B, KV * groups, T, D)


def rotate(x, cos, sin):
    """Rotary positions, LLaMA's rotate_half form: x cos + rotate_half(x) sin
    with (T, D) tables; tcc's tg-cache-rope makes it one tg.rope."""
    h = x.shape[-1] // 2
    rotated = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos + rotated * sin


class VitBlock(nn.Module):
    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, mlp)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(mlp, dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    """ViT (timm's vit_small_patch16_224 layout): conv patch embedding, class
    token, learned positions, pre-norm blocks, the class token's head."""

    def __init__(self, image=224, patch=16, dim=384, depth=12, heads=6, mlp=1536,
                 classes=1000):
        super().__init__()
        n = (image // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(VitBlock(dim, heads, mlp) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)
        nn.init.normal_(self.cls_token, std=0.02)

    def forward(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2)   # (B, N, C)
        B = x.shape[0]
        x = torch.cat([self.cls_token.expand(B, -1, -1), x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x)[:, 0])


# -- UNet ----------------------------------------------------------------------

def upsample2x(x):
    """Nearest-neighbour 2x upsampling (F.interpolate(scale_factor=2)) as
    index + expand + reshape, the form tcc.from_torch maps."""
    B, C, H, W = x.shape
    return x[:, :, :, None, :, None].expand(B, C, H, 2, W, 2).reshape(B, C, 2 * H, 2 * W)


class ConvBlock(nn.Module):
    """Two 3x3 convolutions, each followed by BatchNorm + ReLU (norm
    "batch"), or GroupNorm (8 groups) + SiLU (norm "group", as diffusion
    UNets write their blocks)."""

    def __init__(self, cin, cout, norm="batch"):
        super().__init__()
        def norm_act():
            if norm == "group":
                return [nn.GroupNorm(8, cout), nn.SiLU()]
            return [nn.BatchNorm2d(cout), nn.ReLU()]
        self.net = nn.Sequential(
            nn.Conv2d(cin, cout, 3, 1, 1, bias=False), *norm_act(),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), *norm_act())

    def forward(self, x):
        return self.net(x)


class UNet(nn.Module):
    """A small UNet: `levels` down steps (conv block, 2x2 max pool), a
    bottleneck block, `levels` up steps (2x nearest upsample, 3x3 conv,
    concat with the skip, conv block), a 1x1 conv to per-pixel classes."""

    def __init__(self, base=32, levels=3, classes=8, upsample="expand", norm="batch"):
        super().__init__()
        self.upsample = upsample
        widths = [base * 2 ** i for i in range(levels + 1)]
        self.down = nn.ModuleList()
        cin = 3
        for w in widths[:-1]:
            self.down.append(ConvBlock(cin, w, norm))
            cin = w
        self.pool = nn.MaxPool2d(2)
        self.mid = ConvBlock(widths[-2], widths[-1], norm)
        self.up_conv = nn.ModuleList()
        self.up = nn.ModuleList()
        for w_hi, w in zip(widths[:0:-1], widths[-2::-1]):
            if upsample == "convtranspose":
                self.up_conv.append(nn.ConvTranspose2d(w_hi, w, 2, 2))
            else:
                self.up_conv.append(nn.Conv2d(w_hi, w, 3, 1, 1))
            self.up.append(ConvBlock(2 * w, w, norm))
        self.out = nn.Conv2d(widths[0], classes, 1)
        self.resize = nn.Upsample(scale_factor=2) if upsample == "nn.Upsample" else None

    def _up(self, x, conv):
        if self.upsample == "convtranspose":
            return conv(x)
        if self.upsample == "nn.Upsample":
            return conv(self.resize(x))
        if self.upsample == "interpolate":
            return conv(F.interpolate(x, scale_factor=2, mode="nearest"))
        if self.upsample == "bilinear":
            return conv(F.interpolate(x, scale_factor=2, mode="bilinear"))
        return conv(upsample2x(x))

    def forward(self, images):
        skips, x = [], images
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = self.pool(x)
        x = self.mid(x)
        for conv, block, skip in zip(self.up_conv, self.up, reversed(skips)):
            x = block(torch.cat([self._up(x, conv), skip], dim=1))
        return self.out(x)   # (B, classes, H, W)


# -- GPT-2 and a LLaMA-style decoder ----------------------------------------------

class Gpt2Block(nn.Module):
    def __init__(self, dim, heads, context):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, causal=True, context=context)
        self.ln_2 = nn.LayerNorm(dim)
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.c_proj = nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    """GPT-2 (bench/torch_gpt2.py's model: learned positions, pre-norm,
    GELU tanh, biases, lm_head tied to wte, GPT-2 init)."""

    def __init__(self, vocab=50304, context=1024, layers=12, dim=768, heads=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(context, dim)
        self.h = nn.ModuleList(Gpt2Block(dim, heads, context) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        _gpt_init(self, layers, ("attn.proj", "c_proj"))

    def forward(self, tokens):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))     # (B, T, V) logits


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden, context):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, heads, kv_heads, causal=True, bias=False,
                              context=context)
        self.mlp_norm = RMSNorm(dim)
        self.w_gate = nn.Linear(dim, hidden, bias=False)
        self.w_up = nn.Linear(dim, hidden, bias=False)
        self.w_down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, rope):
        x = x + self.attn(self.attn_norm(x), rope)
        h = self.mlp_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Llama(nn.Module):
    """A LLaMA-style decoder: RMSNorm, rotary positions (theta 10000),
    SwiGLU, grouped-query attention, no biases, tied embeddings."""

    def __init__(self, vocab=32000, context=1024, layers=12, dim=768, heads=12,
                 kv_heads=4, hidden=2304, theta=10000.0, rope="params"):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(LlamaBlock(dim, heads, kv_heads, hidden, context)
                                    for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.embed.weight
        # Rotary tables as frozen parameters (rope="params") or as buffers
        # HuggingFace-style (rope="buffers"; see the module docstring).
        d = dim // heads
        inv_freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        angle = torch.arange(context, dtype=torch.float64)[:, None] * inv_freq
        angle = torch.cat([angle, angle], dim=1)
        if rope == "buffers":
            self.register_buffer("rope_cos", angle.cos().float(), persistent=False)
            self.register_buffer("rope_sin", angle.sin().float(), persistent=False)
        else:
            self.rope_cos = nn.Parameter(angle.cos().float(), requires_grad=False)
            self.rope_sin = nn.Parameter(angle.sin().float(), requires_grad=False)
        _gpt_init(self, layers, ("attn.proj", "w_down"))

    def forward(self, tokens):
        T = tokens.shape[1]
        rope = (self.rope_cos[:T], self.rope_sin[:T])
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, rope)
        return self.lm_head(self.norm(x))


def _gpt_init(model, layers, residual):
    """N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 L)), zero biases."""
    for name, m in model.named_modules():
        if isinstance(m, nn.Linear):
            std = 0.02 / math.sqrt(2 * layers) if name.endswith(residual) else 0.02
            nn.init.normal_(m.weight, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)


# -- the suite -----------------------------------------------------------------

def _adamw(module, lr=3e-4, betas=(0.9, 0.95), wd=0.1, **kw):
    """AdamW with nanoGPT's groups: decay on matrices and embeddings, none
    on biases and norms; frozen tensors (the rotary tables) left out."""
    params = [p for p in module.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=1e-8, **kw)


def _sgd(module, lr=0.1, wd=5e-4, **kw):
    return torch.optim.SGD(module.parameters(), lr=lr, momentum=0.9,
                           weight_decay=wd, **kw)


@dataclass
class Spec:
    """kind: image (images (B, 3, H, W) f32 -> labels (B)), segment (labels
    (B, H, W)) or tokens (tokens (B, T) -> next tokens (B, T))."""
    name: str
    title: str
    kind: str
    build: Callable[[dict], nn.Module]
    optimizer: Callable[..., torch.optim.Optimizer]
    gpu: dict
    cpu: dict
    grad_clip: float = 0.0
    channels_last: bool = False
    notes: Dict[str, str] = field(default_factory=dict)

    def config(self, which):
        return dict(self.gpu if which == "gpu" else self.cpu)

    def batch(self, cfg):
        return cfg["batch"]

    def items_per_step(self, cfg):
        """Images per step, or tokens per step."""
        return cfg["batch"] * (cfg["context"] if self.kind == "tokens" else 1)

    def example(self, cfg, device="cpu", generator=None):
        """(inputs tuple, target) of one random batch."""
        B, g = cfg["batch"], generator
        if self.kind == "tokens":
            T, V = cfg["context"], cfg["vocab"]
            data = torch.randint(0, V, (B, T + 1), generator=g, device=device)
            return (data[:, :-1].contiguous(),), data[:, 1:].contiguous()
        H = cfg["image"]
        x = torch.randn(B, 3, H, H, generator=g, device=device)
        shape = (B,) if self.kind == "image" else (B, H, H)
        return (x,), torch.randint(0, cfg["classes"], shape, generator=g, device=device)



def _llama_spec(name, description, rope):
    """The suite's LLaMA; `rope`: its rotary tables as frozen parameters or
    as buffers (Llama's `rope`)."""
    return Spec(name, description, "tokens",
                lambda c: Llama(c["vocab"], c["context"], c["layers"], c["dim"], c["heads"],
                                c["kv_heads"], c["hidden"], rope=rope),
                lambda m, **kw: _adamw(m, lr=3e-4, **kw),
                gpu=dict(batch=8, context=1024, vocab=32000, layers=12, dim=768, heads=12,
                         kv_heads=4, hidden=2304),
                cpu=dict(batch=4, context=128, vocab=4096, layers=2, dim=128, heads=2,
                         kv_heads=1, hidden=384),
                grad_clip=1.0)


MODELS = {s.name: s for s in [
    Spec("resnet18_cifar", "ResNet-18 (CIFAR stem), 3x32x32, 10 classes", "image",
         lambda c: ResNet(BasicBlock, [2, 2, 2, 2], c["classes"], True, c["width"]),
         lambda m, **kw: _sgd(m, lr=0.1, wd=5e-4, **kw),
         gpu=dict(batch=128, image=32, classes=10, width=64),
         cpu=dict(batch=8, image=32, classes=10, width=16),
         channels_last=True),
    Spec("resnet50", "ResNet-50, 3x224x224, 1000 classes", "image",
         lambda c: ResNet(Bottleneck, [3, 4, 6, 3], c["classes"], False, c["width"]),
         lambda m, **kw: _sgd(m, lr=0.1, wd=1e-4, **kw),
         gpu=dict(batch=64, image=224, classes=1000, width=64),
         cpu=dict(batch=2, image=64, classes=100, width=16),
         channels_last=True),
    Spec("vit_s16", "ViT-S/16, 3x224x224, 1000 classes", "image",
         lambda c: ViT(c["image"], 16, c["dim"], c["depth"], c["heads"], c["mlp"],
                       c["classes"]),
         lambda m, **kw: _adamw(m, lr=1e-3, betas=(0.9, 0.999), wd=0.05, **kw),
         gpu=dict(batch=64, image=224, classes=1000, dim=384, depth=12, heads=6, mlp=1536),
         cpu=dict(batch=4, image=64, classes=100, dim=128, depth=2, heads=2, mlp=512),
         grad_clip=1.0),
    Spec("unet", "UNet, 3x128x128, 3 levels, 8 classes per pixel", "segment",
         lambda c: UNet(c["base"], c["levels"], c["classes"], c.get("upsample", "expand")),
         lambda m, **kw: _adamw(m, lr=1e-3, betas=(0.9, 0.999), wd=0.01, **kw),
         gpu=dict(batch=32, image=128, classes=8, base=32, levels=3),
         cpu=dict(batch=2, image=64, classes=8, base=8, levels=3),
         channels_last=True),
    Spec("unet_gn", "UNet, GroupNorm + SiLU, bilinear upsampling, 3x128x128", "segment",
         lambda c: UNet(c["base"], c["levels"], c["classes"], "bilinear", norm="group"),
         lambda m, **kw: _adamw(m, lr=1e-3, betas=(0.9, 0.999), wd=0.01, **kw),
         gpu=dict(batch=32, image=128, classes=8, base=32, levels=3),
         cpu=dict(batch=2, image=64, classes=8, base=8, levels=3),
         channels_last=True),
    Spec("unet_convt", "UNet, ConvTranspose2d upsampling, 3x128x128", "segment",
         lambda c: UNet(c["base"], c["levels"], c["classes"], "convtranspose"),
         lambda m, **kw: _adamw(m, lr=1e-3, betas=(0.9, 0.999), wd=0.01, **kw),
         gpu=dict(batch=32, image=128, classes=8, base=32, levels=3),
         cpu=dict(batch=2, image=64, classes=8, base=8, levels=3),
         channels_last=True),
    Spec("gpt2", "GPT-2 124M, B16 T1024", "tokens",
         lambda c: Gpt2(c["vocab"], c["context"], c["layers"], c["dim"], c["heads"]),
         lambda m, **kw: _adamw(m, lr=6e-4, **kw),
         gpu=dict(batch=16, context=1024, vocab=50304, layers=12, dim=768, heads=12),
         cpu=dict(batch=4, context=128, vocab=4096, layers=2, dim=128, heads=2),
         grad_clip=1.0),
    _llama_spec("llama", "LLaMA-style ~110M (RoPE, RMSNorm, SwiGLU, GQA 12/4), B8 T1024",
                "params"),
    _llama_spec("llama_hf",
                "the same LLaMA, rotary tables as buffers (HuggingFace's way), B8 T1024",
                "buffers"),
]}


def build(spec, cfg):
    """The module of `spec` at `cfg`, seeded (the same weights every time)."""
    torch.manual_seed(0)
    return spec.build(cfg)


def loss_fn(logits, target):
    """Mean cross-entropy: (B, C) / (B, C, H, W) logits against class ids,
    (B, T, V) logits against (B, T) next tokens (nanoGPT's view)."""
    if logits.dim() == 3:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
    return F.cross_entropy(logits, target)


def param_count(module):
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
