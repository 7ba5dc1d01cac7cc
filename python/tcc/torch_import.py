"""tcc.from_torch: a torch.nn.Module, its loss and its optimizer as a tcc
model file (docs/pytorch-import.md).

    model = tcc.from_torch(net, (x,), loss=F.cross_entropy, target=y,
                           optimizer=torch.optim.SGD(net.parameters(), lr=0.1))
    model.save("net.pb")                       # tcc compile net.pb -o net.so
    tcc.export_torch_weights(net, "net.safetensors")   # trun --init-from

The module is traced with torch.fx (_torch_trace.py: symbolic_trace's
tracer, running each op on the example inputs as it records it and
remembering which submodule each call came from), then ShapeProp gives
every value its shape. Values that depend only on
shapes and buffers (size(), a registered tril mask, torch.arange(T), a
rotary table) are constants of the import: uniform tensors, index ramps and
triangular masks become tcc constants, iota and causal_mask; any other
becomes a constant of the model file (Model.constants, stored once, up to
max_constant_bytes). Each
op this importer does not map is one TccError naming the op and the module
path.
"""

import inspect
import operator

import torch
import torch.fx as fx

from tcc import ops
from tcc import _torch_complex as C
from tcc import _torch_ops as T
from tcc._torch_trace import PREFIX, TorchImportError, run as _run, trace as _trace
from tcc.model import AdamW, Model, SGD, TccError, WarmupCosine, normal, ones, zeros
from tcc._torch_ops import Dyn, Unsupported


_PREFIX = PREFIX


def _op_name(node, gm):
    if node.op == "call_module":
        cls = type(gm.get_submodule(node.target))
        mod = cls.__module__
        if mod.startswith("torch.nn.modules"):
            mod = "torch.nn"
        return f"{mod}.{cls.__name__}"
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    fn = node.target
    mod = getattr(fn, "__module__", None) or "torch"
    if mod == "_operator":
        mod = "operator"
    return f"{mod}.{getattr(fn, '__name__', str(fn))}"


def _where(node):
    if node.op == "call_module":
        return node.target
    return node.meta.get("tcc_path") or "the top-level forward"


