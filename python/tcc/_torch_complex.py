"""Complex values in tcc.from_torch, rewritten to real arithmetic: what
Meta's LLaMA code uses for rotary embeddings,

    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)

with freqs_cis = torch.polar(ones, angles) a constant of the import (a
buffer, or computed in forward from positions). tcc has no complex dtype: a
complex graph value is a pair of real tensors (re, im) of its shape
(`Complex`), and only the ops that form above needs are mapped:
view_as_complex (pairs of the last axis), products with a complex value or
constant (and real scalars), view_as_real. Anything else that meets a
complex value is refused by name (torch_import.py).
"""

import operator

import torch

from tcc import ops
from tcc._torch_ops import Dyn, Unsupported


class Complex(Dyn):
    """A complex graph value: `t` is (re, im), real tensors of `shape`."""
    __slots__ = ()


def _parts(c, x, shape):
    """(re, im) of a complex Dyn, a complex constant tensor or a real number."""
    if isinstance(x, Complex):
        return x.t
    if isinstance(x, torch.Tensor) and x.is_complex():
        return c.t(x.real.contiguous()), c.t(x.imag.contiguous())
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return c.t(float(x)), None
    if isinstance(x, torch.Tensor) and x.numel() == 1 and x.dim() == 0:
        return c.t(float(x.item())), None
    raise Unsupported(f"a {type(x).__name__} multiplied by a complex value (complex or "
                      "real numbers only)")


def _view_as_complex(c, node, args, kwargs):
    x = args[0]
    if not isinstance(x, Dyn) or x.shape[-1] != 2:
        raise Unsupported("view_as_complex of a value whose last dimension is not 2")
    shape = list(x.shape[:-1])
    rank = len(x.shape)
    re = ops.reshape(ops.slice(x.t, [0], [1], [rank - 1]), shape)
    im = ops.reshape(ops.slice(x.t, [1], [2], [rank - 1]), shape)
    dtype = torch.complex128 if x.dtype == torch.float64 else torch.complex64
    return Complex((re, im), shape, dtype)


def _view_as_real(c, node, args, kwargs):
    z = args[0]
    if not isinstance(z, Complex):
        raise Unsupported("view_as_real of a value that is not complex")
    shape = list(z.shape) + [1]
    re, im = (ops.reshape(p, shape) for p in z.t)
    dtype = torch.float64 if z.dtype == torch.complex128 else torch.float32
    return Dyn(ops.concat([re, im], axis=-1), tuple(z.shape) + (2,), dtype)


def _mul(c, node, args, kwargs):
    a, b = args[0], args[1] if len(args) > 1 else kwargs.get("other")
    rec = node.meta["tcc_value"]
    ar, ai = _parts(c, a, rec.shape)
    br, bi = _parts(c, b, rec.shape)
    if ai is None and bi is None:
        raise Unsupported("a product of two real values reached the complex rewrite")
    if ai is None:                      # real scalar x complex
        re, im = ops.mul(br, ar), ops.mul(bi, ar)
    elif bi is None:
        re, im = ops.mul(ar, br), ops.mul(ai, br)
    else:                               # (ar + i ai)(br + i bi)
        re = ops.sub(ops.mul(ar, br), ops.mul(ai, bi))
        im = ops.add(ops.mul(ar, bi), ops.mul(ai, br))
    return Complex((re, im), tuple(rec.shape), rec.dtype)


FUNCTIONS = {torch.view_as_complex: _view_as_complex, torch.view_as_real: _view_as_real,
             operator.mul: _mul, torch.mul: _mul}
METHODS = {"mul": _mul}


def handler(node, args, kwargs):
    """The complex handler of `node` when it takes or makes a complex value,
    else None. Raises Unsupported for an op that meets a complex value and
    has none."""
    def complex_arg(v):
        if isinstance(v, Complex):
            return True
        if isinstance(v, (list, tuple)):
            return any(complex_arg(x) for x in v)
        return False

    if node.op == "call_function" and node.target in (torch.view_as_complex,
                                                       torch.view_as_real):
        return FUNCTIONS[node.target]
    if not complex_arg((args, kwargs)):
        return None
    if node.op == "call_function" and node.target in FUNCTIONS:
        return FUNCTIONS[node.target]
    if node.op == "call_method" and node.target in METHODS:
        return METHODS[node.target]
    raise Unsupported("a complex value (view_as_complex) reaches an op tcc does not "
                      "rewrite to real arithmetic (only products and view_as_real, the "
                      "rotary form of Meta's LLaMA): write the rotation with cos / sin "
                      "tables (x * cos + rotate_half(x) * sin)")
