#!/usr/bin/python3
"""The PyTorch ops tcc.from_torch writes as several tcc ops
(python/tcc/composite_ops.py), end to end as graph_ops_test.py checks the
others: clamp / clip / clamp_min / clamp_max, hardtanh, relu6, hardswish,
hardsigmoid, mish, softplus, repeat_interleave, Tensor.repeat / tile,
outer, einsum, tril / triu of graph values, nn.MultiheadAttention (batch
first or not, the attention weights, causal masks), grouped-query
attention through repeat_interleave (the path of
F.scaled_dot_product_attention(enable_gqa=True)), and nn.RMSNorm /
F.rms_norm and SDPA with enable_gqa where torch has them. Each small
module is imported, compiled by tcc (--target cpu --emit-gradients) and
run one step by trun on the same weights and batch as PyTorch; the loss
and every gradient must be as close to PyTorch's in float64 as max(1e-5 /
1e-4 relative, 10x PyTorch float32's own distance from it)
(harness.compare_step). Then the forms that are refused: one line naming
them (expect_tcc_errors).

usage: more_ops_test.py --bin-dir BUILD/bin --work-dir DIR [--case NAME]
"""

import argparse
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import tcc  # noqa: E402

N, D, C = 8, 12, 6
T, E, HEADS = 4, 8, 2  # attention: tokens, embedding, heads


class Clamps(nn.Module):
    """torch.clamp / clip / clamp_min / clamp_max (functions and methods,
    number and tensor bounds), F.hardtanh, nn.Hardtanh, nn.ReLU6, F.relu6."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 24)
        self.cap = nn.Parameter(torch.linspace(-0.5, 1.0, 24))
        self.ht = nn.Hardtanh(-0.3, 0.6)
        self.r6 = nn.ReLU6()
        self.out = nn.Linear(24, C)

    def forward(self, x):
        h = self.fc(x) * 3.0
        y = torch.clamp(h, -0.5, 0.7) + h.clamp(min=-0.2) + h.clamp_max(0.3)
        y = y + torch.clamp_min(h, 0.1) + torch.clip(h, max=0.4) + h.clip(-0.1, 0.2)
        y = y + torch.clamp(h, max=self.cap) + h.clamp(min=h.mean(1, keepdim=True))
        y = y + F.hardtanh(h) + self.ht(h) + F.hardtanh(h, min_val=-2.0, max_val=0.5)
        y = y + self.r6(h * 4.0) / 4 + F.relu6(h * 3.0 + 1.0)
        return self.out(y)


class HardActivations(nn.Module):
    """nn.Hardswish / F.hardswish, nn.Hardsigmoid / F.hardsigmoid, nn.Mish /
    F.mish, F.softplus (default, beta and a low threshold), nn.Softplus;
    inputs spread over every piece (and far out: the stable softplus)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 24)
        self.hs, self.hsig, self.mish = nn.Hardswish(), nn.Hardsigmoid(), nn.Mish()
        self.sp = nn.Softplus(beta=0.5, threshold=2.0)
        self.out = nn.Linear(24, C)

    def forward(self, x):
        h = self.fc(x) * 4.0
        y = self.hs(h) + F.hardswish(h * 0.5) + self.hsig(h) + F.hardsigmoid(h + 1.0)
        y = y + self.mish(h) + F.mish(h * 8.0) / 8 + F.softplus(h)
        y = y + F.softplus(h, beta=2.0, threshold=1.0) + self.sp(h)
        y = y + F.softplus(h * 30.0) / 30
        return self.out(y)


