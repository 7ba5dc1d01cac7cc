#!/usr/bin/python3
"""Constants of any content through tcc.from_torch (Model.constants): the
rotary tables HuggingFace-style decoders compute in __init__ and register
as buffers, or compute in forward from an inv_freq buffer and
torch.arange. Each case: imported, the tables stored once however many
layers read them, tg-cache-rope fuses every rotation into tg.rope with
constant tables (its report in the dumps), the additive causal mask (a
constant too) lets tg-fuse-attention fuse each layer, and one CPU step's loss and
every gradient match PyTorch's (harness.compare_step's limits). Meta's
complex rotary (torch.polar tables, view_as_complex / view_as_real)
imports as real arithmetic with the same check, and a complex value
meeting any other op is refused by name. Then the
refusals: a constant holding NaN, constants over max_constant_bytes, and
Model.constant_data / ops.tensor misuse, each one TccError line.

usage: constants_test.py --bin-dir BUILD/bin [--work-dir DIR]
"""

import argparse
import glob
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import harness as H  # noqa: E402
import tcc  # noqa: E402
from tcc import ops  # noqa: E402
from zoo.meta_llama import apply_rotary_emb, precompute_freqs_cis  # noqa: E402

B, T, C, HEADS, VOCAB, LAYERS = 2, 16, 32, 4, 48, 2


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class CachedRotary(nn.Module):
    """Tables made in __init__, registered as buffers, sliced to T."""

    def __init__(self, dim, max_positions=64, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_positions).float()
        freqs = torch.einsum("i,j->ij", t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, x, seq_len):
        return self.cos_cached[:seq_len].to(x.dtype), self.sin_cached[:seq_len].to(x.dtype)


class ForwardRotary(nn.Module):
    """Tables computed in forward from inv_freq and the positions."""

    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, seq_len):
        position_ids = torch.arange(seq_len).unsqueeze(0)
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[0], emb.sin()[0]


class Attention(nn.Module):
    def __init__(self, rotary):
        super().__init__()
        self.q_proj = nn.Linear(C, C, bias=False)
        self.k_proj = nn.Linear(C, C, bias=False)
        self.v_proj = nn.Linear(C, C, bias=False)
        self.o_proj = nn.Linear(C, C, bias=False)
        self.rotary_emb = rotary(C // HEADS)
        mask = torch.full((64, 64), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        b, t, _ = x.shape
        d = C // HEADS
        q = self.q_proj(x).view(b, t, HEADS, d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, HEADS, d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, HEADS, d).transpose(1, 2)
        cos, sin = self.rotary_emb(v, t)
        cos, sin = cos.unsqueeze(0).unsqueeze(0), sin.unsqueeze(0).unsqueeze(0)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = q @ k.transpose(-2, -1) / d ** 0.5 + self.mask[:t, :t]
        out = scores.softmax(-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, t, C))


class Decoder(nn.Module):
    def __init__(self, rotary):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, C)
        self.layers = nn.ModuleList([Attention(rotary) for _ in range(LAYERS)])
        self.lm_head = nn.Linear(C, VOCAB, bias=False)

    def forward(self, tokens):
        h = self.embed_tokens(tokens)
        for layer in self.layers:
            h = h + layer(h)
        return self.lm_head(h)


CASES = {"cached_buffers": CachedRotary, "computed_in_forward": ForwardRotary}


