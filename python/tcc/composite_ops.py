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
