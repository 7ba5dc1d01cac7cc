"""The PyTorch vision ops tcc.from_torch maps (the tables are in
_torch_ops.py, which imports this module after defining Dyn and
Unsupported): nn.Conv2d / F.conv2d, nn.MaxPool2d / F.max_pool2d,
nn.AvgPool2d / F.avg_pool2d, nn.BatchNorm1d / 2d / nn.SyncBatchNorm /
F.batch_norm, on NCHW tensors. Handlers take (converter,
fx node, args, kwargs) like _torch_ops.py's."""

import torch

from tcc import ops
from tcc.composite_ops import INTERPOLATE_MODES
from tcc._torch_ops import Dyn, Unsupported
from tcc.model import ones, zeros


def _add_channel_bias(c, y, bias):
    """y (N, C, H, W) plus bias (C) as (C, 1, 1); y itself without one."""
    if bias is None:
        return y
    return ops.add(y, ops.reshape(c.t(bias), (bias.shape[0], 1, 1)))


def _conv2d(c, x, weight, bias, stride, padding, dilation, groups):
    """NCHW conv2d; the weight stays in torch's (O, C/groups, KH, KW) layout,
    the bias is added as (O, 1, 1)."""
    if isinstance(padding, str):
        raise Unsupported(f"conv2d padding '{padding}' (give the sizes)")
    if not isinstance(weight, Dyn):
        raise Unsupported("conv2d with a constant weight")
    y = ops.conv2d(c.t(x), weight.t, stride, padding, dilation, int(groups))
    return _add_channel_bias(c, y, bias)


def _conv2d_module(c, node, args, kwargs):
    m = c.module_of(node)
    if m.padding_mode != "zeros":
        raise Unsupported(f"nn.Conv2d with padding_mode '{m.padding_mode}'")
    path = node.target
    b = c.param_value(f"{path}.bias") if m.bias is not None else None
    return _conv2d(c, args[0], c.param_value(f"{path}.weight"), b, m.stride,
                   m.padding, m.dilation, m.groups)


def _conv2d_function(c, node, args, kwargs):
    names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
    defaults = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1}
    a = dict(defaults, **dict(zip(names, args)), **kwargs)
    return _conv2d(c, a["input"], a["weight"], a["bias"], a["stride"], a["padding"],
                   a["dilation"], a["groups"])


def _conv_transpose2d(c, x, weight, bias, stride, padding, output_padding, groups,
                      dilation):
    """NCHW conv_transpose2d; the weight stays in torch's (C_in, C_out /
    groups, KH, KW) layout; a bias is added as (C_out, 1, 1)."""
    if not isinstance(weight, Dyn):
        raise Unsupported("conv_transpose2d with a constant weight")
    if isinstance(padding, str):
        raise Unsupported(f"conv_transpose2d with padding='{padding}' (give the sizes)")
    y = ops.conv_transpose2d(c.t(x), weight.t, stride, padding, output_padding,
                             int(groups), dilation)
    return _add_channel_bias(c, y, bias)


def _conv_transpose2d_module(c, node, args, kwargs):
    m = c.module_of(node)
    if m.padding_mode != "zeros":
        raise Unsupported(f"ConvTranspose2d with padding_mode='{m.padding_mode}'")
    if len(args) > 1 or kwargs.get("output_size") is not None:
        raise Unsupported("ConvTranspose2d called with output_size (give output_padding)")
    w = c.param_value(f"{node.target}.weight")
    b = c.param_value(f"{node.target}.bias") if m.bias is not None else None
    return _conv_transpose2d(c, args[0], w, b, m.stride, m.padding, m.output_padding,
                             m.groups, m.dilation)


def _conv_transpose2d_function(c, node, args, kwargs):
    names = ("input", "weight", "bias", "stride", "padding", "output_padding", "groups",
             "dilation")
    defaults = {"bias": None, "stride": 1, "padding": 0, "output_padding": 0, "groups": 1,
                "dilation": 1}
    a = dict(defaults, **dict(zip(names, args)), **kwargs)
    return _conv_transpose2d(c, a["input"], a["weight"], a["bias"], a["stride"],
                             a["padding"], a["output_padding"], a["groups"], a["dilation"])


def _pool2d(op, x, kernel, stride, padding, ceil_mode, extra):
    if ceil_mode:
        raise Unsupported(f"{op} with ceil_mode=True")
    for what, bad in extra:
        if bad:
            raise Unsupported(f"{op} with {what}")
    stride = kernel if stride is None or stride == [] or stride == () else stride
    return getattr(ops, op)(x, kernel, stride, padding)


