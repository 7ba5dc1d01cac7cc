"""Building a model file: parameters, inputs, nodes, outputs and the training
recipe, as frontend/proto/tcc_model.proto and docs/ir.md describe them.

    m = tcc.Model("mlp")
    x = m.input("image", (64, 784))
    w = m.param("fc1.weight", (784, 256), init=tcc.normal(0.05))
    y = tcc.ops.relu(x @ w)
    ...
    m.train(loss, tcc.SGD(lr=0.1))
    m.save("mlp.pb")

Every value is a `Tensor`: a name in the graph plus the model it lives in.
Node names come from `name=` or are made unique from the op and the current
`Model.scope` (module paths, so names follow the module tree). Mistakes
(an unknown input, a duplicate name, a bad attribute) raise `TccError`
naming the tensor or node at the line that made them, not later in
`tcc compile`.
"""

import contextlib
import dataclasses
import difflib
import math
import os
import re
from typing import Iterable, Optional, Sequence, Union

from tcc import shapes
from tcc._schema import pb


class TccError(ValueError):
    """A model that tcc cannot accept, with the name of what is wrong."""


_DTYPES = {"f32": pb.F32, "f64": pb.F64, "i32": pb.I32, "i64": pb.I64,
           "bool": pb.BOOL}
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}


def _dtype(dtype: str, what: str):
    if dtype not in _DTYPES:
        raise TccError(f"{what}: unknown dtype {dtype!r} (one of "
                       f"{', '.join(_DTYPES)})")
    return _DTYPES[dtype]


def _shape(shape, what: str):
    dims = tuple(int(d) for d in shape)
    if any(d <= 0 for d in dims):
        raise TccError(f"{what}: shape {dims} has a dimension <= 0 "
                       "(sizes are static and positive)")
    return dims


@dataclasses.dataclass(frozen=True)
class Init:
    """A parameter initializer (Initializer in the schema)."""
    kind: str  # zeros | ones | normal | uniform
    scale: float = 0.0


def zeros() -> Init:
    return Init("zeros")


def ones() -> Init:
    return Init("ones")


def normal(std: float) -> Init:
    """Mean 0, standard deviation `std`."""
    return Init("normal", float(std))


def uniform(scale: float) -> Init:
    """Uniform in [-scale, scale)."""
    return Init("uniform", float(scale))


_INIT_KINDS = {"zeros": pb.Initializer.ZEROS, "ones": pb.Initializer.ONES,
               "normal": pb.Initializer.NORMAL,
               "uniform": pb.Initializer.UNIFORM}


class Tensor:
    """A value of the graph: a parameter, an input or a node output.

    `shape` and `dtype` are known for parameters and inputs (and wherever a
    builder states them); other values carry None. Python operators build
    nodes: a + b, a - b, a * b, a / b, -a, a @ b (matmul).
    """

    __slots__ = ("model", "name", "shape", "dtype")

    def __init__(self, model: "Model", name: str, shape=None, dtype=None):
        self.model = model
        self.name = name
        self.shape = tuple(shape) if shape is not None else None
        self.dtype = dtype

    def __repr__(self):
        extra = f", shape={self.shape}" if self.shape is not None else ""
        return f"Tensor({self.name!r}{extra})"

    def _binary(self, op, other, swap=False):
        other = self.model._as_tensor(other, like=self)
        a, b = (other, self) if swap else (self, other)
        return self.model.op(op, a, b)

    def __add__(self, o): return self._binary("add", o)
    def __radd__(self, o): return self._binary("add", o, swap=True)
    def __sub__(self, o): return self._binary("sub", o)
    def __rsub__(self, o): return self._binary("sub", o, swap=True)
    def __mul__(self, o): return self._binary("mul", o)
    def __rmul__(self, o): return self._binary("mul", o, swap=True)
    def __truediv__(self, o): return self._binary("div", o)
    def __rtruediv__(self, o): return self._binary("div", o, swap=True)
    def __matmul__(self, o): return self._binary("matmul", o)
    def __neg__(self): return self.model.op("neg", self)


