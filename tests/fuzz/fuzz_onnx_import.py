#!/usr/bin/python3
"""A seeded random mutator ("fuzzer") for the ONNX importer (issue 36):
`tcc.onnx_import.from_onnx` on mutated ONNX models.

    tests/fuzz/fuzz_onnx_import.py [SECONDS (default 30)] [--seed N]
                                   [--out DIR] [--replay-only]
    tests/fuzz/fuzz_onnx_import.py --write-seeds   # rewrites the seed corpus

First every file of tests/fuzz/crashes/fuzz_onnx_import/ (each input that
ever failed) is imported; then, for SECONDS, mutants of the seeds (and of
mutants the importer accepted) are. A mutant is a seed with 1 to 6 mutations
stacked: structured ones on the ModelProto (dims, elem types, op types,
attributes, node inputs and outputs, nodes, initializers, graph inputs and
outputs, opset) and byte-level ones on its serialization (bit flips,
truncation, insertion, duplication).

Each input is written to a scratch file and imported by a worker process
with from_onnx(path, loss=..., optimizer=...); an accepted model is also
serialized (model.proto().SerializeToString()). The outcome:

  accepted  from_onnx returned and the model serializes;
  clean     an error the importer reports in one line: TccError (hence
            OnnxImportError), OSError or ValueError;
  finding   any other exception from from_onnx or the serialization, the
            worker dying (a crash of onnx / protobuf / numpy), or an input
            taking more than --timeout seconds (default 10: a hang).

Findings are saved (the input .onnx and a .txt with the traceback, the seed
and the mutations) to --out (default: a new temporary directory, printed);
the run goes on after one. The final table is run.sh's: target, seconds,
executions, accepted, clean errors, findings, result. Exit status 1 on any
finding, 2 on a usage error. The seed of the run is always printed: the same
--seed gives the same inputs in the same order (the number of inputs in
SECONDS differs from run to run).

Needs onnx and numpy; PYTHONPATH must reach python/ (tcc). Runs in one
worker process at a time (plus this one).
"""

import argparse
import hashlib
import math
import multiprocessing as mp
import os
import random
import shutil
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TARGET = "fuzz_onnx_import"
CORPUS = os.path.join(HERE, "corpus", TARGET)
CRASHES = os.path.join(HERE, "crashes", TARGET)
LOSS_KEY = "tcc_fuzz_loss"  # metadata_props: the loss the seed is made for


# ---------------------------------------------------------------------------
# Seeds (small valid models of the shapes the importer is made for)
# ---------------------------------------------------------------------------

def _model(nodes, name, inputs, outputs, inits, opset, loss):
    from onnx import helper, numpy_helper
    g = helper.make_graph(nodes, name, inputs, outputs,
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="tcc fuzz_onnx_import")
    m.ir_version = 8
    helper.set_model_props(m, {LOSS_KEY: loss})
    return m


