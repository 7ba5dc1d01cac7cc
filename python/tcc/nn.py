"""Torch-like modules over tcc.Model.

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, 256)
            self.norm = nn.LayerNorm(256)
            self.fc2 = nn.Linear(256, 10)
        def forward(self, x):
            return self.fc2(nn.functional.relu(self.norm(self.fc1(x))))

    m = tcc.Model("net")
    logits = Net()(m.input("image", (64, 784)))

Names follow the module tree as torch's named_parameters() does: attribute
names joined by dots, ModuleList/Sequential children by index
(`h.0.attn.c_attn.weight`). A module's parameters are made in the Model
lazily, when its forward first reads them, so parameters (and their seeds)
come in forward order, as tcc-models' builders make them; unused ones are
made when its first call ends. Calling a module again reuses them (shared
weights). Nodes made inside a module are named under its path (Model.scope).
One module tree may be built into several models; each gets its own
parameters.
"""

import math
from typing import Iterator, Optional, Sequence, Tuple

from tcc import ops
from tcc.model import Init, Model, Tensor, TccError, normal, ones, zeros

__all__ = ["Parameter", "Module", "Sequential", "ModuleList", "Linear",
           "Conv1D", "Conv2d", "MaxPool2d", "AvgPool2d", "BatchNorm1d",
           "BatchNorm2d", "SyncBatchNorm", "LayerNorm", "RMSNorm", "Embedding", "Dropout", "ReLU",
           "GELU", "SiLU", "Tanh", "Sigmoid", "CausalSelfAttention",
           "apply_rotary", "rotary_tables", "functional"]

# The models of the module calls under way (innermost last): a parameter
# read inside a forward is made in, or fetched from, this model.
_active = []


class Parameter:
    """A parameter a module declares: its shape and initializer. The graph
    value (a tcc Tensor) is made when the module's forward first reads it."""

    def __init__(self, shape: Sequence[int], init: Optional[Init] = None,
                 dtype: str = "f32", frozen: bool = False,
                 no_weight_decay: bool = False,
                 torch_perm: Sequence[int] = (), seed: Optional[int] = None):
        self.shape = tuple(int(d) for d in shape)
        self.init = init if init is not None else zeros()
        self.dtype = dtype
        self.frozen = frozen
        self.no_weight_decay = no_weight_decay
        self.torch_perm = tuple(torch_perm)
        self.seed = seed  # None: the model's next seed (creation order)
        self._made = {}  # Model -> Tensor: one per model, however shared

    def __repr__(self):
        return f"Parameter(shape={self.shape}, init={self.init})"


def _model_of(values) -> Optional[Model]:
    for v in values:
        if isinstance(v, Tensor):
            return v.model
        if isinstance(v, (list, tuple)):
            m = _model_of(v)
            if m is not None:
                return m
    return None


