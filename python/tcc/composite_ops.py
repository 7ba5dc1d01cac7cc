"""Vision ops built from the graph's own ops (docs/ir.md, "Composite ops"):
group_norm, adaptive_avg_pool2d and interpolate. Exported by tcc.ops.

They are decompositions, not new IR ops, so every backend, the gradient
rules, tg-amp and the float64 interpreter already handle them:

- group_norm: x (N, C, ...) viewed as (1, N*G, C/G * ...), a batch_norm
  with batch statistics and no affine (each (image, group) is one of its
  channels: the fused batch-norm kernels, forward and backward), then the
  per-channel weight and bias.
- adaptive_avg_pool2d: the mean over the last two axes for a (1, 1) output,
  avg_pool2d when each output size divides its input, else one product per
  axis with a pooling matrix (PyTorch's windows: floor(o * in / out) to
  ceil((o + 1) * in / out)).
- interpolate: nearest by an integer factor is a broadcast (no arithmetic);
  every other size and mode is one product per resized axis with an
  interpolation matrix (out, in) built in the graph from iota and compares,
  with PyTorch's source coordinates (area_pixel_compute_source_index): the
  weights are PyTorch's up to float rounding.

A resampling matrix is made from iota in the step (out x in elements, a few
KB), so a model file carries no table; the matrices do not depend on the
parameters, so autodiff gives them no gradient.
"""

import math
from typing import Optional, Sequence

from tcc import ops
from tcc.model import Tensor, TccError


def _shape_of(x: Tensor, op: str):
    if not isinstance(x, Tensor) or x.shape is None:
        raise TccError(f"{op}: the input's shape must be known (a tcc Tensor "
                       "from an input, a parameter or a shaped op)")
    return x.shape


# -- group_norm -----------------------------------------------------------------

def group_norm(x: Tensor, num_groups: int, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5,
               name: Optional[str] = None) -> Tensor:
    """torch.nn.functional.group_norm: x (N, C, ...) normalized over each
    group of C / num_groups channels and all the other axes (biased
    variance), then * weight (C) + bias (C) per channel when given."""
    shape = _shape_of(x, "group_norm")
    if len(shape) < 2:
        raise TccError(f"group_norm: the input must be (N, C, ...), got {shape}")
    n, c = shape[0], shape[1]
    g = int(num_groups)
    if g < 1 or c % g:
        raise TccError(f"group_norm: num_groups {num_groups} must divide the "
                       f"{c} channels")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.shape is not None and tuple(t.shape) != (c,)):
            raise TccError(f"group_norm: the {what} must be ({c},), got {t.shape}")
    base = name or x.model._fresh("group_norm")
    inner = math.prod(shape[1:]) // g
    # (1, N*G, inner): each (image, group) a "channel" of a batch norm with
    # batch statistics, whose fused kernels split long channels over many
    # blocks (a layer norm's warp per row left the GPU idle: 256 rows of
    # 65536 ran at ~230 GB/s on an H200).
    rows = ops.reshape(x, (1, n * g, inner), name=f"{base}.groups")
    y = ops.batch_norm(rows, None, None, eps=eps, name=f"{base}.normalized")
    y = ops.reshape(y, shape, name=f"{base}.unflat" if weight is not None or bias is not None else base)
    per_channel = (c,) + (1,) * (len(shape) - 2)
    if weight is not None:
        w = ops.reshape(weight, per_channel, name=f"{base}.weight_c11")
        y = ops.mul(y, w, name=f"{base}.scaled" if bias is not None else base)
    if bias is not None:
        b = ops.reshape(bias, per_channel, name=f"{base}.bias_c11")
        y = ops.add(y, b, name=base)
    return y


# -- resampling matrices --------------------------------------------------------

def _grid(model, n_out: int, n_in: int, base: str):
    """(o, i) index grids of shape (n_out, n_in) in f32 (exact below 2^24)."""
    o = ops.iota(model, (n_out, n_in), axis=0, dtype="f32", name=f"{base}.o")
    i = ops.iota(model, (n_out, n_in), axis=1, dtype="f32", name=f"{base}.i")
    return o, i


def _indicator(cond: Tensor, name: str) -> Tensor:
    return ops.select(cond, 1.0, 0.0, name=name)


