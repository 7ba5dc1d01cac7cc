"""Up-front checks of an ONNX model for the importer (onnx_import.py), run
before ONNX shape inference and the graph walk: what they take for granted
and what onnx's own C++ code (shape inference, data propagation) may crash
on when it is not so (issue 36, tests/fuzz/fuzz_onnx_import.py).

    check_model(model, error)       # raises error("...") naming what is wrong
    load_external_data(model, path, error)

What is checked, in the order of the file:
  - names (of the graph, nodes, values, attributes) are UTF-8;
  - the opset of the default domain is given (once, >= 7); no sparse
    initializers;
  - every tensor (initializers, Constant values, any tensor attribute): a
    known data type, dims >= 0, exactly as many data values (raw bytes or a
    typed field) as the dims hold, no external or segmented data left;
  - graph inputs, outputs and value_info: tensor types of known element
    types, dims >= 0; graph inputs of a type the importer maps;
  - names: graph inputs, initializers and node outputs each defined once;
    every node input defined before the node (a graph input, an initializer
    or an earlier node's output: the nodes are in topological order, as ONNX
    requires); every graph output defined;
  - nodes: an op type of the default ONNX domain; attributes named once, of
    the type their value is stored as, no subgraphs; where this onnx has the
    op's schema (the latest at or below the model's opset): the number of
    inputs and outputs, every attribute known and of the schema's type, the
    required ones given; window sizes (kernel_shape, strides, dilations,
    group) >= 1 and pads >= 0.

The checks are onnx.checker's in part, but onnx.checker is not used: it
stops at the first problem, names nodes poorly, and refuses models the
importer reads on purpose (opsets newer than the installed onnx, outputs
without shapes)."""

import os

# TensorProto.DataType -> (bytes per value in raw_data, the typed field,
# values per element in that field). STRING (8) has no raw form.
_TENSOR_TYPES = {
    1: (4, "float_data", 1), 2: (1, "int32_data", 1), 3: (1, "int32_data", 1),
    4: (2, "int32_data", 1), 5: (2, "int32_data", 1), 6: (4, "int32_data", 1),
    7: (8, "int64_data", 1), 8: (None, "string_data", 1), 9: (1, "int32_data", 1),
    10: (2, "int32_data", 1), 11: (8, "double_data", 1), 12: (4, "uint64_data", 1),
    13: (8, "uint64_data", 1), 14: (8, "float_data", 2), 15: (16, "double_data", 2),
    16: (2, "int32_data", 1)}
_TYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
               7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "double",
               12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128",
               16: "bfloat16"}
_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data",
                 "double_data", "uint64_data")
# Graph input element types the importer maps (_onnx_graph.ELEM).
_INPUT_TYPES = (1, 6, 7, 9, 11)

# AttributeProto.AttributeType -> the field its value is in.
_ATTR_FIELDS = {1: "f", 2: "i", 3: "s", 4: "t", 5: "g", 11: "sparse_tensor",
                13: "tp", 6: "floats", 7: "ints", 8: "strings", 9: "tensors",
                10: "graphs", 12: "sparse_tensors", 14: "type_protos"}
_ATTR_NAMES = {1: "float", 2: "int", 3: "string", 4: "tensor", 5: "graph",
               11: "sparse tensor", 13: "type", 6: "floats", 7: "ints",
               8: "strings", 9: "tensors", 10: "graphs", 12: "sparse tensors",
               14: "types"}
_SINGLE = ("f", "i", "s", "t", "g", "sparse_tensor", "tp")

# The oldest opset read: torch.onnx.export's oldest. Older ops differ (Gemm-6
# broadcasts by an attribute; onnx 1.12's inference of it crashes on a 1-D B).
MIN_OPSET = 7

# Attributes of window ops (Conv, pools), whatever the op: at least 1 / 0.
_AT_LEAST_1 = ("kernel_shape", "strides", "dilations", "group")
_AT_LEAST_0 = ("pads",)


def _type_name(t):
    return _TYPE_NAMES.get(t, f"{t} (not an ONNX type)" if t else "UNDEFINED (0)")


