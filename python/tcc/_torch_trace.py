"""Tracing for tcc.from_torch (torch_import.py): torch.fx's symbolic
tracer, run on the example inputs as it records each op, and ShapeProp.

The tracer evaluates every op on the example values while it records it, so
`x.size()`, `x.shape`, `x.dim()` are plain ints during tracing (tcc steps
have static shapes): `B, T = x.size()`, `torch.arange(T)` and branches on
shapes trace. It also records on each node the path of the submodule whose
forward made it (`node.meta["tcc_path"]`), for names and error messages.
Only public fx APIs (Tracer hooks, Proxy, ShapeProp): torch 1.13 and 2.x.
"""

import dis
import inspect

import torch
import torch.fx as fx
from torch.fx.passes.shape_prop import ShapeProp

from tcc.model import TccError


class TorchImportError(TccError):
    """A module, loss or optimizer from_torch cannot map (one line)."""


PREFIX = "tcc.from_torch"


def _concrete(a):
    """`a` with every proxy replaced by its example value."""
    if isinstance(a, fx.Proxy):
        return a.node.meta["tcc_value"]
    if isinstance(a, (list, tuple)):
        values = [_concrete(x) for x in a]
        return type(a)(*values) if hasattr(a, "_fields") else type(a)(values)
    if isinstance(a, dict):
        return {k: _concrete(v) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(_concrete(a.start), _concrete(a.stop), _concrete(a.step))
    return a


class _Proxy(fx.Proxy):
    """A proxy whose shape is known: `x.shape`, `x.size()`, `x.dim()` are
    plain ints (the step's sizes are static), so `B, T = x.size()` and
    `torch.arange(T)` trace."""

    def __getattr__(self, k):
        if k in _SHAPE_ATTRS and "tcc_value" in self.node.meta:
            return getattr(self.node.meta["tcc_value"], k)
        return super().__getattr__(k)

    def __iter__(self):
        # Unpacking a tuple-valued proxy (q, k, v = x.split(...)): fx finds
        # the UNPACK_SEQUENCE by bytecode index, which Python 3.11 broke for
        # torch 1.13; find it by offset.
        frame = inspect.currentframe().f_back
        for inst in dis.get_instructions(frame.f_code):
            if inst.offset == frame.f_lasti and inst.opname == "UNPACK_SEQUENCE":
                return (self[i] for i in range(inst.argval))
        return self.tracer.iter(self)


# Module.__call__ / __getattr__ as they are outside fx's tracing (which
# patches them): the example run of each op uses these.
_MODULE_ORIGINALS = {n: torch.nn.Module.__dict__[n] for n in ("__call__", "__getattr__")}

_SHAPE_ATTRS = ("shape", "ndim", "dtype", "device")
_SHAPE_METHODS = ("size", "dim", "numel", "ndimension")


class _Tracer(fx.Tracer):
    """symbolic_trace's tracer (public Tracer hooks: torch 1.13 and 2.x)
    that runs each op on the example inputs as it records it, so shapes are
    constants while tracing, and that records on each node the path of the
    submodule whose forward made it."""

    def __init__(self, examples=None):
        super().__init__()
        self._paths = []
        self._examples = examples or {}

    def call_module(self, m, forward, args, kwargs):
        self._paths.append(self.path_of_module(m))
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self._paths.pop()

    def proxy(self, node):
        return _Proxy(node, self)

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        node.meta["tcc_path"] = self._paths[-1] if self._paths else ""
        return node

    def _evaluate(self, kind, target, args, kwargs):
        if kind == "placeholder":
            return self._examples[target]
        # While tracing, fx patches Module.__call__ and __getattr__: reach
        # submodules and tensors through the module dicts, call forward.
        if kind == "get_attr":
            *path, leaf = target.split(".")
            m = self._submodule(path)
            for table in (m._parameters, m._buffers):
                if leaf in table:
                    return table[leaf]
            return m.__dict__[leaf]
        a, k = _concrete(args), _concrete(kwargs)
        patched = {n: torch.nn.Module.__dict__[n] for n in _MODULE_ORIGINALS}
        try:
            for n, f in _MODULE_ORIGINALS.items():
                setattr(torch.nn.Module, n, f)
            with torch.no_grad():
                if kind == "call_module":
                    return self._submodule(target.split("."))(*a, **k)
                if kind == "call_method":
                    return getattr(a[0], target)(*a[1:], **k)
                return target(*a, **k)
        finally:
            for n, f in patched.items():
                setattr(torch.nn.Module, n, f)

    def _submodule(self, path):
        m = self.root
        for part in path:
            m = m._modules[part]
        return m

    def create_proxy(self, kind, target, args, kwargs, *rest, **krest):
        proxy = super().create_proxy(kind, target, args, kwargs, *rest, **krest)
        try:
            value = self._evaluate(kind, target, args, kwargs)
        except Exception:  # no example value: ShapeProp's run reports it
            return proxy
        proxy.node.meta["tcc_value"] = value
        if kind == "call_method" and target in _SHAPE_METHODS:
            return value
        return proxy


def _stub(value):
    """Shape and dtype only (a meta tensor): what a value computed from the
    inputs or the parameters needs to keep, not its memory."""
    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
        return torch.empty(value.shape, dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_stub(v) for v in value)
    return value


def _depends_on_data(n):
    """Whether node n's value is computed from the inputs or parameters (its
    example value is then not a constant of the import)."""
    if n.op == "placeholder":
        return True
    if n.op == "get_attr":
        return isinstance(n.meta.get("tcc_value"), torch.nn.Parameter)
    if n.op == "call_method" and n.target in _SHAPE_METHODS or \
            n.op == "call_function" and n.target is getattr and n.args[1] in _SHAPE_ATTRS:
        return False
    return n.op == "call_module" or any(a.meta.get("tcc_data", False)
                                        for a in n.all_input_nodes)


class _Record(ShapeProp):
    """ShapeProp that also keeps each node's example value: the value itself
    for constants of the import (shapes, buffers, masks), a meta tensor for
    values computed from the data (only their shape and dtype are used), so
    an import holds no more than one forward's live activations."""

    def run_node(self, n):
        result = super().run_node(n)
        n.meta["tcc_data"] = _depends_on_data(n)
        n.meta["tcc_value"] = _stub(result) if n.meta["tcc_data"] else result
        return result


def trace(root, concrete_args=None, what="module", examples=None):
    tracer = _Tracer(examples)
    try:
        graph = tracer.trace(root, concrete_args=concrete_args)
    except Exception as e:  # fx raises many kinds; one line for the user
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TorchImportError(f"{PREFIX}: cannot trace the {what} with "
                               f"torch.fx.symbolic_trace: {msg}") from None
    name = type(root).__name__ if isinstance(root, torch.nn.Module) else "loss"
    gm = fx.GraphModule(tracer.root, graph, name)
    return gm


def run(gm, example, what):
    try:
        with torch.no_grad():
            _Record(gm).propagate(*example)
    except Exception as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TorchImportError(f"{PREFIX}: running the {what} on the example "
                               f"inputs failed: {msg}") from None
