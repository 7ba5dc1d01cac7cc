"""ONNX import: the forward graph of an ONNX model (as torch.onnx.export
writes it) as a tcc model, plus a training recipe given here, and its
initializers as a weights file for trun --init-from (docs/pytorch-import.md).

    tcc import mlp.onnx -o mlp.pb --loss cross_entropy --optimizer sgd --lr 0.1
    python3 -m tcc.onnx_import mlp.onnx -o mlp.pb ...      (the same)

    model = tcc.onnx_import.from_onnx("mlp.onnx", loss="cross_entropy",
                                      optimizer=tcc.SGD(lr=0.1))

Float initializers become parameters under their ONNX names (for
torch.onnx.export: the state_dict keys). A Gemm's transB=1 weight is
PyTorch's (out, in) nn.Linear weight: tcc stores it (in, out) and records
torch perm [1, 0]. A MatMul weight that the exporter folded into a
transposed copy (`onnx::MatMul_N`, consumed by the node `/fc/MatMul`) is
recorded as the PyTorch tensor `fc.weight`, perm [1, 0]. The weights file
holds every parameter under its PyTorch name in PyTorch's layout, so it is
the module's state_dict too. Shapes are ONNX shape inference's (static).
"""

import argparse
import importlib.util
import os
import sys

import numpy as np

from tcc import ops
from tcc._onnx_check import check_model, load_external_data, node_where
from tcc._onnx_graph import (ELEM, FOLDED, attrs, derive_shapes, fold_numpy, gelu_erf,
                             meets_data, module_path, upper_triangle)
from tcc._onnx_vision import VisionOps
from tcc.model import AdamW, Model, SGD, TccError, check_optimizer, normal, ones, zeros


class OnnxImportError(TccError):
    """An ONNX model or recipe this importer cannot map (one line)."""


class Val:
    """A graph value: a tcc tensor with its static shape and numpy dtype."""
    __slots__ = ("t", "shape", "dtype")

    def __init__(self, t, shape, dtype):
        self.t, self.shape, self.dtype = t, tuple(shape), np.dtype(dtype)


def _tcc_dtype(dt, where):
    dt = np.dtype(dt)
    if dt == np.float32:
        return "f32"
    if dt == np.float64:
        return "f64"
    if dt == np.bool_:
        return "bool"
    if dt.kind in "iu":
        return "i32"  # what trun feeds
    raise OnnxImportError(f"tcc import: {where}: dtype {dt} is not supported")


# Handlers of the op_* table of _Importer, made per tcc op.

def _bin(op):
    def h(self, node, ins, a, where):
        x, y = ins
        like = x if isinstance(x, Val) else y
        return getattr(ops, op)(self.t(x, like), self.t(y, like))
    return h


def _variadic(op):
    """Max / Min: of one or more inputs (ONNX), pairwise."""
    def h(self, node, ins, a, where):
        if any(v is None for v in ins):
            raise OnnxImportError(f"tcc import: {where}: an empty input name")
        like = next(v for v in ins if isinstance(v, Val))
        y = self.t(ins[0], like)
        for v in ins[1:]:
            y = getattr(ops, op)(y, self.t(v, like))
        return y
    return h


def _un(op):
    def h(self, node, ins, a, where):
        return getattr(ops, op)(ins[0].t)
    return h


def _softmax(op):
    def h(self, node, ins, a, where):
        return getattr(ops, op)(ins[0].t, axis=int(a.get("axis", -1)))
    return h


def _reduce(op):
    def h(self, node, ins, a, where):
        axes = a.get("axes")
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = [int(v) for v in np.asarray(ins[1]).reshape(-1)]
        return getattr(ops, op)(ins[0].t, axes=axes, keep_dims=bool(a.get("keepdims", 1)))
    return h


# The inputs a handler reads as constants evaluated here (shape vectors,
# axes, a ratio, an exponent): input index -> what they must be.
_CONST_INPUTS = {"Reshape": {1: "ints"}, "Squeeze": {1: "ints"}, "Unsqueeze": {1: "ints"},
                 "ReduceMean": {1: "ints"}, "ReduceSum": {1: "ints"}, "Split": {1: "ints"},
                 "Slice": {1: "ints", 2: "ints", 3: "ints", 4: "ints"},
                 "Dropout": {1: "number", 2: "number"}, "Pow": {1: "number"}}