class Module:
    """Base class: assign Parameters and Modules as attributes in
    __init__ (after super().__init__()), write forward()."""

    def __init__(self):
        d = self.__dict__
        d["_parameters"] = {}   # local name -> Parameter
        d["_modules"] = {}      # local name -> Module
        d["_parent"] = None     # the module that registered this one first
        d["_local_name"] = ""
        d["_made"] = {}         # Model -> {local name: Tensor}
        d["_called"] = set()    # the models this module was called in

    # -- registration --------------------------------------------------------

    def _state(self, what: str):
        if "_parameters" not in self.__dict__:
            raise TccError(f"{type(self).__name__}: call super().__init__() "
                           f"in __init__ before {what}")
        return self.__dict__

    def __setattr__(self, name: str, value):
        d = self._state(f"assigning {name!r}")
        if isinstance(value, Parameter):
            d["_modules"].pop(name, None)
            d["_parameters"][name] = value
            d.pop(name, None)
        elif isinstance(value, Module):
            self._register(name, value)
            d.pop(name, None)
        else:
            if name in d["_parameters"] or name in d["_modules"]:
                if value is not None:
                    raise TccError(
                        f"{self._describe()}: {name!r} is a "
                        f"{'parameter' if name in d['_parameters'] else 'module'}"
                        f"; assign a tcc.nn.Parameter, a Module or None, not "
                        f"{type(value).__name__}")
                d["_parameters"].pop(name, None)
                d["_modules"].pop(name, None)
            object.__setattr__(self, name, value)

    def _register(self, name: str, child: "Module"):
        d = self._state(f"registering {name!r}")
        child._state("it is registered")
        node = self
        while node is not None:
            if node is child:
                raise TccError(f"{self._describe()}: registering {name!r} "
                               "would make the module tree a cycle")
            node = node._parent
        if child._parent is None and child is not self:
            if child._called or any(child._made.values()):
                raise TccError(
                    f"{type(child).__name__} registered as {name!r} was called "
                    "before: its parameters are named already; register a "
                    "module before its first call")
            child.__dict__["_parent"] = self
            child.__dict__["_local_name"] = name
        d["_parameters"].pop(name, None)
        d["_modules"][name] = child

    def add_module(self, name: str, module: "Module") -> None:
        """Registers `module` under `name` (which may be e.g. "0")."""
        if not isinstance(module, Module):
            raise TccError(f"{self._describe()}: add_module({name!r}) needs a "
                           f"Module, got {type(module).__name__}")
        if not name or "." in name:
            raise TccError(f"{self._describe()}: module name {name!r} must be "
                           "non-empty and have no '.'")
        self._register(name, module)

    def __getattr__(self, name: str):
        d = self.__dict__
        if "_parameters" in d:
            if name in d["_parameters"]:
                return self._tensor(name)
            if name in d["_modules"]:
                return d["_modules"][name]
        raise AttributeError(f"{type(self).__name__} has no attribute "
                             f"{name!r}")

    def __delattr__(self, name: str):
        d = self.__dict__
        if name in d.get("_parameters", {}):
            del d["_parameters"][name]
        elif name in d.get("_modules", {}):
            del d["_modules"][name]
        else:
            object.__delattr__(self, name)

    # -- names ---------------------------------------------------------------

    @property
    def path(self) -> str:
        """This module's name in its tree ("" for the root), as torch's
        named_modules() gives it."""
        parts = []
        node = self
        while node._parent is not None:
            parts.append(node._local_name)
            node = node._parent
        return ".".join(reversed(parts))

    def _describe(self) -> str:
        p = self.__dict__.get("_parent") and self.path
        return f"{type(self).__name__} {p!r}" if p else type(self).__name__

    def _full(self, local: str) -> str:
        p = self.path
        return f"{p}.{local}" if p else local

    def named_modules(self, prefix: str = "", _seen=None
                      ) -> Iterator[Tuple[str, "Module"]]:
        seen = set() if _seen is None else _seen
        if id(self) in seen:
            return
        seen.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(
                f"{prefix}.{name}" if prefix else name, seen)

    def named_parameters(self) -> Iterator[Tuple[str, Parameter]]:
        """(name, Parameter) in torch's order, shared ones once."""
        seen = set()
        for prefix, module in self.named_modules():
            for name, p in module._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{prefix}.{name}" if prefix else name), p

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def children(self):
        return list(self._modules.values())

    # -- freezing ------------------------------------------------------------

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """torch's requires_grad_: every parameter of this module and its
        children frozen (False) or trainable (True), in the models built
        already and in those built later. Returns self."""
        for _, p in self.named_parameters():
            p.frozen = not requires_grad
            for model, t in p._made.items():
                model.freeze(t.name, frozen=p.frozen)
        return self

    def freeze(self) -> "Module":
        """Freezes every parameter of this module tree (no gradient, no
        optimizer state): requires_grad_(False)."""
        return self.requires_grad_(False)

    def unfreeze(self) -> "Module":
        return self.requires_grad_(True)

    # -- calls ---------------------------------------------------------------

    def forward(self, *args, **kwargs):
        raise TccError(f"{self._describe()} has no forward()")

    def __call__(self, *args, **kwargs):
        model = _model_of(list(args) + list(kwargs.values()))
        if model is None:
            if not _active:
                raise TccError(f"{self._describe()}: call it with tcc Tensors "
                               "(none given, and no enclosing module call)")
            model = _active[-1]
        first = model not in self._called
        self._called.add(model)
        _active.append(model)
        try:
            with model.scope(self.path, absolute=True):
                out = self.forward(*args, **kwargs)
                if first:  # declared but unread: made now, in declaration order
                    for name in self._parameters:
                        self._tensor(name)
        finally:
            _active.pop()
        return out

    def _current_model(self) -> Model:
        if _active:
            return _active[-1]
        made = [m for m, ts in self._made.items() if ts]
        if len(made) == 1:
            return made[0]
        raise TccError(f"{self._describe()}: its parameters exist only once "
                       "the module is called" if not made else
                       f"{self._describe()} is built into {len(made)} models; "
                       "read its parameters inside a forward")

    def _tensor(self, name: str) -> Tensor:
        """The graph value of parameter `name` in the current model."""
        model = self._current_model()
        p = self._parameters[name]
        full = self._full(name)
        t = p._made.get(model)
        if t is None:
            if full in model:
                raise TccError(
                    f"{self._describe()}: parameter {full!r} exists already "
                    f"in model {model.name!r} (another module of the same "
                    "path?); register modules as attributes of one parent "
                    "Module so their names follow the module tree")
            t = p._made[model] = model.param(
                full, p.shape, init=p.init, dtype=p.dtype,
                frozen=p.frozen, no_weight_decay=p.no_weight_decay,
                torch_perm=p.torch_perm, seed=p.seed)
        elif t.name != full:
            # One Parameter in two modules (tied weights): one tcc parameter,
            # the second state_dict key recorded as its alias.
            model.add_torch_alias(t.name, full)
        self._made.setdefault(model, {})[name] = t
        return t

    def node_name(self, local: str = "") -> str:
        """A fresh node name under this module's path: `path.local` (the
        path alone for ""), with `_1`, ... when taken."""
        model = self._current_model()
        full = self._full(local) if local else self.path
        return model.unique_name(full or local or type(self).__name__.lower())

    def __repr__(self):
        lines = [f"{type(self).__name__}("]
        for name, child in self._modules.items():
            lines.append(f"  ({name}): " + repr(child).replace("\n", "\n  "))
        for name, p in self._parameters.items():
            lines.append(f"  {name}: {p.shape}")
        return "\n".join(lines) + ")" if len(lines) > 1 else lines[0] + ")"