def _max_pool_module(c, node, args, kwargs):
    m = c.module_of(node)
    return _pool2d("max_pool2d", c.t(args[0]), m.kernel_size, m.stride, m.padding,
                   m.ceil_mode, [("dilation", m.dilation not in (1, (1, 1))),
                                 ("return_indices", m.return_indices)])


def _avg_pool_module(c, node, args, kwargs):
    m = c.module_of(node)
    return _pool2d("avg_pool2d", c.t(args[0]), m.kernel_size, m.stride, m.padding,
                   m.ceil_mode, [("count_include_pad=False", not m.count_include_pad),
                                 ("divisor_override", m.divisor_override is not None)])


def _max_pool_function(c, node, args, kwargs):
    names = ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
             "return_indices")
    a = dict({"stride": None, "padding": 0, "dilation": 1, "ceil_mode": False,
              "return_indices": False}, **dict(zip(names, args)), **kwargs)
    return _pool2d("max_pool2d", c.t(a["input"]), a["kernel_size"], a["stride"],
                   a["padding"], a["ceil_mode"],
                   [("dilation", a["dilation"] not in (1, (1, 1), [1, 1])),
                    ("return_indices", a["return_indices"])])


def _avg_pool_function(c, node, args, kwargs):
    names = ("input", "kernel_size", "stride", "padding", "ceil_mode",
             "count_include_pad", "divisor_override")
    a = dict({"stride": None, "padding": 0, "ceil_mode": False, "count_include_pad": True,
              "divisor_override": None}, **dict(zip(names, args)), **kwargs)
    return _pool2d("avg_pool2d", c.t(a["input"]), a["kernel_size"], a["stride"],
                   a["padding"], a["ceil_mode"],
                   [("count_include_pad=False", not a["count_include_pad"]),
                    ("divisor_override", a["divisor_override"] is not None)])


# -- batch norm ----------------------------------------------------------------

def _model_buffers(c, path, channels, dtype):
    """The tcc buffers running_mean, running_var and num_batches_tracked
    under `path` (PyTorch's state_dict names), made once per import."""
    made = c.__dict__.setdefault("batch_norm_buffers", {})
    if path not in made:
        prefix = f"{path}." if path else ""
        m = c.model
        made[path] = (
            m.buffer(f"{prefix}running_mean", (channels,), zeros(), dtype=dtype),
            m.buffer(f"{prefix}running_var", (channels,), ones(), dtype=dtype),
            m.buffer(f"{prefix}num_batches_tracked", (), zeros(), dtype="i64"))
    return made[path]


def _batch_norm(c, x, stats, weight, bias, momentum, eps, sync=False):
    if momentum is None:
        raise Unsupported("momentum=None (a cumulative moving average); give a number")
    if not isinstance(x, Dyn) or x.rank < 2:
        raise Unsupported("batch norm of a non-tensor or of rank < 2")
    if weight is not None and not isinstance(weight, Dyn):
        raise Unsupported("batch norm with a constant weight")
    mean, var, count = stats if stats is not None else (None, None, None)
    return ops.batch_norm(x.t, mean, var, c.t(weight) if weight is not None else None,
                          c.t(bias) if bias is not None else None, eps=float(eps),
                          momentum=float(momentum), num_batches_tracked=count, sync=sync)


def _batch_norm_module(c, node, args, kwargs):
    """nn.BatchNorm1d / 2d, nn.SyncBatchNorm: train steps use the batch's
    statistics (SyncBatchNorm: the global batch's, over the data-parallel
    ranks) and update the running ones (tcc buffers named as the
    module's), eval uses them."""
    m = c.module_of(node)
    path = node.target
    x = args[0]
    stats = None
    if m.track_running_stats:
        stats = _model_buffers(c, path, m.num_features, c.dtype_name(m.running_mean.dtype))
    w = c.param_value(f"{path}.weight") if m.affine else None
    b = c.param_value(f"{path}.bias") if m.affine else None
    return _batch_norm(c, x, stats, w, b, m.momentum, m.eps,
                       sync=isinstance(m, torch.nn.SyncBatchNorm))