def check_tensor(t, what, error):
    """A TensorProto whose data numpy_helper.to_array reads as its dims say."""
    if t.data_type not in _TENSOR_TYPES:
        raise error(f"{what} has data type {_type_name(t.data_type)}")
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise error(f"{what} has dims {dims}: sizes must be >= 0")
    if t.HasField("segment"):
        raise error(f"{what} is a segment of a tensor (not supported)")
    if t.data_location == 1 or len(t.external_data):
        raise error(f"{what}: its data is in an external file that was not read")
    count = 1
    for d in dims:
        count *= d
    itemsize, field, per = _TENSOR_TYPES[t.data_type]
    typed = [f for f in _TYPED_FIELDS if len(getattr(t, f))]
    kind = _type_name(t.data_type)
    if t.HasField("raw_data"):
        if itemsize is None:
            raise error(f"{what}: a {kind} tensor cannot have raw_data")
        if typed:
            raise error(f"{what} has both raw_data and {typed[0]}")
        if len(t.raw_data) != count * itemsize:
            raise error(f"{what}: {len(t.raw_data)} bytes of raw_data, but dims {dims} "
                        f"of {kind} take {count * itemsize}")
        return
    if any(f != field for f in typed):
        other = next(f for f in typed if f != field)
        raise error(f"{what}: a {kind} tensor keeps its values in {field}, not {other}")
    have = len(getattr(t, field))
    if have != count * per:
        raise error(f"{what}: {have} values in {field}, but dims {dims} hold "
                    f"{count * per}")


def _tensors_of(node):
    for a in node.attribute:
        if a.type == 4 and a.HasField("t"):
            yield a.name, a.t
        for k, t in enumerate(a.tensors):
            yield f"{a.name}[{k}]", t


def _check_value_info(vi, what, error, is_input):
    kind = vi.type.WhichOneof("value")
    if kind is None and not is_input:
        return  # no type: a hint left out
    if kind != "tensor_type":
        raise error(f"{what} {vi.name!r} is a {kind or 'value without a type'}: "
                    "only tensors are supported")
    tt = vi.type.tensor_type
    if is_input and tt.elem_type not in _INPUT_TYPES:
        raise error(f"{what} {vi.name!r} has element type {_type_name(tt.elem_type)}: "
                    "graph inputs may be float, double, int32, int64 or bool")
    if tt.elem_type and tt.elem_type not in _TENSOR_TYPES:
        raise error(f"{what} {vi.name!r} has element type {_type_name(tt.elem_type)}")
    if tt.HasField("shape"):
        dims = [d.dim_value for d in tt.shape.dim if d.HasField("dim_value")]
        if any(d < 0 for d in dims):
            raise error(f"{what} {vi.name!r} has dims {dims}: sizes must be >= 0")


def _opset(model, error):
    versions = {}
    for o in model.opset_import:
        domain = "" if o.domain == "ai.onnx" else o.domain
        if domain in versions:
            raise error(f"the model imports the opset of domain {o.domain!r} twice")
        versions[domain] = o.version
    if "" not in versions:
        raise error("the model imports no opset of the default ONNX domain")
    if versions[""] < MIN_OPSET:
        raise error(f"the model imports ONNX opset {versions['']}: tcc import reads "
                    f"opset {MIN_OPSET} and later (torch.onnx.export writes 7 or later)")
    return versions[""]


class _Spec:
    """The parts of an onnx.defs.OpSchema the checks read."""

    def __init__(self, min_input, max_input, min_output, max_output, attributes):
        self.min_input, self.max_input = min_input, max_input
        self.min_output, self.max_output = min_output, max_output
        self.attributes = attributes


class _Attr:
    def __init__(self, type_, required=False):
        self.type, self.required = type_, required


# Ops the importer maps that the installed onnx may not know (newer opsets).
_NEWER_OPS = {"Gelu": _Spec(1, 1, 1, 1, {"approximate": _Attr(3)}),
              "LayerNormalization": _Spec(1, 3, 1, 3, {
                  "axis": _Attr(2), "epsilon": _Attr(1), "stash_type": _Attr(2)})}


def _schema(op, opset):
    """The op's schema at the model's opset; else (an op of a later opset
    than the model declares, or than this onnx knows) its latest one."""
    import onnx.defs
    for version in (opset, onnx.defs.onnx_opset_version()):
        try:
            return onnx.defs.get_schema(op, version, "")
        except Exception:  # noqa: BLE001 - SchemaError: no such op (yet)
            pass
    return _NEWER_OPS.get(op)