class _IndexedModules(Module):
    """Children named by index ("0", "1", ...), as torch's containers."""

    def __len__(self):
        return len(self._modules)

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __iter__(self):
        return iter(self._modules.values())


class Sequential(_IndexedModules):
    """Children "0", "1", ... called in order."""

    def __init__(self, *modules: Module):
        super().__init__()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(_IndexedModules):
    """A list of modules named by index; not callable itself."""

    def __init__(self, modules: Sequence[Module] = ()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self._modules)), module)
        return self

    def forward(self, *args, **kwargs):
        raise TccError(f"{self._describe()}: a ModuleList is not callable; "
                       "iterate over it")


def _check_last_dim(x: Tensor, n: int, who: str):
    if x.shape is not None and (not x.shape or x.shape[-1] != n):
        raise TccError(f"{who}: input {x.name!r} has shape {x.shape}, "
                       f"expected (..., {n})")


class Linear(Module):
    """torch.nn.Linear: y = x W^T + b. tcc holds W as (in, out) and records
    torch_perm [1, 0], so trun --save-weights / --init-from exchange
    nn.Linear's (out, in) weight. Default init: He normal, std
    sqrt(2 / in) (tcc-models' choice, for relu nets); bias zeros."""

    torch_layout = (1, 0)

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 init: Optional[Init] = None, bias_init: Optional[Init] = None):
        super().__init__()
        if in_features <= 0 or out_features <= 0:
            raise TccError(f"{type(self).__name__}({in_features}, "
                           f"{out_features}): sizes must be positive")
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(
            (in_features, out_features),
            init or normal(math.sqrt(2.0 / in_features)),
            torch_perm=self.torch_layout)
        self.bias = Parameter((out_features,), bias_init or zeros()) \
            if bias else None

    def forward(self, x: Tensor, name: Optional[str] = None) -> Tensor:
        """`name`: the output node's name (default: the path; `.biased` for
        the bias add)."""
        _check_last_dim(x, self.in_features, self._describe())
        has_bias = "bias" in self._parameters
        y = ops.matmul(x, self.weight,
                       name=name if name and not has_bias else self.node_name())
        if has_bias:
            y = ops.add(y, self.bias, name=name or self.node_name("biased"))
        return y


class Conv1D(Linear):
    """GPT-2's (Hugging Face's) Conv1D: a linear layer whose weight is
    stored (in, out) in PyTorch too (no perm). Default init normal(0.02)."""

    torch_layout = ()

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 init: Optional[Init] = None, bias_init: Optional[Init] = None):
        super().__init__(in_features, out_features, bias,
                         init or normal(0.02), bias_init)


