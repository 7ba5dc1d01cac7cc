#!/usr/bin/env python3
"""The forms torch_models.py avoids, each imported with tcc.from_torch to
show its error today (README.md, "What does not work yet" quotes them).
Re-run it when the importer grows: a line that says "imports" means the
workaround in torch_models.py can go.

    /usr/bin/python3 bench/models/known_errors.py
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
sys.path.insert(0, here)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tcc  # noqa: E402
import torch_models as M  # noqa: E402


class Pool(nn.Module):
    """ResNet's head with nn.AdaptiveAvgPool2d instead of mean((2, 3))."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, images):
        return self.fc(self.pool(self.conv(images)).flatten(1))


class Rope(nn.Module):
    """Rotary tables as a registered buffer (`table`) or computed in the
    forward with torch.cos / torch.sin (`sincos`)."""

    def __init__(self, how, T=16, D=8):
        super().__init__()
        self.how = how
        self.emb = nn.Embedding(32, D)
        self.out = nn.Linear(D, 32)
        inv = 10000.0 ** (-torch.arange(0, D, 2).float() / D)
        angle = torch.arange(T).float()[:, None] * inv
        self.register_buffer("angle", torch.cat([angle, angle], 1), persistent=False)

    def forward(self, tokens):
        x = self.emb(tokens)
        if self.how == "table":
            cos, sin = self.angle.cos(), self.angle.sin()
        else:
            cos, sin = torch.cos(x), torch.sin(x)
        return self.out(M.rotate(x, cos, sin))


class Gqa(nn.Module):
    """Grouped-query attention through SDPA's enable_gqa (torch >= 2.5)
    instead of repeat_kv: 4 query heads, 2 kv heads of 16."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(64, 64)
        self.kv = nn.Linear(64, 64)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q(x).view(B, T, 4, 16).transpose(1, 2)
        k, v = (t.view(B, T, 2, 16).transpose(1, 2) for t in self.kv(x).split(32, 2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return y.transpose(1, 2).reshape(B, T, 64)


def has_enable_gqa():
    if not hasattr(F, "scaled_dot_product_attention"):
        return False
    q, kv = torch.zeros(1, 4, 2, 16), torch.zeros(1, 2, 2, 16)
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        return True
    except TypeError:
        return False


def unet(upsample):
    s = M.MODELS["unet"]
    cfg = dict(s.config("cpu"), upsample=upsample)
    m = M.build(s, cfg)
    (x,), y = s.example(cfg)
    return m, x, y


def cases():
    for up in ("nn.Upsample", "interpolate", "convtranspose"):
        yield f"UNet upsampling with {up}", lambda up=up: unet(up)
    yield "nn.AdaptiveAvgPool2d", lambda: (Pool(), torch.randn(2, 3, 8, 8),
                                           torch.randint(0, 10, (2,)))
    toks = torch.randint(0, 32, (2, 16))
    yield "rotary tables from a buffer (.cos() / .sin() at import)", \
        lambda: (Rope("table"), toks, toks)
    yield "rotary tables computed with torch.cos / torch.sin", \
        lambda: (Rope("sincos"), toks, toks)
    if has_enable_gqa():  # else nothing to show: torch has no such form
        yield "SDPA with enable_gqa", lambda: (Gqa(), torch.randn(2, 8, 64),
                                               torch.randn(2, 8, 64))


def main():
    for title, make in cases():
        module, x, y = make()
        loss = F.mse_loss if y.is_floating_point() else F.cross_entropy
        opt = torch.optim.SGD([p for p in module.parameters() if p.requires_grad], lr=0.1)
        try:
            tcc.from_torch(module, (x,), loss=loss, target=y, optimizer=opt)
            print(f"{title}: imports")
        except Exception as e:
            print(f"{title}: {type(e).__name__}: {str(e).split(' — supported:')[0]}")


if __name__ == "__main__":
    main()