def _pool_matrix(model, n_out: int, n_in: int, base: str) -> Tensor:
    """(n_out, n_in): 1 / count over PyTorch's adaptive window of output o,
    [floor(o * in / out), ceil((o + 1) * in / out)), in integer arithmetic:
    i in the window iff o * in < (i + 1) * out and i * out < (o + 1) * in."""
    o, i = _grid(model, n_out, n_in, base)
    after_start = ops.less(ops.mul(o, float(n_in)), ops.mul(ops.add(i, 1.0), float(n_out)),
                           name=f"{base}.after_start")
    before_end = ops.less(ops.mul(i, float(n_out)), ops.mul(ops.add(o, 1.0), float(n_in)),
                          name=f"{base}.before_end")
    inside = ops.mul(_indicator(after_start, f"{base}.a"), _indicator(before_end, f"{base}.b"),
                     name=f"{base}.inside")
    count = ops.sum(inside, axes=[1], keep_dims=True, name=f"{base}.count")
    return ops.div(inside, count, name=base)


def _source_scale(n_in: int, n_out: int, align_corners: bool,
                  scale_factor: Optional[float]) -> float:
    """PyTorch's area_pixel_compute_scale (as float32 arithmetic would)."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    if scale_factor is not None and scale_factor > 0:
        return 1.0 / scale_factor
    return n_in / n_out


def _nearest_matrix(model, n_out: int, n_in: int, scale: float, exact: bool,
                    base: str) -> Tensor:
    """(n_out, n_in): 1 at i = min(floor(o * scale), in - 1) (nearest), or
    min(floor((o + 0.5) * scale), in - 1) (nearest-exact)."""
    o, i = _grid(model, n_out, n_in, base)
    src = ops.mul(ops.add(o, 0.5) if exact else o, float(scale), name=f"{base}.src")
    src = ops.minimum(src, float(n_in - 1), name=f"{base}.clamped")
    d = ops.sub(src, i, name=f"{base}.d")
    at = ops.mul(_indicator(ops.greater_equal(d, 0.0), f"{base}.ge0"),
                 _indicator(ops.less(d, 1.0), f"{base}.lt1"), name=base)
    return at


def _linear_matrix(model, n_out: int, n_in: int, scale: float, align_corners: bool,
                   base: str) -> Tensor:
    """(n_out, n_in): the hat weights max(0, 1 - |src(o) - i|), src PyTorch's
    source coordinate (align_corners: o * scale; else (o + 0.5) * scale -
    0.5, at least 0), clamped to in - 1 (PyTorch puts both weights on the
    last pixel there)."""
    o, i = _grid(model, n_out, n_in, base)
    if align_corners:
        src = ops.mul(o, float(scale), name=f"{base}.src")
    else:
        src = ops.sub(ops.mul(ops.add(o, 0.5), float(scale)), 0.5, name=f"{base}.src0")
        src = ops.maximum(src, 0.0, name=f"{base}.src")
    src = ops.minimum(src, float(n_in - 1), name=f"{base}.clamped")
    dist = ops.maximum(ops.sub(src, i), ops.sub(i, src), name=f"{base}.dist")
    return ops.relu(ops.sub(1.0, dist), name=base)


def _apply(x: Tensor, matrix: Tensor, axis: int, base: str) -> Tensor:
    """x with its axis `axis` (-1 or -2) replaced by matrix (out, in) @ it."""
    if x.dtype not in (None, "f32"):
        matrix = ops.cast(matrix, x.dtype, name=f"{base}.cast")
    if axis == -1:  # (..., W) x (W, Wo)
        return ops.matmul(x, matrix, transpose_b=True, name=base)
    return ops.matmul(matrix, x, name=base)  # (Ho, H) x (..., H, W), batch broadcast


# -- adaptive_avg_pool2d --------------------------------------------------------

def _pair_or_none(v, what: str):
    if v is None or isinstance(v, (int, float)):
        return [v, v]
    if not isinstance(v, (list, tuple)):
        raise TccError(f"{what} must be a number or a pair, got {type(v).__name__}")
    v = list(v)
    if len(v) != 2:
        raise TccError(f"{what} needs 1 or 2 values (height, width), got {len(v)}")
    return v


def adaptive_avg_pool2d(x: Tensor, output_size, name: Optional[str] = None) -> Tensor:
    """torch.nn.functional.adaptive_avg_pool2d on x (..., H, W) (rank 3 or
    4): output_size an int or (oh, ow), None keeping that size."""
    shape = _shape_of(x, "adaptive_avg_pool2d")
    if len(shape) not in (3, 4):
        raise TccError(f"adaptive_avg_pool2d: the input must be (N, C, H, W) or "
                       f"(C, H, W), got {shape}")
    h, w = shape[-2], shape[-1]
    oh, ow = _pair_or_none(output_size, "adaptive_avg_pool2d output_size")
    oh, ow = h if oh is None else int(oh), w if ow is None else int(ow)
    if oh < 1 or ow < 1:
        raise TccError(f"adaptive_avg_pool2d: output size ({oh}, {ow}) must be positive")
    base = name or x.model._fresh("adaptive_avg_pool2d")
    if (oh, ow) == (h, w):
        return x
    if (oh, ow) == (1, 1):
        return ops.mean(x, axes=[len(shape) - 2, len(shape) - 1], keep_dims=True, name=base)
    if h % oh == 0 and w % ow == 0 and len(shape) == 4:
        k = (h // oh, w // ow)
        return ops.avg_pool2d(x, k, k, 0, name=base)
    y = x
    if oh != h:
        y = _apply(y, _pool_matrix(x.model, oh, h, f"{base}.rows"), -2,
                   base if ow == w else f"{base}.h")
    if ow != w:
        y = _apply(y, _pool_matrix(x.model, ow, w, f"{base}.cols"), -1, base)
    return y


# -- interpolate ----------------------------------------------------------------

INTERPOLATE_MODES = ("nearest", "nearest-exact", "bilinear")


def interpolate(x: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: Optional[bool] = None,
                recompute_scale_factor: Optional[bool] = None,
                name: Optional[str] = None) -> Tensor:
    """torch.nn.functional.interpolate on x (N, C, H, W): mode "nearest",
    "nearest-exact" or "bilinear" (align_corners False by default, as
    PyTorch), to `size` (int or (h, w)) or by `scale_factor` (number or
    pair; the output size is floor(in * factor), and the factor itself maps
    coordinates unless recompute_scale_factor, as in PyTorch)."""
    shape = _shape_of(x, "interpolate")
    if mode not in INTERPOLATE_MODES:
        raise TccError(f"interpolate: mode '{mode}' is not supported (supported: "
                       f"{', '.join(INTERPOLATE_MODES)}; bicubic, area, linear, trilinear are not)")
    if len(shape) != 4:
        raise TccError(f"interpolate: the input must be (N, C, H, W), got {shape}")
    if align_corners is not None and mode != "bilinear":
        raise TccError("interpolate: align_corners only applies to mode 'bilinear'")
    if (size is None) == (scale_factor is None):
        raise TccError("interpolate: give exactly one of size and scale_factor")
    h, w = shape[2], shape[3]
    if size is not None:
        oh, ow = _pair_or_none(size, "interpolate size")
        if oh is None or ow is None:
            raise TccError("interpolate: size needs both (h, w)")
        factors = [None, None]
    else:
        factors = [float(f) for f in _pair_or_none(scale_factor, "interpolate scale_factor")]
        if min(factors) <= 0:
            raise TccError(f"interpolate: scale_factor {scale_factor} must be positive")
        oh, ow = int(math.floor(h * factors[0])), int(math.floor(w * factors[1]))
        if recompute_scale_factor:
            factors = [None, None]
    oh, ow = int(oh), int(ow)
    if oh < 1 or ow < 1:
        raise TccError(f"interpolate: output size ({oh}, {ow}) must be positive")
    base = name or x.model._fresh("interpolate")
    # An axis is resampled unless it keeps its size with no factor (or 1): a
    # factor maps coordinates even where floor(in * factor) == in.
    resize_h = oh != h or factors[0] not in (None, 1.0)
    resize_w = ow != w or factors[1] not in (None, 1.0)
    if not resize_h and not resize_w:
        return x
    # Nearest by power-of-two factors: every pixel repeated, a broadcast
    # (floor(o * 2^-k) is exact; other factors keep PyTorch's float rounding
    # through the matrix).
    def pow2(k):
        return k >= 1 and k & (k - 1) == 0
    if mode == "nearest" and oh % h == 0 and ow % w == 0 and pow2(oh // h) and \
            pow2(ow // w) and all(f is None or f == int(f) for f in factors):
        sh, sw = oh // h, ow // w
        n, c = shape[0], shape[1]
        y = ops.reshape(x, (n, c, h, 1, w, 1), name=f"{base}.split")
        y = ops.broadcast_to(y, (n, c, h, sh, w, sw), name=f"{base}.repeat")
        return ops.reshape(y, (n, c, oh, ow), name=base)
    corners = bool(align_corners) if mode == "bilinear" else False

    def matrix(n_out, n_in, factor, tag):
        scale = _source_scale(n_in, n_out, corners, factor)
        if mode == "bilinear":
            return _linear_matrix(x.model, n_out, n_in, scale, corners, f"{base}.{tag}")
        return _nearest_matrix(x.model, n_out, n_in, scale, mode == "nearest-exact",
                               f"{base}.{tag}")

    y = x
    if resize_h:
        y = _apply(y, matrix(oh, h, factors[0], "rows"), -2, base if not resize_w else f"{base}.h")
    if resize_w:
        y = _apply(y, matrix(ow, w, factors[1], "cols"), -1, base)
    return y


# -- clamps and piecewise activations ---------------------------------------------
#
# Written with `select` rather than `max` / `min`: the gradient then goes to x
# exactly where PyTorch's backward sends it (tg.max gives half to each side of
# a tie, PyTorch's clamp all of it to x): clamp passes it where min <= x <=
# max, hardtanh (and relu6, hardsigmoid) only strictly inside.

def clamp(x: Tensor, min=None, max=None, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """torch.clamp: max(x, min) then min(., max) (min > max gives max, NaN
    stays NaN); min / max numbers or tensors (broadcast), either None."""
    if min is None and max is None:
        raise TccError("clamp: give min or max")
    base = name or _model_of(x, min, max)._fresh("clamp")
    y = x
    if min is not None:
        y = ops.select(ops.less(y, min, name=f"{base}.below"), min, y,
                       name=base if max is None else f"{base}.lo")
    if max is not None:
        y = ops.select(ops.greater(y, max, name=f"{base}.above"), max, y, name=base)
    return y


def _model_of(*xs):
    for x in xs:
        if isinstance(x, Tensor):
            return x.model
    raise TccError("an op needs at least one tcc Tensor input")


def hardtanh(x: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             name: Optional[str] = None) -> Tensor:
    """F.hardtanh: x clamped to [min_val, max_val], the gradient passed only
    strictly inside (PyTorch's hardtanh_backward)."""
    base = name or x.model._fresh("hardtanh")
    lo, hi = float(min_val), float(max_val)
    y = ops.select(ops.greater_equal(x, hi, name=f"{base}.at_hi"), hi, x, name=f"{base}.hi")
    return ops.select(ops.less_equal(x, lo, name=f"{base}.at_lo"), lo, y, name=base)


def relu6(x: Tensor, name: Optional[str] = None) -> Tensor:
    """F.relu6: hardtanh(x, 0, 6)."""
    return hardtanh(x, 0.0, 6.0, name=name or x.model._fresh("relu6"))


def hardsigmoid(x: Tensor, name: Optional[str] = None) -> Tensor:
    """F.hardsigmoid: relu6(x + 3) / 6 (gradient 1/6 strictly inside (-3, 3))."""
    base = name or x.model._fresh("hardsigmoid")
    return ops.div(hardtanh(ops.add(x, 3.0, name=f"{base}.shift"), 0.0, 6.0,
                            name=f"{base}.relu6"), 6.0, name=base)


def hardswish(x: Tensor, name: Optional[str] = None) -> Tensor:
    """F.hardswish: x * clamp(x + 3, 0, 6) / 6 (the inclusive clamp gives
    PyTorch's gradient at +-3 too: x / 3 + 1/2)."""
    base = name or x.model._fresh("hardswish")
    r = clamp(ops.add(x, 3.0, name=f"{base}.shift"), 0.0, 6.0, name=f"{base}.relu6")
    return ops.div(ops.mul(x, r, name=f"{base}.gated"), 6.0, name=base)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0,
             name: Optional[str] = None) -> Tensor:
    """F.softplus: log(1 + exp(beta x)) / beta, x itself where beta x >
    threshold; computed as max(z, 0) + log(1 + exp(-|z|)), z = beta x
    (no overflow; at z = 0 the two max ties give the gradient 1/2)."""
    base = name or x.model._fresh("softplus")
    beta = float(beta)
    z = x if beta == 1.0 else ops.mul(x, beta, name=f"{base}.z")
    pos = ops.maximum(z, 0.0, name=f"{base}.pos")
    mag = ops.maximum(z, ops.neg(z, name=f"{base}.negz"), name=f"{base}.abs")
    tail = ops.log(ops.add(ops.exp(ops.neg(mag, name=f"{base}.negabs"),
                                   name=f"{base}.exp"), 1.0, name=f"{base}.1p"),
                   name=f"{base}.log1p")
    linear = not math.isinf(float(threshold))
    y = ops.add(pos, tail, name=f"{base}.spz" if beta != 1.0 else
                f"{base}.sp" if linear else base)
    if beta != 1.0:
        y = ops.div(y, beta, name=f"{base}.sp" if linear else base)
    if not linear:
        return y
    return ops.select(ops.greater(z, float(threshold), name=f"{base}.linear"), x, y,
                      name=base)


