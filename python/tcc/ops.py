"""Every op a model file may use (docs/ir.md, "Ops a node may use") as a
function. Each takes the input tensors, the op's attributes as keywords and
an optional `name` (the node's; default made from the op under the model's
scope) and returns the output tensor (a list for `split`).

    y = ops.softmax(ops.causal_mask(scores), axis=-1)
"""

from typing import Optional, Sequence

from tcc.model import Tensor, TccError


def _model(*xs):
    for x in xs:
        if isinstance(x, Tensor):
            return x.model
    raise TccError("an op needs at least one tcc Tensor input to know its model")


def _unary(op):
    def f(x: Tensor, name: Optional[str] = None) -> Tensor:
        return _model(x).op(op, x, name=name)
    f.__name__ = op
    f.__doc__ = f"`{op}` of x, elementwise (docs/ir.md)."
    return f


def _binary(op):
    def f(a, b, name: Optional[str] = None) -> Tensor:
        m = _model(a, b)
        like = a if isinstance(a, Tensor) else b
        return m.op(op, m._as_tensor(a, like), m._as_tensor(b, like), name=name)
    f.__name__ = op
    f.__doc__ = f"`{op}` of a and b with numpy broadcasting (docs/ir.md)."
    return f


add, sub, mul, div, maximum, minimum = (_binary(o) for o in
                                        ("add", "sub", "mul", "div", "max", "min"))
equal, not_equal, less, less_equal, greater, greater_equal = (
    _binary(o) for o in ("equal", "not_equal", "less", "less_equal",
                         "greater", "greater_equal"))
neg, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, silu, sin, cos = (
    _unary(o) for o in ("neg", "exp", "log", "sqrt", "rsqrt", "tanh",
                        "sigmoid", "relu", "silu", "sin", "cos"))


def matmul(a: Tensor, b: Tensor, transpose_a: bool = False,
           transpose_b: bool = False, name: Optional[str] = None) -> Tensor:
    """a (..., M, K) x b (..., K, N); the flags swap the last two dims."""
    return _model(a, b).op("matmul", a, b, name=name,
                           transpose_a=transpose_a or None,
                           transpose_b=transpose_b or None)


def gelu(x: Tensor, approximate: str = "none", name: Optional[str] = None) -> Tensor:
    """"none": the erf form; "tanh": GPT-2's."""
    return _model(x).op("gelu", x, name=name,
                        approximate=None if approximate == "none" else approximate)


def pow(x: Tensor, exponent: float, name: Optional[str] = None) -> Tensor:  # noqa: A001
    return _model(x).op("pow", x, name=name, exponent=float(exponent))


def select(cond: Tensor, a, b, name: Optional[str] = None) -> Tensor:
    """cond ? a : b (all three broadcast)."""
    m = _model(cond, a, b)
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    return m.op("select", cond, m._as_tensor(a, like), m._as_tensor(b, like),
                name=name)


where = select


def cast(x: Tensor, dtype: str, name: Optional[str] = None) -> Tensor:
    return _model(x).op("cast", x, name=name, dtype=dtype)


def constant(model, value: float, shape: Sequence[int] = (), dtype: str = "f32",
             name: Optional[str] = None) -> Tensor:
    """A splat of `value` (the model is needed: a constant has no inputs)."""
    return model.op("constant", name=name, value=float(value),
                    shape=[int(d) for d in shape], dtype=dtype)


def tensor(model, values, dtype: Optional[str] = None,
           name: Optional[str] = None) -> Tensor:
    """A constant of any content (a table, a lookup): `values` a numpy array
    or nested lists, stored in the model file once however often it is
    asked for (Model.constant_data). dtype: f32 (floats), i64 (integers)
    or bool by default."""
    import numpy as np
    a = np.asarray(values)
    if dtype is None:
        dtype = ("bool" if a.dtype == np.bool_ else
                 "i64" if np.issubdtype(a.dtype, np.integer) else "f32")
    kinds = {"f32": "<f4", "f64": "<f8", "i32": "<i4", "i64": "<i8", "bool": "u1"}
    if dtype not in kinds:
        raise TccError(f"tensor: dtype must be one of {', '.join(kinds)}, got {dtype!r}")
    if a.ndim == 0:
        raise TccError("tensor: a scalar is a splat: use ops.constant(model, value)")
    data = np.ascontiguousarray(a.astype(kinds[dtype])).tobytes()
    return model.constant_data(data, a.shape, dtype, name=name)