class _Converter:
    """Emits the tcc nodes of one traced graph into `model`."""

    def __init__(self, model, gm, params, int_dtype, max_constant_bytes=64 << 20,
                 lora=None):
        self.model, self.gm = model, gm
        self.max_constant_bytes = max_constant_bytes
        self.lora = lora          # a tcc.lora.LoRA: adapters on matching nn.Linear calls
        self.adapted = []         # their module paths
        self.params = params          # id(torch tensor) -> (Dyn, transposed)
        self.int_dtype = int_dtype
        self.env = {}

    # -- helpers the op handlers use -------------------------------------------

    def module_of(self, node):
        return self.gm.get_submodule(node.target)

    def recorded(self, node):
        return node.meta["tcc_value"]

    def param_value(self, qualified):
        p = self.gm.get_parameter(qualified)
        return self.params[id(p)][0]

    def is_transposed(self, value):
        for dyn, transposed in self.params.values():
            if dyn is value:
                return transposed
        return False  # not a parameter: an activation in torch's layout

    def dtype_name(self, dtype):
        if dtype == torch.float32:
            return "f32"
        if dtype == torch.float64:
            return "f64"
        if dtype == torch.bool:
            return "bool"
        if dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            return self.int_dtype
        raise Unsupported(f"dtype {dtype}")

    def t(self, x, like=None):
        """A tcc tensor for x: a graph value, a number or a constant tensor."""
        if isinstance(x, Dyn):
            return x.t
        if isinstance(x, bool):
            raise Unsupported("a bool used as a tensor")
        if isinstance(x, (int, float)):
            dtype = self.dtype_name(like.dtype) if isinstance(like, Dyn) else "f32"
            return ops.constant(self.model, float(x), (), dtype)
        if isinstance(x, torch.Tensor):
            return self.materialize(x)
        raise Unsupported(f"a {type(x).__name__} used as a tensor")

    def upper_triangle(self, mask, shape):
        """k when the bool `mask` broadcast to `shape` is (j - i > k) over the
        last two dims and the same for every leading index; else None."""
        if mask.dtype != torch.bool or mask.dim() < 2 or len(shape) < 2:
            return None
        try:
            full = mask.expand(*shape[:-2], *mask.shape[-2:]) if mask.dim() < len(shape) \
                else mask
        except RuntimeError:
            return None
        if tuple(full.shape[-2:]) != tuple(shape[-2:]):
            return None
        flat = full.reshape(-1, *full.shape[-2:])
        if not bool((flat == flat[0]).all()):
            return None
        rows, cols = flat.shape[-2:]
        d = torch.arange(cols).view(1, -1) - torch.arange(rows).view(-1, 1)
        for k in range(-rows - 1, cols + 1):
            if torch.equal(flat[0], d > k):
                return k
        return None

    def materialize(self, x):
        """A constant tensor of the import as tcc nodes: a splat, an index
        ramp (iota) or a triangular bool mask; anything else is refused."""
        shape = list(x.shape)
        dtype = self.dtype_name(x.dtype)
        if x.is_meta:
            raise Unsupported(f"a tensor of shape {tuple(shape)} computed from the "
                              "data used where a constant is needed")
        if x.numel() == 0:
            raise Unsupported("an empty constant tensor")
        flat = x.reshape(-1)
        if bool((flat == flat[0]).all()):
            return ops.constant(self.model, float(flat[0]), shape, dtype)
        if x.dtype != torch.bool:
            for axis, n in enumerate(shape):
                ramp = torch.arange(n, dtype=x.dtype).view(
                    [n if a == axis else 1 for a in range(len(shape))])
                if torch.equal(x, ramp.expand(shape)):
                    return ops.iota(self.model, shape, axis=axis, dtype=dtype)
        if x.dtype == torch.bool and x.dim() >= 2:
            k = self.upper_triangle(x, shape)
            inverted = False
            if k is None:
                k = self.upper_triangle(~x, shape)
                inverted = True
            if k is not None:
                cols = ops.iota(self.model, shape, axis=-1, dtype="f32")
                rows = ops.iota(self.model, shape, axis=-2, dtype="f32")
                diff = ops.sub(cols, rows)
                bound = ops.constant(self.model, float(k), (), "f32")
                return (ops.less_equal if inverted else ops.greater)(diff, bound)
        return self.dense(x, shape, dtype)

    def dense(self, x, shape, dtype):
        """Any other constant (a rotary table from a buffer or computed from
        torch.arange in forward): its values in the model file, stored once
        however many layers read it, up to max_constant_bytes in all."""
        import numpy as np
        kinds = {"f32": "<f4", "f64": "<f8", "i32": "<i4", "i64": "<i8", "bool": "u1"}
        data = np.ascontiguousarray(
            x.detach().cpu().numpy().astype(kinds[dtype])).tobytes()
        if dtype in ("f32", "f64") and bool(torch.isnan(x).any()):
            raise Unsupported(f"a constant tensor of shape {tuple(shape)} holds NaN")
        t = self.model.constant_data(data, shape, dtype)
        after = self.model.constant_bytes()
        if after > self.max_constant_bytes:
            raise Unsupported(
                f"a constant tensor of shape {tuple(shape)} ({len(data)} bytes) takes the "
                f"import's constants to {after} bytes, over max_constant_bytes="
                f"{self.max_constant_bytes} (the step carries constants in its code): "
                "make the table a frozen nn.Parameter (requires_grad=False) and load it "
                "with --init-from, or raise max_constant_bytes")
        return t

    # -- the walk --------------------------------------------------------------

    def resolve(self, a):
        if isinstance(a, fx.Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.resolve(x) for x in a) if not hasattr(a, "_fields") \
                else type(a)(*(self.resolve(x) for x in a))
        if isinstance(a, dict):
            return {k: self.resolve(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(self.resolve(a.start), self.resolve(a.stop), self.resolve(a.step))
        return a

    @staticmethod
    def _has_dyn(v):
        if isinstance(v, Dyn):
            return True
        if isinstance(v, (list, tuple)):
            return any(_Converter._has_dyn(x) for x in v)
        if isinstance(v, dict):
            return any(_Converter._has_dyn(x) for x in v.values())
        if isinstance(v, slice):
            return any(_Converter._has_dyn(x) for x in (v.start, v.stop, v.step))
        return False

    def wrap(self, node, result):
        rec = self.recorded(node)
        if isinstance(result, (list, tuple)):
            return [self.wrap_one(r, v) for r, v in zip(result, rec)]
        return self.wrap_one(result, rec)

    def wrap_one(self, result, rec):
        if isinstance(result, Dyn):
            return result
        return Dyn(result, rec.shape, rec.dtype)

    def run(self, bindings):
        """Converts every node; `bindings`: placeholder name -> value.
        Returns the value of the output node."""
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                # A forward argument left at its default (fx keeps a
                # placeholder for it): the default, a constant of the import.
                self.env[node] = bindings[node.target] if node.target in bindings \
                    else node.meta.get("tcc_value")
            elif node.op == "output":
                return self.resolve(node.args[0])
            elif node.op == "get_attr":
                self.env[node] = self.get_attr(node)
            else:
                self.env[node] = self.call(node)
                written = self.inplace_target(node)
                if written is not None:
                    self.env[written] = self.env[node]
        raise TccError(f"{_PREFIX}: the traced graph has no output")

    # -- in-place ops ------------------------------------------------------------

    def inplace_target(self, node):
        """The fx node whose tensor `node` overwrites (F.relu(h, inplace=True),
        nn.ReLU(inplace=True), h.add_(x), h += x), when that tensor is a graph
        value: later reads of it see the new value, as in PyTorch. Refused
        where the write would reach other names of the tensor (a view of it,
        or it a view of another) or state (a buffer, a parameter)."""
        target = None
        if node.op == "call_module":
            if getattr(self.module_of(node), "inplace", False):
                target = node.args[0] if node.args else None
        elif node.op == "call_method":
            if node.target.endswith("_") and not node.target.endswith("__"):
                target = node.args[0]
        elif node.op == "call_function":
            if node.target in _INPLACE_OPERATORS:
                target = node.args[0]
            elif _inplace_argument(node):
                target = node.args[0] if node.args else node.kwargs.get("input")
        if not isinstance(target, fx.Node):
            return None
        what = f"{_op_name(node, self.gm)} at {_where(node)}"
        if target.op == "get_attr":
            raise TorchImportError(
                f"{_PREFIX}: in-place {what} writes the parameter or buffer "
                f"{target.target}, state the step does not keep: write it out of place "
                "(y = op(x))")
        if not isinstance(self.env.get(target), Dyn):
            return None  # a constant of the import: the example run wrote it already
        order = {n: i for i, n in enumerate(self.gm.graph.nodes)}
        base = target.args[0] if _is_view(target) and target.args else None
        if isinstance(base, fx.Node) and any(order[u] > order[node] for u in base.users):
            raise TorchImportError(
                f"{_PREFIX}: in-place {what} writes {target.name}, a view of "
                f"{base.name}, which PyTorch changes too and is read after it: write it "
                "out of place (y = op(x))")
        for user in target.users:
            if user is node or not _is_view(user) or order[user] > order[node]:
                continue
            if any(order[u] > order[node] for u in user.users):
                raise TorchImportError(
                    f"{_PREFIX}: in-place {what} changes {target.name}, and its view "
                    f"{user.name} is read after it: write it out of place (y = op(x))")
        return target

    def get_attr(self, node):
        value = self.recorded(node)
        if isinstance(value, torch.Tensor) and id(value) in self.params:
            return self.params[id(value)][0]
        return value  # a buffer or a constant: a value of the import

    def call(self, node):
        args = self.resolve(node.args)
        kwargs = self.resolve(node.kwargs)
        shape_only = (node.op == "call_method" and node.target in T.SHAPE_METHODS) or (
            node.op == "call_function" and node.target is getattr
            and args[1] in T.SHAPE_ATTRS)
        if shape_only or not self._has_dyn((args, kwargs)) and node.op != "call_module":
            return self.recorded(node)  # computed by the example run
        try:
            handler = C.handler(node, args, kwargs)  # complex values (Meta's rotary)
        except Unsupported as e:
            raise TorchImportError(f"{_PREFIX}: unsupported use of "
                                   f"{_op_name(node, self.gm)} at {_where(node)}: {e}") from None
        if handler is not None:
            pass
        elif node.op == "call_module":
            handler = T.MODULES.get(type(self.module_of(node)))
        elif node.op == "call_method":
            handler = T.METHODS.get(node.target)
            if handler is None and node.target.endswith("_") and \
                    not node.target.endswith("__"):
                # h.add_(x): the value of h.add(x); run() rebinds h to it.
                handler = T.METHODS.get(node.target[:-1])
        else:
            handler = T.FUNCTIONS.get(node.target)
        where = _where(node)
        if handler is None:
            raise TorchImportError(
                f"{_PREFIX}: unsupported op {_op_name(node, self.gm)} at {where} "
                f"(fx node {node.name}) — supported: {T.supported_names()}")
        try:
            with self.model.scope(where if node.op == "call_module" or
                                  node.meta.get("tcc_path") else ""):
                result = handler(self, node, list(args), kwargs)
        except Unsupported as e:
            raise TorchImportError(f"{_PREFIX}: unsupported use of "
                                   f"{_op_name(node, self.gm)} at {where}: {e}") from None
        if self.lora is not None and node.op == "call_module" and \
                isinstance(self.module_of(node), torch.nn.Linear) and \
                any(_lora_matches(node.target, t) for t in self.lora.targets):
            result = self.add_adapter(node, args[0], result)
        return self.wrap(node, result)

    def add_adapter(self, node, x, y):
        """y + (alpha / r) (x A) B for the nn.Linear at node.target, as
        tcc.lora.LoRALinear computes it: A (in, r) uniform(1/sqrt(in)), B
        (r, out) zeros, parameters PATH.lora_A.weight / PATH.lora_B.weight in
        PEFT's PyTorch layouts, the scale the constant node PATH.lora_scale
        (what tcc.lora.merge reads)."""
        from tcc.lora import _adapter_seed
        from tcc.model import uniform
        path, m = node.target, self.module_of(node)
        if path in self.adapted:
            raise TorchImportError(f"{_PREFIX}: LoRA: {path} is called twice; an adapter "
                                   "belongs to one call")
        r, fan_in, fan_out = self.lora.rank, m.in_features, m.out_features
        a = self.model.param(f"{path}.lora_A.weight", (fan_in, r),
                             init=uniform(1.0 / fan_in ** 0.5), torch_perm=[1, 0],
                             seed=_adapter_seed(f"{path}.lora_A.weight"))
        b = self.model.param(f"{path}.lora_B.weight", (r, fan_out), init=zeros(),
                             torch_perm=[1, 0], seed=_adapter_seed(f"{path}.lora_B.weight"))
        scale = ops.constant(self.model, self.lora.alpha / r, name=f"{path}.lora_scale")
        lead = list(x.shape[:-1])
        rows = 1
        for d in lead:
            rows *= d
        flat = ops.reshape(x.t, [rows, fan_in]) if len(lead) != 1 else x.t
        delta = ops.matmul(ops.matmul(flat, a), b)
        if len(lead) != 1:
            delta = ops.reshape(delta, lead + [fan_out])
        self.adapted.append(path)
        return ops.add(y.t if isinstance(y, Dyn) else y, ops.mul(delta, scale))


_INPLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv}

# Results that share their input's memory (a write to one changes the other).
_VIEW_METHODS = {"view", "view_as", "reshape", "reshape_as", "transpose", "permute", "t",
                 "unsqueeze", "squeeze", "expand", "expand_as", "flatten", "narrow",
                 "split", "chunk", "unbind", "select", "diagonal", "contiguous", "detach"}
_VIEW_FUNCTIONS = {torch.reshape, torch.transpose, torch.permute, torch.t, torch.unsqueeze,
                   torch.squeeze, torch.flatten, torch.narrow, torch.split, torch.chunk,
                   torch.unbind, torch.select, torch.diagonal, torch.detach, operator.getitem}


def _is_view(node):
    if node.op == "call_method":
        return node.target in _VIEW_METHODS
    if node.op == "call_function":
        return node.target in _VIEW_FUNCTIONS
    return False


def _inplace_argument(node):
    """True when a function call passes inplace=True (by keyword or by
    position: F.relu(h, True), F.dropout(h, 0.1, False, True))."""
    if node.kwargs.get("inplace") is True:
        return True
    try:
        bound = inspect.signature(node.target).bind(*node.args, **node.kwargs)
    except (TypeError, ValueError):
        return False
    return bound.arguments.get("inplace") is True


def _lora_matches(path, target):
    from tcc.lora import _matches
    return _matches(path, target)


def _refuse_hooks(module):
    """fx traces forward() itself: hooks (registered on a module, globally,
    or on a parameter's gradient) would silently not run in tcc's step."""
    kinds = (("_forward_pre_hooks", "forward pre-hook"), ("_forward_hooks", "forward hook"),
             ("_backward_hooks", "backward hook"),
             ("_backward_pre_hooks", "backward pre-hook"))
    for path, m in module.named_modules():
        for attr, kind in kinds:
            if getattr(m, attr, None):
                raise TorchImportError(
                    f"{_PREFIX}: {path or 'the module'} has a {kind}, which the traced "
                    "step would not run: remove it (or write its effect into forward)")
    for name, p in module.named_parameters():
        if getattr(p, "_backward_hooks", None):
            raise TorchImportError(
                f"{_PREFIX}: parameter {name} has a gradient hook (register_hook), "
                "which tcc's step would not run: remove it")
    import torch.nn.modules.module as M
    for attr in ("_global_forward_pre_hooks", "_global_forward_hooks",
                 "_global_backward_hooks", "_global_backward_pre_hooks"):
        if getattr(M, attr, None):
            raise TorchImportError(
                f"{_PREFIX}: a global module hook is registered "
                f"(torch.nn.modules.module.{attr}), which the traced step would not "
                "run: remove it before importing")


# -- parameters ---------------------------------------------------------------------

def _parameter_uses(gm):
    """id(param) -> set of uses: 'linear' (the weight of nn.Linear/F.linear)
    or 'other'."""
    uses = {}

    def add(p, use):
        uses.setdefault(id(p), set()).add(use)

    linear_weight_nodes = set()
    for node in gm.graph.nodes:
        if node.op == "call_module":
            m = gm.get_submodule(node.target)
            for pname, p in m.named_parameters():
                add(p, "linear" if isinstance(m, torch.nn.Linear) and pname == "weight"
                    else "other")
        elif node.op == "call_function" and node.target is torch.nn.functional.linear:
            w = node.args[1] if len(node.args) > 1 else node.kwargs.get("weight")
            if isinstance(w, fx.Node) and w.op == "get_attr":
                linear_weight_nodes.add((w, node))
    for node in gm.graph.nodes:
        if node.op != "get_attr":
            continue
        value = node.meta.get("tcc_value")
        if not isinstance(value, torch.nn.Parameter):
            continue
        for user in node.users:
            add(value, "linear" if (node, user) in linear_weight_nodes and
                user.args[0] is not node else "other")
    return uses


def _init_like(p):
    """An initializer close to the tensor (real values come from
    export_torch_weights + trun --init-from)."""
    if bool((p == 0).all()):
        return zeros()
    if bool((p == 1).all()):
        return ones()
    return normal(float(p.detach().float().std()) if p.numel() > 1 else 0.02)


def _make_params(model, module, uses, optimized):
    """One tcc parameter per distinct nn.Parameter, named as
    named_parameters() names it, tied names as torch aliases; frozen when
    it does not require grad or the optimizer does not hold it."""
    names = {}
    for mod_name, mod in module.named_modules(remove_duplicate=False):
        for pname, p in mod.named_parameters(recurse=False):
            full = f"{mod_name}.{pname}" if mod_name else pname
            names.setdefault(id(p), [])
            if full not in names[id(p)]:
                names[id(p)].append(full)
    params = {}
    for name, p in module.named_parameters():
        if p.dtype not in (torch.float32, torch.float64):
            raise TorchImportError(f"{_PREFIX}: parameter {name} is {p.dtype}; "
                                   "tcc parameters are float32 or float64")
        transposed = p.dim() == 2 and uses.get(id(p)) == {"linear"}
        shape = tuple(p.shape[::-1]) if transposed else tuple(p.shape)
        aliases = [n for n in names.get(id(p), []) if n != name]
        t = model.param(name, shape, init=_init_like(p),
                        dtype="f32" if p.dtype == torch.float32 else "f64",
                        frozen=not p.requires_grad or (
                            optimized is not None and id(p) not in optimized),
                        torch_perm=[1, 0] if transposed else (),
                        torch_aliases=aliases)
        params[id(p)] = (Dyn(t, p.shape[::-1] if transposed else p.shape, p.dtype),
                         transposed)
    return params


# -- optimizer ---------------------------------------------------------------------

def _optimizer(opt, module, model):
    """A tcc.SGD / tcc.AdamW for a torch.optim instance (or passed through);
    parameter groups with weight_decay 0 mark their parameters no_weight_decay."""
    if isinstance(opt, (SGD, AdamW)):
        return opt
    if not isinstance(opt, torch.optim.Optimizer):
        raise TorchImportError(f"{_PREFIX}: optimizer must be a torch.optim.SGD/"
                               f"AdamW/Adam or tcc.SGD/AdamW, got {type(opt).__name__}")
    kind = type(opt).__name__
    groups = opt.param_groups
    lrs = {float(g["lr"]) for g in groups}
    decays = {float(g.get("weight_decay", 0.0)) for g in groups} - {0.0}
    if len(lrs) != 1:
        raise TorchImportError(f"{_PREFIX}: {kind} has parameter groups with "
                               f"different learning rates {sorted(lrs)}")
    if len(decays) > 1:
        raise TorchImportError(f"{_PREFIX}: {kind} has parameter groups with "
                               f"different nonzero weight decays {sorted(decays)}")
    lr, wd = lrs.pop(), (decays.pop() if decays else 0.0)
    g0 = groups[0]
    if kind == "SGD":
        if any(g.get("nesterov") or g.get("dampening", 0) != 0 or g.get("maximize")
               for g in groups):
            raise TorchImportError(f"{_PREFIX}: SGD with nesterov, dampening or "
                                   "maximize is not supported")
        moms = {float(g.get("momentum", 0.0)) for g in groups}
        if len(moms) != 1:
            raise TorchImportError(f"{_PREFIX}: SGD groups differ in momentum")
        result = SGD(lr=lr, momentum=moms.pop(), weight_decay=wd)
    elif kind in ("AdamW", "Adam"):
        if kind == "Adam" and wd != 0.0:
            raise TorchImportError(f"{_PREFIX}: torch.optim.Adam with weight_decay "
                                   "(L2 in the gradient) is not AdamW; use AdamW")
        if any(g.get("amsgrad") or g.get("maximize") for g in groups):
            raise TorchImportError(f"{_PREFIX}: {kind} with amsgrad/maximize is "
                                   "not supported")
        if len({(tuple(g["betas"]), g["eps"]) for g in groups}) != 1:
            raise TorchImportError(f"{_PREFIX}: {kind} groups differ in betas/eps")
        result = AdamW(lr=lr, betas=tuple(float(b) for b in g0["betas"]),
                       eps=float(g0["eps"]), weight_decay=wd)
    else:
        raise TorchImportError(f"{_PREFIX}: optimizer torch.optim.{kind} is not "
                               "supported (SGD, Adam, AdamW)")
    names = {id(p): n for n, p in module.named_parameters()}
    for g in groups:
        for p in g["params"]:
            if id(p) not in names:
                raise TorchImportError(f"{_PREFIX}: the optimizer holds a tensor "
                                       f"of shape {tuple(p.shape)} that is not a "
                                       "parameter of the module")
            if wd and float(g.get("weight_decay", 0.0)) == 0.0:
                model.no_weight_decay(names[id(p)])
    return result


def _optimized(opt):
    """ids of the tensors a torch optimizer updates (None: all, for tcc's)."""
    if isinstance(opt, torch.optim.Optimizer):
        return {id(p) for g in opt.param_groups for p in g["params"]}
    return None


# -- from_torch ----------------------------------------------------------------------

_LOSS_FUNCTIONS = {torch.nn.functional.cross_entropy: "cross_entropy",
                   torch.nn.functional.mse_loss: "mse"}


def _loss_value(conv, loss, out, target, target_example):
    """The loss of `out` against the target input, for the known losses
    directly and for any other callable by tracing it."""
    kind = _LOSS_FUNCTIONS.get(loss)
    kw = {}
    if isinstance(loss, torch.nn.CrossEntropyLoss):
        kind = "cross_entropy"
        kw = dict(weight=loss.weight, ignore_index=loss.ignore_index,
                  reduction=loss.reduction,
                  label_smoothing=getattr(loss, "label_smoothing", 0.0))
    elif isinstance(loss, torch.nn.MSELoss):
        kind, kw = "mse", dict(reduction=loss.reduction)
    try:
        if kind == "cross_entropy":
            if out.rank == 3 and target.rank == 2:  # (B, T, V) logits as nanoGPT
                n = out.shape[0] * out.shape[1]
                out = Dyn(ops.reshape(out.t, [n, out.shape[2]]), (n, out.shape[2]),
                          out.dtype)
                target = Dyn(ops.reshape(target.t, [n]), (n,), target.dtype)
            return T.cross_entropy(conv, out, target, **kw)
        if kind == "mse":
            return T.mse_loss(conv, out, target, **kw)
    except Unsupported as e:
        raise TorchImportError(f"{_PREFIX}: unsupported loss: {e}") from None
    if not callable(loss):
        raise TorchImportError(f"{_PREFIX}: loss must be callable, got "
                               f"{type(loss).__name__}")
    fn = loss.forward if isinstance(loss, torch.nn.Module) else loss
    try:
        arg_names = list(inspect.signature(fn).parameters)[:2]
    except (TypeError, ValueError):
        arg_names = []
    gm = _trace(loss, what="loss", examples=dict(zip(
        arg_names, (conv.out_example, target_example))))
    names = [n.target for n in gm.graph.nodes if n.op == "placeholder"]
    if len(names) != 2:
        raise TorchImportError(f"{_PREFIX}: the loss must take (output, target), "
                               f"it takes {names}")
    _run(gm, (conv.out_example, target_example), "loss")
    sub = _Converter(conv.model, gm, conv.params, conv.int_dtype, conv.max_constant_bytes)
    with conv.model.scope("loss"):
        result = sub.run({names[0]: out, names[1]: target})
    if not isinstance(result, Dyn):
        raise TorchImportError(f"{_PREFIX}: the loss returned no tensor")
    return result.t


def _examples(example_inputs):
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)


