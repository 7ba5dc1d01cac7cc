"""Graph helpers of the ONNX import (onnx_import.py): ONNX dtypes, module
paths in node names, the GELU pattern, which initializers are parameters,
triangular masks, and numpy evaluation of constant expressions."""

import math

import numpy as np


ELEM = {1: np.float32, 11: np.float64, 7: np.int64, 6: np.int32, 9: np.bool_}


def gelu_erf(graph_nodes, consumers, erf, values):
    """GELU as torch.onnx.export writes it: x * (erf(x / sqrt2) + 1) * 0.5.
    Returns (x, output name, nodes consumed) or None."""
    def only_user(name):
        users = consumers.get(name, [])
        return users[0] if len(users) == 1 else None

    div = graph_nodes.get(erf.input[0])
    if div is None or div.op_type not in ("Div", "Mul"):
        return None
    k = values.get(div.input[1])
    if not isinstance(k, np.ndarray) or k.size != 1:
        return None
    k = float(k.reshape(-1)[0])
    if not math.isclose(k if div.op_type == "Div" else 1 / k, math.sqrt(2), rel_tol=1e-6):
        return None
    x = div.input[0]
    add = only_user(erf.output[0])
    if add is None or add.op_type != "Add":
        return None
    one = values.get([i for i in add.input if i != erf.output[0]][0])
    if not isinstance(one, np.ndarray) or float(one.reshape(-1)[0]) != 1.0:
        return None
    mul = only_user(add.output[0])
    if mul is None or mul.op_type != "Mul" or x not in mul.input:
        return None
    half = only_user(mul.output[0])
    if half is None or half.op_type != "Mul":
        return None
    c = values.get([i for i in half.input if i != mul.output[0]][0])
    if not isinstance(c, np.ndarray) or float(c.reshape(-1)[0]) != 0.5:
        return None
    return x, half.output[0], {id(n) for n in (div, erf, add, mul, half)}


def module_path(node_name):
    """The module path in torch.onnx.export's node name: "/h.0/attn/c_attn/
    MatMul" -> "h.0.attn.c_attn"; "/features/features.0/Conv" -> "features.0"
    (a level may repeat the path above it)."""
    path = ""
    for part in node_name.strip("/").split("/")[:-1]:
        path = part if not path or part.startswith(path + ".") else f"{path}.{part}"
    return path


def upper_triangle(a):
    """k when the bool array `a` is (j - i > k) over its last two dims for
    every leading index, else None."""
    if a.dtype != np.bool_ or a.ndim < 2 or a.size == 0:
        return None
    rows, cols = a.shape[-2:]
    flat = a.reshape(-1, rows, cols)
    if not np.all(flat == flat[0]):
        return None
    m = flat[0]
    # The smallest k with m == (j - i > k): the largest j - i where m is
    # False (one comparison, not one per k: a 4096-long causal mask took
    # minutes), in bool arrays of m's size (an int64 j - i of a 32768-long
    # mask is 8 GiB).
    if m.all():
        k = -rows - 1
    elif not m.any():
        k = cols - 1
    else:
        false = ~m
        last = cols - 1 - np.argmax(false[:, ::-1], axis=1)  # per row
        k = int(np.max(np.where(false.any(axis=1), last - np.arange(rows), -rows - 1)))
    return k if np.array_equal(m, np.triu(np.ones((rows, cols), np.bool_), k + 1)) else None


# Ops through which an initializer does not reach the loss differentiably:
# one that meets the data only through them (a mask buffer) is a constant.
NOT_DIFFERENTIABLE = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                       "Not", "And", "Or", "Xor", "Shape", "Size"}


def meets_data(graph, nodes, consumers, inits):
    """The float initializers that reach a value computed from the graph
    inputs through differentiable ops: the parameters."""
    data = {i.name for i in graph.input if i.name not in inits}
    for n in nodes:
        if any(i in data for i in n.input):
            data.update(n.output)
    found = set()
    for name in inits:
        seen, frontier = set(), [name]
        while frontier and name not in found:
            v = frontier.pop()
            for n, _ in consumers.get(v, []):
                if n.op_type in NOT_DIFFERENTIABLE or id(n) in seen:
                    continue
                seen.add(id(n))
                if any(o in data for o in n.output):
                    found.add(name)
                    break
                frontier.extend(n.output)
    return found