def seed_mlp():
    """x (4, 8) -> Gemm(transB=1) -> Relu -> MatMul (an exporter's folded
    `onnx::MatMul_N`) + Add -> logits (4, 3): cross_entropy."""
    import numpy as np
    from onnx import TensorProto, helper
    rng = np.random.default_rng(1)
    f = np.float32
    inits = {"fc1.weight": rng.normal(size=(16, 8)).astype(f) * 0.3,
             "fc1.bias": np.zeros(16, f),
             "onnx::MatMul_7": rng.normal(size=(16, 3)).astype(f) * 0.3,
             "fc2.bias": rng.normal(size=(3,)).astype(f) * 0.1}
    h = helper
    nodes = [
        h.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["/fc1/Gemm_output_0"],
                    name="/fc1/Gemm", alpha=1.0, beta=1.0, transB=1),
        h.make_node("Relu", ["/fc1/Gemm_output_0"], ["/act/Relu_output_0"], name="/act/Relu"),
        h.make_node("MatMul", ["/act/Relu_output_0", "onnx::MatMul_7"],
                    ["/fc2/MatMul_output_0"], name="/fc2/MatMul"),
        h.make_node("Add", ["fc2.bias", "/fc2/MatMul_output_0"], ["logits"], name="/fc2/Add"),
    ]
    return _model(nodes, "mlp", [h.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                  [h.make_tensor_value_info("logits", TensorProto.FLOAT, [4, 3])],
                  inits, 13, "cross_entropy")


def seed_regressor():
    """x (4, 6) -> MatMul + Add -> Tanh -> Dropout -> Gemm -> Sigmoid ->
    Identity -> y (4, 2): mse."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(2)
    f = np.float32
    inits = {"w1": rng.normal(size=(6, 5)).astype(f) * 0.3,
             "b1": rng.normal(size=(5,)).astype(f) * 0.1,
             "w2": rng.normal(size=(5, 2)).astype(f) * 0.3,
             "b2": np.ones(2, f)}
    h = helper
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["m1"], name="/l1/MatMul"),
        h.make_node("Add", ["m1", "b1"], ["a1"], name="/l1/Add"),
        h.make_node("Tanh", ["a1"], ["t1"], name="/Tanh"),
        h.make_node("Constant", [], ["ratio"], name="/Constant",
                    value=numpy_helper.from_array(np.array(0.25, f))),
        h.make_node("Dropout", ["t1", "ratio"], ["d1"], name="/drop/Dropout"),
        h.make_node("Gemm", ["d1", "w2", "b2"], ["g2"], name="/l2/Gemm", alpha=0.5, beta=2.0),
        h.make_node("Sigmoid", ["g2"], ["s2"], name="/Sigmoid"),
        h.make_node("Identity", ["s2"], ["y"], name="/Identity"),
    ]
    return _model(nodes, "regressor",
                  [h.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
                  [h.make_tensor_value_info("y", TensorProto.FLOAT, [4, 2])],
                  inits, 13, "mse")


def seed_cnn():
    """x (2, 1, 8, 8) -> Conv -> BatchNormalization (running statistics as
    initializers: model buffers) -> Relu -> MaxPool -> AveragePool ->
    Flatten -> Gemm(transB=1) -> logits (2, 10): cross_entropy."""
    import numpy as np
    from onnx import TensorProto, helper
    rng = np.random.default_rng(3)
    f = np.float32
    inits = {"conv.weight": rng.normal(size=(4, 1, 3, 3)).astype(f) * 0.3,
             "conv.bias": rng.normal(size=(4,)).astype(f) * 0.1,
             "bn.weight": np.ones(4, f), "bn.bias": np.zeros(4, f),
             "bn.running_mean": np.zeros(4, f), "bn.running_var": np.ones(4, f),
             "fc.weight": rng.normal(size=(10, 16)).astype(f) * 0.3,
             "fc.bias": np.zeros(10, f)}
    h = helper
    nodes = [
        h.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], name="/conv/Conv",
                    kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1],
                    dilations=[1, 1], group=1),
        h.make_node("BatchNormalization",
                    ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                    ["n"], name="/bn/BatchNormalization", epsilon=1e-5, momentum=0.9),
        h.make_node("Relu", ["n"], ["r"], name="/Relu"),
        h.make_node("MaxPool", ["r"], ["p"], name="/pool/MaxPool", kernel_shape=[2, 2],
                    strides=[2, 2], pads=[0, 0, 0, 0]),
        h.make_node("AveragePool", ["p"], ["ap"], name="/avg/AveragePool",
                    kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Flatten", ["ap"], ["fl"], name="/Flatten", axis=1),
        h.make_node("Gemm", ["fl", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm",
                    transB=1),
    ]
    return _model(nodes, "cnn",
                  [h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 8, 8])],
                  [h.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 10])],
                  inits, 13, "cross_entropy")


def seed_transformer():
    """A GPT block as torch.onnx.export writes it (opset 17): tokens (2, 5)
    -> Gather embedding + a Slice of the position table -> LayerNormalization
    -> MatMul qkv -> Split -> Reshape / Transpose heads (the shape computed
    by Shape, Gather, Unsqueeze, Concat: folded) -> MatMul, Div, Where by a
    causal mask (Range, Unsqueeze, Greater: folded), Softmax, MatMul ->
    Transpose, Reshape, projection, residual -> the decomposed layer norm
    (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add) -> MatMul, GELU as
    x*(erf(x/sqrt2)+1)*0.5, MatMul -> Concat/Slice -> tied head (Transpose of
    the table) -> logits (2, 5, 16): cross_entropy."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(4)
    f = np.float32
    B, T, C, H, V, P = 2, 5, 8, 2, 16, 8
    D = C // H

    def w(*shape):
        return (rng.normal(size=shape) * 0.2).astype(f)

    inits = {"wte.weight": w(V, C), "wpe.weight": w(P, C),
             "ln_1.weight": np.ones(C, f), "ln_1.bias": np.zeros(C, f),
             "onnx::MatMul_90": w(C, 3 * C), "attn.c_attn.bias": w(3 * C),
             "onnx::MatMul_91": w(C, C), "attn.c_proj.bias": w(C),
             "ln_2.weight": 1 + w(C), "ln_2.bias": w(C),
             "onnx::MatMul_92": w(C, 4 * C), "mlp.fc.bias": w(4 * C),
             "onnx::MatMul_93": w(4 * C, C), "mlp.proj.bias": w(C)}
    h = helper

    def const(name, value):
        return h.make_node("Constant", [], [name], name="/" + name.strip("/") + "/Constant",
                           value=numpy_helper.from_array(np.asarray(value)))

    i64 = np.int64
    nodes = [
        h.make_node("Gather", ["wte.weight", "tokens"], ["tok"], name="/wte/Gather"),
        const("pos_s", np.array([0], i64)), const("pos_e", np.array([T], i64)),
        const("pos_a", np.array([0], i64)),
        h.make_node("Slice", ["wpe.weight", "pos_s", "pos_e", "pos_a"], ["pos"],
                    name="/wpe/Slice"),
        h.make_node("Add", ["tok", "pos"], ["x0"], name="/Add"),
        h.make_node("LayerNormalization", ["x0", "ln_1.weight", "ln_1.bias"], ["n1"],
                    name="/ln_1/LayerNormalization", axis=-1, epsilon=1e-5),
        h.make_node("MatMul", ["n1", "onnx::MatMul_90"], ["qkv0"], name="/attn/c_attn/MatMul"),
        h.make_node("Add", ["attn.c_attn.bias", "qkv0"], ["qkv"], name="/attn/c_attn/Add"),
        const("split", np.array([C, C, C], i64)),
        h.make_node("Split", ["qkv", "split"], ["q0", "k0", "v0"], name="/attn/Split", axis=2),
        # (B, T, H, D) from the runtime shape, as the exporter writes it
        h.make_node("Shape", ["q0"], ["qs"], name="/attn/Shape"),
        const("zero", np.array(0, i64)),
        h.make_node("Gather", ["qs", "zero"], ["qb"], name="/attn/Gather", axis=0),
        const("ax0", np.array([0], i64)),
        h.make_node("Unsqueeze", ["qb", "ax0"], ["qb1"], name="/attn/Unsqueeze"),
        const("rest", np.array([T, H, D], i64)),
        h.make_node("Concat", ["qb1", "rest"], ["heads"], name="/attn/Concat", axis=0),
        h.make_node("Reshape", ["q0", "heads"], ["q1"], name="/attn/Reshape"),
        h.make_node("Reshape", ["k0", "heads"], ["k1"], name="/attn/Reshape_1"),
        h.make_node("Reshape", ["v0", "heads"], ["v1"], name="/attn/Reshape_2"),
        h.make_node("Transpose", ["q1"], ["q"], name="/attn/Transpose", perm=[0, 2, 1, 3]),
        h.make_node("Transpose", ["k1"], ["kt"], name="/attn/Transpose_1", perm=[0, 2, 3, 1]),
        h.make_node("Transpose", ["v1"], ["v"], name="/attn/Transpose_2", perm=[0, 2, 1, 3]),
        h.make_node("MatMul", ["q", "kt"], ["s0"], name="/attn/MatMul"),
        const("scale", np.array(math.sqrt(D), f)),
        h.make_node("Div", ["s0", "scale"], ["s1"], name="/attn/Div"),
        # the causal mask computed (folded at import): j > i
        const("r0", np.array(0, i64)), const("r1", np.array(T, i64)),
        const("r2", np.array(1, i64)),
        h.make_node("Range", ["r0", "r1", "r2"], ["ar"], name="/attn/Range"),
        const("ax1", np.array([1], i64)),
        h.make_node("Unsqueeze", ["ar", "ax0"], ["cols"], name="/attn/Unsqueeze_1"),
        h.make_node("Unsqueeze", ["ar", "ax1"], ["rows"], name="/attn/Unsqueeze_2"),
        h.make_node("Greater", ["cols", "rows"], ["mask"], name="/attn/Greater"),
        const("neg", np.array(-1e9, f)),
        h.make_node("Where", ["mask", "neg", "s1"], ["s2"], name="/attn/Where"),
        h.make_node("Softmax", ["s2"], ["att"], name="/attn/Softmax", axis=-1),
        h.make_node("MatMul", ["att", "v"], ["y0"], name="/attn/MatMul_1"),
        h.make_node("Transpose", ["y0"], ["y1"], name="/attn/Transpose_3", perm=[0, 2, 1, 3]),
        const("btc", np.array([B, T, C], i64)),
        h.make_node("Reshape", ["y1", "btc"], ["y2"], name="/attn/Reshape_3"),
        h.make_node("MatMul", ["y2", "onnx::MatMul_91"], ["y3"], name="/attn/c_proj/MatMul"),
        h.make_node("Add", ["attn.c_proj.bias", "y3"], ["y4"], name="/attn/c_proj/Add"),
        h.make_node("Add", ["x0", "y4"], ["x1"], name="/Add_1"),
        # layer norm as its decomposition (an older exporter's)
        h.make_node("ReduceMean", ["x1"], ["mu"], name="/ln_2/ReduceMean", axes=[-1]),
        h.make_node("Sub", ["x1", "mu"], ["xc"], name="/ln_2/Sub"),
        const("two", np.array(2.0, f)),
        h.make_node("Pow", ["xc", "two"], ["sq"], name="/ln_2/Pow"),
        h.make_node("ReduceMean", ["sq"], ["var"], name="/ln_2/ReduceMean_1", axes=[-1]),
        const("eps", np.array(1e-5, f)),
        h.make_node("Add", ["var", "eps"], ["ve"], name="/ln_2/Add"),
        h.make_node("Sqrt", ["ve"], ["sd"], name="/ln_2/Sqrt"),
        h.make_node("Div", ["xc", "sd"], ["xn"], name="/ln_2/Div"),
        h.make_node("Mul", ["xn", "ln_2.weight"], ["xs"], name="/ln_2/Mul"),
        h.make_node("Add", ["xs", "ln_2.bias"], ["n2"], name="/ln_2/Add_1"),
        # MLP with GELU's erf form
        h.make_node("MatMul", ["n2", "onnx::MatMul_92"], ["f0"], name="/mlp/fc/MatMul"),
        h.make_node("Add", ["mlp.fc.bias", "f0"], ["f1"], name="/mlp/fc/Add"),
        const("sqrt2", np.array(math.sqrt(2), f)),
        h.make_node("Div", ["f1", "sqrt2"], ["g0"], name="/mlp/act/Div"),
        h.make_node("Erf", ["g0"], ["g1"], name="/mlp/act/Erf"),
        const("one", np.array(1.0, f)),
        h.make_node("Add", ["g1", "one"], ["g2"], name="/mlp/act/Add"),
        h.make_node("Mul", ["f1", "g2"], ["g3"], name="/mlp/act/Mul"),
        const("half", np.array(0.5, f)),
        h.make_node("Mul", ["g3", "half"], ["g4"], name="/mlp/act/Mul_1"),
        h.make_node("MatMul", ["g4", "onnx::MatMul_93"], ["p0"], name="/mlp/proj/MatMul"),
        h.make_node("Add", ["mlp.proj.bias", "p0"], ["p1"], name="/mlp/proj/Add"),
        h.make_node("Add", ["x1", "p1"], ["x2"], name="/Add_2"),
        # a Concat and Slice of graph values, a Cast, a tied head
        h.make_node("Concat", ["x2", "x2"], ["xx"], name="/Concat", axis=-1),
        const("sl_s", np.array([C], i64)), const("sl_e", np.array([2 * C], i64)),
        const("sl_a", np.array([-1], i64)),
        h.make_node("Slice", ["xx", "sl_s", "sl_e", "sl_a"], ["x3"], name="/Slice"),
        h.make_node("Cast", ["x3"], ["x4"], name="/Cast", to=TensorProto.FLOAT),
        h.make_node("Transpose", ["wte.weight"], ["head"], name="/lm_head/Transpose",
                    perm=[1, 0]),
        h.make_node("MatMul", ["x4", "head"], ["logits"], name="/lm_head/MatMul"),
    ]
    return _model(nodes, "gpt_block",
                  [h.make_tensor_value_info("tokens", TensorProto.INT64, [B, T])],
                  [h.make_tensor_value_info("logits", TensorProto.FLOAT, [B, T, V])],
                  inits, 17, "cross_entropy")


SEEDS = {"mlp": seed_mlp, "regressor": seed_regressor, "cnn": seed_cnn,
         "transformer": seed_transformer}


def write_seeds():
    os.makedirs(CORPUS, exist_ok=True)
    for name, make in SEEDS.items():
        data = make().SerializeToString()
        path = os.path.join(CORPUS, name + ".onnx")
        with open(path, "wb") as f:
            f.write(data)
        print(f"{path}: {len(data)} bytes")


def load_seeds():
    """[(name, bytes)]: the seeds built here, then any other .onnx file of the
    corpus folder (the same bytes once)."""
    seeds, seen = [], set()
    for name, make in SEEDS.items():
        data = make().SerializeToString()
        seeds.append((name, data))
        seen.add(data)
    if os.path.isdir(CORPUS):
        for fn in sorted(os.listdir(CORPUS)):
            if fn.startswith(".") or not fn.endswith(".onnx"):
                continue
            with open(os.path.join(CORPUS, fn), "rb") as f:
                data = f.read()
            if data not in seen:
                seeds.append((fn, data))
                seen.add(data)
    return seeds


# ---------------------------------------------------------------------------
# Mutations
# ---------------------------------------------------------------------------

# Ops the importer maps or folds, and a few it does not.
KNOWN_OPS = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "Greater",
             "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Gelu",
             "LayerNormalization", "Shape", "Identity", "Dropout", "Pow", "Gemm",
             "MatMul", "Gather", "Softmax", "LogSoftmax", "Reshape", "Flatten",
             "Squeeze", "Unsqueeze", "Transpose", "ReduceMean", "ReduceSum", "Concat",
             "Split", "Slice", "Cast", "Where", "Conv", "MaxPool", "AveragePool",
             "BatchNormalization", "Constant", "ConstantOfShape", "Range", "Expand",
             "Not", "Erf"]