def _attribute(key: str, value, where: str) -> "pb.Attribute":
    a = pb.Attribute()
    if isinstance(value, bool):
        a.b = value
    elif isinstance(value, int):
        a.i = value
    elif isinstance(value, float):
        a.f = value
    elif isinstance(value, str):
        a.s = value
    elif isinstance(value, (list, tuple)) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        a.ints.SetInParent()  # an empty list (a scalar's shape) is still set
        a.ints.values.extend(int(v) for v in value)
    else:
        raise TccError(f"{where}: attribute {key}={value!r} is not an int, "
                       "float, bool, string or list of ints")
    return a


# The optimizers and schedule of the training recipe (Training in the schema).

@dataclasses.dataclass
class SGD:
    """torch.optim.SGD (dampening 0, no nesterov)."""
    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0


@dataclasses.dataclass
class AdamW:
    """torch.optim.AdamW."""
    lr: float = 1e-3
    betas: Sequence[float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0


def _check_hyper(field: str, value, spelling: str) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)
    if ok:
        ok = {"> 0": value > 0, ">= 0": value >= 0, "in [0, 1)": 0 <= value < 1}[spelling]
    if not ok:
        raise TccError(f"training: {field} must be {spelling}, got {value!r}")


def check_optimizer(optimizer) -> None:
    """The hyper-parameter ranges tcc compile accepts (dialects/common/
    HyperParameterRanges.h), checked where a recipe is written: a TccError
    naming the field."""
    if isinstance(optimizer, SGD):
        _check_hyper("sgd learning_rate", optimizer.lr, "> 0")
        _check_hyper("sgd momentum", optimizer.momentum, "in [0, 1)")
        _check_hyper("sgd weight_decay", optimizer.weight_decay, ">= 0")
    elif isinstance(optimizer, AdamW):
        _check_hyper("adamw learning_rate", optimizer.lr, "> 0")
        betas = tuple(optimizer.betas)
        if len(betas) != 2:
            raise TccError(f"training: adamw betas must be two numbers, got {betas!r}")
        _check_hyper("adamw beta1", betas[0], "in [0, 1)")
        _check_hyper("adamw beta2", betas[1], "in [0, 1)")
        _check_hyper("adamw eps", optimizer.eps, "> 0")
        _check_hyper("adamw weight_decay", optimizer.weight_decay, ">= 0")


@dataclasses.dataclass
class WarmupCosine:
    """Linear warmup to the optimizer's lr, cosine decay to `min_lr` at
    `decay_steps` (runtime/include/tcc/step_abi.h)."""
    warmup_steps: int
    decay_steps: int
    min_lr: float