def mish(x: Tensor, name: Optional[str] = None) -> Tensor:
    """F.mish: x * tanh(softplus(x)) (PyTorch's mish has no threshold)."""
    base = name or x.model._fresh("mish")
    sp = softplus(x, threshold=float("inf"), name=f"{base}.softplus")
    return ops.mul(x, ops.tanh(sp, name=f"{base}.tanh"), name=base)


# -- repeats, outer products, triangles -------------------------------------------

def _axis(axis: int, rank: int, op: str) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise TccError(f"{op}: axis {axis} is out of range for rank {rank}")
    return a


def repeat_interleave(x: Tensor, repeats: int, axis: int,
                      name: Optional[str] = None) -> Tensor:
    """torch.repeat_interleave(x, repeats, dim=axis) with an int: each slice
    along `axis` repeated `repeats` times in place, (.., n, ..) -> (.., n r,
    ..): reshape to (.., n, 1, ..), broadcast_to (.., n, r, ..), reshape.
    (k (B, Hkv, S, D) repeated along the heads is what tg-fuse-attention reads
    as grouped-query attention.)"""
    shape = tuple(_shape_of(x, "repeat_interleave"))
    a = _axis(axis, len(shape), "repeat_interleave")
    r = int(repeats)
    if r < 1:
        raise TccError(f"repeat_interleave: repeats must be >= 1, got {repeats}")
    if r == 1:
        return x
    base = name or x.model._fresh("repeat_interleave")
    split = shape[:a + 1] + (1,) + shape[a + 1:]
    wide = shape[:a + 1] + (r,) + shape[a + 1:]
    y = ops.reshape(x, split, name=f"{base}.split")
    y = ops.broadcast_to(y, wide, name=f"{base}.repeat")
    return ops.reshape(y, shape[:a] + (shape[a] * r,) + shape[a + 1:], name=base)