def _input_names(names, examples, target, input_names):
    """The model input name of each forward argument: `input_names`' where
    given, else its own, except a token model's: trun feeds a token shard
    to inputs named "tokens" and "targets", so the one integer (B, T)
    argument of a forward (nanoGPT's `idx`, HuggingFace's `input_ids`)
    beside an integer target of its shape (an argument `targets`, or
    target=) is named "tokens"."""
    input_names = dict(input_names or {})
    unknown = sorted(set(input_names) - set(names))
    if unknown:
        raise TorchImportError(f"{_PREFIX}: input_names names {unknown}, which are not "
                               f"arguments of forward {names}")
    result = {n: input_names.get(n, n) for n in names}
    ints = [(n, e) for n, e in zip(names, examples)
            if not e.is_floating_point() and e.dim() == 2]
    tgt = _examples(target)[0] if target is not None else dict(ints).get("targets")
    tokens = [(n, e) for n, e in ints if n != "targets"]
    if "tokens" not in result.values() and len(tokens) == 1 and tgt is not None and \
            not tgt.is_floating_point() and tuple(tgt.shape) == tuple(tokens[0][1].shape) \
            and tokens[0][0] not in input_names:
        result[tokens[0][0]] = "tokens"
    if len(set(result.values())) != len(result):
        raise TorchImportError(f"{_PREFIX}: two forward arguments get one input name: "
                               f"{result}")
    return result