class LayerNorm(Module):
    """torch.nn.LayerNorm over the last dim (weight ones, bias zeros)."""

    def __init__(self, normalized_shape: int, eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True):
        super().__init__()
        self.size, self.eps = int(normalized_shape), float(eps)
        if elementwise_affine:
            self.weight = Parameter((self.size,), ones())
            if bias:
                self.bias = Parameter((self.size,), zeros())

    def forward(self, x: Tensor) -> Tensor:
        _check_last_dim(x, self.size, self._describe())
        w = self.weight if "weight" in self._parameters else None
        b = self.bias if "bias" in self._parameters else None
        return ops.layer_norm(x, w, b, eps=self.eps, name=self.node_name())


class RMSNorm(Module):
    """torch.nn.RMSNorm (LLaMA's): x / sqrt(mean(x^2) + eps) * weight."""

    def __init__(self, normalized_shape: int, eps: float = 1e-6,
                 elementwise_affine: bool = True):
        super().__init__()
        self.size, self.eps = int(normalized_shape), float(eps)
        if elementwise_affine:
            self.weight = Parameter((self.size,), ones())

    def forward(self, x: Tensor) -> Tensor:
        _check_last_dim(x, self.size, self._describe())
        w = self.weight if "weight" in self._parameters else None
        return ops.rms_norm(x, w, eps=self.eps, name=self.node_name())


class Embedding(Module):
    """torch.nn.Embedding: rows of a (num, dim) table at integer ids. Default
    init normal(0.02) (GPT's; torch's is normal(1))."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 init: Optional[Init] = None):
        super().__init__()
        self.weight = Parameter((num_embeddings, embedding_dim),
                                init or normal(0.02))

    def forward(self, ids: Tensor) -> Tensor:
        return ops.embedding(self.weight, ids, name=self.node_name())


class Dropout(Module):
    """Zeroes with probability p while training (identity in eval and at
    p = 0, which writes no node)."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0 <= p < 1:
            raise TccError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = float(p)

    def forward(self, x: Tensor) -> Tensor:
        if self.p == 0:
            return x
        return ops.dropout(x, self.p, name=self.node_name())


def _activation(op_name: str, fn, doc: str):
    class Activation(Module):
        __doc__ = doc

        def forward(self, x: Tensor) -> Tensor:
            return fn(x, name=self.node_name())
    Activation.__name__ = Activation.__qualname__ = op_name
    return Activation


ReLU = _activation("ReLU", ops.relu, "max(x, 0), elementwise.")
SiLU = _activation("SiLU", ops.silu, "x * sigmoid(x), elementwise.")
Tanh = _activation("Tanh", ops.tanh, "tanh(x), elementwise.")
Sigmoid = _activation("Sigmoid", ops.sigmoid, "1 / (1 + exp(-x)).")