def _check_node(node, where, opset, error):
    if not node.op_type:
        raise error(f"{where}: the node has no op type")
    if node.domain not in ("", "ai.onnx"):
        raise error(f"{where}: op of domain {node.domain!r}: only ops of the default "
                    "ONNX domain are supported")
    seen = set()
    for a in node.attribute:
        if not a.name:
            raise error(f"{where}: an attribute without a name")
        if a.name in seen:
            raise error(f"{where}: attribute {a.name!r} is given twice")
        seen.add(a.name)
        field = _ATTR_FIELDS.get(a.type)
        if field is None:
            raise error(f"{where}: attribute {a.name!r} has no valid type ({a.type})")
        if a.type in (5, 10):
            raise error(f"{where}: attribute {a.name!r} is a subgraph: control flow "
                        "(If, Loop, Scan) is not supported")
        for other in _ATTR_FIELDS.values():
            if other == field:
                continue
            present = a.HasField(other) if other in _SINGLE else len(getattr(a, other))
            if present:
                raise error(f"{where}: attribute {a.name!r} is declared "
                            f"{_ATTR_NAMES[a.type]} but holds a value in {other!r}")
        if a.type == 2 and a.name in _AT_LEAST_1 and a.i < 1 or \
                a.type == 7 and a.name in _AT_LEAST_1 and any(v < 1 for v in a.ints):
            raise error(f"{where}: attribute {a.name} = "
                        f"{a.i if a.type == 2 else list(a.ints)}: must be >= 1")
        if a.type == 7 and a.name in _AT_LEAST_0 and any(v < 0 for v in a.ints):
            raise error(f"{where}: attribute {a.name} = {list(a.ints)}: must be >= 0")
    schema = _schema(node.op_type, opset)
    if schema is None:
        return  # an op newer than this onnx, or unknown: the walk decides
    n_in, n_out = len(node.input), len(node.output)
    if not schema.min_input <= n_in <= schema.max_input:
        raise error(f"{where}: {n_in} inputs; {node.op_type} (opset {opset}) takes "
                    + _range(schema.min_input, schema.max_input))
    if not schema.min_output <= n_out <= schema.max_output:
        raise error(f"{where}: {n_out} outputs; {node.op_type} (opset {opset}) has "
                    + _range(schema.min_output, schema.max_output))
    formals = list(getattr(schema, "inputs", []))
    for k, name in enumerate(node.input):
        if name or not formals:
            continue
        formal = formals[min(k, len(formals) - 1)]
        if k >= len(formals) and int(formal.option) != 2:
            continue
        if int(formal.option) != 1:  # Single or Variadic, not Optional
            raise error(f"{where}: input {k} ({formal.name}) is required but its "
                        "name is empty")
    for a in node.attribute:
        spec = schema.attributes.get(a.name)
        if spec is None:
            raise error(f"{where}: {node.op_type} (opset {opset}) has no attribute "
                        f"{a.name!r}")
        if int(spec.type) != a.type:
            raise error(f"{where}: attribute {a.name!r} is {_ATTR_NAMES[a.type]}; "
                        f"{node.op_type} takes {_ATTR_NAMES.get(int(spec.type), spec.type)}")
    for name, spec in schema.attributes.items():
        if spec.required and name not in seen:
            raise error(f"{where}: {node.op_type} needs attribute {name!r}")


def _range(lo, hi):
    if lo == hi:
        return f"{lo}"
    return f"{lo} or more" if hi >= 2 ** 31 - 1 else f"{lo} to {hi}"


def node_where(node):
    """How the importer names a node in its errors."""
    return f"node {node.name or node.op_type} ({node.op_type})"


def _check_text(model, error):
    """Names that are not UTF-8 (protobuf hands them over as bytes)."""
    g = model.graph

    def text(value, what):
        if not isinstance(value, str):
            raise error(f"{what} {value!r} is not valid UTF-8")

    text(g.name, "the graph name")
    for o in model.opset_import:
        text(o.domain, "opset domain")
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        text(vi.name, "value name")
    for t in g.initializer:
        text(t.name, "initializer name")
    for k, node in enumerate(g.node):
        for value, what in ((node.name, "node name"), (node.op_type, "op type"),
                            (node.domain, "op domain")):
            text(value, f"node {k}: {what}")
        for v in list(node.input) + list(node.output):
            text(v, f"node {k}: value name")
        for a in node.attribute:
            text(a.name, f"node {k}: attribute name")