class Repeats(nn.Module):
    """repeat_interleave (method and function, dim given or not), the
    repeat_kv of grouped-query attention, Tensor.repeat, torch.tile."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 24)
        self.out = nn.Linear(24 * 5, C)

    def forward(self, x):
        B = x.shape[0]
        h = self.fc(x)
        k = h.view(B, 2, 3, 4)
        a = k.repeat_interleave(2, dim=1).reshape(B, -1)               # (B, 48)
        b = torch.repeat_interleave(k, 3, dim=-1).sum(2).reshape(B, -1)  # (B, 24)
        c = h.repeat_interleave(2).view(B, 48)[:, :24]
        d = k.repeat(1, 2, 1, 1).reshape(B, 48) + torch.tile(h, (2,))
        e = h.repeat(2, 1, 1).sum(0)                                   # (B, 24)
        return self.out(torch.cat([a + d, b * c + e, a * 0.5], dim=1))


class Outer(nn.Module):
    """torch.outer / Tensor.outer / torch.ger of graph values, a parameter
    and a constant ramp."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 24)
        self.v = nn.Parameter(torch.linspace(-1.0, 1.0, C))
        self.out = nn.Linear(24, C)

    def forward(self, x):
        u = self.fc(x)
        # (Vectors over the batch, not rows of it: trun shuffles the rows.)
        a, b = u.mean(0), (u * u).mean(0)
        m = torch.outer(a, self.v)                          # (24, C)
        r = a.outer(b) / 10 + torch.ger(b, torch.arange(24.0)) / 100
        return u @ m + self.out(u @ r)


class Einsum(nn.Module):
    """torch.einsum of attention (bhqd,bhkd->bhqk; bhqk,bhkd->bhqd), of an
    MLP (bld,dh->blh; ...d,ed->...e), an outer product, a batched product,
    an implicit output, transposed operands, sums, a permuted output."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * 2 * 3 * 4)
        self.w = nn.Parameter(torch.randn(4, 5) * 0.3)
        self.e = nn.Parameter(torch.randn(6, 5) * 0.3)
        self.m = nn.Parameter(torch.randn(D, 24) * 0.3)
        self.w4 = nn.Parameter(torch.randn(3, 4, 2, 5) * 0.3)
        self.out = nn.Linear(2 * 3 * 5 + 2 * 3 * 6 + 12 + 24 + 8 + 5, C)

    def forward(self, x):
        B = x.shape[0]
        q, k, v = self.qkv(x).view(B, 3, 2, 3, 4).chunk(3, dim=1)
        q, k, v = q.squeeze(1), k.squeeze(1), v.squeeze(1)           # (B, 2, 3, 4)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / 2.0
        o = torch.einsum("bhqk,bhkd->bhqd", s.softmax(-1), v)       # (B, 2, 3, 4)
        p = torch.einsum("bld,dh->blh", o.reshape(B, 6, 4), self.w)  # (B, 6, 5)
        r = torch.einsum("...d,ed->...e", p, self.e)                 # (B, 6, 6)
        f = x.mean(0)  # (not a row: trun shuffles the rows)
        g = torch.einsum("i,j->ij", f, f[:6]).sum(1)                 # (12,)
        bij = torch.einsum("bij,bjk->bik", q.reshape(B, 6, 4), k.reshape(B, 4, 6))
        bij = bij + torch.einsum("bij,bjk->bik", q.reshape(B, 6, 4), self.w[None, :, :1])
        t1 = torch.einsum("ij,jk", x, self.m)                        # implicit: ik
        t2 = torch.einsum("ij->ji", bij.sum(0)).reshape(1, 36)[:, :8]
        t3 = torch.einsum("bij->bj", bij) + torch.einsum("bi,bi->b", x, x).unsqueeze(1) / 10
        t4 = torch.einsum("ji,jk->ik", x, x).sum(0) + torch.einsum("ij,kj->ik", x.t(), x.t()).sum(0)
        t5 = torch.einsum("bhqd,bhkd->bqhk", q, v).reshape(B, -1)[:, :8]
        t6 = torch.einsum("bij,k->bk", q.reshape(B, 6, 4), f[:8])
        t7 = torch.einsum("abcd,cdbe->ae", q, self.w4)              # 3 contracted
        feats = [p.reshape(B, -1), r.reshape(B, -1), (g + t4).expand(B, 12),
                 t1 + t3.repeat(1, 4) + t6.repeat(1, 3), t2 + t5, t7]
        return self.out(torch.cat(feats, dim=1))


class Triangles(nn.Module):
    """torch.tril / triu and the methods on graph values, with diagonals
    above, on and below the main one, and one that keeps everything."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 2 * 4 * 5)
        self.out = nn.Linear(2 * 4 * 5, C)

    def forward(self, x):
        s = self.fc(x).view(x.shape[0], 2, 4, 5)
        y = torch.tril(s) + s.triu(1) * 2 + torch.triu(s, diagonal=-1) * 0.5
        y = y + s.tril(-2) * 3 + torch.tril(s, 10) * 0.25 + torch.triu(s * s, 2)
        return self.out(y.flatten(1))


