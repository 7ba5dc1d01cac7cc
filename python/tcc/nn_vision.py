"""tcc.nn's vision modules on NCHW tensors (torch.nn's names, layouts and
defaults): Conv2d, ConvTranspose2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d,
BatchNorm1d, BatchNorm2d, GroupNorm, Upsample. Exported by tcc.nn."""

import math
from typing import Optional, Tuple

from tcc import ops
from tcc.model import Init, Tensor, TccError, ones, uniform, zeros
from tcc.nn import Module, Parameter


def _pair(v) -> Tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else tuple(int(e) for e in v)


def _conv_sizes(kind: str, in_channels: int, out_channels: int, kernel_size,
                groups: int) -> Tuple[int, int]:
    """The (kh, kw) of a convolution module, after checking its sizes."""
    k = _pair(kernel_size)
    if in_channels <= 0 or out_channels <= 0 or min(k) <= 0:
        raise TccError(f"{kind}({in_channels}, {out_channels}, {kernel_size}): "
                       "sizes must be positive")
    if groups < 1 or in_channels % groups or out_channels % groups:
        raise TccError(f"{kind}: groups {groups} must divide in_channels "
                       f"{in_channels} and out_channels {out_channels}")
    return k


def _add_channel_bias(module: Module, y: Tensor) -> Tensor:
    """y (N, out, H, W) plus the module's bias (out) as (out, 1, 1), when it
    has one."""
    if "bias" not in module._parameters:
        return y
    b = ops.reshape(module.bias, (module.out_channels, 1, 1),
                    name=module.node_name("bias_chw"))
    return ops.add(y, b, name=module.node_name("biased"))