OTHER_OPS = ["InstanceNormalization", "Foo", "", "Loop", "If", "ConvTranspose",
             "Size", "LessOrEqual"]
ATTR_NAMES = ["axis", "axes", "perm", "transA", "transB", "alpha", "beta", "epsilon",
              "momentum", "keepdims", "kernel_shape", "pads", "strides", "dilations",
              "group", "ceil_mode", "auto_pad", "storage_order", "count_include_pad",
              "to", "split", "approximate", "value", "ratio", "allowzero",
              "training_mode", "value_float", "value_ints"]
INTERESTING_INTS = [0, 1, -1, 2, 3, -2, 4, 7, 16, 255, 2 ** 31 - 1, -2 ** 31,
                    2 ** 62, -2 ** 62, 2 ** 63 - 1, -2 ** 63]
INTERESTING_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-5, 1e30, -1e30,
                      float("nan"), float("inf"), float("-inf"), 3.4e38]


def rand_int(rng):
    return rng.choice(INTERESTING_INTS) if rng.random() < 0.6 else rng.randint(-8, 64)


def rand_dim(rng):
    return rng.choice([0, -1, 1, 2, 3, 5, 2 ** 31, 2 ** 40, 2 ** 62, -7,
                       rng.randint(0, 40)])


def rand_name(rng, m):
    """A value name: often one of the graph's (inputs, outputs of nodes,
    initializers), else a new one or the empty (absent optional input)."""
    g = m.graph
    names = ([i.name for i in g.input] + [o for n in g.node for o in n.output]
             + [i.name for i in g.initializer] + [o.name for o in g.output])
    r = rng.random()
    if names and r < 0.75:
        return rng.choice(names)
    if r < 0.85:
        return ""
    return rng.choice(["unknown", "nowhere_%d" % rng.randint(0, 9), "x", "tokens",
                       "\u00e9", "a" * 300])


def _value_infos(m):
    g = m.graph
    return list(g.input) + list(g.output) + list(g.value_info)


def mut_dim(rng, m):
    vis = [v for v in _value_infos(m) if v.type.HasField("tensor_type")]
    if not vis:
        return None
    vi = rng.choice(vis)
    shape = vi.type.tensor_type.shape
    r = rng.random()
    if shape.dim and r < 0.35:  # a small size: a shape the walk may still take
        d = rng.choice(shape.dim)
        d.dim_value = rng.choice([1, 2, 3, 4, 5, 6, 8, 16])
        return f"dim of {vi.name!r} = {d.dim_value}"
    r = rng.random()
    if not shape.dim or r < 0.15:
        shape.dim.add().dim_value = rand_dim(rng)
        return f"dim added to {vi.name!r}"
    d = rng.choice(shape.dim)
    if r < 0.3:
        del shape.dim[rng.randrange(len(shape.dim))]
        return f"dim removed from {vi.name!r}"
    if r < 0.4:
        d.dim_param = rng.choice(["batch", "N", ""])
        return f"dim of {vi.name!r} symbolic"
    if r < 0.45:
        vi.type.tensor_type.ClearField("shape")
        return f"shape of {vi.name!r} cleared"
    d.dim_value = rand_dim(rng)
    return f"dim of {vi.name!r} = {d.dim_value}"