def iota(model, shape: Sequence[int], axis: int = 0, dtype: str = "i64",
         name: Optional[str] = None) -> Tensor:
    """The index along `axis`."""
    return model.op("iota", name=name, shape=[int(d) for d in shape],
                    axis=axis, dtype=dtype)


def dropout(x: Tensor, rate: float = 0.5, name: Optional[str] = None) -> Tensor:
    return _model(x).op("dropout", x, name=name, rate=float(rate))


def softmax_cross_entropy(logits: Tensor, labels: Tensor,
                          name: Optional[str] = None) -> Tensor:
    """Per-row loss (N) of logits (N, C) against labels (N)."""
    return _model(logits).op("softmax_cross_entropy", logits, labels, name=name)


def cross_entropy(logits: Tensor, targets: Tensor,
                  ignore_index: Optional[int] = None,
                  name: Optional[str] = None) -> Tensor:
    """Scalar mean over positions of logsumexp - logit[target]."""
    return _model(logits).op("cross_entropy", logits, targets, name=name,
                             ignore_index=ignore_index)


def _reduce(op):
    def f(x: Tensor, axes: Optional[Sequence[int]] = None,
          keep_dims: bool = False, name: Optional[str] = None) -> Tensor:
        return _model(x).op(op, x, name=name,
                            axes=None if axes is None else [int(a) for a in axes],
                            keep_dims=keep_dims or None)
    f.__name__ = op
    f.__doc__ = f"`{op}` over `axes` (default all) (docs/ir.md)."
    return f


mean, sum, reduce_max = (_reduce(o) for o in ("mean", "sum", "max"))  # noqa: A001


def softmax(x: Tensor, axis: int = -1, name: Optional[str] = None) -> Tensor:
    return _model(x).op("softmax", x, name=name, axis=axis)


def log_softmax(x: Tensor, axis: int = -1, name: Optional[str] = None) -> Tensor:
    return _model(x).op("log_softmax", x, name=name, axis=axis)


def layer_norm(x: Tensor, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5,
               name: Optional[str] = None) -> Tensor:
    ins = [x] + ([weight] if weight is not None else [])
    if bias is not None:
        if weight is None:
            raise TccError("layer_norm: a bias needs a weight")
        ins.append(bias)
    return _model(x).op("layer_norm", *ins, name=name, eps=float(eps))


def batch_norm(x: Tensor, running_mean: Optional[Tensor], running_var: Optional[Tensor],
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps: float = 1e-5, momentum: float = 0.1,
               num_batches_tracked: Optional[Tensor] = None,
               sync: bool = False, name: Optional[str] = None) -> Tensor:
    """Batch norm over the channels (dim 1) of x (N, C, ...), as
    F.batch_norm: the train step normalizes with the batch's statistics
    (biased variance) and updates the running ones in place
    (running = (1 - momentum) running + momentum batch, the variance
    unbiased; num_batches_tracked + 1), eval normalizes with the running
    ones. running_mean / running_var (C) must be model buffers
    (Model.buffer); both None: batch statistics in train and eval
    (track_running_stats=False). weight and bias (C) are optional.
    sync: in a data-parallel train step (tcc compile --data-parallel), the
    statistics of the global batch, over every rank (nn.SyncBatchNorm)."""
    track = running_mean is not None
    if track != (running_var is not None):
        raise TccError("batch_norm: give both running_mean and running_var, or neither")
    if bias is not None and weight is None:
        raise TccError("batch_norm: a bias needs a weight")
    if num_batches_tracked is not None and not track:
        raise TccError("batch_norm: num_batches_tracked needs the running statistics")
    ins = [x] + ([running_mean, running_var] if track else [])
    ins += [t for t in (weight, bias) if t is not None]
    return _model(x).op(
        "batch_norm", *ins, name=name, eps=float(eps), momentum=float(momentum),
        track_running_stats=None if track else False,
        num_batches_tracked=num_batches_tracked.name
        if num_batches_tracked is not None else None, sync=True if sync else None)


def rms_norm(x: Tensor, weight: Optional[Tensor] = None, eps: float = 1e-6,
             name: Optional[str] = None) -> Tensor:
    ins = [x] + ([weight] if weight is not None else [])
    return _model(x).op("rms_norm", *ins, name=name, eps=float(eps))


def embedding(table: Tensor, ids: Tensor, name: Optional[str] = None) -> Tensor:
    """Rows of table (V, C) at ids (...): (..., C)."""
    return _model(table).op("embedding", table, ids, name=name)


def reshape(x: Tensor, shape: Sequence[int], name: Optional[str] = None) -> Tensor:
    return _model(x).op("reshape", x, name=name, shape=[int(d) for d in shape])