class Model:
    """A model file being written."""

    def __init__(self, name: str):
        self._proto = pb.Model(schema_version=1, name=name)
        self._names = {}  # graph value name -> Tensor
        self._node_names = set()
        self._scopes = []
        self._counters = {}
        self._next_seed = 1
        self._constants = {}  # (dtype, shape, data) -> Tensor: each stored once

    # -- names ---------------------------------------------------------------

    @contextlib.contextmanager
    def scope(self, prefix: str, absolute: bool = False):
        """Names made inside get `prefix.` in front (nested scopes join;
        `absolute=True` drops the enclosing ones: tcc.nn modules use their
        path in the module tree)."""
        self._scopes.append((prefix, absolute))
        try:
            yield
        finally:
            self._scopes.pop()

    def scoped(self, name: str = "") -> str:
        """`name` under the current scope (empty parts are left out)."""
        start = 0
        for i, (_, absolute) in enumerate(self._scopes):
            if absolute:
                start = i
        parts = [p for p, _ in self._scopes[start:]] + [name]
        return ".".join(p for p in parts if p)

    def fresh_name(self, base: str) -> str:
        """A node name not used yet: `base` under the current scope, or with
        `_1`, `_2`, ... after it when taken (a module called twice)."""
        return self.unique_name(self.scoped(base))

    def unique_name(self, full: str) -> str:
        """`full` itself when no value or node has it, else `full_1`, ..."""
        if not full:
            raise TccError("a node name cannot be empty")
        n = self._counters.get(full, 0)
        while True:
            candidate = full if n == 0 else f"{full}_{n}"
            n += 1
            if candidate not in self._names and candidate not in self._node_names:
                self._counters[full] = n
                return candidate

    def _fresh(self, base: str) -> str:
        """A new unique value name for an unnamed node (`base`, `base_1`, ...)."""
        return self.fresh_name(base)

    def _define(self, name: str, what: str, shape=None, dtype=None) -> Tensor:
        if not name:
            raise TccError(f"{what}: empty name")
        if name in self._names:
            raise TccError(f"{what} {name!r}: the name is already used by "
                           "another parameter, input or node output")
        t = Tensor(self, name, shape, dtype)
        self._names[name] = t
        return t

    def __getitem__(self, name: str) -> Tensor:
        """The value named `name` (a KeyError-free lookup raises TccError)."""
        if name not in self._names:
            raise TccError(f"no value named {name!r} in model "
                           f"{self._proto.name!r}")
        return self._names[name]

    def __contains__(self, name: str) -> bool:
        return name in self._names

    # -- graph ---------------------------------------------------------------

    def param(self, name: str, shape: Iterable[int], init: Init = None,
              dtype: str = "f32", frozen: bool = False,
              no_weight_decay: bool = False, torch_name: str = "",
              torch_perm: Sequence[int] = (),
              torch_aliases: Sequence[str] = (),
              seed: Optional[int] = None) -> Tensor:
        """A trainable parameter (`frozen=True`: no gradient, no optimizer
        state). Seeds count up from 1 in creation order, as tcc-models does,
        so adding a layer keeps earlier layers' weights; an explicit `seed`
        takes none from that count (LoRA adapters keep the base's seeds).
        `torch_*` record how PyTorch holds it (TorchTensor in the schema):
        trun --save-weights / --init-from then speak PyTorch's state_dict."""
        if dtype not in ("f32", "f64"):
            raise TccError(f"parameter {name!r}: dtype must be f32 or f64, "
                           f"got {dtype!r}")
        dims = _shape(shape, f"parameter {name!r}")
        init = init if init is not None else zeros()
        if init.kind not in _INIT_KINDS:
            raise TccError(f"parameter {name!r}: unknown initializer "
                           f"{init.kind!r}")
        perm = [int(p) for p in torch_perm]
        if perm and sorted(perm) != list(range(len(dims))):
            raise TccError(f"parameter {name!r}: torch_perm {perm} is not a "
                           f"permutation of its {len(dims)} dimensions")
        t = self._define(name, "parameter", dims, dtype)
        p = self._proto.params.add(name=name, dtype=_dtype(dtype, name))
        p.shape.dims.extend(dims)
        p.init.kind = _INIT_KINDS[init.kind]
        p.init.scale = init.scale
        if seed is None:
            p.init.seed = self._next_seed
            self._next_seed += 1
        else:
            p.init.seed = int(seed)
        p.frozen = frozen
        p.no_weight_decay = no_weight_decay
        if torch_name or perm or torch_aliases:
            p.torch.name = torch_name if torch_name != name else ""
            p.torch.perm.extend(perm)
            p.torch.aliases.extend(torch_aliases)
        return t

    def add_torch_alias(self, name: str, alias: str) -> None:
        """Records `alias` as a further PyTorch state_dict key of parameter
        `name` (a tied weight); once."""
        for p in self._proto.params:
            if p.name == name:
                if alias != (p.torch.name or p.name) and \
                        alias not in p.torch.aliases:
                    p.torch.aliases.append(alias)
                return
        raise TccError(f"add_torch_alias: no parameter named {name!r}")

    def buffer(self, name: str, shape: Iterable[int], init: Init = None,
               dtype: str = "f32", torch_name: str = "") -> Tensor:
        """A model buffer (Model.buffers in the schema): state the train step
        updates in place that no gradient trains, PyTorch's module buffers
        (batch norm's running statistics and counter). Starts at `init`
        (zeros or ones); trun keeps it in checkpoints and writes it with
        --save-weights under `torch_name` (default: `name`)."""
        if dtype not in ("f32", "f64", "i64"):
            raise TccError(f"buffer {name!r}: dtype must be f32, f64 or i64, "
                           f"got {dtype!r}")
        dims = _shape(shape, f"buffer {name!r}")
        init = init if init is not None else zeros()
        if init.kind not in ("zeros", "ones"):
            raise TccError(f"buffer {name!r}: starts at zeros or ones, not "
                           f"{init.kind!r}")
        t = self._define(name, "buffer", dims, dtype)
        b = self._proto.buffers.add(name=name, dtype=_dtype(dtype, name))
        b.shape.dims.extend(dims)
        b.init.kind = _INIT_KINDS[init.kind]
        if torch_name and torch_name != name:
            b.torch.name = torch_name
        return t

    # Element widths of constant data (BOOL: one byte, 0 or 1).
    _CONSTANT_WIDTHS = {"f32": 4, "f64": 8, "i32": 4, "i64": 8, "bool": 1}

    def constant_data(self, data: bytes, shape: Iterable[int], dtype: str = "f32",
                      name: Optional[str] = None) -> Tensor:
        """A tensor of fixed values (Model.constants in the schema): `data`
        holds every element, row-major, little-endian (bool: one byte each,
        0 or 1). Not trained and not saved with the weights. The same values
        (dtype, shape and bytes) asked for twice are stored once: the second
        call returns the first tensor. ops.constant is the splat form."""
        if dtype not in self._CONSTANT_WIDTHS:
            raise TccError(f"constant: dtype must be one of "
                           f"{', '.join(self._CONSTANT_WIDTHS)}, got {dtype!r}")
        dims = _shape(shape, "constant")
        data = bytes(data)
        need = math.prod(dims) * self._CONSTANT_WIDTHS[dtype]
        if len(data) != need:
            raise TccError(f"constant of shape {dims} {dtype}: {len(data)} bytes "
                           f"of data, needs {need}")
        key = (dtype, dims, data)
        if key in self._constants:
            return self._constants[key]
        full = self.unique_name(name or self.scoped("constant"))
        t = self._define(full, "constant", dims, dtype)
        c = self._proto.constants.add(name=full, dtype=_dtype(dtype, full), data=data)
        c.shape.dims.extend(dims)
        self._constants[key] = t
        return t

    def constant_bytes(self) -> int:
        """The bytes of constant data in the model so far."""
        return sum(len(c.data) for c in self._proto.constants)

    def input(self, name: str, shape: Iterable[int], dtype: str = "f32") -> Tensor:
        """A data input of the step (batch dimension included)."""
        dims = _shape(shape, f"input {name!r}")
        t = self._define(name, "input", dims, dtype)
        i = self._proto.inputs.add(name=name, dtype=_dtype(dtype, f"input {name!r}"))
        i.shape.dims.extend(dims)
        return t

    def op(self, op: str, *inputs, name: Optional[str] = None,
           outputs: Union[None, int, Sequence[str]] = None,
           result_shape=None, result_dtype=None, **attrs):
        """A node running `op` (docs/ir.md) on `inputs`; returns its output,
        or a list of outputs when `outputs` is a count or a list of names.
        `name`: the node (and single output) name; default made from the op
        under the current scope. `result_shape`/`result_dtype`: what the
        caller knows of the result (kept on the returned Tensor only); every
        other keyword is an attribute of the node."""
        ins = [self._as_tensor(x) for x in inputs]
        node_name = name if name is not None else self._fresh(op)
        where = f"node {node_name!r} ({op})"
        if not node_name:
            raise TccError(f"node ({op}): empty name")
        if node_name in self._node_names:
            raise TccError(f"{where}: a node of this name exists already")
        if outputs is None:
            out_names = [node_name]
        elif isinstance(outputs, int):
            out_names = [f"{node_name}.{k}" for k in range(outputs)]
        else:
            out_names = list(outputs)
        # Everything is checked before the node goes in, so a TccError leaves
        # the model as it was.
        for o in out_names:
            if not o or o in self._names or out_names.count(o) > 1:
                raise TccError(f"{where}: output name {o!r} is empty or "
                               "already used by another parameter, input or "
                               "node output")
        given = {k: v for k, v in attrs.items() if v is not None}
        built = {k: _attribute(k, given[k], where) for k in sorted(given)}
        known = [(result_shape, result_dtype)] * len(out_names)
        if result_shape is None:
            try:
                inferred = shapes.infer(op, [t.shape for t in ins],
                                        [t.dtype for t in ins], given,
                                        len(out_names))
            except shapes.ShapeError as e:
                args = ", ".join(f"{t.name!r} {t.shape}" for t in ins)
                raise TccError(f"{where}: {e} (inputs {args})") from None
            except (KeyError, TypeError, IndexError):
                inferred = None  # a malformed node: tcc compile names it
            if inferred and len(inferred) == len(out_names):
                known = [(s, result_dtype or d) for s, d in inferred]
        node = self._proto.nodes.add(name=node_name, op=op)
        node.inputs.extend(t.name for t in ins)
        node.outputs.extend(out_names)
        for key, value in built.items():
            node.attrs[key].CopyFrom(value)
        self._node_names.add(node_name)
        results = [self._define(o, f"output of {where}", s, d)
                   for o, (s, d) in zip(out_names, known)]
        return results[0] if outputs is None else results

    def _as_tensor(self, x, like: Optional[Tensor] = None) -> Tensor:
        if isinstance(x, Tensor):
            if x.model is not self:
                raise TccError(f"value {x.name!r} belongs to another model")
            return x
        if isinstance(x, str):
            return self[x]
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            dtype = like.dtype if like is not None and like.dtype else "f32"
            return self.op("constant", value=float(x), shape=[], dtype=dtype,
                           name=self._fresh("const"), result_shape=(),
                           result_dtype=dtype)
        raise TccError(f"{x!r} is not a tensor of model {self._proto.name!r}")

    def output(self, name: str, value) -> None:
        """A value the eval entry point returns (trun reads "logits")."""
        t = self._as_tensor(value)
        if any(o.name == name for o in self._proto.outputs):
            raise TccError(f"output {name!r} is defined twice")
        self._proto.outputs.add(name=name, value=t.name)

    # -- training ------------------------------------------------------------

    def train(self, loss, optimizer: Union[SGD, AdamW], grad_clip: float = 0.0,
              micro_batches: Optional[int] = None,
              schedule: Optional[WarmupCosine] = None,
              constant_schedule: bool = False) -> None:
        """The training recipe: minimize the scalar `loss` with `optimizer`.
        `grad_clip`: global L2 norm (0: off); `micro_batches`: gradient
        accumulation over K micro-batches; `schedule`: warmup + cosine
        (None: constant; `constant_schedule=True` writes it explicitly)."""
        loss = self._as_tensor(loss)
        tr = self._proto.training
        tr.loss = loss.name
        if isinstance(optimizer, SGD):
            check_optimizer(optimizer)
            tr.optimizer.sgd.learning_rate = optimizer.lr
            tr.optimizer.sgd.momentum = optimizer.momentum
            tr.optimizer.sgd.weight_decay = optimizer.weight_decay
        elif isinstance(optimizer, AdamW):
            check_optimizer(optimizer)
            a = tr.optimizer.adamw
            a.learning_rate = optimizer.lr
            a.beta1, a.beta2 = (float(b) for b in optimizer.betas)
            a.eps = optimizer.eps
            a.weight_decay = optimizer.weight_decay
        else:
            raise TccError(f"optimizer must be tcc.SGD or tcc.AdamW, got "
                           f"{type(optimizer).__name__}")
        if not isinstance(grad_clip, (int, float)) or not math.isfinite(grad_clip) or \
                grad_clip < 0:
            raise TccError(f"grad_clip must be >= 0 (0 = off), got {grad_clip}")
        tr.grad_clip = grad_clip
        if micro_batches is not None:
            if micro_batches < 1:
                raise TccError(f"micro_batches must be >= 1, got {micro_batches}")
            tr.micro_batches = micro_batches
        if schedule is not None:
            wc = tr.lr_schedule.warmup_cosine
            wc.warmup_steps = schedule.warmup_steps
            wc.decay_steps = schedule.decay_steps
            wc.min_lr = schedule.min_lr
        elif constant_schedule:
            tr.lr_schedule.constant.SetInParent()

    def freeze(self, *params, frozen: bool = True) -> None:
        """Marks parameters (names or Tensors) frozen: no gradient, no
        optimizer state, and autodiff drops what only their gradients
        needed. `frozen=False` makes them trainable again. An unknown name
        is a TccError naming the model and the nearest parameter."""
        by_name = {p.name: p for p in self._proto.params}
        for param in params:
            name = param.name if isinstance(param, Tensor) else param
            if name not in by_name:
                near = difflib.get_close_matches(str(name), by_name, n=1)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise TccError(f"freeze: model {self.name!r} has no parameter "
                               f"named {name!r}{hint}")
            by_name[name].frozen = frozen

    def no_weight_decay(self, param) -> None:
        """Exempts a parameter from the optimizer's weight decay."""
        name = param.name if isinstance(param, Tensor) else param
        for p in self._proto.params:
            if p.name == name:
                p.no_weight_decay = True
                return
        raise TccError(f"no_weight_decay: no parameter named {name!r}")

    # -- the file ------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._proto.name

    def proto(self) -> "pb.Model":
        """A copy of the model message."""
        m = pb.Model()
        m.CopyFrom(self._proto)
        return m

    def params(self):
        return list(self._proto.params)

    def save(self, path: str) -> str:
        """Writes the model file: binary for .pb, text for .pbtxt / .txtpb /
        .textproto (tcc compile reads both). Returns `path`."""
        if not self._proto.training.loss:
            raise TccError(f"model {self.name!r} has no training recipe: "
                           "call model.train(loss, optimizer) before save")
        save_proto(self._proto, path)
        return path