def mut_elem_type(rng, m):
    vis = [v for v in _value_infos(m) if v.type.HasField("tensor_type")]
    if not vis:
        return None
    vi = rng.choice(vis)
    t = rng.choice([0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 16, 17, 99])
    vi.type.tensor_type.elem_type = t
    return f"elem_type of {vi.name!r} = {t}"


# Ops of one arity and kind: a swap within a class keeps the graph wired.
OP_CLASSES = [["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Gelu", "Identity",
               "Dropout", "Softmax", "LogSoftmax", "Erf", "Not", "Cast", "Flatten",
               "Transpose", "Shape"],
              ["Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "Greater", "Pow",
               "MatMul", "Gather", "Reshape", "Unsqueeze", "Squeeze", "Expand"],
              ["ReduceMean", "ReduceSum"], ["MaxPool", "AveragePool"], ["Gemm", "Conv"]]


def mut_op_type(rng, m):
    if not m.graph.node:
        return None
    n = rng.choice(m.graph.node)
    old = n.op_type
    same = [c for c in OP_CLASSES if old in c]
    r = rng.random()
    if same and r < 0.5:
        n.op_type = rng.choice(same[0])
    else:
        n.op_type = rng.choice(KNOWN_OPS) if r < 0.93 else rng.choice(OTHER_OPS)
    return f"op {n.name or old}: {old} -> {n.op_type}"


def _set_attr_value(rng, a):
    from onnx import AttributeProto as AP
    if a.type == AP.INT and rng.random() < 0.5:
        a.i = rng.randint(-4, 4)  # an axis / flag in range, or nearly
    elif a.type == AP.INTS and a.ints and rng.random() < 0.4:
        vals = list(a.ints)
        vals[rng.randrange(len(vals))] = rng.randint(-4, 4)
        if rng.random() < 0.3:
            rng.shuffle(vals)  # a perm stays one
        del a.ints[:]
        a.ints.extend(vals)
    elif a.type == AP.INT:
        a.i = rand_int(rng)
    elif a.type == AP.FLOAT:
        a.f = rng.choice(INTERESTING_FLOATS) if rng.random() < 0.7 else rng.uniform(-5, 5)
    elif a.type == AP.INTS:
        vals = list(a.ints)
        r = rng.random()
        if r < 0.25 or not vals:
            vals.append(rand_int(rng))
        elif r < 0.5:
            del vals[rng.randrange(len(vals))]
        elif r < 0.6:
            vals = []
        elif r < 0.7:
            rng.shuffle(vals)
        else:
            vals[rng.randrange(len(vals))] = rand_int(rng)
        del a.ints[:]
        a.ints.extend(vals)
    elif a.type == AP.FLOATS:
        a.floats.append(rng.choice(INTERESTING_FLOATS))
    elif a.type == AP.STRING:
        a.s = rng.choice([b"NOTSET", b"SAME_UPPER", b"VALID", b"tanh", b"none", b"",
                          b"\xff\xfe"])
    elif a.type == AP.TENSOR:
        mut_tensor(rng, a.t, f"attribute {a.name}")
    else:
        a.i = rand_int(rng)


def mut_attr(rng, m):
    from onnx import AttributeProto as AP
    nodes = list(m.graph.node)
    if not nodes:
        return None
    n = rng.choice(nodes)
    where = n.name or n.op_type
    r = rng.random()
    if not n.attribute or r < 0.2:  # a new attribute
        name = rng.choice(ATTR_NAMES)
        a = n.attribute.add()
        a.name = name
        a.type = rng.choice([AP.INT, AP.INTS, AP.FLOAT, AP.STRING, AP.FLOATS])
        _set_attr_value(rng, a)
        return f"{where}: attribute {name} added"
    a = rng.choice(n.attribute)
    if r < 0.35:
        n.attribute.remove(a)
        return f"{where}: attribute {a.name} removed"
    if r < 0.45:  # the type field changed, the value kept (or another added)
        a.type = rng.choice([AP.INT, AP.FLOAT, AP.INTS, AP.FLOATS, AP.STRING,
                             AP.TENSOR, AP.GRAPH, 0])
        return f"{where}: attribute {a.name} type {a.type}"
    if r < 0.5:
        dup = n.attribute.add()
        dup.CopyFrom(a)
        _set_attr_value(rng, dup)
        return f"{where}: attribute {a.name} twice"
    _set_attr_value(rng, a)
    return f"{where}: attribute {a.name} value changed"


def mut_node_input(rng, m):
    nodes = list(m.graph.node)
    if not nodes:
        return None
    k = rng.randrange(len(nodes))
    n = nodes[k]
    where = n.name or n.op_type
    r = rng.random()
    if r < 0.15 or not n.input:
        n.input.append(rand_name(rng, m))
        return f"{where}: input added"
    if r < 0.3:
        del n.input[rng.randrange(len(n.input))]
        return f"{where}: input dropped"
    if r < 0.4:
        n.input.append(rng.choice(n.input))
        return f"{where}: input duplicated"
    j = rng.randrange(len(n.input))
    later = [o for x in nodes[k:] for o in x.output]
    if r < 0.55 and later:
        n.input[j] = rng.choice(later)  # a cycle or a use before definition
        return f"{where}: input {j} = a later output {n.input[j]!r}"
    n.input[j] = rand_name(rng, m)
    return f"{where}: input {j} = {n.input[j][:40]!r}"


def mut_node_output(rng, m):
    nodes = list(m.graph.node)
    if not nodes:
        return None
    n = rng.choice(nodes)
    where = n.name or n.op_type
    r = rng.random()
    if r < 0.25 and n.output:
        del n.output[rng.randrange(len(n.output))]
        return f"{where}: output dropped"
    if r < 0.45:
        n.output.append(rand_name(rng, m))
        return f"{where}: output added"
    if not n.output:
        return None
    j = rng.randrange(len(n.output))
    n.output[j] = rand_name(rng, m)  # often a name defined elsewhere too
    return f"{where}: output {j} = {n.output[j][:40]!r}"


def _set_nodes(m, nodes):
    del m.graph.node[:]
    m.graph.node.extend(nodes)


def mut_nodes(rng, m):
    import onnx
    nodes = [onnx.NodeProto() for _ in m.graph.node]
    for dst, src in zip(nodes, m.graph.node):
        dst.CopyFrom(src)
    if not nodes:
        return None
    r = rng.random()
    k = rng.randrange(len(nodes))
    if r < 0.3:
        del nodes[k]
        what = f"node {k} deleted"
    elif r < 0.5:
        dup = onnx.NodeProto()
        dup.CopyFrom(nodes[k])
        nodes.insert(rng.randrange(len(nodes) + 1), dup)
        what = f"node {k} duplicated"
    elif r < 0.7:
        j = rng.randrange(len(nodes))
        nodes[k], nodes[j] = nodes[j], nodes[k]
        what = f"nodes {k} and {j} swapped"
    elif r < 0.8:
        rng.shuffle(nodes)
        what = "nodes shuffled"
    else:
        n = nodes[k]
        n.name = rng.choice(["", nodes[rng.randrange(len(nodes))].name, "/a/b/c",
                             "/" * 5, "x" * 200])
        what = f"node {k} renamed {n.name[:20]!r}"
    _set_nodes(m, nodes)
    return what