# Ops whose first input must be a graph value (a tcc tensor), not a constant
# (the others take either where they take a graph value).
_VALUE_INPUT0 = {"Gemm", "Softmax", "LogSoftmax", "Reshape", "Flatten",
                 "Squeeze", "Unsqueeze", "Transpose", "ReduceMean", "ReduceSum",
                 "Split", "Slice", "Cast", "Dropout", "Pow", "Gelu",
                 "LayerNormalization", "Shape", "Conv", "MaxPool", "AveragePool",
                 "BatchNormalization", "Relu", "Sigmoid", "Tanh", "Exp", "Log",
                 "Sqrt", "Neg"}


def _check_inputs(node, ins, where):
    """The kinds _CONST_INPUTS and _VALUE_INPUT0 ask for."""
    if node.op_type in _VALUE_INPUT0 and ins and not isinstance(ins[0], Val):
        raise OnnxImportError(f"tcc import: {where}: input {node.input[0]!r} is a "
                              "constant here; this op is mapped for a graph value (one "
                              "computed from the graph inputs or a parameter)")
    for k, kind in _CONST_INPUTS.get(node.op_type, {}).items():
        if k >= len(ins) or ins[k] is None:
            continue
        v = ins[k]
        if isinstance(v, Val):
            raise OnnxImportError(f"tcc import: {where}: input {node.input[k]!r} must be "
                                  "a constant (an initializer, a Constant or computed "
                                  "from them), not a graph value")
        v = np.asarray(v)
        if kind == "ints" and (v.dtype.kind not in "iu" or v.ndim > 1):
            raise OnnxImportError(f"tcc import: {where}: input {node.input[k]!r} must be "
                                  f"a 1-D integer tensor, got {v.dtype} of shape {v.shape}")
        if kind == "ints" and v.size and v.dtype == np.uint64 and v.max() >= 2 ** 63:
            raise OnnxImportError(f"tcc import: {where}: input {node.input[k]!r} holds "
                                  f"{int(v.max())}, beyond int64")
        if kind == "number" and (v.dtype.kind not in "biuf" or v.size != 1):
            raise OnnxImportError(f"tcc import: {where}: input {node.input[k]!r} must be "
                                  f"one number, got {v.dtype} of shape {v.shape}")


def _infer_shapes(onnx_model):
    """ONNX shape inference, with data propagation (shapes computed by
    Shape -> Gather -> Concat -> Reshape) unless a Shape node's input has no
    type: onnx's propagation through Shape dereferences that type (onnx 1.12
    crashes). Untyped values follow ops this onnx does not know (Gelu of
    opset 20) or nodes whose inference failed; without the propagation the
    walk still folds Shape from the static shapes itself (derive_shapes)."""
    import onnx
    infer = onnx.shape_inference.infer_shapes
    shape_inputs = {n.input[0] for n in onnx_model.graph.node
                    if n.op_type == "Shape" and n.input}
    if not shape_inputs:
        return infer(onnx_model, data_prop=True)  # nothing for it to crash on
    m = infer(onnx_model)
    g = m.graph
    typed = {v.name for v in list(g.input) + list(g.value_info) + list(g.output)
             if v.type.WhichOneof("value")}
    if m.ir_version >= 4:  # (before IR 4 an initializer is typed as a graph input)
        typed |= {t.name for t in g.initializer}
    return infer(onnx_model, data_prop=True) if shape_inputs <= typed else m


