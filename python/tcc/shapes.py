"""Result shapes and dtypes of nodes, worked out while a model is written.

Model.op calls `infer` for every node whose input shapes are all known, so
a module can read `x.shape` (an attention needs B and T for its reshapes)
and a mismatch (a Linear fed the wrong width, shapes that do not broadcast)
is a TccError at the line that made it rather than a failure in
`tcc compile`. The rules are docs/ir.md's; an op this file does not know
gives an unknown shape (None), never an error.
"""

from typing import List, Optional, Sequence, Tuple

Shape = Tuple[int, ...]

_SAME_SHAPE = {"neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid",
               "relu", "silu", "sin", "cos", "gelu", "pow", "dropout",
               "causal_mask", "softmax", "log_softmax", "layer_norm",
               "rms_norm"}
_BROADCAST = {"add", "sub", "mul", "div", "max", "min"}
_COMPARE = {"equal", "not_equal", "less", "less_equal", "greater",
            "greater_equal"}


class ShapeError(ValueError):
    """Inputs whose shapes the op cannot take (Model.op reports it)."""


def broadcast(a: Shape, b: Shape) -> Shape:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            raise ShapeError(f"shapes {tuple(a)} and {tuple(b)} do not "
                             "broadcast")
        out.append(max(x, y) if x != 1 and y != 1 else x * y)
    return tuple(reversed(out))


def _axis(axis: int, rank: int) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise ShapeError(f"axis {axis} is out of range for rank {rank}")
    return a


def _matmul(a: Shape, b: Shape, ta: bool, tb: bool) -> Shape:
    if len(a) < 2 or len(b) < 2:
        # (K) or (M, K) x (K, N): only the 2-D and batched forms are checked
        if len(a) >= 1 and len(b) == 2:
            k = a[-1]
            if k != (b[1] if tb else b[0]):
                raise ShapeError(f"inner sizes differ: {tuple(a)} x {tuple(b)}")
            return tuple(a[:-1]) + ((b[0] if tb else b[1]),)
        return None
    m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if tb else (b[-2], b[-1])
    if k != k2:
        raise ShapeError(f"inner sizes differ: {tuple(a)} x {tuple(b)}"
                         + (" (transpose_a)" if ta else "")
                         + (" (transpose_b)" if tb else ""))
    batch = broadcast(tuple(a[:-2]), tuple(b[:-2]))
    return batch + (m, n)


def _reshape(x: Shape, shape: Sequence[int]) -> Shape:
    count = 1
    for d in x:
        count *= d
    dims = list(shape)
    if dims.count(-1) > 1:
        raise ShapeError(f"reshape to {dims}: at most one -1")
    known = 1
    for d in dims:
        if d != -1:
            known *= d
    if -1 in dims:
        if known == 0 or count % known:
            raise ShapeError(f"cannot reshape {tuple(x)} to {dims}")
        dims[dims.index(-1)] = count // known
    elif known != count:
        raise ShapeError(f"cannot reshape {tuple(x)} ({count} elements) to "
                         f"{dims} ({known})")
    return tuple(dims)


def _reduce(x: Shape, axes, keep: bool) -> Shape:
    axes = range(len(x)) if axes is None else [_axis(a, len(x)) for a in axes]
    axes = set(axes)
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(x))
    return tuple(d for i, d in enumerate(x) if i not in axes)


