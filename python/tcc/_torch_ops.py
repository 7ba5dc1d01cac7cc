"""The PyTorch ops tcc.from_torch maps (torch_import.py drives it): one
handler per op, each given the converter, the fx node and its arguments
with graph values resolved (a `Dyn` for a value computed from the inputs or
the parameters, plain Python / torch constants otherwise). Shapes come from
the example run, so view(-1, ...) and size()-derived shapes are exact."""

import math
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from tcc import composite_ops as CO
from tcc import ops
from tcc.model import TccError


class Dyn:
    """A value of the tcc graph with the shape and dtype it had in PyTorch."""
    __slots__ = ("t", "shape", "dtype")

    def __init__(self, t, shape, dtype):
        self.t, self.shape, self.dtype = t, tuple(shape), dtype

    @property
    def rank(self):
        return len(self.shape)


class Unsupported(Exception):
    """An op or argument this importer cannot map (the driver names the
    op and its module path)."""


def _dim(d, rank):
    return d + rank if d < 0 else d


def _dims(dim, rank):
    if dim is None:
        return None
    if isinstance(dim, int):
        dim = [dim]
    return [_dim(int(d), rank) for d in dim]


def _const_float(x, what):
    if isinstance(x, torch.Tensor) and x.numel() == 1:
        return float(x.item())
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    raise Unsupported(f"{what} must be a constant number, got {type(x).__name__}")


# -- elementwise ---------------------------------------------------------------

def _unary(op):
    def h(c, node, args, kwargs):
        return getattr(ops, op)(c.t(args[0]))
    return h


def _binary(op):
    def h(c, node, args, kwargs):
        a, b = args[0], args[1] if len(args) > 1 else kwargs.get("other")
        alpha = kwargs.get("alpha", 1)
        if alpha != 1:
            b = _mul_const(c, b, alpha)
        if op == "div" and kwargs.get("rounding_mode") is not None:
            raise Unsupported("div with a rounding_mode")
        like = a if isinstance(a, Dyn) else b
        return c.model.op(op, c.t(a, like), c.t(b, like))
    return h


def _mul_const(c, x, k):
    if isinstance(x, Dyn):
        return Dyn(ops.mul(x.t, c.t(float(k), x)), x.shape, x.dtype)
    return x * k


def _compare(op):
    def h(c, node, args, kwargs):
        a, b = args[0], args[1]
        like = a if isinstance(a, Dyn) else b
        return getattr(ops, op)(c.t(a, like), c.t(b, like))
    return h


def _rsub(c, node, args, kwargs):  # torch.rsub(a, b) = b - a
    a, b = args[0], args[1]
    like = a if isinstance(a, Dyn) else b
    return c.model.op("sub", c.t(b, like), c.t(a, like))


def _neg(c, node, args, kwargs):
    return ops.neg(c.t(args[0]))


def _pow(c, node, args, kwargs):
    x, e = args[0], args[1] if len(args) > 1 else kwargs["exponent"]
    if not isinstance(x, Dyn):
        raise Unsupported("pow of a constant base by a tensor exponent")
    e = _const_float(e, "the exponent of pow")
    if e == 1.0:
        return x.t
    if e == 2.0:  # one multiply: exact, and what torch does for x ** 2
        return ops.mul(x.t, x.t)
    return ops.pow(x.t, e)


def _gelu(c, node, args, kwargs):
    approx = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
    if node.op == "call_module":
        approx = getattr(c.module_of(node), "approximate", "none")
    if approx not in ("none", "tanh"):
        raise Unsupported(f"gelu approximate={approx!r}")
    return ops.gelu(c.t(args[0]), approximate=approx)


def _activation_module(op):
    def h(c, node, args, kwargs):
        return getattr(ops, op)(c.t(args[0]))
    return h


def _dropout(c, node, args, kwargs):
    x = args[0]
    if node.op == "call_module":
        p = c.module_of(node).p
        training = True
    else:
        p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
        training = kwargs.get("training", args[2] if len(args) > 2 else True)
    # tcc's dropout drops in the train step and is the identity in eval;
    # an explicit training=False is the identity everywhere.
    if not training or float(p) == 0.0:
        return x.t
    return ops.dropout(x.t, rate=float(p))


# -- products and layers -------------------------------------------------------

def _matmul(c, node, args, kwargs):
    a, b = args[0], args[1]
    if not (isinstance(a, Dyn) and isinstance(b, Dyn)):
        raise Unsupported("matmul with a constant operand")
    if a.rank < 2 or b.rank < 2:
        raise Unsupported("matmul of a 1-D tensor")
    if b.rank > 2 and b.shape[:-2] != a.shape[:-2]:
        raise Unsupported(f"matmul with batch dims {a.shape[:-2]} and {b.shape[:-2]}")
    return ops.matmul(a.t, b.t)