class _Importer(VisionOps):  # Conv, pools, BatchNormalization: _onnx_vision.py
    def __init__(self, onnx_model, name):
        import onnx
        from onnx import numpy_helper
        self.onnx, self.nh = onnx, numpy_helper
        try:
            m = _infer_shapes(onnx_model)
        except Exception as e:  # noqa: BLE001 - onnx raises several kinds
            raise OnnxImportError(f"tcc import: ONNX shape inference failed: {e}") from None
        self.g = m.graph
        # One wrapper per node, kept: the code below keys nodes by id().
        self.nodes = list(self.g.node)
        self.model = Model(name)
        self.values = {}      # ONNX name -> Val or np.ndarray (a constant)
        self.shapes = {}
        for vi in list(self.g.input) + list(self.g.value_info) + list(self.g.output):
            tt = vi.type.tensor_type
            if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
                self.shapes[vi.name] = (tuple(d.dim_value for d in tt.shape.dim),
                                        ELEM.get(tt.elem_type))
        self.torch = {}       # param name -> (torch name, perm, torch-layout array)
        self.tables = set()   # parameters read by Gather (embeddings)
        self.consumed = {i for n in self.nodes for i in n.input} | {
            o.name for o in self.g.output}

    def error(self, message):
        return OnnxImportError(f"tcc import: {message}")

    @classmethod
    def unsupported(cls, node, where):
        return OnnxImportError(
            f"tcc import: unsupported op {node.op_type} at {where} — supported: "
            + ", ".join(sorted(n[3:] for n in dir(cls) if n.startswith("op_"))))

    @classmethod
    def check_ops(cls, graph):
        """Refuses an op the walk cannot map before ONNX shape inference runs
        on it (onnx 1.12's inference of ConvTranspose crashes on ranks that
        do not match): a handler op_X, an op folded on constants (FOLDED),
        Constant, or Erf (GELU's pattern; the walk checks the rest)."""
        for node in graph.node:
            if not hasattr(cls, "op_" + node.op_type) and \
                    node.op_type not in FOLDED | {"Constant", "Erf"}:
                raise cls.unsupported(node, node_where(node))

    @staticmethod
    def val(t, shape, dtype):
        return Val(t, shape, dtype)

    # -- values ----------------------------------------------------------------

    def t(self, x, like=None):
        if isinstance(x, Val):
            return x.t
        a = np.asarray(x)
        dtype = _tcc_dtype(like.dtype if isinstance(like, Val) else a.dtype, "constant")
        flat = a.reshape(-1)
        if flat.size and np.all(flat == flat[0]):
            return ops.constant(self.model, float(flat[0]), a.shape, dtype)
        if a.dtype != np.bool_:  # torch.arange(T) positions: iota
            for axis, n in enumerate(a.shape):
                ramp = np.arange(n).reshape([n if i == axis else 1 for i in range(a.ndim)])
                if np.array_equal(a, np.broadcast_to(ramp, a.shape)):
                    return ops.iota(self.model, a.shape, axis=axis, dtype=dtype)
        k = upper_triangle(a)
        if k is not None:  # a causal mask buffer: j - i > k
            cols = ops.iota(self.model, a.shape, axis=-1, dtype="f32")
            rows = ops.iota(self.model, a.shape, axis=-2, dtype="f32")
            return ops.greater(ops.sub(cols, rows), ops.constant(self.model, float(k)))
        # Any other content (a rotary table): a constant of the model file,
        # stored once (Model.constant_data), up to 64 MiB in all.
        if a.dtype.kind == "f" and np.isnan(a).any():
            raise OnnxImportError(f"tcc import: a constant tensor of shape {a.shape} "
                                  "holds NaN")
        if self.model.constant_bytes() + a.size * np.dtype(a.dtype).itemsize > 64 << 20:
            raise OnnxImportError(f"tcc import: a constant tensor of shape {a.shape} takes "
                                  "the model's constants over 64 MiB (the step carries "
                                  "them in its code): make it an initializer the graph "
                                  "trains, or compute it from the inputs")
        return ops.tensor(self.model, a, dtype)

    def shape_of(self, name, node):
        if name not in self.shapes or self.shapes[name][0] is None:
            ins = [self.values.get(i) if i else None for i in node.input]
            shapes = [v.shape if isinstance(v, Val) else np.shape(v) for v in ins]
            consts = [None if isinstance(v, Val) else v for v in ins]
            try:
                derived = derive_shapes(node.op_type, attrs(node), shapes, consts,
                                        len(node.output))
            except ValueError as e:  # attributes that do not fit the shapes
                raise OnnxImportError(f"tcc import: node {node.name or node.op_type} "
                                      f"({node.op_type}): {e}") from None
            if derived is not None:
                for out, shape in zip(node.output, derived):
                    self.shapes[out] = (shape, None)
                return self.shapes[name][0]
            raise OnnxImportError(f"tcc import: node {node.name or node.op_type}: "
                                  f"no static shape for {name!r} (export with "
                                  "fixed input sizes)")
        return self.shapes[name][0]

    def dtype_of(self, name, node, ins):
        if name in self.shapes and self.shapes[name][1] is not None:
            return self.shapes[name][1]
        if node.op_type in ("Equal", "Less", "Greater"):
            return np.bool_
        if node.op_type == "Cast":
            return ELEM[attrs(node)["to"]]
        vals = [v for v in ins if isinstance(v, Val)]
        floats = [v.dtype for v in vals if v.dtype.kind == "f"]
        return floats[0] if floats else vals[0].dtype

    # -- parameters and inputs ---------------------------------------------------

    def declare(self):
        for i in self.g.initializer:
            if any(d < 0 for d in i.dims):
                raise OnnxImportError(f"tcc import: initializer {i.name!r} has dims "
                                      f"{list(i.dims)}: sizes must be >= 0")
        try:
            inits = {i.name: self.nh.to_array(i) for i in self.g.initializer}
        except ValueError as e:  # data that does not fill the dims, and such
            raise OnnxImportError(f"tcc import: an initializer's data does not match "
                                  f"its dims: {e}") from None
        # torch.onnx.export stores equal parameters once and names the others
        # Identity(first): each is a parameter of its own (trained apart).
        self.skip = set()
        for n in self.nodes:
            if n.op_type == "Identity" and n.input[0] in inits \
                    and inits[n.input[0]].dtype.kind == "f":
                inits[n.output[0]] = inits[n.input[0]].copy()
                self.skip.add(id(n))
        consumers = {}
        for n in self.nodes:
            if id(n) in self.skip:
                continue
            for k, i in enumerate(n.input):
                consumers.setdefault(i, []).append((n, k))
        trained = meets_data(self.g, self.nodes, consumers, set(inits))
        buffers = self.batch_norm_buffers(inits)  # running statistics
        for name, arr in inits.items():
            if name in buffers:
                continue
            users = consumers.get(name, [])
            weight_of = [n.op_type for n, k in users
                         if n.op_type in ("Gemm", "MatMul", "Conv", "ConvTranspose") and k >= 1]
            if arr.dtype.kind != "f" and weight_of and name in trained:
                raise OnnxImportError(f"tcc import: initializer {name!r} is {arr.dtype}, "
                                      f"the weight of a {weight_of[0]}: trained weights "
                                      "must be float (export the model in float32)")
            if arr.dtype.kind != "f" or name not in trained or not np.all(np.isfinite(arr)):
                self.values[name] = arr  # shapes, masks: constants of the import
                continue
            gemm_b = all(n.op_type == "Gemm" and k == 1 and attrs(n).get("transB", 0)
                         for n, k in users)
            torch_name, perm = name, []
            stored = arr
            if gemm_b and arr.ndim == 2:
                stored, perm = arr.T, [1, 0]
            elif "::" in name and len(users) == 1 and users[0][0].op_type == "MatMul" \
                    and users[0][1] == 1 and arr.ndim == 2:
                guess = module_path(users[0][0].name)
                guess = guess + ".weight" if guess else ""
                if guess and guess not in inits:
                    torch_name, perm = guess, [1, 0]
            init = zeros() if not np.any(stored) else ones() if np.all(stored == 1) \
                else normal(float(np.std(stored)) or 0.02)
            t = self.model.param(name, stored.shape, init=init,
                                 dtype=_tcc_dtype(arr.dtype, f"initializer {name!r}"),
                                 torch_name=torch_name if torch_name != name else "",
                                 torch_perm=perm)
            self.values[name] = Val(t, stored.shape, arr.dtype)
            self.torch[name] = (torch_name, perm, arr if not perm else stored.T)
        for i in self.g.input:
            if i.name in inits:
                continue
            shape, dt = self.shapes.get(i.name, (None, None))
            if shape is None:
                raise OnnxImportError(f"tcc import: input {i.name!r} has no static shape")
            t = self.model.input(i.name, shape, _tcc_dtype(dt, f"input {i.name!r}"))
            self.values[i.name] = Val(t, shape, dt)

    # -- nodes -------------------------------------------------------------------

    def run(self):
        producers = {o: n for n in self.nodes for o in n.output}
        consumers = {}
        for n in self.nodes:
            for i in n.input:
                consumers.setdefault(i, []).append(n)
        skip = set(self.skip)
        for node in self.nodes:  # constants first: the GELU match reads them
            if node.op_type == "Constant" and "value" in attrs(node):
                self.values[node.output[0]] = self.nh.to_array(attrs(node)["value"])
        for node in self.nodes:
            if id(node) in skip:
                continue
            where = f"node {node.name or node.op_type} ({node.op_type})"
            if node.op_type == "Constant":
                a = attrs(node)
                if "value" not in a:
                    raise OnnxImportError(f"tcc import: {where}: only tensor constants")
                self.values[node.output[0]] = self.nh.to_array(a["value"])
                continue
            if node.op_type == "Erf":
                fused = gelu_erf(producers, consumers, node, self.values)
                if fused is None:
                    raise OnnxImportError(f"tcc import: unsupported op Erf at {where} "
                                          "(only inside GELU's x*(erf(x/sqrt2)+1)*0.5)")
                x, out, nodes = fused
                src = self.values[x]
                self.values[out] = Val(ops.gelu(src.t), src.shape, src.dtype)
                skip |= nodes
                continue
            ins = [self.values.get(i) if i else None for i in node.input]
            missing = [i for i, v in zip(node.input, ins) if i and v is None]
            if missing:
                raise OnnxImportError(f"tcc import: {where}: input {missing[0]!r} is "
                                      "not computed before it")
            if all(not isinstance(v, Val) for v in ins):
                self.fold(node, ins, where)
                continue
            handler = getattr(self, "op_" + node.op_type, None)
            if handler is None:
                raise self.unsupported(node, where)
            _check_inputs(node, ins, where)
            try:
                outs = handler(node, ins, attrs(node), where)
                outs = outs if isinstance(outs, list) else [outs]
                for name, t in zip(node.output, outs):
                    if isinstance(t, (Val, np.ndarray)):
                        self.values[name] = t
                    else:
                        shape = self.shape_of(name, node)
                        self.values[name] = Val(t, shape, self.dtype_of(name, node, ins))
            except OnnxImportError:
                raise
            except TccError as e:  # a tcc op refused it (shapes): name the ONNX node
                raise OnnxImportError(f"tcc import: {where}: {e}") from None

    def fold(self, node, ins, where):
        """A node of constants only (shape arithmetic, masks): evaluated here."""
        try:
            res = fold_numpy(node.op_type, attrs(node), ins)
        except (ValueError, TypeError, IndexError, OverflowError) as e:  # numpy refused
            raise OnnxImportError(f"tcc import: {where}: cannot evaluate this constant "
                                  f"expression at import: {e}") from None
        if res is None:
            raise OnnxImportError(f"tcc import: {where}: cannot evaluate this "
                                  "constant expression at import")
        for name, r in zip(node.output, res):
            self.values[name] = np.asarray(r)

    # -- ops ---------------------------------------------------------------------

    op_Add, op_Sub, op_Mul, op_Div = _bin("add"), _bin("sub"), _bin("mul"), _bin("div")
    op_Max, op_Min = _variadic("maximum"), _variadic("minimum")
    op_Equal, op_Less, op_Greater = _bin("equal"), _bin("less"), _bin("greater")

    op_Relu, op_Sigmoid, op_Tanh = _un("relu"), _un("sigmoid"), _un("tanh")
    op_Exp, op_Log, op_Sqrt, op_Neg = _un("exp"), _un("log"), _un("sqrt"), _un("neg")

    def op_Gelu(self, node, ins, a, where):  # opset 20
        approx = a.get("approximate", "none")
        approx = approx.decode() if isinstance(approx, bytes) else approx
        return ops.gelu(ins[0].t, approximate=approx)

    def op_LayerNormalization(self, node, ins, a, where):  # opset 17
        x = ins[0]
        if a.get("axis", -1) not in (-1, len(x.shape) - 1):
            raise OnnxImportError(f"tcc import: {where}: LayerNormalization over "
                                  "more than the last axis")
        if len(node.output) > 1 and any(node.output[1:]):
            raise OnnxImportError(f"tcc import: {where}: LayerNormalization's mean / "
                                  "inverse deviation outputs are not supported")
        w = self.t(ins[1], x) if len(ins) > 1 and ins[1] is not None else None
        b = self.t(ins[2], x) if len(ins) > 2 and ins[2] is not None else None
        if b is not None and w is None:
            w = ops.constant(self.model, 1.0, x.shape[-1:])
        return ops.layer_norm(x.t, w, b, eps=float(a.get("epsilon", 1e-5)))

    def op_Shape(self, node, ins, a, where):
        return np.array(ins[0].shape, dtype=np.int64)  # static: a constant

    def op_Identity(self, node, ins, a, where):
        return ins[0]

    def op_Dropout(self, node, ins, a, where):
        ratio = float(ins[1]) if len(ins) > 1 and ins[1] is not None else a.get("ratio", 0.5)
        training = bool(ins[2]) if len(ins) > 2 and ins[2] is not None else False
        # An exported eval graph's Dropout is the identity; a training one
        # drops in tcc's train step and is the identity in eval, as here.
        return ops.dropout(ins[0].t, rate=ratio) if training and ratio > 0 else ins[0]

    def op_Pow(self, node, ins, a, where):
        if isinstance(ins[1], Val) or np.asarray(ins[1]).size != 1:
            raise OnnxImportError(f"tcc import: {where}: only a constant exponent")
        e = float(np.asarray(ins[1]).reshape(-1)[0])
        return ops.mul(ins[0].t, ins[0].t) if e == 2.0 else ops.pow(ins[0].t, e)

    def op_Gemm(self, node, ins, a, where):
        x, w = ins[0], ins[1]
        if a.get("transA", 0):
            raise OnnxImportError(f"tcc import: {where}: Gemm transA=1")
        trans_b = bool(a.get("transB", 0))
        if isinstance(w, Val) and w.t.name in self.torch and self.torch[w.t.name][1]:
            trans_b = False  # stored (in, out) already
        y = ops.matmul(x.t, self.t(w), transpose_b=trans_b)
        if a.get("alpha", 1.0) != 1.0:
            y = ops.mul(y, self.t(float(a["alpha"]), x))
        if len(ins) > 2 and ins[2] is not None:
            c = self.t(ins[2], x)
            if a.get("beta", 1.0) != 1.0:
                c = ops.mul(c, self.t(float(a["beta"]), x))
            y = ops.add(y, c)
        return y

    def op_MatMul(self, node, ins, a, where):
        return ops.matmul(self.t(ins[0]), self.t(ins[1]))

    def op_Gather(self, node, ins, a, where):
        table, ids = ins
        if a.get("axis", 0) != 0 or not isinstance(table, Val):
            raise OnnxImportError(f"tcc import: {where}: only Gather of a table's rows "
                                  "(an embedding)")
        self.tables.add(table.t.name)
        return ops.embedding(table.t, self.t(ids))

    op_Softmax, op_LogSoftmax = _softmax("softmax"), _softmax("log_softmax")

    def _reshape_to_inferred(self, node, ins, a, where):
        shape = self.shape_of(node.output[0], node)
        return ops.reshape(ins[0].t, list(shape)) if shape != ins[0].shape else ins[0]

    op_Reshape = op_Flatten = op_Squeeze = op_Unsqueeze = _reshape_to_inferred

    def op_Transpose(self, node, ins, a, where):
        perm = a.get("perm")
        return ops.transpose(ins[0].t, list(perm) if perm is not None else None)

    op_ReduceMean, op_ReduceSum = _reduce("mean"), _reduce("sum")

    def op_Concat(self, node, ins, a, where):
        like = next(v for v in ins if isinstance(v, Val))
        return ops.concat([self.t(v, like) for v in ins], axis=int(a["axis"]))

    def op_Split(self, node, ins, a, where):
        axis = int(a.get("axis", 0))
        x = ins[0]
        if not -len(x.shape) <= axis < len(x.shape):
            raise OnnxImportError(f"tcc import: {where}: axis {axis} is out of range "
                                  f"for {x.shape}")
        axis = axis + len(x.shape) if axis < 0 else axis
        shapes = [self.shape_of(o, node) for o in node.output]
        if any(len(s) != len(x.shape) for s in shapes):
            raise OnnxImportError(f"tcc import: {where}: outputs of shapes {shapes} "
                                  f"from {x.shape}")
        sizes = [s[axis] for s in shapes]
        return ops.split(x.t, sizes, axis=axis)

    def op_Slice(self, node, ins, a, where):
        x = ins[0]
        if len(ins) == 1:  # opset < 10: starts, ends and axes are attributes
            ins = [x, a.get("starts", []), a.get("ends", []), a.get("axes")]
        starts, ends = (np.asarray(v).reshape(-1).tolist() for v in ins[1:3])
        axes = np.asarray(ins[3]).reshape(-1).tolist() if len(ins) > 3 and ins[3] is not None \
            else list(range(len(starts)))
        if len(ins) > 4 and ins[4] is not None and any(s != 1 for s in np.asarray(ins[4]).reshape(-1)):
            raise OnnxImportError(f"tcc import: {where}: Slice with steps")
        big = 2 ** 62  # ONNX writes INT64_MAX for "to the end": clamp like numpy
        ends = [min(e, big) for e in ends]
        return ops.slice(x.t, starts, ends, axes=axes)

    def op_Cast(self, node, ins, a, where):
        to = ELEM.get(a["to"])
        if to is None:
            raise OnnxImportError(f"tcc import: {where}: Cast to ONNX type {a['to']}")
        if np.dtype(to) == ins[0].dtype:
            return ins[0]
        return ops.cast(ins[0].t, _tcc_dtype(to, where))

    def op_Where(self, node, ins, a, where):
        like = ins[1] if isinstance(ins[1], Val) else ins[2]
        return ops.select(self.t(ins[0]), self.t(ins[1], like), self.t(ins[2], like))


