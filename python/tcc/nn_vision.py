"""tcc.nn's vision modules on NCHW tensors (torch.nn's names, layouts and
defaults): Conv2d, MaxPool2d, AvgPool2d. Exported by tcc.nn."""

import math
from typing import Optional, Tuple

from tcc import ops
from tcc.model import Init, Tensor, TccError, uniform
from tcc.nn import Module, Parameter


def _pair(v) -> Tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else tuple(int(e) for e in v)


class Conv2d(Module):
    """torch.nn.Conv2d on NCHW: weight (out, in / groups, kh, kw), stored in
    torch's layout (no perm), bias (out). Default init as torch's: uniform
    in +-1 / sqrt(in / groups * kh * kw) for both. Only zero padding."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size,
                 stride=1, padding=0, dilation=1, groups: int = 1,
                 bias: bool = True, init: Optional[Init] = None,
                 bias_init: Optional[Init] = None):
        super().__init__()
        k = _pair(kernel_size)
        if in_channels <= 0 or out_channels <= 0 or min(k) <= 0:
            raise TccError(f"Conv2d({in_channels}, {out_channels}, {kernel_size}): "
                           "sizes must be positive")
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise TccError(f"Conv2d: groups {groups} must divide in_channels "
                           f"{in_channels} and out_channels {out_channels}")
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
        has_bias = "bias" in self._parameters
        y = ops.conv2d(x, self.weight, self.stride, self.padding, self.dilation,
                       self.groups, name=self.node_name())
        if has_bias:
            b = ops.reshape(self.bias, (self.out_channels, 1, 1),
                            name=self.node_name("bias_chw"))
            y = ops.add(y, b, name=self.node_name("biased"))
        return y


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