def check_rope(name, args):
    H.seed_all(3)
    module = Decoder(CASES[name])
    x = torch.randint(0, VOCAB, (B, T))
    y = torch.randint(0, VOCAB, (B, T))
    work = os.path.join(args.work_dir, name)
    os.makedirs(work, exist_ok=True)
    model = tcc.from_torch(module, (x,), loss=H.cross_entropy, target=y,
                           optimizer=torch.optim.SGD(module.parameters(), lr=0.1))
    failures = []
    proto = model.proto()
    shapes = sorted(tuple(c.shape.dims) for c in proto.constants)
    # cos and sin once each (every layer reads the same two), and the
    # additive causal mask's (T, T) slice once.
    if shapes != [(1, 1, T, C // HEADS)] * 2 + [(T, T)]:
        failures.append(f"{name}: constants {shapes}, expected the cos and sin tables "
                        f"(1, 1, {T}, {C // HEADS}) and the ({T}, {T}) mask once each")
    if any(p.name.endswith(("cos_cached", "sin_cached", "inv_freq")) for p in proto.params):
        failures.append(f"{name}: a rotary buffer became a parameter")
    # The rotations: one tg.rope each, with constant tables.
    path = os.path.join(work, "model.pb")
    model.save(path)
    dumps = os.path.join(work, "dumps")
    H.compile_step(args.bin_dir, path, os.path.join(work, "plain.so"), "--dump-dir", dumps)
    report = open(glob.glob(os.path.join(dumps, "*-tg-cache-rope-report.txt"))[0]).read()
    fused = [line for line in report.splitlines() if "constant tables -> tg.rope" in line]
    print(f"{name}: constants {shapes}; tg-cache-rope: {len(fused)} rotations fused")
    if len(fused) != 2 * LAYERS:
        failures.append(f"{name}: {len(fused)} rotations fused with constant tables, "
                        f"expected {2 * LAYERS}:\n{report}")
    attention = open(glob.glob(os.path.join(dumps, "*-tg-fuse-attention-report.txt"))[0]).read()
    causal = [line for line in attention.splitlines() if "fused:" in line and "causal" in line]
    if len(causal) != LAYERS:
        failures.append(f"{name}: {len(causal)} causal attentions fused (the constant "
                        f"additive mask), expected {LAYERS}:\n{attention}")
    ref = H.reference_step(module, lambda m, x, y: H.cross_entropy(m(x), y), (x, y))
    failures += H.check_step(args.bin_dir, name, model, module, (x, y), ref, work,
                             H.STEP_LOSS_FLOOR)
    return failures


# Meta's LLaMA rotary (the zoo's meta_llama functions): complex tables
# (torch.polar) and view_as_complex / view_as_real, rewritten to real
# arithmetic at import (_torch_complex.py).
class MetaAttention(nn.Module):
    def __init__(self, magnitude=False):
        super().__init__()
        self.wq = nn.Linear(C, C, bias=False)
        self.wk = nn.Linear(C, C, bias=False)
        self.wv = nn.Linear(C, C, bias=False)
        self.wo = nn.Linear(C, C, bias=False)
        self.magnitude = magnitude

    def forward(self, x, freqs_cis):
        b, t, _ = x.shape
        d = C // HEADS
        q = self.wq(x).view(b, t, HEADS, d)
        k = self.wk(x).view(b, t, HEADS, d)
        v = self.wv(x).view(b, t, HEADS, d)
        if self.magnitude:  # a complex op tcc does not rewrite
            q = q * torch.view_as_complex(q.reshape(b, t, HEADS, -1, 2)).abs().sum()
        q, k = apply_rotary_emb(q, k, freqs_cis)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / d ** 0.5
        scores = scores + torch.full((t, t), float("-inf")).triu(1)
        return self.wo((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, C))


class MetaDecoder(nn.Module):
    def __init__(self, magnitude=False):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, C)
        self.layers = nn.ModuleList([MetaAttention(magnitude) for _ in range(LAYERS)])
        self.output = nn.Linear(C, VOCAB, bias=False)
        self.freqs_cis = precompute_freqs_cis(C // HEADS, 64)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        freqs_cis = self.freqs_cis[: tokens.shape[1]]
        for layer in self.layers:
            h = h + layer(h, freqs_cis)
        return self.output(h)


def check_complex(args):
    H.seed_all(4)
    module = MetaDecoder()
    x = torch.randint(0, VOCAB, (B, T))
    y = torch.randint(0, VOCAB, (B, T))
    work = os.path.join(args.work_dir, "meta_complex")
    os.makedirs(work, exist_ok=True)
    sgd = torch.optim.SGD(module.parameters(), lr=0.1)
    model = tcc.from_torch(module, (x,), loss=H.cross_entropy, target=y, optimizer=sgd)
    ops_used = {n.op for n in model.proto().nodes}
    print(f"meta_complex: constants {[tuple(c.shape.dims) for c in model.proto().constants]}")
    failures = []
    if any("complex" in o for o in ops_used):
        failures.append(f"meta_complex: complex ops in the model: {sorted(ops_used)}")
    ref = H.reference_step(module, lambda m, x, y: H.cross_entropy(m(x), y), (x, y))
    failures += H.check_step(args.bin_dir, "meta_complex", model, module, (x, y), ref, work,
                             H.STEP_LOSS_FLOOR)
    bad = MetaDecoder(magnitude=True)
    failures += H.expect_tcc_errors([(
        lambda: tcc.from_torch(bad, (x,), loss=H.cross_entropy, target=y,
                               optimizer=torch.optim.SGD(bad.parameters(), lr=0.1)),
        "unsupported use of Tensor.abs at layers.0: a complex value (view_as_complex) "
        "reaches an op tcc does not rewrite to real arithmetic")])
    return failures


class NanTable(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("table", torch.tensor([1.0, float("nan"), 2.0]))

    def forward(self, x):
        return self.fc(x) * self.table


class BigTable(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 300)
        self.register_buffer("table", torch.linspace(0, 1, 300))

    def forward(self, x):
        return self.fc(x) * self.table


def check_refusals():
    x, y = torch.randn(2, 4), torch.randint(0, 3, (2,))

    def imported(module, **kw):
        return lambda: tcc.from_torch(module, (x,), loss=F.cross_entropy, target=y,
                                      optimizer=torch.optim.SGD(module.parameters(), lr=0.1),
                                      **kw)

    big_y = torch.randint(0, 300, (2,))
    big = BigTable()
    m = tcc.Model("m")
    failures = H.expect_tcc_errors([
        (imported(NanTable()), "a constant tensor of shape (3,) holds NaN"),
        (lambda: tcc.from_torch(big, (x,), loss=F.cross_entropy, target=big_y,
                                optimizer=torch.optim.SGD(big.parameters(), lr=0.1),
                                max_constant_bytes=1000),
         "a constant tensor of shape (300,) (1200 bytes) takes the import's constants to "
         "1200 bytes, over max_constant_bytes=1000"),
        (lambda: m.constant_data(b"\0" * 10, (2, 3), "f32"),
         "constant of shape (2, 3) f32: 10 bytes of data, needs 24"),
        (lambda: m.constant_data(b"\0" * 6, (2, 3), "bf16"), "constant: dtype must be one of"),
        (lambda: ops.tensor(m, 1.5), "tensor: a scalar is a splat"),
    ])
    # Under the cap the same module imports, its table once.
    model = tcc.from_torch(big, (x,), loss=F.cross_entropy, target=big_y,
                           optimizer=torch.optim.SGD(big.parameters(), lr=0.1))
    if [tuple(c.shape.dims) for c in model.proto().constants] != [(300,)]:
        failures.append("BigTable under the default cap: expected one (300,) constant")
    # ops.tensor stores equal values once.
    a = ops.tensor(m, np.arange(6).reshape(2, 3) * 0.5)
    b = ops.tensor(m, [[0.0, 0.5, 1.0], [1.5, 2.0, 2.5]])
    c = ops.tensor(m, [[0.0, 0.5, 1.0], [1.5, 2.0, 2.5]], dtype="f64")
    if a.name != b.name or a.name == c.name or len(m.proto().constants) != 2:
        failures.append(f"ops.tensor: equal values should share one constant "
                        f"({a.name}, {b.name}, {c.name})")
    print(f"refusals and constant storage: {len(failures)} problems")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir")
    args = ap.parse_args()
    torch.set_num_threads(1)
    failures = []
    with tempfile.TemporaryDirectory(prefix="tcc-constants-") as tmp:
        args.work_dir = args.work_dir or tmp
        for name in CASES:
            try:
                failures += check_rope(name, args)
            except (H.Failure, tcc.TccError) as e:
                failures.append(f"{name}: {e}")
        try:
            failures += check_complex(args)
        except (H.Failure, tcc.TccError) as e:
            failures.append(f"meta_complex: {e}")
        failures += check_refusals()
    return H.report(failures)


if __name__ == "__main__":
    sys.exit(main())