def mut_splice(rng, m, donors):
    """A node copied from another seed (with its attributes), its inputs
    rewired to values of this graph."""
    import onnx
    donor = onnx.load_model_from_string(rng.choice(donors))
    if not donor.graph.node or not m.graph.node:
        return None
    src = rng.choice(donor.graph.node)
    n = onnx.NodeProto()
    n.CopyFrom(src)
    for j in range(len(n.input)):
        if rng.random() < 0.8:
            n.input[j] = rand_name(rng, m)
    nodes = list(m.graph.node)
    k = rng.randrange(len(nodes) + 1)
    if rng.random() < 0.5 and k < len(nodes) and nodes[k].output:
        n.output[0:1] = [nodes[k].output[0] + "_s"]
        # the next node reads the spliced one
        if k + 1 < len(nodes) and nodes[k + 1].input:
            nodes[k + 1].input[0] = n.output[0]
    copies = [onnx.NodeProto() for _ in nodes]
    for dst, s in zip(copies, nodes):
        dst.CopyFrom(s)
    copies.insert(k, n)
    _set_nodes(m, copies)
    return f"node {src.op_type} spliced in at {k}"


def _values(rng, dtype, n):
    """n values of numpy dtype: small integers (shapes, axes, -1, 0) or floats
    (normal, 0, 1, NaN, inf, huge)."""
    import numpy as np
    kind = np.dtype(dtype).kind
    if kind in "iu":
        pool = [0, 1, 2, 3, 4, 5, 8, -1, -2, 16, 2 ** 31 - 1]
        vals = [rng.choice(pool) if rng.random() < 0.8 else rng.randint(-3, 40)
                for _ in range(n)]
        if kind == "u":
            vals = [abs(v) for v in vals]
        return np.array(vals, dtype=dtype)
    if kind == "b":
        return np.array([rng.random() < 0.5 for _ in range(n)])
    pool = [0.0, 1.0, -1.0, 0.5, 2.0, float("nan"), float("inf"), 1e30]
    vals = [rng.gauss(0, 1) if rng.random() < 0.85 else rng.choice(pool) for _ in range(n)]
    return np.array(vals, dtype=dtype)


def mut_tensor_consistent(rng, t, where):
    """New dims (the rank kept or one off, small sizes) and data that fills
    them, of the same data type: reaches the walk rather than the checks."""
    import numpy as np
    from onnx import numpy_helper
    try:
        old = numpy_helper.to_array(t)
    except Exception:  # noqa: BLE001 - an earlier mutation broke it
        return None
    dims = list(old.shape)
    r = rng.random()
    if r < 0.3 and dims:
        dims[rng.randrange(len(dims))] = rng.choice([0, 1, 2, 3, 4, 5, 8, 16])
    elif r < 0.45:
        dims.insert(rng.randrange(len(dims) + 1), rng.choice([1, 2, 3]))
    elif r < 0.6 and dims:
        del dims[rng.randrange(len(dims))]
    # else: the same dims, new values
    if np.prod(dims, dtype=np.int64) > 4096:
        return None
    new = numpy_helper.from_array(_values(rng, old.dtype, int(np.prod(dims, dtype=np.int64)))
                                  .reshape(dims), t.name)
    t.CopyFrom(new)
    return f"{where}: dims {dims}, new values"


def mut_tensor(rng, t, where):
    """A TensorProto (an initializer or a Constant's value)."""
    if rng.random() < 0.4:
        what = mut_tensor_consistent(rng, t, where)
        if what:
            return what
    r = rng.random()
    if r < 0.25:
        if t.raw_data:
            data = t.raw_data
            if rng.random() < 0.5:
                t.raw_data = data[:rng.randrange(len(data) + 1)]
            else:
                t.raw_data = data + bytes(rng.randrange(1, 64))
            return f"{where}: raw_data {len(data)} -> {len(t.raw_data)} bytes"
        t.float_data.append(1.0)
        return f"{where}: a float_data value more"
    if r < 0.55:
        dims = list(t.dims)
        rr = rng.random()
        if rr < 0.3 or not dims:
            dims.insert(rng.randrange(len(dims) + 1), rand_dim(rng))
        elif rr < 0.5:
            del dims[rng.randrange(len(dims))]
        elif rr < 0.6:
            dims = dims[::-1]
        else:
            dims[rng.randrange(len(dims))] = rand_dim(rng)
        del t.dims[:]
        t.dims.extend(dims)
        return f"{where}: dims {dims}"
    if r < 0.7:
        t.data_type = rng.choice([0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 99])
        return f"{where}: data_type {t.data_type}"
    if r < 0.8 and t.raw_data:  # raw data moved to a typed field (wrong count)
        n = rng.randrange(0, 40)
        t.ClearField("raw_data")
        if rng.random() < 0.5:
            t.float_data.extend([0.5] * n)
        else:
            t.int64_data.extend([3] * n)
        return f"{where}: raw_data -> {n} typed values"
    if r < 0.9 and t.raw_data:  # new bytes: NaN, Inf, huge
        data = bytearray(t.raw_data)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i] = rng.choice([0x7f, 0xff, 0x80, 0x00, 0xc0])
        t.raw_data = bytes(data)
        return f"{where}: raw bytes changed"
    if r < 0.95:
        t.data_location = 1  # EXTERNAL
        e = t.external_data.add()
        e.key = "location"
        e.value = rng.choice(["missing.bin", "", ".", "../missing.bin", "in.onnx",
                              "/dev/zero", "a/../../../etc/hostname", "fault.txt"])
        if rng.random() < 0.5:
            e = t.external_data.add()
            e.key = rng.choice(["offset", "length"])
            e.value = rng.choice(["0", "-1", "99999999", "x", "4"])
        return f"{where}: external data {t.external_data[0].value!r}"
    t.name = rng.choice(["", "x", "logits", t.name + "_"])
    return f"{where}: renamed {t.name!r}"


def mut_initializer(rng, m):
    inits = list(m.graph.initializer)
    if not inits:
        return None
    r = rng.random()
    if r < 0.1:
        k = rng.randrange(len(inits))
        del m.graph.initializer[k]
        return f"initializer {inits[k].name!r} deleted"
    if r < 0.15:
        dup = m.graph.initializer.add()
        dup.CopyFrom(rng.choice(inits))
        return f"initializer {dup.name!r} duplicated"
    t = rng.choice(m.graph.initializer)
    return mut_tensor(rng, t, f"initializer {t.name!r}")


def mut_constant(rng, m):
    consts = [n for n in m.graph.node if n.op_type == "Constant"
              and any(a.type == 4 for a in n.attribute)]
    if not consts:
        return None
    n = rng.choice(consts)
    a = next(a for a in n.attribute if a.type == 4)
    return mut_tensor(rng, a.t, f"Constant {n.name or n.output[0]!r}")