def linear(c, x, weight_param, bias):
    """y = x W^T + b with W a parameter in either layout (torch_import picks
    tcc's (in, out) layout unless W is also used another way, e.g. tied to an
    embedding table)."""
    if not isinstance(weight_param, Dyn):
        raise Unsupported("linear with a constant weight")
    if c.is_transposed(weight_param):
        y = ops.matmul(c.t(x), weight_param.t)
    else:
        y = ops.matmul(c.t(x), weight_param.t, transpose_b=True)
    if bias is not None:
        y = ops.add(y, c.t(bias))
    return y


def _linear_module(c, node, args, kwargs):
    m = c.module_of(node)
    path = node.target
    w = c.param_value(f"{path}.weight")
    b = c.param_value(f"{path}.bias") if m.bias is not None else None
    return linear(c, args[0], w, b)


def _linear_function(c, node, args, kwargs):
    x = args[0]
    w = args[1] if len(args) > 1 else kwargs["weight"]
    b = args[2] if len(args) > 2 else kwargs.get("bias")
    return linear(c, x, w, b)


def _embedding_module(c, node, args, kwargs):
    m = c.module_of(node)
    if m.padding_idx is not None or m.max_norm is not None or m.sparse:
        raise Unsupported("nn.Embedding with padding_idx, max_norm or sparse")
    return ops.embedding(c.param_value(f"{node.target}.weight").t, c.t(args[0]))


def _embedding_function(c, node, args, kwargs):
    ids, table = args[0], args[1] if len(args) > 1 else kwargs["weight"]
    extra = [kwargs.get(k) for k in ("padding_idx", "max_norm")] + list(args[2:4])
    if any(e is not None for e in extra):
        raise Unsupported("F.embedding with padding_idx or max_norm")
    return ops.embedding(c.t(table), c.t(ids))


def _layer_norm(c, x, shape, weight, bias, eps):
    shape = [shape] if isinstance(shape, int) else list(shape)
    if len(shape) != 1 or shape[0] != x.shape[-1]:
        raise Unsupported(f"layer_norm over {shape} (only the last dimension)")
    if weight is None and bias is not None:
        weight = Dyn(ops.constant(c.model, 1.0, x.shape[-1:]), x.shape[-1:], x.dtype)
    return ops.layer_norm(x.t, c.t(weight) if weight is not None else None,
                          c.t(bias) if bias is not None else None, eps=float(eps))


def _layer_norm_module(c, node, args, kwargs):
    m = c.module_of(node)
    w = b = None
    if m.elementwise_affine:
        w = c.param_value(f"{node.target}.weight")
        if getattr(m, "bias", None) is not None:
            b = c.param_value(f"{node.target}.bias")
    return _layer_norm(c, args[0], m.normalized_shape, w, b, m.eps)


def _layer_norm_function(c, node, args, kwargs):
    names = ("input", "normalized_shape", "weight", "bias", "eps")
    a = dict(zip(names, args), **kwargs)
    return _layer_norm(c, a["input"], a["normalized_shape"], a.get("weight"),
                       a.get("bias"), a.get("eps", 1e-5))


def _softmax(op):
    def h(c, node, args, kwargs):
        x = args[0]
        if node.op == "call_module":
            dim = c.module_of(node).dim
        else:
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        if dim is None:
            raise Unsupported(f"{op} without dim")
        dtype = kwargs.get("dtype", args[2] if len(args) > 2 and node.op != "call_module"
                           else None)
        t = x.t
        if dtype is not None:
            # softmax(x, dim, dtype=torch.float32) (HuggingFace's attention):
            # x cast first, as PyTorch does.
            if dtype not in (torch.float32, torch.float64):
                raise Unsupported(f"{op} with dtype {dtype} (float32 or float64)")
            if dtype != x.dtype:
                t = ops.cast(t, c.dtype_name(dtype))
        return getattr(ops, op)(t, axis=_dim(int(dim), x.rank))
    return h


def _reduce(op):
    def h(c, node, args, kwargs):
        x = args[0]
        dim = kwargs.get("dim", kwargs.get("axis", args[1] if len(args) > 1 else None))
        keep = kwargs.get("keepdim", args[2] if len(args) > 2 else False)
        if kwargs.get("dtype") is not None:
            raise Unsupported(f"{op} with dtype")
        return getattr(ops, op)(x.t, axes=_dims(dim, x.rank), keep_dims=bool(keep))
    return h


# -- shapes --------------------------------------------------------------------

def _to_recorded_shape(c, node, args, kwargs):
    """view, reshape, flatten, unsqueeze, squeeze...: the shape the example
    run produced (so -1 and size()-derived dims need no re-evaluation)."""
    x = args[0]
    shape = tuple(c.recorded(node).shape)
    if shape == x.shape:
        return x.t
    return ops.reshape(x.t, list(shape))


def _identity(c, node, args, kwargs):
    return c.t(args[0])


def _transpose(c, node, args, kwargs):
    x = args[0]
    d0 = kwargs.get("dim0", args[1] if len(args) > 1 else None)
    d1 = kwargs.get("dim1", args[2] if len(args) > 2 else None)
    perm = list(range(x.rank))
    a, b = _dim(int(d0), x.rank), _dim(int(d1), x.rank)
    perm[a], perm[b] = perm[b], perm[a]
    return ops.transpose(x.t, perm) if a != b else x.t