def numpy_helper_value(tensor):
    """A TensorProto attribute as a flat numpy array (None stays None)."""
    if tensor is None:
        return None
    from onnx import numpy_helper
    return numpy_helper.to_array(tensor).reshape(-1)


def attrs(node):
    import onnx
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


# The ops fold_numpy evaluates (on constant inputs only).
FOLDED = {"Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater", "Cast", "Unsqueeze",
          "Concat", "Reshape", "Sqrt", "Not", "Neg", "Identity", "Shape", "Where", "Pow",
          "ConstantOfShape", "Gather", "Transpose", "Squeeze", "Range", "Expand", "Slice"}

# The most elements a constant made at import (folding ConstantOfShape,
# Expand, Range, broadcasting ops, Gather, Concat) may have: 2^27 (1 GiB of
# int64; an 8192-long causal mask is 2^26; a constant the model keeps is
# 64 MiB at most anyway).
MAX_FOLDED = 1 << 27


def _fold_size(shape_or_count, op):
    """Refuses a folded result of more than MAX_FOLDED elements (ValueError)
    before numpy allocates it."""
    n = shape_or_count if isinstance(shape_or_count, int) else \
        math.prod(int(d) for d in shape_or_count)
    if n > MAX_FOLDED:
        raise ValueError(f"{op} would make a constant of {n} elements (at most "
                         f"{MAX_FOLDED} are evaluated at import)")


def _folded_count(op, a, ins):
    """The elements of the result of the ops whose result can be larger
    than their inputs (broadcasting, gathering, concatenating); 0 for the
    others (Range, ConstantOfShape and Expand are checked below)."""
    if op in ("Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater", "Pow", "Where"):
        return math.prod(np.broadcast_shapes(*(np.shape(x) for x in ins)))
    if op == "Gather" and len(ins) == 2 and np.ndim(ins[0]):
        return np.size(ins[1]) * (np.size(ins[0]) // max(
            np.shape(ins[0])[int(a.get("axis", 0))], 1))
    if op == "Concat":
        return sum(np.size(x) for x in ins)
    return 0