class Attention(nn.Module):
    """nn.MultiheadAttention over (B, T, E) tokens made from the input:
    `kind` picks batch_first with need_weights=False, sequence first with
    the averaged attention weights used, per-head weights, or causal masks
    (float -inf and bool) with bias=False."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(D, T * E)
        first = kind != "seq_first"
        self.attn = nn.MultiheadAttention(E, HEADS, batch_first=first,
                                          bias=kind != "causal")
        if kind == "causal":
            self.attn2 = nn.MultiheadAttention(E, HEADS, batch_first=True)
            self.register_buffer("mask", torch.triu(torch.full((T, T), float("-inf")), 1))
        extra = {"seq_first": T * T, "per_head": HEADS * T * T}.get(kind, 0)
        self.out = nn.Linear(T * E + extra, C)

    def forward(self, x):
        B = x.shape[0]
        h = self.fc(x).view(B, T, E)
        if self.kind == "batch_first":
            y = self.attn(h, h, h, need_weights=False)[0]
            feats = [y.flatten(1)]
        elif self.kind == "seq_first":
            s = h.transpose(0, 1)                        # (T, B, E)
            y, w = self.attn(s, s, s)
            feats = [y.transpose(0, 1).flatten(1), w.flatten(1)]
        elif self.kind == "per_head":
            y, w = self.attn(h, h, h, average_attn_weights=False)
            feats = [y.flatten(1), w.flatten(1)]
        else:
            y, _ = self.attn(h, h, h, attn_mask=self.mask, need_weights=False)
            bool_mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            y2, _ = self.attn2(y, y, y, attn_mask=bool_mask)
            feats = [(y + y2).flatten(1)]
        return self.out(torch.cat(feats, dim=1))


class GroupedQuery(nn.Module):
    """Grouped-query attention as LLaMA code writes it: k and v with fewer
    heads repeat_interleave'd to the query heads (what
    F.scaled_dot_product_attention(enable_gqa=True) is mapped to), causal."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D, T * 4 * 3)
        self.kv = nn.Linear(D, 2 * T * 2 * 3)
        self.out = nn.Linear(T * 4 * 3, C)

    def forward(self, x):
        B = x.shape[0]
        q = self.q(x).view(B, T, 4, 3).transpose(1, 2)             # (B, 4, T, 3)
        k, v = self.kv(x).view(B, T, 2, 6).transpose(1, 2).split(3, dim=-1)
        k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
        s = (q @ k.transpose(-2, -1)) / 3 ** 0.5
        s = s.masked_fill(torch.ones(T, T).tril() == 0, float("-inf"))
        o = s.softmax(-1) @ v                                      # (B, 4, T, 3)
        return self.out(o.transpose(1, 2).reshape(B, -1))