def mut_graph_io(rng, m):
    g = m.graph
    r = rng.random()
    if r < 0.2 and g.output:
        o = rng.choice(g.output)
        o.name = rand_name(rng, m)
        return f"output renamed {o.name[:40]!r}"
    if r < 0.3 and g.output:
        del g.output[rng.randrange(len(g.output))]
        return "an output removed"
    if r < 0.4:
        o = g.output.add()
        o.CopyFrom(rng.choice(g.output) if g.output and rng.random() < 0.5
                   else (rng.choice(g.input) if g.input else o))
        o.name = rand_name(rng, m)
        return f"output added {o.name[:40]!r}"
    if r < 0.55 and g.input:
        del g.input[rng.randrange(len(g.input))]
        return "an input removed"
    if r < 0.7 and g.input:
        i = g.input.add()
        i.CopyFrom(rng.choice(g.input))
        if rng.random() < 0.5:
            i.name = rand_name(rng, m)  # maybe an initializer's: a graph input
        return f"input added {i.name[:40]!r}"
    if r < 0.8 and g.input:
        i = rng.choice(g.input)
        i.name = rand_name(rng, m)
        return f"input renamed {i.name[:40]!r}"
    if r < 0.9:  # a value_info for some value, with a random shape
        from onnx import helper
        name = rand_name(rng, m)
        vi = helper.make_tensor_value_info(
            name, rng.choice([1, 7, 9, 11]),
            [rand_dim(rng) for _ in range(rng.randint(0, 4))])
        g.value_info.append(vi)
        return f"value_info {name[:40]!r}"
    g.name = rng.choice(["", "x", "\u00e9" * 3, "a b/c"])
    return f"graph name {g.name!r}"


def mut_opset(rng, m):
    r = rng.random()
    if r < 0.7 and m.opset_import:
        op = rng.choice(m.opset_import)
        op.version = rng.choice([1, 6, 7, 9, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                 99, 0, -1])
        return f"opset {op.version}"
    if r < 0.8 and m.opset_import:
        op = rng.choice(m.opset_import)
        op.domain = rng.choice(["ai.onnx.ml", "com.microsoft", "x"])
        return f"opset domain {op.domain!r}"
    if r < 0.9:
        m.ir_version = rng.choice([0, 1, 3, 4, 7, 8, 9, 10, 99])
        return f"ir_version {m.ir_version}"
    if m.graph.node:
        n = rng.choice(m.graph.node)
        n.domain = rng.choice(["com.microsoft", "ai.onnx", "x"])
        return f"node {n.name} domain {n.domain!r}"
    return None


STRUCTURED = [(mut_dim, 3), (mut_elem_type, 2), (mut_op_type, 3), (mut_attr, 5),
              (mut_node_input, 4), (mut_node_output, 2), (mut_nodes, 3),
              (mut_initializer, 4), (mut_constant, 2), (mut_graph_io, 2),
              (mut_opset, 1), (mut_splice, 2)]


def mutate_bytes(rng, data):
    data = bytearray(data)
    if not data:
        return bytes(rng.randrange(256) for _ in range(8)), "random bytes"
    r = rng.random()
    if r < 0.4:
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        return bytes(data), "bit flips"
    if r < 0.55:
        n = rng.randrange(len(data))
        return bytes(data[:n]), f"truncated to {n}"
    if r < 0.75:
        i = rng.randrange(len(data) + 1)
        ins = bytes(rng.choice([0, 0xff, 0x7f, 0x80, rng.randrange(256)])
                    for _ in range(rng.randint(1, 16)))
        return bytes(data[:i] + ins + data[i:]), f"{len(ins)} bytes inserted at {i}"
    if r < 0.9:
        i = rng.randrange(len(data))
        j = min(len(data), i + rng.randint(1, 64))
        k = rng.randrange(len(data) + 1)
        return bytes(data[:k] + data[i:j] + data[k:]), "a chunk duplicated"
    i = rng.randrange(len(data))
    data[i] = rng.choice([0, 0xff, 0x7f, 0x80, 0x01])
    return bytes(data), f"byte {i} set"


def make_mutant(rng, parent, donors):
    """(bytes, [mutation descriptions])."""
    import onnx
    m = onnx.ModelProto()
    m.ParseFromString(parent)
    done = []
    funcs, weights = zip(*STRUCTURED)
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 4, 6])):
        f = rng.choices(funcs, weights)[0]
        try:
            what = f(rng, m, donors) if f is mut_splice else f(rng, m)
        except (ValueError, TypeError, IndexError, OverflowError) as e:
            what = None  # a value protobuf refuses (out of range): skipped
            del e
        if what:
            done.append(what)
    try:
        data = m.SerializeToString()
    except Exception as e:  # noqa: BLE001 - e.g. a string field protobuf refuses
        data = parent
        done.append(f"(serialization of the mutant failed: {type(e).__name__})")
    if rng.random() < 0.1 or not done:
        for _ in range(rng.randint(1, 3)):
            data, what = mutate_bytes(rng, data)
            done.append(what)
    return data, done


# ---------------------------------------------------------------------------
# The worker: imports one input at a time
# ---------------------------------------------------------------------------

OPTIMIZERS = ["sgd", "sgd_momentum", "adamw"]


def _optimizer(kind):
    import tcc
    if kind == "sgd":
        return tcc.SGD(lr=0.1)
    if kind == "sgd_momentum":
        return tcc.SGD(lr=0.05, momentum=0.9, weight_decay=1e-4)
    return tcc.AdamW(lr=1e-3, weight_decay=0.01)


def import_one(path, loss, opt, no_decay=(), grad_clip=0.0):
    """('accepted', summary) | ('clean', message) | ('finding', message,
    traceback): from_onnx on `path`, then the model's serialization."""
    from tcc.model import TccError
    from tcc.onnx_import import from_onnx
    try:
        model, weights = from_onnx(path, loss=loss, optimizer=_optimizer(opt),
                                   no_decay=no_decay, grad_clip=grad_clip)
    except (TccError, OSError, ValueError) as e:
        if isinstance(e, TccError):
            return ("clean", f"{type(e).__name__}: {e}")
        # A plain ValueError / OSError: main() prints it in one line, but it
        # names neither node nor value: counted apart ("unnamed").
        return ("unnamed", f"{type(e).__name__}: {e}", traceback.format_exc())
    except BaseException as e:  # noqa: BLE001 - a finding
        return ("finding", f"{type(e).__name__}: {e}", traceback.format_exc())
    try:
        p = model.proto()
        data = p.SerializeToString()
    except BaseException as e:  # noqa: BLE001
        return ("finding", f"model.proto() / serialization: {type(e).__name__}: {e}",
                traceback.format_exc())
    return ("accepted", f"{len(p.params)} params, {len(p.nodes)} nodes, "
            f"{len(data)} bytes, {len(weights)} weights")


def _worker(conn, scratch, mem_limit):
    import faulthandler
    import warnings
    warnings.simplefilter("ignore")  # numpy overflow, protobuf end-group notes
    # A crash of native code (onnx, protobuf, numpy): its Python stack here.
    fault = open(os.path.join(scratch, "fault.txt"), "w")
    faulthandler.enable(fault)
    try:
        import resource
        if mem_limit:
            resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))
    except (ImportError, ValueError, OSError):
        pass
    os.makedirs(scratch, exist_ok=True)
    path = os.path.join(scratch, "in.onnx")
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        data, loss, opt, no_decay, grad_clip = job
        with open(path, "wb") as f:
            f.write(data)
        fault.seek(0)
        fault.truncate()
        try:
            res = import_one(path, loss, opt, no_decay, grad_clip)
        except BaseException as e:  # noqa: BLE001 - in the classification itself
            res = ("finding", f"{type(e).__name__}: {e}", traceback.format_exc())
        conn.send(res)