class GELU(Module):
    """approximate "none" (erf, torch's default) or "tanh" (GPT-2's)."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise TccError(f"GELU: approximate must be 'none' or 'tanh', got "
                           f"{approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return ops.gelu(x, self.approximate, name=self.node_name())


# -- attention ----------------------------------------------------------------

def rotary_tables(model: Model, context: int, head_size: int,
                  theta: float = 10000.0) -> Tuple[Tensor, Tensor]:
    """cos and sin (context, head_size) from iota (tcc's tg-cache-rope
    computes them at compile time): angle[t, i] = t * theta^(-2i / D),
    each half repeated. Nodes named under the current scope (rope.*)."""
    if head_size % 2:
        raise TccError(f"rotary tables need an even head size, got {head_size}")
    shape = [context, head_size // 2]
    n = model.fresh_name
    pos = ops.iota(model, shape, axis=0, dtype="f32", name=n("pos"))
    idx = ops.iota(model, shape, axis=1, dtype="f32", name=n("idx"))
    k = ops.constant(model, -2.0 * math.log(theta) / float(head_size),
                     name=n("log_freq_step"))
    inv_freq = ops.exp(ops.mul(idx, k, name=n("log_freq")), name=n("inv_freq"))
    angle = ops.mul(pos, inv_freq, name=n("angle"))
    c = ops.cos(angle, name=n("cos_half"))
    s = ops.sin(angle, name=n("sin_half"))
    return (ops.concat([c, c], axis=1, name=n("cos")),
            ops.concat([s, s], axis=1, name=n("sin")))


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor, name: str) -> Tensor:
    """x (B, H, T, D) cos + rotate_half(x) sin, rotate_half(x) = [-x2, x1];
    nodes `name.x1`, ..., the result `name`."""
    m = x.model
    d = x.shape[-1]
    u = m.unique_name
    x1 = ops.slice(x, [0], [d // 2], axes=[3], name=u(f"{name}.x1"))
    x2 = ops.slice(x, [d // 2], [d], axes=[3], name=u(f"{name}.x2"))
    rotated = ops.concat([ops.neg(x2, name=u(f"{name}.neg_x2")), x1], axis=3,
                         name=u(f"{name}.rotated"))
    return ops.add(ops.mul(x, cos, name=u(f"{name}.cos")),
                   ops.mul(rotated, sin, name=u(f"{name}.sin")),
                   name=u(name))


class CausalSelfAttention(Module):
    """Multi-head causal self-attention from primitives (tcc's
    tg-fuse-attention makes it one flash-attention op): a packed q/k/v
    projection `c_attn`, softmax(q kᵀ / sqrt(D), causal) v, an output
    projection `c_proj`. x is (B, T, C). `linear`: the projections' layer
    (Conv1D: GPT-2's (in, out) weights; Linear: nn.Linear's). Call with
    rope=(cos, sin) tables (rotary_tables) for rotary positions."""

    def __init__(self, width: int, heads: int, bias: bool = True,
                 dropout: float = 0.0, init: Optional[Init] = None,
                 proj_init: Optional[Init] = None, linear=Conv1D):
        super().__init__()
        if width % heads:
            raise TccError(f"CausalSelfAttention: width {width} does not "
                           f"divide into {heads} heads")
        self.width, self.heads = width, heads
        self.c_attn = linear(width, 3 * width, bias=bias, init=init)
        self.attn_dropout = Dropout(dropout)
        self.c_proj = linear(width, width, bias=bias, init=proj_init)
        self.resid_dropout = Dropout(dropout)

    def forward(self, x: Tensor, rope: Optional[Tuple[Tensor, Tensor]] = None
                ) -> Tensor:
        if x.shape is None or len(x.shape) != 3:
            raise TccError(f"{self._describe()}: input {x.name!r} must be "
                           f"(B, T, C) with a known shape, got {x.shape}")
        B, T, C = x.shape
        H, D = self.heads, self.width // self.heads
        m = x.model
        qkv = self.c_attn(x)                                   # (B, T, 3C)
        parts = ops.split(qkv, [C, C, C], axis=2, name=self.node_name("split"),
                          outputs=[self.node_name(s) for s in "qkv"])

        def heads(v):  # (B, T, C) -> (B, H, T, D)
            r = ops.reshape(v, [B, T, H, D], name=m.unique_name(f"{v.name}.heads"))
            return ops.transpose(r, [0, 2, 1, 3],
                                 name=m.unique_name(f"{v.name}.bhtd"))
        q, k, v = (heads(p) for p in parts)
        if rope is not None:
            q = apply_rotary(q, rope[0], rope[1], f"{parts[0].name}.rope")
            k = apply_rotary(k, rope[0], rope[1], f"{parts[1].name}.rope")
        scores = ops.matmul(q, k, transpose_b=True, name=self.node_name("scores"))
        scale = ops.constant(m, 1.0 / math.sqrt(D), name=self.node_name("scale"))
        scores = ops.mul(scores, scale, name=self.node_name("scaled"))
        masked = ops.causal_mask(scores, name=self.node_name("masked"))
        probs = ops.softmax(masked, axis=-1, name=self.node_name("probs"))
        probs = self.attn_dropout(probs)
        y = ops.matmul(probs, v, name=self.node_name("context"))  # (B, H, T, D)
        y = ops.transpose(y, [0, 2, 1, 3], name=self.node_name("context.bthd"))
        y = ops.reshape(y, [B, T, C], name=self.node_name("context.btc"))
        return self.resid_dropout(self.c_proj(y))


from tcc import functional  # noqa: E402  (nn.functional, as in torch)


# The vision modules (NCHW) live in nn_vision.py; imported last because they
# subclass Module.
from tcc.nn_vision import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d,  # noqa: E402
                           BatchNorm2d, SyncBatchNorm, Conv2d, ConvTranspose2d, GroupNorm, MaxPool2d,
                           Upsample)