def fold_numpy(op, a, ins):
    """The outputs of ONNX op `op` (attributes `a`) on constant inputs, or
    None when it is not one evaluated here. ValueError (or numpy's TypeError,
    IndexError) when numpy refuses the data or the result is too large."""
    binary = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
              "Div": np.divide, "Equal": np.equal, "Less": np.less,
              "Greater": np.greater}
    _fold_size(_folded_count(op, a, ins), op)
    if op in binary:
        r = binary[op](ins[0], ins[1])
        return [r.astype(ins[0].dtype, copy=False) if op in ("Add", "Sub", "Mul", "Div") else r]
    if op == "Cast":
        if a.get("to") not in ELEM:
            raise ValueError(f"Cast to ONNX type {a.get('to')}")
        return [ins[0].astype(ELEM[a["to"]])]
    if op == "Unsqueeze":
        axes = a.get("axes", ins[1] if len(ins) > 1 else None)
        return [np.expand_dims(ins[0], tuple(int(x) for x in axes))]
    if op == "Concat":
        return [np.concatenate(ins, axis=a["axis"])]
    if op == "Reshape":
        return [ins[0].reshape(ins[1])]
    if op == "Sqrt":
        return [np.sqrt(ins[0])]
    if op == "Not":
        return [np.logical_not(ins[0])]
    if op == "Neg":
        return [-ins[0]]
    if op == "Identity":
        return [ins[0]]
    if op == "Shape":
        return [np.array(np.shape(ins[0]), dtype=np.int64)]
    if op == "Where":
        return [np.where(ins[0], ins[1], ins[2])]
    if op == "Pow":
        return [np.power(ins[0], ins[1]).astype(ins[0].dtype)]
    if op == "ConstantOfShape":
        _fold_size(np.asarray(ins[0]).reshape(-1).tolist(), op)
        value = numpy_helper_value(a.get("value"))
        return [np.full(tuple(int(d) for d in ins[0]), value[0] if value is not None
                        else 0.0, dtype=value.dtype if value is not None else np.float32)]
    if op == "Gather":
        return [np.take(ins[0], ins[1], axis=a.get("axis", 0))]
    if op == "Transpose":
        return [np.transpose(ins[0], a.get("perm"))]
    if op == "Squeeze":
        axes = a.get("axes", ins[1] if len(ins) > 1 else None)
        return [np.squeeze(ins[0], tuple(int(x) for x in axes) if axes is not None else None)]
    if op == "Range":
        start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in ins[:3])
        if delta == 0 or not all(map(math.isfinite, (start, limit, delta))):
            raise ValueError(f"Range({start}, {limit}, {delta})")
        _fold_size(max(0, math.ceil((limit - start) / delta)), op)
        return [np.arange(ins[0], ins[1], ins[2]).astype(ins[0].dtype)]
    if op == "Expand":
        _fold_size(np.broadcast_shapes(np.shape(ins[0]),
                                       tuple(int(d) for d in ins[1])), op)
        return [ins[0] * np.ones(tuple(int(d) for d in ins[1]), dtype=ins[0].dtype)]
    if op == "Slice":
        x = ins[0]
        if len(ins) == 1:  # opset < 10: attributes
            ins = [x, a.get("starts", []), a.get("ends", []), a.get("axes")]
        starts, ends = (np.asarray(v).reshape(-1).tolist() for v in ins[1:3])
        axes = np.asarray(ins[3]).reshape(-1).tolist() if len(ins) > 3 and \
            ins[3] is not None else list(range(len(starts)))
        steps = np.asarray(ins[4]).reshape(-1).tolist() if len(ins) > 4 and \
            ins[4] is not None else [1] * len(starts)
        index = [slice(None)] * x.ndim
        for st, en, ax, sp in zip(starts, ends, axes, steps):
            index[ax] = slice(st, en, sp)
        return [x[tuple(index)]]
    return None


# Ops whose output has the shape of the first input / the inputs broadcast.
SAME_SHAPE = {"Gelu", "LayerNormalization", "Relu", "Sigmoid", "Tanh", "Exp", "Log",
              "Sqrt", "Neg", "Softmax", "LogSoftmax", "Pow", "Identity", "Dropout",
              "Cast"}
BROADCAST = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Where", "Equal", "Less",
             "Greater"}