class Worker:
    """A forked process importing one input at a time, restarted after a
    crash or a hang."""

    def __init__(self, timeout, mem_limit):
        self.timeout, self.mem_limit = timeout, mem_limit
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) \
            else tempfile.gettempdir()
        self.scratch = tempfile.mkdtemp(prefix=f"tcc-fuzz-onnx-{os.getpid()}-", dir=base)
        self.ctx = mp.get_context("fork")
        self.proc = None

    def start(self):
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker,
                                     args=(child, self.scratch, self.mem_limit), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent

    def stop(self, kill=False):
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except (OSError, EOFError):
                pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()
        self.proc = None

    def run(self, data, loss, opt, no_decay=(), grad_clip=0.0):
        if self.proc is None:
            self.start()
        t0 = time.monotonic()
        try:
            self.conn.send((data, loss, opt, tuple(no_decay), grad_clip))
            if self.conn.poll(self.timeout):
                return self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            self.proc.join(5)
            code = self.proc.exitcode
            self.stop(kill=True)
            try:
                with open(os.path.join(self.scratch, "fault.txt")) as f:
                    stack = f.read()
            except OSError:
                stack = ""
            # faulthandler: most recent call first; made a traceback's order
            frames = [ln.strip() for ln in stack.splitlines() if ln.strip().startswith("File ")]
            tb = "".join(f"  {ln}\n" for ln in reversed(frames))
            return ("finding", f"the worker died (exit status {code}; a signal if "
                    "negative) after %.1f s" % (time.monotonic() - t0),
                    stack and f"{stack}\nas a traceback:\n{tb}")
        self.stop(kill=True)
        return ("finding", f"hang: no result within {self.timeout:g} s", "")

    def close(self):
        self.stop()
        shutil.rmtree(self.scratch, ignore_errors=True)


# ---------------------------------------------------------------------------
# The campaign
# ---------------------------------------------------------------------------

def signature(res):
    """What makes two findings the same bug: the exception type and the last
    frame of the traceback."""
    kind, msg = res[0], res[1]
    tb = res[2] if len(res) > 2 else ""
    frames = [ln.strip() for ln in tb.splitlines() if ln.strip().startswith("File ")]
    where = frames[-1] if frames else ""
    if msg.startswith("hang") or msg.startswith("the worker died"):
        return f"{kind}: {msg.split(' after ')[0]} at {where}"
    return f"{kind}: {msg.split(':')[0]} at {where}"


class Campaign:
    def __init__(self, args, out):
        self.args, self.out = args, out
        self.stats = {"executions": 0, "accepted": 0, "clean": 0, "unnamed": 0,
                      "finding": 0}
        self.sigs = {}
        self.failed = []
        self.clean_kinds = {}

    def record(self, data, res, info):
        kind = res[0]
        self.stats["executions"] += 1
        self.stats[kind] += 1
        bad = kind == "finding" or (kind == "unnamed" and self.args.strict)
        if kind == "clean":
            import re
            key = re.sub(r"'[^']*'|\"[^\"]*\"|\d+|node \S+|\[.*?\]|\(.*?\)", "_",
                         re.sub(r"/\S*\.onnx", "M", res[1]))[:110]
            self.clean_kinds[key] = self.clean_kinds.get(key, 0) + 1
        if kind not in ("finding", "unnamed"):
            return False
        sig = signature(res)
        n = self.sigs.get(sig, 0)
        self.sigs[sig] = n + 1
        if not bad and n >= 1:
            return False
        if n < 3:  # the first few inputs of each kind of finding
            h = hashlib.sha1(data).hexdigest()[:12]
            base = os.path.join(self.out, f"{kind}-{h}")
            with open(base + ".onnx", "wb") as f:
                f.write(data)
            with open(base + ".txt", "w") as f:
                f.write(f"{res[1]}\n\n{info}\n\n{res[2] if len(res) > 2 else ''}")
            if n == 0:
                print(f"{'FINDING' if bad else 'unnamed'}: {res[1][:300]}\n  "
                      f"{info}\n  saved: {base}.onnx", flush=True)
        if bad:
            self.failed.append(sig)
        return bad


def _reductions(m):
    """Smaller variants of ModelProto `m` (fresh copies), largest cuts first."""
    import onnx
    g = m.graph

    def variant(edit):
        c = onnx.ModelProto()
        c.CopyFrom(m)
        edit(c)
        return c

    def drop(field, k):
        return lambda c: c.graph.ClearField(field) if k is None \
            else c.graph.__getattribute__(field).__delitem__(k)

    for field in ("value_info", "initializer", "node", "input", "output"):
        if len(getattr(g, field)) > 1:
            half = len(getattr(g, field)) // 2
            yield variant(lambda c, f=field, h=half: getattr(c.graph, f).__delitem__(slice(h)))
            yield variant(lambda c, f=field, h=half: getattr(c.graph, f).__delitem__(
                slice(h, None)))
    for field in ("value_info", "node", "initializer", "input", "output"):
        for k in reversed(range(len(getattr(g, field)))):
            yield variant(drop(field, k))
    for k, n in enumerate(g.node):
        for j in reversed(range(len(n.attribute))):
            yield variant(lambda c, k=k, j=j: c.graph.node[k].attribute.__delitem__(j))
        for j in reversed(range(len(n.input))):
            yield variant(lambda c, k=k, j=j: c.graph.node[k].input.__delitem__(j))
        for j in reversed(range(len(n.output))):
            yield variant(lambda c, k=k, j=j: c.graph.node[k].output.__delitem__(j))
        if n.name:
            yield variant(lambda c, k=k: c.graph.node[k].ClearField("name"))
    if m.metadata_props or m.producer_name or g.doc_string or g.name:
        yield variant(lambda c: (c.ClearField("metadata_props"),
                                 c.ClearField("producer_name"), c.graph.ClearField("name")))