def _t(c, node, args, kwargs):
    x = args[0]
    if x.rank < 2:
        return x.t
    perm = list(range(x.rank))[:-2] + [x.rank - 1, x.rank - 2]
    return ops.transpose(x.t, perm)


def _permute(c, node, args, kwargs):
    x = args[0]
    dims = kwargs.get("dims", args[1:])
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = dims[0]
    return ops.transpose(x.t, [_dim(int(d), x.rank) for d in dims])


def _split(c, node, args, kwargs):
    x = args[0]
    # split(x, size_or_sizes, dim) and chunk(x, n, dim): the sizes are the
    # example run's.
    dim = _dim(int(kwargs.get("dim", args[2] if len(args) > 2 else 0)), x.rank)
    sizes = [int(v.shape[dim]) for v in c.recorded(node)]
    if len(sizes) == 1:
        return [x.t]
    return ops.split(x.t, sizes, axis=dim)


def _unbind(c, node, args, kwargs):
    """unbind(x, dim): the slices along dim, each without it (timm's
    `q, k, v = qkv.unbind(0)`)."""
    x = args[0]
    dim = _dim(int(kwargs.get("dim", args[1] if len(args) > 1 else 0)), x.rank)
    n = x.shape[dim]
    shape = [d for i, d in enumerate(x.shape) if i != dim]
    parts = [x.t] if n == 1 else ops.split(x.t, [1] * n, axis=dim)
    return [ops.reshape(p, shape) for p in parts]


def _cat(c, node, args, kwargs):
    xs = args[0] if args else kwargs["tensors"]
    dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    like = next(x for x in xs if isinstance(x, Dyn))
    return ops.concat([c.t(x, like) for x in xs], axis=_dim(int(dim), like.rank))


def _expand(c, node, args, kwargs):
    shape = tuple(c.recorded(node).shape)
    return ops.broadcast_to(args[0].t, list(shape)) if shape != args[0].shape else args[0].t


def _getitem(c, node, args, kwargs):
    x, index = args[0], args[1]
    if isinstance(x, (list, tuple)):
        return x[index]
    if not isinstance(x, Dyn):
        raise Unsupported(f"indexing a {type(x).__name__}")
    index = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, (Dyn, torch.Tensor, list)) for i in index):
        raise Unsupported("advanced (tensor) indexing")
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if Ellipsis in index:
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (x.rank - n_real) + index[k + 1:]
    starts, ends, axes = [], [], []
    axis = 0
    for i in index:
        if i is None:
            continue
        size = x.shape[axis]
        if isinstance(i, int):
            s = i + size if i < 0 else i
            starts.append(s), ends.append(s + 1), axes.append(axis)
        elif isinstance(i, slice):
            if i.step not in (None, 1):
                raise Unsupported("a slice with a step")
            s, e, _ = i.indices(size)
            if (s, e) != (0, size):
                starts.append(s), ends.append(e), axes.append(axis)
        else:
            raise Unsupported(f"index {i!r}")
        axis += 1
    y = ops.slice(x.t, starts, ends, axes=axes) if axes else x.t
    shape = tuple(c.recorded(node).shape)
    sliced = list(x.shape)
    for s, e, a in zip(starts, ends, axes):
        sliced[a] = e - s
    return ops.reshape(y, list(shape)) if tuple(sliced) != shape else y


def _getattr(c, node, args, kwargs):
    x, attr = args[0], args[1]
    if attr == "T":
        return _t(c, node, [x], {})
    if attr == "mT":
        return _t(c, node, [x], {})
    raise Unsupported(f"tensor attribute .{attr}")


def _cast(c, node, args, kwargs):
    x = args[0]
    out = c.recorded(node)
    if not isinstance(x, Dyn):
        # A constant cast like a graph value (mask.type_as(h)): still a
        # constant, of the graph value's type.
        return c.t(x.to(out.dtype) if isinstance(x, torch.Tensor) else x)
    if out.dtype == x.dtype:
        return x.t
    return ops.cast(x.t, c.dtype_name(out.dtype))


# -- masks and selection -------------------------------------------------------

def _masked_fill(c, node, args, kwargs):
    x = args[0]
    mask = args[1] if len(args) > 1 else kwargs["mask"]
    value = _const_float(args[2] if len(args) > 2 else kwargs["value"],
                         "the fill value of masked_fill")
    if isinstance(mask, torch.Tensor):
        k = c.upper_triangle(mask, x.shape)
        if k is not None and k == x.shape[-1] - x.shape[-2]:
            return ops.causal_mask(x.t, value=value)
    return ops.select(c.t(mask), c.t(value, x), x.t)


def _where(c, node, args, kwargs):
    cond, a, b = args[0], args[1], args[2]
    like = a if isinstance(a, Dyn) else b
    if isinstance(cond, torch.Tensor) and isinstance(b, Dyn) and not isinstance(a, Dyn):
        k = c.upper_triangle(cond, b.shape)
        if k is not None and k == b.shape[-1] - b.shape[-2]:
            return ops.causal_mask(b.t, value=_const_float(a, "where's value"))
    return ops.select(c.t(cond), c.t(a, like), c.t(b, like))