class Conv2d(Module):
    """torch.nn.Conv2d on NCHW: weight (out, in / groups, kh, kw), stored in
    torch's layout (no perm), bias (out). Default init as torch's: uniform
    in +-1 / sqrt(in / groups * kh * kw) for both. Only zero padding."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size,
                 stride=1, padding=0, dilation=1, groups: int = 1,
                 bias: bool = True, init: Optional[Init] = None,
                 bias_init: Optional[Init] = None):
        super().__init__()
        k = _conv_sizes("Conv2d", in_channels, out_channels, kernel_size, groups)
        if isinstance(padding, str):
            raise TccError(f"Conv2d: padding '{padding}' is not supported "
                           "(give the sizes)")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = k, _pair(stride)
        self.padding, self.dilation = _pair(padding), _pair(dilation)
        self.groups = groups
        bound = 1.0 / math.sqrt(in_channels // groups * k[0] * k[1])
        self.weight = Parameter((out_channels, in_channels // groups) + k,
                                init or uniform(bound))
        self.bias = Parameter((out_channels,), bias_init or uniform(bound)) \
            if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = ops.conv2d(x, self.weight, self.stride, self.padding, self.dilation,
                       self.groups, name=self.node_name())
        return _add_channel_bias(self, y)


class ConvTranspose2d(Module):
    """torch.nn.ConvTranspose2d on NCHW: weight (in, out / groups, kh, kw),
    torch's layout, bias (out); both uniform in +-1 / sqrt(out / groups * kh
    * kw) as torch's default init (its fan-in is the weight's dim 1). Only
    zero padding."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1,
                 padding=0, output_padding=0, groups: int = 1, bias: bool = True,
                 dilation=1, init: Optional[Init] = None,
                 bias_init: Optional[Init] = None):
        super().__init__()
        k = _conv_sizes("ConvTranspose2d", in_channels, out_channels, kernel_size, groups)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = k, _pair(stride)
        self.padding, self.dilation = _pair(padding), _pair(dilation)
        self.output_padding, self.groups = _pair(output_padding), groups
        bound = 1.0 / math.sqrt(out_channels // groups * k[0] * k[1])
        self.weight = Parameter((in_channels, out_channels // groups) + k,
                                init or uniform(bound))
        self.bias = Parameter((out_channels,), bias_init or uniform(bound)) \
            if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = ops.conv_transpose2d(x, self.weight, self.stride, self.padding,
                                 self.output_padding, self.groups, self.dilation,
                                 name=self.node_name())
        return _add_channel_bias(self, y)


class MaxPool2d(Module):
    """torch.nn.MaxPool2d (stride defaults to the kernel; gradient to each
    window's first maximum)."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _pair(kernel_size)
        self.stride = self.kernel_size if stride is None else _pair(stride)
        self.padding = _pair(padding)

    def forward(self, x: Tensor) -> Tensor:
        return ops.max_pool2d(x, self.kernel_size, self.stride, self.padding,
                              name=self.node_name())


class AvgPool2d(MaxPool2d):
    """torch.nn.AvgPool2d with its defaults (count_include_pad=True: the
    divisor is always kh * kw)."""

    def forward(self, x: Tensor) -> Tensor:
        return ops.avg_pool2d(x, self.kernel_size, self.stride, self.padding,
                              name=self.node_name())


class _BatchNorm(Module):
    """torch.nn.BatchNorm*d: weight ones, bias zeros (affine), and the
    buffers running_mean (zeros), running_var (ones) and num_batches_tracked
    (i64, 0) with PyTorch's state_dict names. The train step normalizes with
    the batch's statistics and updates the buffers (momentum as PyTorch's:
    running = (1 - momentum) running + momentum batch); eval uses them.
    momentum=None (a cumulative average) is not supported."""

    ranks: Tuple[int, ...] = ()
    sync = False  # statistics over the data-parallel ranks (SyncBatchNorm)

    def __init__(self, num_features: int, eps: float = 1e-5,
                 momentum: Optional[float] = 0.1, affine: bool = True,
                 track_running_stats: bool = True):
        super().__init__()
        if num_features <= 0:
            raise TccError(f"{type(self).__name__}({num_features}): "
                           "num_features must be positive")
        if momentum is None:
            raise TccError(f"{type(self).__name__}: momentum=None (a cumulative "
                           "moving average) is not supported; give a number")
        self.num_features, self.eps = int(num_features), float(eps)
        self.momentum = float(momentum)
        self.track_running_stats = bool(track_running_stats)
        self.__dict__["_buffers_made"] = {}  # Model -> (mean, var, count)
        if affine:
            self.weight = Parameter((num_features,), ones())
            self.bias = Parameter((num_features,), zeros())

    def _buffers(self):
        """The running statistics in the current model, made at the first
        call (after the module's parameters, as torch's state_dict lists
        them)."""
        model = self._current_model()
        made = self._buffers_made.get(model)
        if made is None:
            c = (self.num_features,)
            made = (model.buffer(self._full("running_mean"), c, zeros()),
                    model.buffer(self._full("running_var"), c, ones()),
                    model.buffer(self._full("num_batches_tracked"), (), zeros(),
                                 dtype="i64"))
            self._buffers_made[model] = made
        return made

    def forward(self, x: Tensor) -> Tensor:
        if x.shape is not None and (len(x.shape) not in self.ranks or
                                    x.shape[1] != self.num_features):
            raise TccError(f"{self._describe()}: input {x.name!r} has shape "
                           f"{x.shape}, expected rank {' or '.join(map(str, self.ranks))} "
                           f"with {self.num_features} channels at dim 1")
        w = self.weight if "weight" in self._parameters else None
        b = self.bias if "bias" in self._parameters else None
        mean = var = count = None
        if self.track_running_stats:
            mean, var, count = self._buffers()
        return ops.batch_norm(x, mean, var, w, b, eps=self.eps,
                              momentum=self.momentum, num_batches_tracked=count,
                              sync=self.sync, name=self.node_name())


class BatchNorm1d(_BatchNorm):
    """torch.nn.BatchNorm1d on (N, C) or (N, C, L)."""
    ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """torch.nn.BatchNorm2d on NCHW."""
    ranks = (4,)


class SyncBatchNorm(_BatchNorm):
    """torch.nn.SyncBatchNorm on (N, C, ...): in a data-parallel train step
    (tcc compile --data-parallel) the statistics of the global batch, over
    every rank; otherwise a batch norm."""
    ranks = (2, 3, 4, 5)
    sync = True


class AdaptiveAvgPool2d(Module):
    """torch.nn.AdaptiveAvgPool2d (ops.adaptive_avg_pool2d): output_size an
    int or (oh, ow), None keeping that size."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return ops.adaptive_avg_pool2d(x, self.output_size, name=self.node_name())


class GroupNorm(Module):
    """torch.nn.GroupNorm: weight ones and bias zeros (C) when affine
    (ops.group_norm: a batch norm over each (image, group), then per
    channel)."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True):
        super().__init__()
        if num_groups < 1 or num_channels < 1 or num_channels % num_groups:
            raise TccError(f"GroupNorm({num_groups}, {num_channels}): num_groups must "
                           "be positive and divide num_channels")
        self.num_groups, self.num_channels = int(num_groups), int(num_channels)
        self.eps = float(eps)
        if affine:
            self.weight = Parameter((num_channels,), ones())
            self.bias = Parameter((num_channels,), zeros())

    def forward(self, x: Tensor) -> Tensor:
        if x.shape is not None and (len(x.shape) < 2 or x.shape[1] != self.num_channels):
            raise TccError(f"{self._describe()}: input {x.name!r} has shape {x.shape}, "
                           f"expected (N, {self.num_channels}, ...)")
        w = self.weight if "weight" in self._parameters else None
        b = self.bias if "bias" in self._parameters else None
        return ops.group_norm(x, self.num_groups, w, b, eps=self.eps,
                              name=self.node_name())


class Upsample(Module):
    """torch.nn.Upsample (ops.interpolate): size or scale_factor, mode
    "nearest" (default), "nearest-exact" or "bilinear"."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: Optional[bool] = None):
        super().__init__()
        self.size, self.scale_factor = size, scale_factor
        self.mode, self.align_corners = mode, align_corners

    def forward(self, x: Tensor) -> Tensor:
        return ops.interpolate(x, self.size, self.scale_factor, self.mode,
                               self.align_corners, name=self.node_name())