def minimize(worker, data, loss, opt="sgd"):
    """A smaller input with the same finding signature (structure first when
    the bytes parse, else byte chunks)."""
    import onnx
    want = signature(worker.run(data, loss, opt))
    print(f"minimizing {len(data)} bytes: {want}", flush=True)

    def same(d):
        res = worker.run(d, loss, opt)
        return res[0] in ("finding", "unnamed") and signature(res) == want

    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
        parsed = m.SerializeToString() == data or same(m.SerializeToString())
    except Exception:  # noqa: BLE001
        parsed = False
    if parsed:
        progress = True
        while progress:
            progress = False
            for c in _reductions(m):
                d = c.SerializeToString()
                if len(d) < len(m.SerializeToString()) and same(d):
                    m, progress = c, True
                    break
        data = m.SerializeToString()
    chunk = max(1, len(data) // 2)
    while chunk >= 1:
        i, cut = 0, False
        while i < len(data):
            d = data[:i] + data[i + chunk:]
            if d and same(d):
                data, cut = d, True
            else:
                i += chunk
        if not cut:
            chunk //= 2
    print(f"minimized to {len(data)} bytes", flush=True)
    return data


def pick_loss(rng, data):
    """The seed's loss (its metadata), sometimes the other."""
    loss = "cross_entropy"
    if b"tcc_fuzz_loss" in data:
        loss = "mse" if b"\x12\x03mse" in data else "cross_entropy"
    if rng.random() < 0.2:
        loss = "mse" if loss == "cross_entropy" else "cross_entropy"
    return loss


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seconds", nargs="?", type=float, default=30.0)
    ap.add_argument("--seed", type=int, help="default: from the time (printed)")
    ap.add_argument("--out", help="where findings go (default: a new temporary dir)")
    ap.add_argument("--replay-only", action="store_true",
                    help="only import the crashes/ folder (and the seeds)")
    ap.add_argument("--write-seeds", action="store_true",
                    help=f"write the seed models to {os.path.relpath(CORPUS)} and exit")
    ap.add_argument("--timeout", type=float, default=10.0,
                    help="seconds one input may take (default 10)")
    ap.add_argument("--mem-limit-mb", type=int, default=4096,
                    help="the worker's address-space limit (default 4096; 0: none)")
    ap.add_argument("--strict", action="store_true",
                    help="also fail on a plain ValueError/OSError (one that is not "
                    "a TccError: it names no node)")
    ap.add_argument("--stats", action="store_true",
                    help="also print the most frequent clean errors (where inputs stop)")
    ap.add_argument("--replay", nargs="*", metavar="FILE",
                    help="import these files (each with both losses) and exit")
    ap.add_argument("--minimize", nargs=2, metavar=("FILE", "OUT"),
                    help="write to OUT a smaller input than FILE that fails the same way")
    ap.add_argument("--loss", default="cross_entropy", choices=("cross_entropy", "mse"),
                    help="the loss for --minimize (default cross_entropy)")
    args = ap.parse_args(argv)
    if args.write_seeds:
        write_seeds()
        return 0
    if args.seconds < 0:
        ap.error("SECONDS must be >= 0")
    if args.minimize:
        worker = Worker(args.timeout, args.mem_limit_mb << 20)
        try:
            with open(args.minimize[0], "rb") as f:
                data = minimize(worker, f.read(), args.loss)
        finally:
            worker.close()
        with open(args.minimize[1], "wb") as f:
            f.write(data)
        return 0
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % (2 ** 31)
    out = args.out or tempfile.mkdtemp(prefix="tcc-fuzz-onnx-findings-")
    os.makedirs(out, exist_ok=True)
    print(f"{TARGET}: seed {seed} (reproduce with --seed {seed}), findings in {out}",
          flush=True)
    camp = Campaign(args, out)
    worker = Worker(args.timeout, args.mem_limit_mb << 20)
    t_start = time.monotonic()
    try:
        # 1. the seeds are accepted; every input that ever failed is not a finding
        replay = []
        if args.replay is not None:
            replay = [(p, open(p, "rb").read()) for p in args.replay]
        else:
            if os.path.isdir(CRASHES):
                for fn in sorted(os.listdir(CRASHES)):
                    p = os.path.join(CRASHES, fn)
                    if not fn.startswith(".") and os.path.isfile(p) \
                            and fn.endswith(".onnx"):
                        replay.append((p, open(p, "rb").read()))
        for p, data in replay:
            for loss in ("cross_entropy", "mse"):
                res = worker.run(data, loss, "sgd")
                print(f"replay {os.path.relpath(os.path.abspath(p), REPO)} ({loss}): {res[0]}: "
                      f"{res[1][:200]}", flush=True)
                camp.record(data, res, f"replay of {p} with loss {loss}")
        if args.replay is not None:
            args.seconds = 0
        seeds = load_seeds()
        pool = []
        for name, data in seeds:
            res = worker.run(data, pick_loss(random.Random(0), data), "sgd")
            if res[0] != "accepted":
                print(f"seed {name} is not accepted: {res[0]}: {res[1][:300]}", flush=True)
                camp.record(data, res, f"seed {name}")
                if res[0] != "finding":
                    camp.failed.append(f"seed {name} not accepted")
            else:
                camp.stats["executions"] += 1
                camp.stats["accepted"] += 1
            pool.append(data)
        donors = [d for _, d in seeds]
        t_fuzz = time.monotonic()
        i = 0
        last_report = t_fuzz
        while not args.replay_only and time.monotonic() - t_fuzz < args.seconds:
            rng = random.Random(seed * 1000003 + i)
            parent = rng.choice(pool) if rng.random() < 0.5 else rng.choice(donors)
            data, done = make_mutant(rng, parent, donors)
            loss = pick_loss(rng, data)
            opt = rng.choice(OPTIMIZERS)
            no_decay = tuple(x for x in ("bias", "norm", "embedding") if rng.random() < 0.2)
            grad_clip = rng.choice([0.0, 0.0, 1.0])
            res = worker.run(data, loss, opt, no_decay, grad_clip)
            info = (f"seed {seed}, iteration {i}, loss {loss}, optimizer {opt}, "
                    f"no_decay {no_decay}, grad_clip {grad_clip}; mutations: "
                    + "; ".join(done))
            camp.record(data, res, info)
            if res[0] == "accepted" and data not in pool and len(data) < 200000:
                if len(pool) < 256:
                    pool.append(data)
                else:
                    pool[rng.randrange(len(seeds), len(pool))] = data
            i += 1
            now = time.monotonic()
            if now - last_report >= 60:
                last_report = now
                s = camp.stats
                print(f"  {now - t_fuzz:.0f} s: {s['executions']} executions, "
                      f"{s['accepted']} accepted, {s['clean']} clean, {s['unnamed']} "
                      f"unnamed, {s['finding']} findings, pool {len(pool)}", flush=True)
    finally:
        worker.close()
    elapsed = time.monotonic() - t_start
    s = camp.stats
    if args.stats:
        print("\nmost frequent clean errors (count):")
        for key, n in sorted(camp.clean_kinds.items(), key=lambda kv: -kv[1])[:40]:
            print(f"  {n:6d}  {key}")
    if camp.sigs:
        print("\nkinds of findings / unnamed errors (count):")
        for sig, n in sorted(camp.sigs.items(), key=lambda kv: -kv[1]):
            print(f"  {n:6d}  {sig[:220]}")
    result = "ok" if not camp.failed else f"FAIL: {len(set(camp.failed))} kinds (see {out})"
    print(f"\n{'target':<22} {'seconds':>7} {'executions':>11} {'accepted':>9} "
          f"{'clean':>7} {'unnamed':>8} {'findings':>9}  result")
    print(f"{TARGET:<22} {elapsed:7.0f} {s['executions']:11d} {s['accepted']:9d} "
          f"{s['clean']:7d} {s['unnamed']:8d} {s['finding']:9d}  {result}")
    print(f"(seed {seed})")
    if camp.failed:
        print(f"\nfindings: the inputs and tracebacks are in {out}/; keep a minimized "
              f"reproducer in {os.path.relpath(CRASHES)}/ and fix the importer.")
    elif not args.out and not os.listdir(out):
        os.rmdir(out)
    return 1 if camp.failed else 0


if __name__ == "__main__":
    sys.exit(main())