def transpose(x: Tensor, perm: Optional[Sequence[int]] = None,
              name: Optional[str] = None) -> Tensor:
    return _model(x).op("transpose", x, name=name,
                        perm=None if perm is None else [int(p) for p in perm])


def broadcast_to(x: Tensor, shape: Sequence[int], name: Optional[str] = None) -> Tensor:
    return _model(x).op("broadcast_to", x, name=name, shape=[int(d) for d in shape])


def slice(x: Tensor, starts: Sequence[int], ends: Sequence[int],  # noqa: A001
          axes: Optional[Sequence[int]] = None, name: Optional[str] = None) -> Tensor:
    return _model(x).op("slice", x, name=name, starts=[int(s) for s in starts],
                        ends=[int(e) for e in ends],
                        axes=None if axes is None else [int(a) for a in axes])


def concat(xs: Sequence[Tensor], axis: int = 0, name: Optional[str] = None) -> Tensor:
    return _model(*xs).op("concat", *xs, name=name, axis=axis)


def split(x: Tensor, sizes: Sequence[int], axis: int = 0,
          name: Optional[str] = None,
          outputs: Optional[Sequence[str]] = None):
    """One output per size; `outputs` names them (default name.0, name.1...)."""
    return _model(x).op("split", x, name=name,
                        outputs=list(outputs) if outputs else len(sizes),
                        axis=axis, sizes=[int(s) for s in sizes])


def causal_mask(scores: Tensor, value: Optional[float] = None,
                name: Optional[str] = None) -> Tensor:
    """(..., T, S): `value` (default -inf) where j > i + (S - T)."""
    return _model(scores).op("causal_mask", scores, name=name,
                             value=None if value is None else float(value))


def _pair(v, what: str):
    """An int or a (height, width) pair as a 2-list of ints."""
    if isinstance(v, int):
        return [int(v), int(v)]
    v = [int(e) for e in v]
    if len(v) != 2:
        raise TccError(f"{what} needs 1 or 2 values (height, width), got {len(v)}")
    return v


def conv2d(x: Tensor, weight: Tensor, stride=1, padding=0, dilation=1,
           groups: int = 1, name: Optional[str] = None) -> Tensor:
    """NCHW cross-correlation (PyTorch's conv2d without bias): x (N, C, H,
    W), weight (O, C / groups, KH, KW) -> (N, O, HO, WO). Add a bias with
    ops.add (reshaped to (O, 1, 1))."""
    return _model(x, weight).op("conv2d", x, weight, name=name,
                                stride=_pair(stride, "conv2d stride"),
                                padding=_pair(padding, "conv2d padding"),
                                dilation=_pair(dilation, "conv2d dilation"),
                                groups=int(groups))


def conv_transpose2d(x: Tensor, weight: Tensor, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1, name: Optional[str] = None) -> Tensor:
    """PyTorch's conv_transpose2d without bias (the gradient of conv2d with
    respect to its input): x (N, C_in, H, W), weight (C_in, C_out / groups,
    KH, KW) -> (N, C_out, HO, WO), HO = (H - 1) stride - 2 padding +
    dilation (KH - 1) + output_padding + 1. Add a bias as (C_out, 1, 1)."""
    return _model(x, weight).op("conv_transpose2d", x, weight, name=name,
                                stride=_pair(stride, "conv_transpose2d stride"),
                                padding=_pair(padding, "conv_transpose2d padding"),
                                dilation=_pair(dilation, "conv_transpose2d dilation"),
                                output_padding=_pair(output_padding,
                                                     "conv_transpose2d output_padding"),
                                groups=int(groups))


def _pool(op):
    def f(x: Tensor, kernel, stride=None, padding=0,
          name: Optional[str] = None) -> Tensor:
        k = _pair(kernel, f"{op} kernel")
        return _model(x).op(op, x, name=name, kernel=k,
                            stride=k if stride is None else _pair(stride, f"{op} stride"),
                            padding=_pair(padding, f"{op} padding"))
    f.__name__ = op
    f.__doc__ = (f"`{op}` over KH x KW windows of NCHW x (stride defaults to the "
                 "kernel; docs/ir.md)." + (" Divides by KH * KW, padding counted "
                                           "(PyTorch's count_include_pad=True)."
                                           if op == "avg_pool2d" else ""))
    return f


max_pool2d, avg_pool2d = _pool("max_pool2d"), _pool("avg_pool2d")


# Composite vision ops (decompositions into the ops above; composite_ops.py).
from tcc.composite_ops import adaptive_avg_pool2d, group_norm, interpolate  # noqa: E402,F401