def _window2d(op: str, x: Shape, w: Optional[Shape], attrs: dict) -> Shape:
    """(N, O or C, HO, WO) of conv2d (weight w) or a 2-D pool of NCHW x."""
    if len(x) != 4:
        raise ShapeError(f"input must be NCHW (rank 4), got {tuple(x)}")
    n, c, h, wd = x
    if op == "conv2d":
        if len(w) != 4:
            raise ShapeError(f"weight must be (O, C/groups, KH, KW), got {tuple(w)}")
        g = attrs.get("groups", 1)
        if g < 1 or c % g or w[0] % g:
            raise ShapeError(f"groups {g} must divide the input channels {c} "
                             f"and the output channels {w[0]}")
        if w[1] != c // g:
            raise ShapeError(f"weight {tuple(w)} must have {c // g} input "
                             f"channels (input channels {c} / groups {g})")
        k, channels = w[2:], w[0]
        dil = attrs.get("dilation", [1, 1])
    else:
        k, channels, dil = attrs["kernel"], c, [1, 1]
    stride = attrs.get("stride", k)
    pad = attrs.get("padding", [0, 0])
    if min(stride) < 1 or min(pad) < 0 or min(dil) < 1 or min(k) < 1:
        raise ShapeError(f"stride {list(stride)} and dilation {list(dil)} must be "
                         f">= 1, padding {list(pad)} >= 0")
    if op != "conv2d" and (2 * pad[0] > k[0] or 2 * pad[1] > k[1]):
        raise ShapeError(f"padding {list(pad)} must be at most half the kernel "
                         f"{list(k)}")
    out = []
    for size, kk, s, p, d in zip((h, wd), k, stride, pad, dil):
        span = d * (kk - 1) + 1
        if span > size + 2 * p:
            raise ShapeError(f"kernel extent {span} is larger than the padded "
                             f"input {size + 2 * p} (input {tuple(x)})")
        out.append((size + 2 * p - span) // s + 1)
    return (n, channels, out[0], out[1])


def _conv_transpose2d(x: Shape, w: Shape, attrs: dict) -> Shape:
    """(N, C_out, HO, WO) of conv_transpose2d of NCHW x by weight (C_in,
    C_out/groups, KH, KW): HO = (H - 1) stride - 2 pad + dil (KH - 1) +
    output_padding + 1."""
    if len(x) != 4 or len(w) != 4:
        raise ShapeError(f"input must be NCHW and weight (C_in, C_out/groups, KH, KW), "
                         f"got {tuple(x)} and {tuple(w)}")
    g = attrs.get("groups", 1)
    if g < 1 or x[1] % g:
        raise ShapeError(f"groups {g} must divide the input channels {x[1]}")
    if w[0] != x[1]:
        raise ShapeError(f"weight {tuple(w)} must have C_in = {x[1]} first")
    stride = attrs.get("stride", [1, 1])
    pad = attrs.get("padding", [0, 0])
    dil = attrs.get("dilation", [1, 1])
    opad = attrs.get("output_padding", [0, 0])
    if min(stride) < 1 or min(dil) < 1 or min(pad) < 0:
        raise ShapeError("stride and dilation must be >= 1, padding >= 0")
    out = []
    for size, k, s, p, d, o in zip(x[2:], w[2:], stride, pad, dil, opad):
        if o < 0 or o >= s:
            raise ShapeError(f"output_padding {o} must be >= 0 and smaller than the "
                             f"stride {s} (PyTorch also allows it below the dilation; "
                             "tcc does not)")
        out.append((size - 1) * s - 2 * p + d * (k - 1) + o + 1)
    if min(out) < 1:
        raise ShapeError(f"the output would be {out[0]} x {out[1]} (input {tuple(x)})")
    return (x[0], w[1] * g, out[0], out[1])


def infer(op: str, shapes: List[Optional[Shape]], dtypes: List[Optional[str]],
          attrs: dict, n_outputs: int):
    """[(shape, dtype)] per output, entries None where unknown. Raises
    ShapeError when the known shapes cannot go together."""
    unknown = [(None, None)] * n_outputs
    dtype = dtypes[0] if dtypes else None
    if op in ("constant", "iota"):
        return [(tuple(attrs.get("shape", ())),
                 attrs.get("dtype", "f32" if op == "constant" else "i64"))]
    if not shapes or any(s is None for s in shapes):
        return unknown
    x = shapes[0]
    if op in _SAME_SHAPE:
        if op == "softmax" or op == "log_softmax":
            _axis(attrs.get("axis", -1), len(x))
        if op in ("layer_norm", "rms_norm"):
            for s in shapes[1:]:
                if tuple(s) != tuple(x[-1:]):
                    raise ShapeError(f"weight/bias {tuple(s)} must be "
                                     f"({x[-1] if x else 0},) for input "
                                     f"{tuple(x)}")
        return [(x, dtype)]
    if op == "cast":
        return [(x, attrs.get("dtype"))]
    if op in ("mean", "sum", "max") and len(shapes) == 1:
        return [(_reduce(x, attrs.get("axes"), bool(attrs.get("keep_dims"))),
                 dtype)]
    if op in _BROADCAST or op in _COMPARE:
        out = broadcast(x, shapes[1])
        return [(out, "bool" if op in _COMPARE else dtype)]
    if op == "select":
        out = broadcast(broadcast(x, shapes[1]), shapes[2])
        return [(out, dtypes[1])]
    if op == "matmul":
        out = _matmul(x, shapes[1], bool(attrs.get("transpose_a")),
                      bool(attrs.get("transpose_b")))
        return [(out, dtype)] if out is not None else unknown
    if op == "embedding":
        if len(x) != 2:
            raise ShapeError(f"the table must be (V, C), got {tuple(x)}")
        return [(tuple(shapes[1]) + (x[1],), dtype)]
    if op == "softmax_cross_entropy":
        if len(x) != 2 or tuple(shapes[1]) != x[:1]:
            raise ShapeError(f"logits (N, C) and labels (N), got {tuple(x)} "
                             f"and {tuple(shapes[1])}")
        return [((x[0],), dtype)]
    if op == "cross_entropy":
        if tuple(shapes[1]) != tuple(x[:-1]):
            raise ShapeError(f"targets {tuple(shapes[1])} must be the "
                             f"logits' {tuple(x)} without the last dim")
        return [((), dtype)]
    if op == "reshape":
        return [(_reshape(x, attrs["shape"]), dtype)]
    if op == "transpose":
        perm = attrs.get("perm") or list(reversed(range(len(x))))
        perm = [p + len(x) if p < 0 else p for p in perm]
        if sorted(perm) != list(range(len(x))):
            raise ShapeError(f"perm {list(perm)} is not a permutation of "
                             f"{len(x)} dims")
        return [(tuple(x[p] for p in perm), dtype)]
    if op == "broadcast_to":
        target = tuple(attrs["shape"])
        if broadcast(x, target) != target:
            raise ShapeError(f"{tuple(x)} does not broadcast to {target}")
        return [(target, dtype)]
    if op == "slice":
        out = list(x)
        axes = attrs.get("axes") or list(range(len(attrs["starts"])))
        for a, s, e in zip(axes, attrs["starts"], attrs["ends"]):
            a = _axis(a, len(x))
            s = s + x[a] if s < 0 else s
            e = e + x[a] if e < 0 else e
            s, e = max(0, min(s, x[a])), max(0, min(e, x[a]))
            if e <= s:
                raise ShapeError(f"slice [{s}, {e}) of axis {a} (size "
                                 f"{x[a]}) is empty")
            out[a] = e - s
        return [(tuple(out), dtype)]
    if op == "concat":
        a = _axis(attrs.get("axis", 0), len(x))
        total = 0
        for s in shapes:
            if len(s) != len(x) or any(s[i] != x[i] for i in range(len(x))
                                       if i != a):
                raise ShapeError(f"concat along axis {a}: {tuple(x)} and "
                                 f"{tuple(s)} differ elsewhere")
            total += s[a]
        return [(tuple(x[:a]) + (total,) + tuple(x[a + 1:]), dtype)]
    if op == "batch_norm":
        if len(x) < 2:
            raise ShapeError(f"batch_norm needs (N, C, ...), got {tuple(x)}")
        for s in shapes[1:]:
            if tuple(s) != (x[1],):
                raise ShapeError(f"running statistics, weight and bias must be "
                                 f"({x[1]},) (the channels of {tuple(x)}), got "
                                 f"{tuple(s)}")
        return [(x, dtype)]
    if op == "conv_transpose2d":
        return [(_conv_transpose2d(x, shapes[1], attrs), dtype)]
    if op in ("conv2d", "max_pool2d", "avg_pool2d"):
        return [(_window2d(op, x, shapes[1] if op == "conv2d" else None, attrs),
                 dtype)]
    if op == "split":
        a = _axis(attrs.get("axis", 0), len(x))
        sizes = list(attrs["sizes"])
        if sum(sizes) != x[a]:
            raise ShapeError(f"split sizes {sizes} do not add up to axis "
                             f"{a}'s size {x[a]}")
        return [(tuple(x[:a]) + (s,) + tuple(x[a + 1:]), dtype)
                for s in sizes]
    return unknown