def tile(x: Tensor, repeats: Sequence[int], name: Optional[str] = None) -> Tensor:
    """Tensor.repeat(*repeats): x (leading 1s added up to len(repeats) dims)
    laid end to end repeats[d] times along each dim d: reshape to (1, s0, 1,
    s1, ..), broadcast_to (r0, s0, r1, s1, ..), reshape to (r0 s0, r1 s1, ..)."""
    shape = tuple(_shape_of(x, "repeat"))
    reps = [int(r) for r in repeats]
    if len(reps) < len(shape):
        raise TccError(f"repeat: {len(reps)} repeats for a rank-{len(shape)} tensor")
    if any(r < 1 for r in reps):
        raise TccError(f"repeat: repeats must be >= 1, got {reps}")
    full = (1,) * (len(reps) - len(shape)) + shape
    out = tuple(r * s for r, s in zip(reps, full))
    base = name or x.model._fresh("repeat")
    if all(r == 1 for r in reps):
        return x if full == shape else ops.reshape(x, full, name=base)
    pairs = [d for s in full for d in (1, s)]
    wide = [d for r, s in zip(reps, full) for d in (r, s)]
    y = ops.reshape(x, pairs, name=f"{base}.split")
    y = ops.broadcast_to(y, wide, name=f"{base}.repeat")
    return ops.reshape(y, out, name=base)