_TEXT_SUFFIXES = (".pbtxt", ".txtpb", ".textproto")

# A scalar field whose value has a decimal point or an exponent: a double
# (integer fields print digits only; strings are quoted).
_FLOAT_LINE = re.compile(r"^(\s*\w+: )(-?\d[\d.]*(?:[eE][-+]?\d+)?)$",
                         re.MULTILINE)


def _cpp_float(match) -> str:
    """protobuf C++'s SimpleDtoa: %.15g when it reads back exactly, else
    %.17g ("1" for 1.0; Python would print "1.0")."""
    token = match.group(2)
    if "." not in token and "e" not in token.lower():
        return match.group(0)
    value = float(token)
    short = "%.15g" % value
    return match.group(1) + (short if float(short) == value else "%.17g" % value)


def save_proto(message: "pb.Model", path: str) -> None:
    from google.protobuf import text_format
    if path.endswith(_TEXT_SUFFIXES):
        # Floats as C++'s TextFormat prints them: tcc-models and this front
        # end write the same text for one model.
        text = text_format.MessageToString(message)
        data = _FLOAT_LINE.sub(_cpp_float, text).encode()
    elif path.endswith(".pb"):
        data = message.SerializeToString(deterministic=True)
    else:
        raise TccError(f"{path}: a model file ends in .pb (binary) or "
                       ".pbtxt (text)")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def load_proto(path: str) -> "pb.Model":
    """Reads a model file (.pb binary or text)."""
    from google.protobuf import text_format
    m = pb.Model()
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(_TEXT_SUFFIXES):
        text_format.Parse(data.decode(), m)
    else:
        m.ParseFromString(data)
    return m


def dtype_name(enum_value) -> str:
    return _DTYPE_NAMES[enum_value]