def from_torch(module, example_inputs, loss=None, optimizer=None, target=None,
               target_name=None, name=None, int_dtype="i32",
               grad_clip=0.0, micro_batches=None, schedule=None,
               max_constant_bytes=64 << 20, input_names=None, lora=None):
    """A tcc.Model computing `module` on inputs shaped like `example_inputs`
    (a tensor or a tuple, the forward's positional arguments; input names
    are the forward's parameter names) and training it with `optimizer`.

    loss: None when the forward returns the loss (a scalar, or a tuple
      holding it), else a callable (F.cross_entropy, nn.CrossEntropyLoss(),
      F.mse_loss, nn.MSELoss() or one fx can trace) of (output, target);
      `target` is an example target (its shape and dtype make the input
      `target_name`, default "targets" next to an input "tokens" (a token
      model for trun), else "labels"). Cross entropy of (B, T, V) logits
      against (B, T) targets is taken over the B*T positions, as nanoGPT.
    optimizer: torch.optim.SGD / AdamW / Adam (weight_decay 0) or tcc.SGD /
      tcc.AdamW.
    int_dtype: tcc dtype of integer inputs ("i32": what trun feeds).
    lora: a tcc.lora.LoRA (rank, alpha, targets, freeze_base): adapters on
      the nn.Linear layers whose module paths match its targets, as
      tcc.lora.apply puts them on tcc.nn layers (the base frozen by
      default; tcc.lora.merge / add_adapters work on the result).
    input_names: {forward argument: model input name}; by default each
      keeps its name, except that a token model's integer (B, T) argument
      (nanoGPT's `idx`) beside an integer target of its shape is "tokens",
      the name trun feeds a token shard to (with "targets").
    max_constant_bytes: the most constant data the model file may carry
      (values computed from buffers and positions alone that are not a
      splat, an index ramp or a triangular mask: rotary tables); above it
      the import is refused, naming the tensor.
    The output "logits" is the module output when it is (B, C) or (B, T, V).
    """
    if not isinstance(module, torch.nn.Module):
        raise TorchImportError(f"{_PREFIX}: expected a torch.nn.Module, got "
                               f"{type(module).__name__}")
    if optimizer is None:
        raise TorchImportError(f"{_PREFIX}: an optimizer is needed (torch.optim.SGD/"
                               "AdamW or tcc.SGD/AdamW)")
    if example_inputs is None or (not isinstance(example_inputs, torch.Tensor) and not (
            isinstance(example_inputs, (list, tuple)) and
            all(isinstance(e, torch.Tensor) for e in example_inputs))):
        raise TorchImportError(f"{_PREFIX}: example_inputs must be a tensor or a tuple of "
                               "tensors (the forward's positional arguments, shaped as "
                               f"the step's batch), got {type(example_inputs).__name__}")
    _refuse_hooks(module)
    if loss is not None and target is None:
        raise TorchImportError(f"{_PREFIX}: loss= needs target=, an example target")
    examples = _examples(example_inputs)
    sig = inspect.signature(module.forward)
    positional = [p for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(examples) > len(positional):
        raise TorchImportError(f"{_PREFIX}: {len(examples)} example inputs for a "
                               f"forward taking {len(positional)}")
    concrete = {}
    for p in positional[len(examples):]:
        if p.default is p.empty:
            raise TorchImportError(f"{_PREFIX}: forward argument {p.name!r} has no "
                                   "example input and no default")
        concrete[p.name] = p.default
    gm = _trace(module, concrete or None, examples=dict(
        zip((p.name for p in positional), examples)))
    _run(gm, examples, "module")

    model = Model(name or type(module).__name__)
    if lora is not None:
        from tcc.lora import LoRA
        if not isinstance(lora, LoRA):
            raise TorchImportError(f"{_PREFIX}: lora must be a tcc.lora.LoRA, got "
                                   f"{type(lora).__name__}")
        if not isinstance(lora.rank, int) or lora.rank <= 0 or not lora.alpha > 0 or \
                not lora.targets:
            raise TorchImportError(f"{_PREFIX}: lora needs rank > 0, alpha > 0 and "
                                   f"targets, got {lora}")
        if isinstance(lora.targets, str):
            lora = LoRA(lora.rank, lora.alpha, [lora.targets], lora.freeze_base)
    conv = _Converter(model, gm, None, int_dtype, max_constant_bytes, lora)
    conv.params = _make_params(model, module, _parameter_uses(gm), _optimized(optimizer))
    bindings = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    renamed = _input_names([n.target for n in placeholders], examples, target, input_names)
    for node, ex in zip(placeholders, examples):
        if not isinstance(ex, torch.Tensor):
            raise TorchImportError(f"{_PREFIX}: example input {node.target!r} is a "
                                   f"{type(ex).__name__}, not a tensor")
        try:
            dt = conv.dtype_name(ex.dtype)
        except Unsupported as e:
            raise TorchImportError(f"{_PREFIX}: input {node.target!r}: {e}") from None
        bindings[node.target] = Dyn(model.input(renamed[node.target], ex.shape, dt),
                                    ex.shape, ex.dtype)
    out = conv.run(bindings)
    if lora is not None:
        linears = [p for p, m in module.named_modules() if isinstance(m, torch.nn.Linear)]
        for t in lora.targets:
            if not any(_lora_matches(p, t) for p in conv.adapted):
                shown = ", ".join(linears[:6]) + (", ..." if len(linears) > 6 else "")
                raise TorchImportError(f"{_PREFIX}: LoRA target {t!r} matches no nn.Linear "
                                       f"the forward calls (nn.Linear layers: "
                                       f"{shown or 'none'})")
        if lora.freeze_base:
            adapters = {f"{p}.lora_{x}.weight" for p in conv.adapted for x in "AB"}
            model.freeze(*[p.name for p in model.params() if p.name not in adapters])
    output_node = next(n for n in gm.graph.nodes if n.op == "output")
    out_example = output_node.args[0]
    batch = examples[0].shape[0] if examples and examples[0].dim() else None

    def is_logits(v):
        return isinstance(v, Dyn) and v.rank in (2, 3) and v.shape[0] == batch \
            and v.dtype.is_floating_point

    if loss is None:
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        scalars = [v for v in outs if isinstance(v, Dyn) and v.rank == 0]
        if len(scalars) != 1:
            raise TorchImportError(f"{_PREFIX}: without loss= the forward must return "
                                   "the loss (a scalar, or a tuple with one scalar)")
        loss_t = scalars[0].t
        logits = [v for v in outs if is_logits(v)]
    else:
        if not isinstance(out, Dyn):
            raise TorchImportError(f"{_PREFIX}: with loss= the forward must return "
                                   "one tensor")
        tgt = _examples(target)[0]
        try:
            tdt = conv.dtype_name(tgt.dtype)
        except Unsupported as e:
            raise TorchImportError(f"{_PREFIX}: target: {e}") from None
        if target_name is None:  # trun's names: tokens/targets, else any
            target_name = "targets" if "tokens" in renamed.values() else "labels"
        if target_name in renamed.values():
            raise TorchImportError(f"{_PREFIX}: target_name {target_name!r} is also "
                                   "a forward argument")
        tdyn = Dyn(model.input(target_name, tgt.shape, tdt), tgt.shape, tgt.dtype)
        # The loss is traced on zeros shaped like the output (only its
        # shapes matter: the output's values are not constants).
        rec = out_example.meta["tcc_value"] if isinstance(out_example, fx.Node) else None
        conv.out_example = torch.zeros(rec.shape, dtype=rec.dtype) \
            if isinstance(rec, torch.Tensor) else rec
        loss_t = _loss_value(conv, loss, out, tdyn, tgt)
        logits = [out] if is_logits(out) else []
    if logits:
        model.output("logits", logits[0].t)
    model.train(loss_t, _optimizer(optimizer, module, model), grad_clip=grad_clip,
                micro_batches=micro_batches, schedule=schedule)
    return model


def export_torch_weights(module, path, metadata=None):
    """Writes the module's parameters (and batch norm's running statistics)
    as safetensors with PyTorch's names and layouts (named_parameters(): tied
    tensors once, under their first name),
    the file trun --init-from reads for a model from from_torch. Returns
    the path."""
    from tcc.safetensors import save_file
    tensors = {name: p.detach().cpu().contiguous().numpy()
               for name, p in module.named_parameters()}
    # Batch norm's running statistics are tcc buffers, read with the weights.
    for prefix, m in module.named_modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats:
            for leaf in ("running_mean", "running_var", "num_batches_tracked"):
                key = f"{prefix}.{leaf}" if prefix else leaf
                tensors[key] = getattr(m, leaf).detach().cpu().contiguous().numpy()
    meta = {"producer": "tcc.export_torch_weights", "model": type(module).__name__}
    meta.update(metadata or {})
    save_file(tensors, path, metadata=meta)
    return path


__all__ = ["from_torch", "export_torch_weights", "TorchImportError",
           "WarmupCosine"]