def outer(a: Tensor, b: Tensor, name: Optional[str] = None) -> Tensor:
    """torch.outer of 1-D a (n) and b (m): a as (n, 1) times b as (1, m)."""
    sa, sb = _shape_of(a, "outer"), _shape_of(b, "outer")
    if len(sa) != 1 or len(sb) != 1:
        raise TccError(f"outer: both operands must be 1-D, got {tuple(sa)} and {tuple(sb)}")
    base = name or a.model._fresh("outer")
    return ops.mul(ops.reshape(a, (sa[0], 1), name=f"{base}.col"),
                   ops.reshape(b, (1, sb[0]), name=f"{base}.row"), name=base)


def _triangle(x: Tensor, diagonal: int, lower: bool, name: Optional[str]) -> Tensor:
    op = "tril" if lower else "triu"
    shape = tuple(_shape_of(x, op))
    if len(shape) < 2:
        raise TccError(f"{op}: the input must have at least 2 dims, got {shape}")
    rows, cols = shape[-2:]
    k = int(diagonal)
    # Everything kept (or nothing): no mask.
    if (lower and k >= cols - 1) or (not lower and k <= -(rows - 1)):
        return x
    base = name or x.model._fresh(op)
    i = ops.iota(x.model, (rows, cols), axis=0, dtype="f32", name=f"{base}.i")
    j = ops.iota(x.model, (rows, cols), axis=1, dtype="f32", name=f"{base}.j")
    d = ops.sub(j, i, name=f"{base}.j_minus_i")
    keep = (ops.less_equal if lower else ops.greater_equal)(d, float(k), name=f"{base}.keep")
    return ops.select(keep, x, 0.0, name=base)