def _batch_norm_function(c, node, args, kwargs):
    """F.batch_norm(input, running_mean, running_var, weight, bias, training,
    momentum, eps) with the module's registered running statistics and
    training=True (what a module's forward passes while it trains)."""
    names = ("input", "running_mean", "running_var", "weight", "bias", "training",
             "momentum", "eps")
    a = dict({"weight": None, "bias": None, "training": False, "momentum": 0.1,
              "eps": 1e-5}, **dict(zip(names, args)), **kwargs)
    rm, rv = a["running_mean"], a["running_var"]
    stats = None
    if rm is not None or rv is not None:
        if not a["training"]:
            raise Unsupported("training=False with running statistics (tcc's train "
                              "step normalizes with the batch's statistics)")
        owners = {id(t): n for n, t in c.gm.named_buffers()}
        if id(rm) not in owners or id(rv) not in owners:
            raise Unsupported("running statistics that are not registered buffers")
        prefix, _, leaf = owners[id(rm)].rpartition(".")
        if leaf != "running_mean" or owners[id(rv)] != (f"{prefix}.running_var"
                                                        if prefix else "running_var"):
            raise Unsupported("running statistics not named running_mean / running_var "
                              "of one module")
        stats = _model_buffers(c, prefix, rm.shape[0], c.dtype_name(rm.dtype))
    return _batch_norm(c, a["input"], stats, a["weight"], a["bias"], a["momentum"],
                       a["eps"])


# -- group norm, adaptive pooling, resampling (tcc/composite_ops.py) -------------------

def _group_norm(c, x, groups, weight, bias, eps):
    if not isinstance(x, Dyn):
        raise Unsupported("group_norm of a constant")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and not isinstance(t, Dyn):
            raise Unsupported(f"group_norm with a constant {what}")
    return ops.group_norm(x.t, int(groups), c.t(weight) if weight is not None else None,
                          c.t(bias) if bias is not None else None, eps=float(eps))


def _group_norm_module(c, node, args, kwargs):
    m = c.module_of(node)
    w = c.param_value(f"{node.target}.weight") if m.affine else None
    b = c.param_value(f"{node.target}.bias") if m.affine else None
    return _group_norm(c, args[0], m.num_groups, w, b, m.eps)


def _group_norm_function(c, node, args, kwargs):
    names = ("input", "num_groups", "weight", "bias", "eps")
    a = dict({"weight": None, "bias": None, "eps": 1e-5}, **dict(zip(names, args)), **kwargs)
    return _group_norm(c, a["input"], a["num_groups"], a["weight"], a["bias"], a["eps"])


def _adaptive_avg_pool_module(c, node, args, kwargs):
    return ops.adaptive_avg_pool2d(c.t(args[0]), c.module_of(node).output_size)


def _adaptive_avg_pool_function(c, node, args, kwargs):
    a = dict(zip(("input", "output_size"), args), **kwargs)
    return ops.adaptive_avg_pool2d(c.t(a["input"]), a["output_size"])


def _interpolate(c, x, size, scale_factor, mode, align_corners, recompute, antialias=False):
    if antialias:
        raise Unsupported("interpolate with antialias=True")
    if mode not in INTERPOLATE_MODES:
        raise Unsupported(f"interpolate mode '{mode}' (supported: "
                          f"{', '.join(INTERPOLATE_MODES)})")
    if not isinstance(x, Dyn) or x.rank != 4:
        raise Unsupported("interpolate of an input that is not (N, C, H, W)")
    return ops.interpolate(c.t(x), size=size, scale_factor=scale_factor, mode=mode,
                           align_corners=align_corners, recompute_scale_factor=recompute)


def _upsample_module(c, node, args, kwargs):
    """nn.Upsample, nn.UpsamplingNearest2d, nn.UpsamplingBilinear2d (the last
    with align_corners=True, as PyTorch)."""
    m = c.module_of(node)
    return _interpolate(c, args[0], m.size, m.scale_factor, m.mode, m.align_corners,
                        getattr(m, "recompute_scale_factor", None))


def _interpolate_function(c, node, args, kwargs):
    names = ("input", "size", "scale_factor", "mode", "align_corners",
             "recompute_scale_factor", "antialias")
    a = dict({"size": None, "scale_factor": None, "mode": "nearest", "align_corners": None,
              "recompute_scale_factor": None, "antialias": False},
             **dict(zip(names, args)), **kwargs)
    return _interpolate(c, a["input"], a["size"], a["scale_factor"], a["mode"],
                        a["align_corners"], a["recompute_scale_factor"], a["antialias"])
