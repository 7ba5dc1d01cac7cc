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
        if k == "device" and "tcc_value" in self.node.meta:
            return self.tracer.device  # the value is a meta tensor; the data's
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


def _tree_map(fn, a):
    if isinstance(a, (list, tuple)):
        values = [_tree_map(fn, x) for x in a]
        return type(a)(*values) if hasattr(a, "_fields") else type(a)(values)
    if isinstance(a, dict):
        return {k: _tree_map(fn, v) for k, v in a.items()}
    return fn(a)


def _has_meta(a):
    if isinstance(a, (list, tuple)):
        return any(_has_meta(x) for x in a)
    if isinstance(a, dict):
        return any(_has_meta(x) for x in a.values())
    return isinstance(a, torch.Tensor) and a.is_meta


def _to_meta(x):
    return x.to("meta") if isinstance(x, torch.Tensor) and not x.is_meta else x


try:  # torch >= 2.0
    from torch.func import functional_call as _functional_call
except ImportError:  # torch 1.13
    from torch.nn.utils.stateless import functional_call as _functional_call


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
        self.device = torch.device("cpu")  # the example inputs'

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
        """The example value of one op. Values computed from the inputs are
        meta tensors (shape and dtype, no memory, no arithmetic); constants
        (shapes, buffers, masks) are computed for real."""
        if kind == "placeholder":
            example = self._examples[target]
            if isinstance(example, torch.Tensor):
                self.device = example.device
            return _stub(example)
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
                if not _has_meta((a, k)):
                    return self._call(kind, target, a, k, meta=False)
                try:
                    return _tree_map(_stub, self._call(kind, target, _tree_map(_to_meta, a),
                                                       _tree_map(_to_meta, k), meta=True))
                except Exception:  # noqa: BLE001 - no meta kernel: on zeros
                    zeros = lambda t: torch.zeros(t.shape, dtype=t.dtype, device=self.device) \
                        if isinstance(t, torch.Tensor) and t.is_meta else t  # noqa: E731
                    return _tree_map(_stub, self._call(kind, target, _tree_map(zeros, a),
                                                       _tree_map(zeros, k), meta=False))
        finally:
            for n, f in patched.items():
                setattr(torch.nn.Module, n, f)

    def _call(self, kind, target, a, k, meta):
        if kind == "call_module":
            m = self._submodule(target.split("."))
            if not meta:
                return m(*a, **k)
            tensors = {n: t.to("meta") for n, t in
                       list(m.named_parameters()) + list(m.named_buffers())}
            return _functional_call(m, tensors, tuple(a), k)
        if kind == "call_method":
            return getattr(a[0], target)(*a[1:], **k)
        return target(*a, **k)

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
    values computed from the data. Run on meta example inputs, it computes
    only constants for real: the data's values are never needed, their
    shapes and dtypes are."""

    def __init__(self, gm, device):
        super().__init__(gm)
        self.device = device

    def run_node(self, n):
        result = super().run_node(n)
        n.meta["tcc_data"] = _depends_on_data(n)
        n.meta["tcc_value"] = _stub(result) if n.meta["tcc_data"] else result
        return result

    def _on_meta(self, call, args, kwargs):
        if not _has_meta((args, kwargs)):
            return call(args, kwargs, False)
        try:
            return call(_tree_map(_to_meta, args), _tree_map(_to_meta, kwargs), True)
        except Exception:  # noqa: BLE001 - no meta kernel: on zeros
            zeros = lambda t: torch.zeros(t.shape, dtype=t.dtype, device=self.device) \
                if isinstance(t, torch.Tensor) and t.is_meta else t  # noqa: E731
            return _tree_map(_stub, call(_tree_map(zeros, args), _tree_map(zeros, kwargs),
                                         False))

    def call_function(self, target, args, kwargs):
        return self._on_meta(lambda a, k, m: target(*a, **k), args, kwargs)

    def call_method(self, target, args, kwargs):
        return self._on_meta(lambda a, k, m: getattr(a[0], target)(*a[1:], **k),
                             args, kwargs)

    def call_module(self, target, args, kwargs):
        module = self.fetch_attr(target)

        def call(a, k, meta):
            if isinstance(module, torch.nn.SyncBatchNorm):
                # Its forward needs CUDA tensors and a process group in
                # training; its output has its input's shape and type.
                return a[0].clone()
            if not meta:
                return module(*a, **k)
            tensors = {n: t.to("meta") for n, t in
                       list(module.named_parameters()) + list(module.named_buffers())}
            return _functional_call(module, tensors, tuple(a), k)
        return self._on_meta(call, args, kwargs)


def trace(root, concrete_args=None, what="module", examples=None):
    tracer = _Tracer(examples)
    try:
        graph = tracer.trace(root, concrete_args=concrete_args)
    except Exception as e:  # fx raises many kinds; one line for the user
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "is not installed as a submodule" in msg:
            msg += (" (a module created inside forward: create it in __init__, or call "
                    "its functional form, e.g. F.cross_entropy)")
        raise TorchImportError(f"{PREFIX}: cannot trace the {what} with "
                               f"torch.fx.symbolic_trace: {msg}") from None
    name = type(root).__name__ if isinstance(root, torch.nn.Module) else "loss"
    gm = fx.GraphModule(tracer.root, graph, name)
    return gm


def run(gm, example, what):
    device = next((e.device for e in example if isinstance(e, torch.Tensor)),
                  torch.device("cpu"))
    try:
        with torch.no_grad():
            _Record(gm, device).propagate(*(_stub(e) for e in example))
    except Exception as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TorchImportError(f"{PREFIX}: running the {what} on the example "
                               f"inputs failed: {msg}") from None
