"""The PyTorch vision ops tcc.from_torch maps (the tables are in
_torch_ops.py, which imports this module after defining Dyn and
Unsupported): nn.Conv2d / F.conv2d, nn.MaxPool2d / F.max_pool2d,
nn.AvgPool2d / F.avg_pool2d, on NCHW tensors. Handlers take (converter,
fx node, args, kwargs) like _torch_ops.py's."""

from tcc import ops
from tcc._torch_ops import Dyn, Unsupported


def _conv2d(c, x, weight, bias, stride, padding, dilation, groups):
    """NCHW conv2d; the weight stays in torch's (O, C/groups, KH, KW) layout,
    the bias is added as (O, 1, 1)."""
    if isinstance(padding, str):
        raise Unsupported(f"conv2d padding '{padding}' (give the sizes)")
    if not isinstance(weight, Dyn):
        raise Unsupported("conv2d with a constant weight")
    y = ops.conv2d(c.t(x), weight.t, stride, padding, dilation, int(groups))
    if bias is not None:
        o = weight.shape[0]
        y = ops.add(y, ops.reshape(c.t(bias), (o, 1, 1)))
    return y


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