def tril(x: Tensor, diagonal: int = 0, name: Optional[str] = None) -> Tensor:
    """torch.tril: x where j - i <= diagonal over the last two dims, else 0
    (a mask from two iotas: the gradient is masked the same way)."""
    return _triangle(x, diagonal, True, name)


def triu(x: Tensor, diagonal: int = 0, name: Optional[str] = None) -> Tensor:
    """torch.triu: x where j - i >= diagonal over the last two dims, else 0."""
    return _triangle(x, diagonal, False, name)


# -- einsum -----------------------------------------------------------------------

def _einsum_parse(equation: str, shapes):
    """The operands' labels (one string each, '...' replaced by fresh labels
    aligned from the right) and the output's, as torch.einsum reads them."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise TccError(f"einsum '{equation}': {len(terms)} operand terms for "
                       f"{len(shapes)} operands")
    letters = set(c for c in eq if c.isalpha())
    fresh = iter(c for c in map(chr, range(0x100, 0x200)) if c not in letters)
    ell_dims = 0
    for t, s in zip(terms, shapes):
        named = t.replace("...", "")
        if not all(c.isalpha() for c in named) or t.count("...") > 1:
            raise TccError(f"einsum '{equation}': bad subscripts '{t}'")
        if "..." in t:
            ell_dims = max(ell_dims, len(s) - len(named))
        elif len(named) != len(s):
            raise TccError(f"einsum '{equation}': '{t}' names {len(named)} dims of a "
                           f"rank-{len(s)} operand")
    ell = [next(fresh) for _ in range(ell_dims)]
    labels = []
    for t, s in zip(terms, shapes):
        if "..." in t:
            n = len(s) - len(t.replace("...", ""))
            if n < 0:
                raise TccError(f"einsum '{equation}': '{t}' names more dims than the "
                               f"operand's {len(s)}")
            t = t.replace("...", "".join(ell[ell_dims - n:]))
        labels.append(t)
    if arrow:
        if not all(c.isalpha() for c in out.replace("...", "")) or out.count("...") > 1:
            raise TccError(f"einsum '{equation}': bad output subscripts '{out}'")
        out = out.replace("...", "".join(ell))
    else:  # implicit: the ellipsis dims, then labels used once, in order
        counts = {}
        for t in labels:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = "".join(ell) + "".join(sorted(c for c in counts
                                            if counts[c] == 1 and c not in ell))
    return labels, out


def einsum(equation: str, *xs: Tensor, name: Optional[str] = None) -> Tensor:
    """torch.einsum of one or two operands, as transposes, reshapes, sums
    and one matmul: labels of the output found in both operands are batch
    dims, labels of both missing from the output are contracted (K), the
    rest are each operand's free dims (M, N); a label only one operand has
    and the output lacks is summed first. The operands are laid out as
    (batch, M, K) and (batch, K, N) (or transposed, with matmul's flags,
    when that is their order already), multiplied, and the (batch, M, N)
    product is reshaped and transposed to the output's order. Refused: a
    label twice in one operand (diagonals, traces), more than two operands,
    sizes that differ (but a dim of size 1 broadcasts, as in torch)."""
    if len(xs) not in (1, 2):
        raise TccError(f"einsum '{equation}': {len(xs)} operands (1 or 2 are supported; "
                       "write a chain of two-operand einsums instead)")
    shapes = [tuple(_shape_of(x, "einsum")) for x in xs]
    labels, out = _einsum_parse(equation, shapes)
    for t in labels + [out]:
        if len(set(t)) != len(t):
            raise TccError(f"einsum '{equation}': a label repeated in one term (a "
                           "diagonal or trace; write it with a mask and sum instead)")
    size = {}
    for t, s in zip(labels, shapes):
        for c, n in zip(t, s):
            if size.get(c, 1) not in (1, n) and n != 1:
                raise TccError(f"einsum '{equation}': label '{c}' has sizes {size[c]} "
                               f"and {n}")
            size[c] = max(size.get(c, 1), n)
    for c in out:
        if c not in size:
            raise TccError(f"einsum '{equation}': output label '{c}' is in no operand")
    base = name or xs[0].model._fresh("einsum")
    # A dim of size 1 where the other operand's is n broadcasts (as torch).
    xs = [x if all(size[c] == n for c, n in zip(t, s)) else
          ops.broadcast_to(x, [size[c] for c in t], name=f"{base}.broadcast{i}")
          for i, (x, t, s) in enumerate(zip(xs, labels, shapes))]

    def reduce_only(x, t, keep, tag):
        """x (labels t) summed over the labels not in `keep`."""
        axes = [i for i, c in enumerate(t) if c not in keep]
        if not axes:
            return x, t
        return (ops.sum(x, axes=axes, name=f"{base}.{tag}"),
                "".join(c for c in t if c in keep))

    def permute(x, t, order, tag, final=False):
        if t == order:
            return x
        return ops.transpose(x, [t.index(c) for c in order],
                             name=base if final else f"{base}.{tag}")

    if len(xs) == 1:
        y, t = reduce_only(xs[0], labels[0], out, "sum")
        if t == out and y is xs[0]:
            return y
        return permute(y, t, out, "t", final=True)

    (a, b), (ta, tb) = xs, labels
    a, ta = reduce_only(a, ta, set(tb) | set(out), "a_sum")
    b, tb = reduce_only(b, tb, set(ta) | set(out), "b_sum")
    batch = "".join(c for c in out if c in ta and c in tb)
    contract = "".join(c for c in ta if c in tb and c not in out)
    free_a = "".join(c for c in ta if c not in tb)
    free_b = "".join(c for c in tb if c not in ta)

    def prod(labels_):
        return math.prod(size[c] for c in labels_)

    def operand(x, t, free, tag, k_last):
        """x laid out as (batch, free, K) (k_last) or (batch, K, free), with
        the flag saying which; kept when already in either order."""
        straight = batch + (free + contract if k_last else contract + free)
        flipped = batch + (contract + free if k_last else free + contract)
        if t == straight:
            trans = False
        elif t == flipped:
            trans = True
        else:
            x, trans = permute(x, t, straight, f"{tag}_t"), False
        rows, cols = (free, contract) if k_last != trans else (contract, free)
        want = tuple(size[c] for c in batch) + (prod(rows), prod(cols))
        if tuple(size[c] for c in (straight if not trans else flipped)) != want:
            x = ops.reshape(x, want, name=f"{base}.{tag}_2d")
        return x, trans

    got = batch + free_a + free_b
    # (..., K) x (K, N), as a Linear layer's product: a's leading dims are
    # matmul's broadcast batch, no reshape.
    as_linear = not batch and len(contract) == 1 and len(free_a) > 1 and \
        ta == free_a + contract
    if as_linear:
        a2, trans_a = a, False
    else:
        a2, trans_a = operand(a, ta, free_a, "a", True)
    b2, trans_b = operand(b, tb, free_b, "b", False)
    flat = not as_linear and len(free_a) != 1 or len(free_b) != 1
    y = ops.matmul(a2, b2, transpose_a=trans_a, transpose_b=trans_b,
                   name=base if got == out and not flat else f"{base}.mm")
    if flat:
        y = ops.reshape(y, [size[c] for c in got],
                        name=base if got == out else f"{base}.unflat")
    return permute(y, got, out, "t", final=True)