def _sdpa(c, node, args, kwargs):
    """F.scaled_dot_product_attention (torch >= 2.0) from primitives:
    softmax(q k^T * scale [+ mask]) v."""
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
             "enable_gqa")
    a = dict(zip(names, args), **kwargs)
    q, k, v = a["query"], a["key"], a["value"]
    if not all(isinstance(t, Dyn) for t in (q, k, v)):
        raise Unsupported("scaled_dot_product_attention with a constant q, k or v")
    if a.get("enable_gqa") and q.rank >= 3 and k.shape[-3] != q.shape[-3]:
        # torch: key and value heads repeat_interleave'd to the query's.
        hq, hk = q.shape[-3], k.shape[-3]
        if hq % hk or v.shape[-3] != hk:
            raise Unsupported(f"enable_gqa with {hq} query heads and {hk} / {v.shape[-3]} "
                              "key / value heads (the query's must be a multiple)")
        k, v = repeat_heads(k, hq // hk), repeat_heads(v, hq // hk)
    L, S = q.shape[-2], k.shape[-2]
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = ops.mul(ops.matmul(q.t, k.t, transpose_b=True), c.t(scale, q))
    if a.get("is_causal"):
        if a.get("attn_mask") is not None or L != S:
            # torch's is_causal mask is top-left aligned (tril of (L, S)).
            raise Unsupported("is_causal with an attn_mask or L != S")
        scores = ops.causal_mask(scores)
    mask = a.get("attn_mask")
    if mask is not None:
        if isinstance(mask, (Dyn, torch.Tensor)) and mask.dtype == torch.bool:
            if isinstance(mask, torch.Tensor):
                kk = c.upper_triangle(~mask, tuple(q.shape[:-2]) + (L, S))
                if kk is not None and kk == S - L:
                    scores = ops.causal_mask(scores)
                    mask = None
            if mask is not None:
                scores = ops.select(c.t(mask), scores, c.t(float("-inf"), q))
        else:
            scores = ops.add(scores, c.t(mask, q))
    p = ops.softmax(scores, axis=-1)
    if float(a.get("dropout_p") or 0.0) > 0.0:
        p = ops.dropout(p, rate=float(a["dropout_p"]))
    return ops.matmul(p, v.t)


# -- clamps and activations (composites: tcc/composite_ops.py) --------------------

def _bound(c, v, like, what):
    """A clamp bound: None, a number, or a tensor (a graph value, a constant)."""
    if v is None:
        return None
    if isinstance(v, Dyn):
        return v.t
    if isinstance(v, torch.Tensor):
        return float(v.item()) if v.numel() == 1 else c.t(v, like)
    return _const_float(v, what)


def _clamp(which):
    """torch.clamp / clip / clamp_min / clamp_max and their methods."""
    def h(c, node, args, kwargs):
        x = args[0]
        rest = list(args[1:])
        lo = hi = None
        if which in ("clamp", "min"):
            lo = kwargs.get("min", rest.pop(0) if rest else None)
        if which in ("clamp", "max"):
            hi = kwargs.get("max", rest.pop(0) if rest else None)
        if not isinstance(x, Dyn):
            raise Unsupported("clamp of a constant by a graph value: write "
                              "torch.maximum / torch.minimum instead")
        if lo is None and hi is None:
            raise Unsupported("clamp without min or max")
        return CO.clamp(x.t, _bound(c, lo, x, "clamp's min"), _bound(c, hi, x, "clamp's max"))
    return h


def _hardtanh(c, node, args, kwargs):
    if node.op == "call_module":
        m = c.module_of(node)
        lo, hi = m.min_val, m.max_val
    else:
        lo = kwargs.get("min_val", args[1] if len(args) > 1 else -1.0)
        hi = kwargs.get("max_val", args[2] if len(args) > 2 else 1.0)
    return CO.hardtanh(c.t(args[0]), _const_float(lo, "hardtanh's min_val"),
                       _const_float(hi, "hardtanh's max_val"))


def _composite(fn):
    """An activation of x alone (relu6, hardswish, hardsigmoid, mish)."""
    def h(c, node, args, kwargs):
        return fn(c.t(args[0]))
    return h


def _softplus(c, node, args, kwargs):
    if node.op == "call_module":
        m = c.module_of(node)
        beta, threshold = m.beta, m.threshold
    else:
        beta = kwargs.get("beta", args[1] if len(args) > 1 else 1.0)
        threshold = kwargs.get("threshold", args[2] if len(args) > 2 else 20.0)
    return CO.softplus(c.t(args[0]), _const_float(beta, "softplus's beta"),
                       _const_float(threshold, "softplus's threshold"))


# -- repeats, outer products, einsum, triangles ---------------------------------------

def repeat_heads(x, groups):
    """x (..., Hkv, S, D) with each head repeated `groups` times in place
    (repeat_interleave along dim -3: grouped-query attention's k and v),
    a Dyn."""
    shape = list(x.shape)
    shape[-3] *= groups
    return Dyn(CO.repeat_interleave(x.t, groups, -3), shape, x.dtype)


def _repeat_interleave(c, node, args, kwargs):
    a = dict(zip(("input", "repeats", "dim"), args), **kwargs)
    x, r, dim = a["input"], a.get("repeats"), a.get("dim")
    if isinstance(r, torch.Tensor) and r.numel() == 1 and not r.is_meta:
        r = int(r.item())
    if isinstance(r, bool) or not isinstance(r, int):
        raise Unsupported("repeat_interleave with a tensor of repeats: write an int "
                          "repeats, or torch.cat of the pieces, instead")
    if not isinstance(x, Dyn):
        raise Unsupported("repeat_interleave of a constant: write expand + reshape instead")
    t = x.t
    if dim is None:  # torch flattens first
        t, dim = ops.reshape(t, [math.prod(x.shape)]), 0
    return CO.repeat_interleave(t, r, _dim(int(dim), max(x.rank, 1)))


def _tile(numpy_style):
    """Tensor.repeat(*sizes) (torch.tile(x, dims): fewer dims than x's rank
    count from the end)."""
    def h(c, node, args, kwargs):
        x = args[0]
        reps = kwargs.get("dims", kwargs.get("repeats", args[1:]))
        if len(reps) == 1 and isinstance(reps[0], (list, tuple)):
            reps = reps[0]
        reps = [int(r) for r in reps]
        if numpy_style and len(reps) < x.rank:
            reps = [1] * (x.rank - len(reps)) + reps
        return CO.tile(x.t, reps)
    return h


def _outer(c, node, args, kwargs):
    a = args[0]
    b = args[1] if len(args) > 1 else kwargs.get("vec2")
    like = a if isinstance(a, Dyn) else b
    return CO.outer(c.t(a, like), c.t(b, like))


def _einsum(c, node, args, kwargs):
    eq, operands = args[0], list(args[1:])
    if not isinstance(eq, str):
        raise Unsupported("einsum in the sublist format: write the equation string instead")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    if len(operands) > 2:
        raise Unsupported(f"einsum '{eq}' with {len(operands)} operands (1 or 2 are "
                          "supported): write a chain of two-operand einsums instead")
    like = next(o for o in operands if isinstance(o, Dyn))
    try:
        return CO.einsum(eq, *(c.t(o, like) for o in operands))
    except TccError as e:
        raise Unsupported(str(e)) from None


def _triangle(lower):
    """torch.tril / triu of a graph value (of a constant: computed by torch)."""
    def h(c, node, args, kwargs):
        k = kwargs.get("diagonal", args[1] if len(args) > 1 else 0)
        return (CO.tril if lower else CO.triu)(c.t(args[0]), int(k))
    return h


# -- attention and norms of newer PyTorch ---------------------------------------------

def _causal_constant(c, mask, L, S):
    """Whether a constant attn_mask (bool: True hides; float: 0 or -inf) is
    the causal mask: key j hidden from query i exactly where j > i + S - L."""
    if not isinstance(mask, torch.Tensor) or mask.is_meta or mask.dim() < 2:
        return False
    if mask.dtype == torch.bool:
        hidden = mask
    elif mask.is_floating_point():
        hidden = torch.isinf(mask) & (mask < 0)
        if not bool(((mask == 0) | hidden).all()):
            return False
    else:
        return False
    k = c.upper_triangle(hidden, (L, S))
    return k is not None and k == S - L


def _multihead_attention(c, node, args, kwargs):
    """nn.MultiheadAttention as self-attention attn(x, x, x): the packed
    in_proj_weight / in_proj_bias (torch's (3E, E) layout, names kept), heads
    split, softmax(q k^T / sqrt(d)) v (causal_mask for a causal attn_mask),
    heads merged, out_proj; the attention weights (averaged over the heads
    unless average_attn_weights=False) when need_weights."""
    m = c.module_of(node)
    names = ("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask",
             "average_attn_weights", "is_causal")
    a = dict(zip(names, args), **kwargs)
    x = a["query"]
    if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        raise Unsupported("nn.MultiheadAttention with kdim / vdim, add_bias_kv or "
                          "add_zero_attn: write the attention with nn.Linear and "
                          "F.softmax instead")
    if not (x is a["key"] and x is a["value"]):
        raise Unsupported("nn.MultiheadAttention with different query, key and value (only "
                          "self-attention attn(x, x, x)): write cross-attention with "
                          "nn.Linear and F.softmax instead")
    if not isinstance(x, Dyn) or x.rank != 3:
        raise Unsupported("nn.MultiheadAttention of an unbatched input: add a batch "
                          "dim (unsqueeze) instead")
    if a.get("key_padding_mask") is not None:
        raise Unsupported("nn.MultiheadAttention with a key_padding_mask: write the "
                          "attention with masked_fill and F.softmax instead")
    mask, causal = a.get("attn_mask"), bool(a.get("is_causal"))
    L = x.shape[1] if m.batch_first else x.shape[0]
    if mask is not None:
        if not _causal_constant(c, mask, L, L):
            raise Unsupported("nn.MultiheadAttention with an attn_mask that is not the "
                              "constant causal mask: write the attention with "
                              "masked_fill and F.softmax instead")
        causal = True
    E, H = m.embed_dim, m.num_heads
    D = E // H
    path = node.target
    w_in = c.param_value(f"{path}.in_proj_weight")
    b_in = c.param_value(f"{path}.in_proj_bias") if m.in_proj_bias is not None else None
    qkv = linear(c, x, w_in, b_in)                       # (B, L, 3E) / (L, B, 3E)
    d0, d1 = x.shape[0], x.shape[1]
    to_heads = [0, 2, 1, 3] if m.batch_first else [1, 2, 0, 3]

    def heads(t):                                        # (B, H, L, D)
        return ops.transpose(ops.reshape(t, [d0, d1, H, D]), to_heads)
    q, k, v = (heads(t) for t in ops.split(qkv, [E, E, E], axis=2))
    scores = ops.mul(ops.matmul(q, k, transpose_b=True), c.t(1.0 / math.sqrt(D), x))
    if causal:
        scores = ops.causal_mask(scores)
    p = ops.softmax(scores, axis=-1)
    if float(m.dropout) > 0.0:
        p = ops.dropout(p, rate=float(m.dropout))
    o = ops.transpose(ops.matmul(p, v), [0, 2, 1, 3] if m.batch_first else [2, 0, 1, 3])
    o = Dyn(ops.reshape(o, [d0, d1, E]), (d0, d1, E), x.dtype)
    b_out = c.param_value(f"{path}.out_proj.bias") if m.out_proj.bias is not None else None
    y = linear(c, o, c.param_value(f"{path}.out_proj.weight"), b_out)
    rec = c.recorded(node)
    weights = rec[1] if isinstance(rec, (list, tuple)) and len(rec) > 1 else None
    if weights is None:  # need_weights=False: torch returns None
        return [y, Dyn(None, (), x.dtype)]
    if weights.dim() == 3:  # averaged over the heads (the default)
        return [y, ops.mean(p, axes=[1])]
    return [y, p]


def _rms_norm(c, x, shape, weight, eps):
    shape = [shape] if isinstance(shape, int) else list(shape)
    if len(shape) != 1 or shape[0] != x.shape[-1]:
        raise Unsupported(f"rms_norm over {shape} (only the last dimension): write "
                          "x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps) instead")
    if eps is None:  # torch: the input dtype's machine epsilon
        eps = torch.finfo(x.dtype).eps
    return ops.rms_norm(x.t, c.t(weight) if weight is not None else None, eps=float(eps))


def _rms_norm_module(c, node, args, kwargs):
    m = c.module_of(node)
    w = c.param_value(f"{node.target}.weight") if m.weight is not None else None
    return _rms_norm(c, args[0], m.normalized_shape, w, m.eps)


def _rms_norm_function(c, node, args, kwargs):
    a = dict(zip(("input", "normalized_shape", "weight", "eps"), args), **kwargs)
    return _rms_norm(c, a["input"], a["normalized_shape"], a.get("weight"), a.get("eps"))


# -- losses --------------------------------------------------------------------

def cross_entropy(c, logits, target, weight=None, ignore_index=-100,
                  reduction="mean", label_smoothing=0.0):
    if weight is not None or float(label_smoothing) != 0.0:
        raise Unsupported("cross_entropy with class weights or label smoothing")
    x = logits.t
    if logits.rank > 2:  # torch's class dimension is 1; tcc's the last
        perm = [0] + list(range(2, logits.rank)) + [1]
        x = ops.transpose(x, perm)
    if reduction == "none":
        if logits.rank != 2:
            raise Unsupported("cross_entropy reduction='none' beyond (N, C)")
        return ops.softmax_cross_entropy(x, c.t(target))
    # torch's default ignore_index -100 matches no class id, as tcc without one.
    ii = None if int(ignore_index) == -100 else int(ignore_index)
    loss = ops.cross_entropy(x, c.t(target), ignore_index=ii)
    if reduction == "sum":
        if ii is not None:
            raise Unsupported("cross_entropy reduction='sum' with ignore_index")
        return ops.mul(loss, c.t(float(math.prod(target.shape)), logits))
    if reduction != "mean":
        raise Unsupported(f"cross_entropy reduction={reduction!r}")
    return loss


def mse_loss(c, a, b, reduction="mean"):
    like = a if isinstance(a, Dyn) else b
    d = ops.sub(c.t(a, like), c.t(b, like))
    sq = ops.mul(d, d)
    if reduction == "mean":
        return ops.mean(sq)
    if reduction == "sum":
        return ops.sum(sq)
    raise Unsupported(f"mse_loss reduction={reduction!r}")


def _cross_entropy_function(c, node, args, kwargs):
    names = ("input", "target", "weight", "size_average", "ignore_index",
             "reduce", "reduction", "label_smoothing")
    a = dict(zip(names, args), **kwargs)
    if a.get("size_average") is not None or a.get("reduce") is not None:
        raise Unsupported("cross_entropy with size_average/reduce")
    return cross_entropy(c, a["input"], a["target"], a.get("weight"),
                         a.get("ignore_index", -100), a.get("reduction", "mean"),
                         a.get("label_smoothing", 0.0))


def _cross_entropy_module(c, node, args, kwargs):
    m = c.module_of(node)
    return cross_entropy(c, args[0], args[1], m.weight, m.ignore_index,
                         m.reduction, getattr(m, "label_smoothing", 0.0))


def _mse_function(c, node, args, kwargs):
    names = ("input", "target", "size_average", "reduce", "reduction")
    a = dict(zip(names, args), **kwargs)
    return mse_loss(c, a["input"], a["target"], a.get("reduction", "mean"))


def _mse_module(c, node, args, kwargs):
    return mse_loss(c, args[0], args[1], c.module_of(node).reduction)


# -- the tables ----------------------------------------------------------------

# Imported here: the vision handlers use Dyn and Unsupported above.
from tcc._torch_vision_ops import (_adaptive_avg_pool_function,  # noqa: E402
                                   _adaptive_avg_pool_module, _avg_pool_function,
                                   _avg_pool_module, _batch_norm_function,
                                   _batch_norm_module, _conv2d_function, _conv2d_module,
                                   _conv_transpose2d_function, _conv_transpose2d_module,
                                   _group_norm_function, _group_norm_module,
                                   _interpolate_function, _max_pool_function,
                                   _max_pool_module, _upsample_module)

MODULES = {
    nn.Linear: _linear_module, nn.Embedding: _embedding_module,
    nn.LayerNorm: _layer_norm_module, nn.Dropout: _dropout,
    nn.ReLU: _activation_module("relu"), nn.GELU: _gelu,
    nn.SiLU: _activation_module("silu"), nn.Tanh: _activation_module("tanh"),
    nn.Sigmoid: _activation_module("sigmoid"), nn.Identity: _identity,
    nn.Softmax: _softmax("softmax"), nn.LogSoftmax: _softmax("log_softmax"),
    nn.Flatten: _to_recorded_shape, nn.CrossEntropyLoss: _cross_entropy_module,
    nn.MSELoss: _mse_module, nn.Conv2d: _conv2d_module,
    nn.MaxPool2d: _max_pool_module, nn.AvgPool2d: _avg_pool_module,
    nn.BatchNorm1d: _batch_norm_module, nn.BatchNorm2d: _batch_norm_module,
    nn.SyncBatchNorm: _batch_norm_module,
    nn.ConvTranspose2d: _conv_transpose2d_module,
    nn.GroupNorm: _group_norm_module, nn.AdaptiveAvgPool2d: _adaptive_avg_pool_module,
    nn.Upsample: _upsample_module, nn.UpsamplingNearest2d: _upsample_module,
    nn.UpsamplingBilinear2d: _upsample_module,
    nn.Hardtanh: _hardtanh, nn.ReLU6: _composite(CO.relu6),
    nn.Hardswish: _composite(CO.hardswish), nn.Hardsigmoid: _composite(CO.hardsigmoid),
    nn.Mish: _composite(CO.mish), nn.Softplus: _softplus,
    nn.MultiheadAttention: _multihead_attention,
}
if hasattr(nn, "RMSNorm"):  # torch >= 2.4
    MODULES[nn.RMSNorm] = _rms_norm_module

FUNCTIONS = {
    F.linear: _linear_function, F.embedding: _embedding_function,
    F.conv2d: _conv2d_function, F.max_pool2d: _max_pool_function,
    F.conv_transpose2d: _conv_transpose2d_function,
    F.batch_norm: _batch_norm_function, F.group_norm: _group_norm_function,
    F.adaptive_avg_pool2d: _adaptive_avg_pool_function,
    F.interpolate: _interpolate_function, F.upsample: _interpolate_function,
    torch.max_pool2d: _max_pool_function, F.avg_pool2d: _avg_pool_function,
    F.layer_norm: _layer_norm_function, F.dropout: _dropout,
    F.relu: _unary("relu"), torch.relu: _unary("relu"),
    F.gelu: _gelu, F.silu: _unary("silu"),
    torch.tanh: _unary("tanh"), F.tanh: _unary("tanh"),
    torch.sigmoid: _unary("sigmoid"), F.sigmoid: _unary("sigmoid"),
    torch.exp: _unary("exp"), torch.log: _unary("log"),
    torch.sin: _unary("sin"), torch.cos: _unary("cos"),
    torch.sqrt: _unary("sqrt"), torch.rsqrt: _unary("rsqrt"),
    torch.neg: _neg, operator.neg: _neg,
    torch.add: _binary("add"), operator.add: _binary("add"),
    operator.iadd: _binary("add"),
    torch.sub: _binary("sub"), operator.sub: _binary("sub"), torch.rsub: _rsub,
    torch.mul: _binary("mul"), operator.mul: _binary("mul"),
    torch.div: _binary("div"), operator.truediv: _binary("div"),
    torch.pow: _pow, operator.pow: _pow,
    torch.matmul: _matmul, operator.matmul: _matmul, torch.bmm: _matmul,
    F.softmax: _softmax("softmax"), torch.softmax: _softmax("softmax"),
    F.log_softmax: _softmax("log_softmax"),
    torch.log_softmax: _softmax("log_softmax"),
    torch.mean: _reduce("mean"), torch.sum: _reduce("sum"),
    torch.reshape: _to_recorded_shape, torch.flatten: _to_recorded_shape,
    torch.unsqueeze: _to_recorded_shape, torch.squeeze: _to_recorded_shape,
    torch.transpose: _transpose, torch.permute: _permute, torch.t: _t,
    torch.split: _split, torch.chunk: _split, torch.unbind: _unbind, torch.cat: _cat,
    operator.getitem: _getitem, getattr: _getattr,
    torch.masked_fill: _masked_fill, torch.where: _where,
    F.cross_entropy: _cross_entropy_function, F.mse_loss: _mse_function,
    operator.gt: _compare("greater"), torch.gt: _compare("greater"),
    operator.ge: _compare("greater_equal"), torch.ge: _compare("greater_equal"),
    operator.lt: _compare("less"), torch.lt: _compare("less"),
    operator.le: _compare("less_equal"), torch.le: _compare("less_equal"),
    operator.eq: _compare("equal"), torch.eq: _compare("equal"),
    operator.ne: _compare("not_equal"), torch.ne: _compare("not_equal"),
    torch.maximum: _binary("max"), torch.minimum: _binary("min"),
    torch.clamp: _clamp("clamp"), torch.clip: _clamp("clamp"),
    torch.clamp_min: _clamp("min"), torch.clamp_max: _clamp("max"),
    F.hardtanh: _hardtanh, F.relu6: _composite(CO.relu6),
    F.hardswish: _composite(CO.hardswish), F.hardsigmoid: _composite(CO.hardsigmoid),
    F.mish: _composite(CO.mish), F.softplus: _softplus,
    torch.repeat_interleave: _repeat_interleave, torch.tile: _tile(True),
    torch.outer: _outer, torch.ger: _outer, torch.einsum: _einsum,
    torch.tril: _triangle(True), torch.triu: _triangle(False),
}

if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0
    FUNCTIONS[F.scaled_dot_product_attention] = _sdpa
if hasattr(F, "rms_norm"):  # torch >= 2.4
    FUNCTIONS[F.rms_norm] = _rms_norm_function

METHODS = {
    "view": _to_recorded_shape, "reshape": _to_recorded_shape,
    "flatten": _to_recorded_shape, "unsqueeze": _to_recorded_shape,
    "squeeze": _to_recorded_shape, "view_as": _to_recorded_shape,
    "reshape_as": _to_recorded_shape,
    "transpose": _transpose, "permute": _permute, "t": _t,
    "contiguous": _identity, "clone": _identity,
    "split": _split, "chunk": _split, "unbind": _unbind,
    "expand": _expand, "expand_as": _expand,
    "masked_fill": _masked_fill,
    "mean": _reduce("mean"), "sum": _reduce("sum"),
    "softmax": _softmax("softmax"), "log_softmax": _softmax("log_softmax"),
    "relu": _unary("relu"), "tanh": _unary("tanh"), "sigmoid": _unary("sigmoid"),
    "exp": _unary("exp"), "log": _unary("log"), "sqrt": _unary("sqrt"),
    "sin": _unary("sin"), "cos": _unary("cos"),
    "rsqrt": _unary("rsqrt"), "neg": _neg, "pow": _pow,
    "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"),
    "div": _binary("div"), "matmul": _matmul, "bmm": _matmul,
    "float": _cast, "to": _cast, "type_as": _cast, "long": _cast, "int": _cast,
    "double": _cast, "gt": _compare("greater"), "ge": _compare("greater_equal"),
    "lt": _compare("less"), "le": _compare("less_equal"), "eq": _compare("equal"),
    "ne": _compare("not_equal"),
    "clamp": _clamp("clamp"), "clip": _clamp("clamp"), "clamp_min": _clamp("min"),
    "clamp_max": _clamp("max"), "repeat_interleave": _repeat_interleave,
    "repeat": _tile(False), "tile": _tile(True), "outer": _outer, "ger": _outer,
    "tril": _triangle(True), "triu": _triangle(False),
}

# Method calls whose result depends only on shapes (constant at import).
SHAPE_METHODS = {"size", "dim", "numel", "ndimension"}
SHAPE_ATTRS = {"shape", "ndim", "dtype", "device"}


def supported_names():
    """A compact list of what is mapped, for the error message."""
    mods = sorted(f"nn.{m.__name__}" for m in MODULES)
    fns = sorted({getattr(f, "__name__", str(f)) for f in FUNCTIONS} - {"getattr"})
    return ", ".join(mods) + "; functions/methods: " + ", ".join(
        sorted(set(fns) | set(METHODS) | SHAPE_METHODS))