def check_model(model, error):
    """Raises error(message) (a one-line message, without the "tcc import:"
    prefix) for the first thing in `model` that is not as the module
    docstring says."""
    if not model.HasField("graph"):
        raise error("the model has no graph")
    _check_text(model, error)
    opset = _opset(model, error)
    g = model.graph
    if len(g.sparse_initializer):
        raise error(f"sparse initializer {g.sparse_initializer[0].values.name!r}: "
                    "sparse tensors are not supported")
    for t in g.initializer:
        if not t.name:
            raise error("an initializer without a name")
        check_tensor(t, f"initializer {t.name!r}", error)
    for vi in g.input:
        _check_value_info(vi, "graph input", error, is_input=True)
    for vi in g.output:
        _check_value_info(vi, "graph output", error, is_input=False)
    for vi in g.value_info:
        _check_value_info(vi, "value_info", error, is_input=False)
    defined = {}  # name -> what defines it
    inits = set()
    for t in g.initializer:
        if t.name in inits:
            raise error(f"initializer {t.name!r} is defined twice")
        inits.add(t.name)
        defined[t.name] = "an initializer"
    inputs = set()
    for vi in g.input:
        if not vi.name:
            raise error("a graph input without a name")
        if vi.name in inputs:
            raise error(f"graph input {vi.name!r} is declared twice")
        inputs.add(vi.name)
        defined.setdefault(vi.name, "a graph input")
    for node in g.node:
        where = node_where(node)
        _check_node(node, where, opset, error)
        for name, t in _tensors_of(node):
            check_tensor(t, f"{where}: attribute {name!r}", error)
        for i in node.input:
            if i and i not in defined:
                raise error(f"{where}: input {i!r} is not computed before it (no graph "
                            "input, initializer or earlier node output has that name)")
        for o in node.output:
            if not o:
                continue
            if o in defined:
                raise error(f"{where}: output {o!r} is already defined by {defined[o]}")
            defined[o] = where
    outs = set()
    for vi in g.output:
        if vi.name not in defined:
            raise error(f"graph output {vi.name!r} is not computed by any node")
        if vi.name in outs:
            raise error(f"graph output {vi.name!r} is listed twice")
        outs.add(vi.name)


def _all_tensors(model):
    g = model.graph
    yield from g.initializer
    for node in g.node:
        for _, t in _tensors_of(node):
            yield t


def load_external_data(model, path, error):
    """Reads the tensors whose data is in files beside the model (as
    onnx.load does), refusing a location outside the model's folder (an
    absolute path, '..', a link out), one that is not a regular file, and an
    offset / length beyond the file."""
    base = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    for t in _all_tensors(model):
        if t.data_location != 1:
            continue
        what = f"tensor {t.name!r}" if t.name else "a tensor"
        info = {e.key: e.value for e in t.external_data}
        if not all(isinstance(x, str) for kv in info.items() for x in kv):
            raise error(f"{what}: external data entries {info} are not UTF-8")
        try:
            offset = int(info.get("offset") or 0)
            length = int(info["length"]) if info.get("length") else None
        except ValueError:
            raise error(f"{what}: external data offset / length are not integers: "
                        f"{info}") from None
        loc = info.get("location", "")
        full = os.path.realpath(os.path.join(base, loc))
        if not loc or os.path.isabs(loc) or full == base \
                or os.path.commonpath([base, full]) != base:
            raise error(f"{what}: external data location {loc!r} is not a file in the "
                        f"model's folder {base}")
        if not os.path.isfile(full):
            raise error(f"{what}: external data file {loc!r} "
                        + ("is not a regular file" if os.path.exists(full) else
                           "does not exist"))
        size = os.path.getsize(full)
        if offset < 0 or (length is not None and length < 0) or \
                offset + (length or 0) > size:
            raise error(f"{what}: external data offset {offset}, length {length} "
                        f"are beyond {loc!r} ({size} bytes)")
        try:
            with open(full, "rb") as f:
                f.seek(offset)
                t.raw_data = f.read(length if length is not None else size - offset)
        except OSError as e:
            raise error(f"{what}: cannot read external data {loc!r}: {e}") from None
        t.data_location = 0
        del t.external_data[:]
