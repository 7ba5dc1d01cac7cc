"""Stateless functions (torch.nn.functional's counterparts), tcc.nn.functional.

Losses are built from tcc's primitives, so autodiff and the fusions see
ordinary ops. Every function takes `name=` for its result node (default: a
name made from the function under the current scope).
"""

from typing import Optional

from tcc import ops
from tcc.model import Tensor, TccError

relu, silu, tanh, sigmoid = ops.relu, ops.silu, ops.tanh, ops.sigmoid
gelu, softmax, log_softmax = ops.gelu, ops.softmax, ops.log_softmax


def dropout(x: Tensor, p: float = 0.5, name: Optional[str] = None) -> Tensor:
    """Training: zero with probability p, scale by 1/(1-p); eval: identity."""
    if not 0 <= p < 1:
        raise TccError(f"dropout: p must be in [0, 1), got {p}")
    return x if p == 0 else ops.dropout(x, p, name=name)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
           name: Optional[str] = None) -> Tensor:
    """x W + b with W stored (in, out) (tcc's layout)."""
    y = ops.matmul(x, weight, name=None if bias is not None else name)
    return y if bias is None else ops.add(y, bias, name=name)


def cross_entropy(logits: Tensor, targets: Tensor,
                  ignore_index: Optional[int] = None,
                  name: Optional[str] = None) -> Tensor:
    """torch's F.cross_entropy with reduction "mean": logits (..., C),
    integer targets (...); positions whose target is ignore_index count
    for nothing."""
    return ops.cross_entropy(logits, targets, ignore_index=ignore_index,
                             name=name)


def mse_loss(a: Tensor, b, name: Optional[str] = None) -> Tensor:
    """mean((a - b)^2) over every element (torch's F.mse_loss): nodes
    `name.diff`, `name.sq`, `name` (default name: mse_loss)."""
    m = a.model
    base = name or m.fresh_name("mse_loss")
    diff = ops.sub(a, b, name=m.unique_name(f"{base}.diff"))
    sq = ops.mul(diff, diff, name=m.unique_name(f"{base}.sq"))
    return ops.mean(sq, name=base)