class RmsNorm(nn.Module):
    """nn.RMSNorm (weight; default and given eps) and F.rms_norm (torch >= 2.4)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 2 * 12)
        self.n1 = nn.RMSNorm(12)
        self.n2 = nn.RMSNorm(12, eps=1e-3, elementwise_affine=False)
        self.g = nn.Parameter(torch.linspace(0.5, 1.5, 12))
        self.out = nn.Linear(2 * 12, C)

    def forward(self, x):
        h = self.fc(x).view(x.shape[0], 2, 12)
        y = self.n1(h) + self.n2(h) + F.rms_norm(h, (12,), self.g, 1e-5)
        return self.out(y.flatten(1))


class SdpaGqa(nn.Module):
    """F.scaled_dot_product_attention(enable_gqa=True, is_causal=True)
    with 4 query heads and 2 key/value heads (torch >= 2.5)."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D, T * 4 * 3)
        self.kv = nn.Linear(D, 2 * T * 2 * 3)
        self.out = nn.Linear(T * 4 * 3, C)

    def forward(self, x):
        B = x.shape[0]
        q = self.q(x).view(B, T, 4, 3).transpose(1, 2)
        k, v = self.kv(x).view(B, T, 2, 6).transpose(1, 2).split(3, dim=-1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.out(o.transpose(1, 2).reshape(B, -1))


def _sdpa_has_gqa():
    import inspect
    fn = getattr(F, "scaled_dot_product_attention", None)
    if fn is None:
        return False
    try:
        return "enable_gqa" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return "enable_gqa" in (fn.__doc__ or "")


CASES = {"clamps": Clamps, "hard_activations": HardActivations, "repeats": Repeats,
         "outer": Outer, "einsum": Einsum, "triangles": Triangles,
         "mha_batch_first": lambda: Attention("batch_first"),
         "mha_seq_first_weights": lambda: Attention("seq_first"),
         "mha_per_head_weights": lambda: Attention("per_head"),
         "mha_causal": lambda: Attention("causal"), "grouped_query": GroupedQuery}
if hasattr(nn, "RMSNorm") and hasattr(F, "rms_norm"):  # torch >= 2.4
    CASES["rms_norm"] = RmsNorm
if _sdpa_has_gqa():  # torch >= 2.5
    CASES["sdpa_gqa"] = SdpaGqa
SKIPPED = [n for n in ("rms_norm", "sdpa_gqa") if n not in CASES]


def check(name, args):
    H.seed_all(1)
    module = CASES[name]()
    x = torch.randn(N, D)
    y = torch.randint(0, C, (N,))
    work = os.path.join(args.work_dir, name)
    os.makedirs(work, exist_ok=True)
    model = tcc.from_torch(module, (x,), loss=F.cross_entropy, target=y,
                           optimizer=torch.optim.SGD(module.parameters(), lr=0.1))
    ref = H.reference_step(module, lambda m, x, y: F.cross_entropy(m(x), y), (x, y))
    proto = model.proto()
    path = os.path.join(work, f"{name}.pbtxt")
    model.save(path)
    step = os.path.join(work, f"{name}.so")
    H.compile_step(args.bin_dir, path, step, "--emit-gradients", "--dump-dir",
                   os.path.join(work, "dump"))
    outs = H.step_outputs(args.bin_dir, step, work,
                          dict(zip([i.name for i in proto.inputs], (x.numpy(), y.numpy()))),
                          module)
    return H.compare_step(name, proto, outs, ref), proto


def fused_attention(args, name):
    """tg-fuse-attention's report of a case: how many attentions it fused."""
    dump = os.path.join(args.work_dir, name, "dump")
    reports = [f for f in os.listdir(dump) if "fuse-attention" in f and f.endswith(".txt")] \
        if os.path.isdir(dump) else []
    if not reports:
        return None
    with open(os.path.join(dump, sorted(reports)[0])) as f:
        return f.read()


def structural_checks(protos, args):
    """What the mapping must have emitted, beyond matching numbers."""
    failures = []
    ops = {name: [n.op for n in p.nodes] for name, p in protos.items()}
    for name in ("clamps", "hard_activations"):
        if name in ops and "min" in ops[name]:
            failures.append(f"{name}: clamps should be selects (PyTorch's gradient at "
                            f"the bounds), got a min: {sorted(set(ops[name]))}")
    if "triangles" in ops and ops["triangles"].count("iota") != 10:
        failures.append(f"triangles: expected 5 masks of 2 iotas (tril(s, 10) needs "
                        f"none), got {ops['triangles'].count('iota')} iotas")
    for name in ("mha_batch_first", "mha_seq_first_weights", "mha_causal"):
        if name not in protos:
            continue
        p = {q.name: q for q in protos[name].params}
        for pname in ("attn.in_proj_weight", "attn.out_proj.weight"):
            if pname not in p or list(p[pname].torch.perm):
                failures.append(f"{name}: {pname} should be a parameter in PyTorch's "
                                f"layout: {sorted(p)}")
    if "mha_causal" in ops and ops["mha_causal"].count("causal_mask") != 2:
        failures.append(f"mha_causal: expected 2 causal_masks, got {ops['mha_causal']}")
    # The attention written out is what tg-fuse-attention fuses (grouped-query
    # attention's k and v repeats included: one tg.attention with Hkv < H).
    for name, want in (("grouped_query", "Hkv=2"), ("sdpa_gqa", "Hkv=2"),
                       ("mha_batch_first", "H=2 Hkv=2")):
        report = fused_attention(args, name) if name in protos else None
        if report is not None and ("1 fused" not in report or want not in report):
            failures.append(f"{name}: tg-fuse-attention should fuse one attention "
                            f"({want}):\n{report}")
    return failures


class Fn(nn.Module):
    """A Linear to (B, T, E) tokens, then `fn(module, h)`, for the refusals."""

    def __init__(self, fn, **mha):
        super().__init__()
        self.fc = nn.Linear(D, T * E)
        self.fn = fn
        self.attn = nn.MultiheadAttention(E, HEADS, batch_first=True, **mha)

    def forward(self, x):
        h = self.fc(x).view(x.shape[0], T, E)
        return self.fn(self, h).flatten(1)


def refusals():
    """Forms that are not supported end in one TccError line naming them."""
    x, y = torch.randn(N, D), torch.randint(0, C, (N,))

    def importer(fn, **mha):
        def make():
            m = Fn(fn, **mha)
            tcc.from_torch(m, (x,), loss=F.cross_entropy, target=y,
                           optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
        return make

    cases = [
        (importer(lambda m, h: torch.einsum("bii->bi", h[:, :, :T])), "a label repeated"),
        (importer(lambda m, h: torch.einsum("bij,bjk,bkl->bil", h, h.transpose(1, 2), h)),
         "write a chain of two-operand einsums"),
        (importer(lambda m, h: h.repeat_interleave(torch.tensor([1, 2, 1, 2]), dim=1)),
         "repeat_interleave with a tensor of repeats"),
        (importer(lambda m, h: m.attn(h, h * 2.0, h * 2.0)[0]),
         "only self-attention"),
        (importer(lambda m, h: m.attn(h, h, h, key_padding_mask=torch.zeros(
            h.shape[0], T, dtype=torch.bool))[0]), "key_padding_mask"),
        (importer(lambda m, h: m.attn(h, h, h, attn_mask=torch.eye(T, dtype=torch.bool))[0]),
         "not the constant causal mask"),
        (importer(lambda m, h: m.attn(h, h, h)[0], add_bias_kv=True), "add_bias_kv"),
        (importer(lambda m, h: m.attn(h, h[..., :4], h[..., :4])[0], kdim=4, vdim=4),
         "kdim / vdim"),
    ]
    failures = H.expect_tcc_errors(cases)
    for make, expected in cases:  # and each is one line
        try:
            make()
        except tcc.TccError as e:
            if "\n" in str(e).strip():
                failures.append(f"the error for '{expected}' is not one line: {e}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir")
    ap.add_argument("--case", action="append", choices=sorted(CASES) + ["refusals"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="tcc-more-ops-") as tmp:
        args.work_dir = args.work_dir or tmp
        failures, protos = [], {}
        for name in args.case or list(CASES) + ["refusals"]:
            if name == "refusals":
                failures += refusals()
                continue
            try:
                f, protos[name] = check(name, args)
                failures += f
            except (H.Failure, tcc.TccError) as e:
                failures.append(f"{name}: {e}")
        failures += structural_checks(protos, args)
    if SKIPPED:
        print(f"skipped (torch {torch.__version__} has no such op): {', '.join(SKIPPED)}")
    return H.report(failures)


if __name__ == "__main__":
    sys.exit(main())