# -- the recipe and the files ----------------------------------------------------

def _checker_problem(onnx_model):
    """onnx.checker's first line about `onnx_model`, or "" when it passes."""
    import onnx
    try:
        onnx.checker.check_model(onnx_model)
    except Exception as e:  # noqa: BLE001 - ValidationError and others
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return ""


def from_onnx(path, loss="cross_entropy", optimizer=None, output=None,
              target_name=None, name=None, grad_clip=0.0, no_decay=()):
    """(tcc.Model, {torch name: array}) for the ONNX file at `path`.

    loss: "cross_entropy" (the output is (B, C) or (B, T, V) logits, the
      target (B) / (B, T) integer labels) or "mse" (a float target shaped as
      the output). output: the ONNX output it applies to (default: the
      first); it is also the model's "logits" output when shaped so.
    target_name: the target input (default "targets" next to an input
      "tokens", else "labels": trun's names).
    no_decay: groups of parameters without weight decay: "bias" (names
      ending in "bias"), "norm" (other 1-D parameters: norm weights),
      "embedding" (tables read by Gather).
    The weights are every parameter under its PyTorch name and layout."""
    import onnx
    if optimizer is None:
        raise OnnxImportError("tcc import: an optimizer is needed")
    try:
        onnx_model = onnx.load(path, load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf/IO errors of many kinds
        raise OnnxImportError(f"tcc import: cannot read {path}: {e}") from None

    def error(message):
        return OnnxImportError(f"tcc import: {path} is not a valid ONNX model: {message}")

    # Before ONNX shape inference: its C++ code trusts what these check.
    load_external_data(onnx_model, path, error)
    check_model(onnx_model, error)
    _Importer.check_ops(onnx_model.graph)
    base = os.path.splitext(os.path.basename(path))[0]
    try:
        imp = _Importer(onnx_model, name or onnx_model.graph.name or base)
        imp.declare()
        imp.run()
    except OnnxImportError:
        raise
    except Exception:  # noqa: BLE001 - a graph the walk did not expect
        # Malformed input is the likely cause: onnx.checker names what is
        # wrong in one line (it is not run first: it also refuses graphs
        # the walk reads fine, such as value_info without shapes).
        problem = _checker_problem(onnx_model)
        if problem:
            raise OnnxImportError(f"tcc import: {path} is not a valid ONNX model: "
                                  f"{problem}") from None
        raise
    outs = [o.name for o in imp.g.output]
    out_name = output or (outs[0] if outs else None)
    if out_name not in imp.values or not isinstance(imp.values[out_name], Val):
        raise OnnxImportError(f"tcc import: no computed output {out_name!r} "
                              f"(outputs: {', '.join(outs)})")
    out = imp.values[out_name]
    m = imp.model
    inputs = [i.name for i in imp.g.input if isinstance(imp.values.get(i.name), Val)
              and i.name not in imp.torch]
    if target_name is None:
        target_name = "targets" if "tokens" in inputs else "labels"
    if loss == "cross_entropy":
        if len(out.shape) not in (2, 3):
            raise OnnxImportError(f"tcc import: cross_entropy needs (B, C) or "
                                  f"(B, T, V) logits; {out_name!r} is {out.shape}")
        target = m.input(target_name, out.shape[:-1], "i32")
        loss_t = ops.cross_entropy(out.t, target)
        m.output("logits", out.t)
    elif loss == "mse":
        target = m.input(target_name, out.shape, _tcc_dtype(out.dtype, "output"))
        d = ops.sub(out.t, target)
        loss_t = ops.mean(ops.mul(d, d))
        m.output("output", out.t)
    else:
        raise OnnxImportError(f"tcc import: unknown loss {loss!r} (cross_entropy, mse)")
    for p in m.params():
        is_bias = (p.torch.name or p.name).endswith("bias")
        if ("bias" in no_decay and is_bias) or (
                "norm" in no_decay and len(p.shape.dims) == 1 and not is_bias) or (
                "embedding" in no_decay and p.name in imp.tables):
            m.no_weight_decay(p.name)
    m.train(loss_t, optimizer, grad_clip=grad_clip)
    # (reshaped: ascontiguousarray makes a 0-d counter 1-d)
    weights = {tn: np.ascontiguousarray(arr).reshape(np.shape(arr))
               for tn, _, arr in imp.torch.values()}
    return m, weights


def _parser(prog):
    ap = argparse.ArgumentParser(
        prog=prog, description="A tcc model file from an ONNX model "
        "(torch.onnx.export) and a training recipe; optionally its "
        "initializers as a weights file for trun --init-from.")
    ap.add_argument("model", help="the .onnx file")
    ap.add_argument("-o", "--output", required=True,
                    help="the model file to write (.pb, or .pbtxt for text)")
    ap.add_argument("--weights", help="also write the initializers here "
                    "(safetensors, PyTorch names and layouts)")
    ap.add_argument("--loss", choices=("cross_entropy", "mse"), default="cross_entropy")
    ap.add_argument("--logits", help="the ONNX output the loss applies to "
                    "(default: the first)")
    ap.add_argument("--target-name", help="the target input (default: targets "
                    "with an input 'tokens', else labels)")
    ap.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd")
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--momentum", type=float, default=0.0, help="sgd")
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--beta1", type=float, default=0.9, help="adamw")
    ap.add_argument("--beta2", type=float, default=0.999, help="adamw")
    ap.add_argument("--eps", type=float, default=1e-8, help="adamw")
    ap.add_argument("--no-decay", default="",
                    help="comma list of groups without weight decay: bias "
                    "(names ending in bias), norm (other 1-D parameters), "
                    "embedding (tables of Gather)")
    ap.add_argument("--grad-clip", type=float, default=0.0,
                    help="global gradient L2 norm (0: off)")
    ap.add_argument("--name", help="the model's name (default: the graph's)")
    return ap


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = "python3 -m tcc.onnx_import"
    if argv and argv[0].startswith("--prog="):  # set by `tcc import`
        prog = argv.pop(0)[len("--prog="):]
    args = _parser(prog).parse_args(argv)
    if args.optimizer == "sgd":
        opt = SGD(lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    else:
        opt = AdamW(lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
                    weight_decay=args.weight_decay)
    try:
        check_optimizer(opt)
    except TccError as e:
        print(f"{prog}: error: {e} (the optimizer flags)", file=sys.stderr)
        return 2
    no_decay = tuple(x for x in args.no_decay.split(",") if x)
    bad = set(no_decay) - {"bias", "norm", "embedding"}
    if bad:
        print(f"{prog}: error: --no-decay: unknown group {sorted(bad)[0]!r} "
              "(bias, norm, embedding)", file=sys.stderr)
        return 2
    if importlib.util.find_spec("onnx") is None:
        print(f"tcc import: needs the onnx package for {sys.executable} (Debian: "
              "apt install python3-onnx; or pip install onnx; TCC_PYTHON picks "
              "the python)", file=sys.stderr)
        return 1
    try:
        if os.path.isdir(args.model):
            raise OnnxImportError(f"tcc import: {args.model}: is a directory, not an "
                                  ".onnx file")
        if not os.path.exists(args.model):
            raise OnnxImportError(f"tcc import: {args.model}: no such file")
        if not os.path.isfile(args.model):
            raise OnnxImportError(f"tcc import: {args.model}: not a regular file (a "
                                  "device or pipe): give the .onnx file")
        model, weights = from_onnx(args.model, loss=args.loss, optimizer=opt,
                                   output=args.logits, target_name=args.target_name,
                                   name=args.name, grad_clip=args.grad_clip,
                                   no_decay=no_decay)
        model.save(args.output)
        if args.weights:
            from tcc.safetensors import save_file
            save_file(weights, args.weights,
                      metadata={"producer": "tcc import", "model": model.name})
    except (TccError, OSError, ValueError) as e:
        msg = str(e)
        print(msg if msg.startswith("tcc import") else f"tcc import: error: {msg}",
              file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - a bug here: still one line
        print(f"tcc import: internal error on {args.model}: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    p = model.proto()
    print(f"{args.output}: {len(p.params)} parameters, {len(p.inputs)} inputs, "
          f"{len(p.nodes)} nodes" + (f"; weights: {args.weights}" if args.weights else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