def derive_shapes(op, a, shapes, consts, n_out):
    """The output shapes of `op` from its input shapes (and constant inputs:
    consts[k] is the array or None), for when ONNX shape inference left them
    out (ops newer than this onnx stop its propagation). None: unknown.
    ValueError: attributes or constants that do not fit the shapes (an axis
    out of range, a perm that is not one)."""
    def const(k):
        return np.asarray(consts[k]).reshape(-1).tolist() \
            if k < len(consts) and consts[k] is not None else None

    def axis(k, rank):
        if not -rank <= int(k) < rank:
            raise ValueError(f"axis {k} is out of range for rank {rank} (input "
                             f"shapes {[tuple(s) for s in shapes]})")
        return int(k) + rank if k < 0 else int(k)

    def rank_at_least(n, *which):
        for k in which:
            if k >= len(shapes) or len(shapes[k]) < n:
                raise ValueError(f"{op} needs input {k} of rank >= {n}, got shapes "
                                 f"{[tuple(s) for s in shapes]}")

    if not shapes or shapes[0] is None:
        return None
    x = tuple(shapes[0])
    r = len(x)
    if op in SAME_SHAPE:
        return [x]
    if op in BROADCAST and len(shapes) >= 2:
        return [tuple(np.broadcast_shapes(*shapes))]
    if op == "MatMul" and len(shapes) == 2 and min(map(len, shapes)) >= 2:
        b = shapes[1]
        return [tuple(np.broadcast_shapes(x[:-2], b[:-2])) + (x[-2], b[-1])]
    if op == "Gemm":
        rank_at_least(2, 0, 1)
        m = x[1] if a.get("transA", 0) else x[0]
        n = shapes[1][0] if a.get("transB", 0) else shapes[1][1]
        return [(m, n)]
    if op == "Transpose":
        perm = a.get("perm") or list(range(r))[::-1]
        if sorted(perm) != list(range(r)):
            raise ValueError(f"perm {list(perm)} is not a permutation of the {r} axes "
                             f"of {x}")
        return [tuple(x[p] for p in perm)]
    if op == "Reshape":
        target = const(1)
        if target is None:
            return None
        zero_copies = not a.get("allowzero", 0)
        if zero_copies and any(d == 0 and i >= r for i, d in enumerate(target)) \
                or any(d < -1 for d in target) or target.count(-1) > 1:
            raise ValueError(f"cannot reshape {x} to {target}")
        out = [x[i] if d == 0 and zero_copies else d for i, d in enumerate(target)]
        if -1 in out:
            known = math.prod(d for d in out if d != -1)
            out[out.index(-1)] = math.prod(x) // max(known, 1)
        return [tuple(out)]
    if op == "Flatten":
        k = a.get("axis", 1)
        k = r if k == r else axis(k, r)  # (axis r: all of it, then 1)
        return [(math.prod(x[:k]), math.prod(x[k:]))]
    if op in ("Unsqueeze", "Squeeze"):
        axes = a.get("axes", const(1))
        if axes is None and op == "Unsqueeze":
            raise ValueError("Unsqueeze without axes")
        if op == "Squeeze":
            drop = {axis(k, r) for k in axes} if axes is not None else \
                {i for i, d in enumerate(x) if d == 1}
            return [tuple(d for i, d in enumerate(x) if i not in drop)]
        out = list(x)
        for k in sorted(axis(k, r + len(axes)) for k in axes):
            out.insert(k, 1)
        return [tuple(out)]
    if op == "Concat":
        k = axis(a["axis"], r)
        if any(len(s) != r for s in shapes):
            raise ValueError(f"Concat of different ranks {[tuple(s) for s in shapes]}")
        return [x[:k] + (sum(s[k] for s in shapes),) + x[k + 1:]]
    if op == "Split":
        k = axis(a.get("axis", 0), r)
        sizes = a.get("split", const(1))
        if sizes is None:
            sizes = [x[k] // n_out] * n_out
        if len(sizes) != n_out:
            raise ValueError(f"{len(sizes)} split sizes for {n_out} outputs")
        return [x[:k] + (int(s),) + x[k + 1:] for s in sizes]
    if op == "Slice":
        starts, ends = a.get("starts", const(1)), a.get("ends", const(2))
        axes = a.get("axes", const(3)) or list(range(len(starts or [])))
        if starts is None or ends is None:
            return None
        out = list(x)
        if len(axes) != len(starts) or len(ends) != len(starts):
            raise ValueError(f"Slice starts {starts}, ends {ends}, axes {axes}: "
                             "not one of each per axis")
        for s, e, k in zip(starts, ends, axes):
            k = axis(k, r)
            out[k] = len(range(*slice(s, e).indices(x[k])))
        return [tuple(out)]
    if op == "Gather" and a.get("axis", 0) == 0 and len(shapes) == 2:
        return [tuple(shapes[1]) + x[1:]]
    if op in ("ReduceMean", "ReduceSum"):
        axes = a.get("axes", const(1))
        axes = {axis(k, r) for k in axes} if axes is not None else set(range(r))
        keep = a.get("keepdims", 1)
        return [tuple(1 if i in axes else d for i, d in enumerate(x) if keep or i not in axes)]
    return None
