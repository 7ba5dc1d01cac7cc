// Model nodes -> tg structural ops (dialects/tg/TgStructuralOps.td): linear
// algebra, reductions, shapes, losses, normalization, embeddings.
//
// Axis attributes may be negative in the model file (counting from the end);
// the tg ops get them normalized. Every shape problem is reported here, at
// the node, before an op is built.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgDialect.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "frontend/importer/NodeImporter.h"

using namespace mlir;

namespace tcc {

const char *structuralOpNames() {
  return "matmul, softmax_cross_entropy, cross_entropy, mean, sum, max "
         "(one input), softmax, log_softmax, layer_norm, rms_norm, embedding, "
         "reshape, transpose, broadcast_to, slice, concat, split, causal_mask";
}

namespace {

NodeResults single(Value v) { return SmallVector<Value, 1>{v}; }

// `axis` counted from the end when negative, checked against `rank`.
FailureOr<int64_t> normalizeAxis(NodeContext &n, int64_t axis,
                                 RankedTensorType type) {
  int64_t rank = type.getRank();
  if (axis < -rank || axis >= rank) {
    n.error() << "axis " << axis << " out of range for "
              << tcc::formatShape(type.getShape());
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

// Between `min` and `max` inputs, one output.
LogicalResult inputCount(NodeContext &n, size_t min, size_t max) {
  if (n.operands.size() < min || n.operands.size() > max)
    return n.error() << "op " << n.op() << " takes " << min << " to " << max
                     << " inputs, got " << n.operands.size();
  if (n.node.outputs_size() != 1)
    return n.error() << "op " << n.op() << " has 1 output, got "
                     << n.node.outputs_size();
  return success();
}

NodeResults importMatmul(NodeContext &n) {
  if (failed(n.arity(2)) || failed(n.attrs({"transpose_a", "transpose_b"})) ||
      failed(n.requireFloat(0)) || failed(n.requireFloat(1)))
    return failure();
  FailureOr<bool> ta = n.boolAttr("transpose_a", false);
  FailureOr<bool> tb = n.boolAttr("transpose_b", false);
  if (failed(ta) || failed(tb))
    return failure();
  auto l = n.type(0), r = n.type(1);
  if (l.getElementType() != r.getElementType())
    return n.error() << "inputs have different dtypes: " << l << " and " << r;
  if (l.getRank() < 2 || r.getRank() < 2)
    return n.error() << "matmul expects inputs of rank >= 2 (..., M, K) x "
                        "(..., K, N), got "
                     << tcc::formatShape(l.getShape()) << " x "
                     << tcc::formatShape(r.getShape());
  int64_t kl = l.getDimSize(l.getRank() - (*ta ? 2 : 1));
  int64_t kr = r.getDimSize(r.getRank() - (*tb ? 1 : 2));
  if (kl != kr)
    return n.error() << "shape mismatch: " << tcc::formatShape(l.getShape())
                     << " x " << tcc::formatShape(r.getShape())
                     << " contracts K = " << kl << " with K = " << kr;
  auto shape = tg::matmulShape(l.getShape(), r.getShape(), *ta, *tb);
  if (!shape)
    return n.error() << "shape mismatch: batch dimensions of "
                     << tcc::formatShape(l.getShape()) << " and "
                     << tcc::formatShape(r.getShape()) << " do not broadcast";
  return single(tg::MatmulOp::create(
      n.b, n.loc, RankedTensorType::get(*shape, l.getElementType()),
      n.operands[0], n.operands[1], n.b.getBoolAttr(*ta),
      n.b.getBoolAttr(*tb)));
}

// Integer targets whose shape is the logits' without the last axis.
LogicalResult checkTargets(NodeContext &n, StringRef what, bool rowsOnly) {
  auto logits = n.type(0), targets = n.type(1);
  if (!isa<IntegerType>(targets.getElementType()) ||
      targets.getElementType().isInteger(1))
    return n.error() << what << " '" << n.node.inputs(1)
                     << "' must be I32 or I64, got " << targets;
  bool ok = rowsOnly ? logits.getRank() == 2 && targets.getRank() == 1 &&
                           targets.getDimSize(0) == logits.getDimSize(0)
                     : logits.getRank() >= 1 &&
                           targets.getShape() == logits.getShape().drop_back();
  if (!ok)
    return n.error() << "shape mismatch: logits must be "
                     << (rowsOnly ? "(N, C) and " : "(..., C) and ") << what
                     << (rowsOnly ? " (N)" : " (...)") << ", got "
                     << tcc::formatShape(logits.getShape()) << " and "
                     << tcc::formatShape(targets.getShape());
  return success();
}

NodeResults importSoftmaxCrossEntropy(NodeContext &n) {
  if (failed(n.arity(2)) || failed(n.attrs({})) || failed(n.requireFloat(0)) ||
      failed(checkTargets(n, "labels", /*rowsOnly=*/true)))
    return failure();
  auto logits = n.type(0);
  auto out = RankedTensorType::get({logits.getDimSize(0)}, logits.getElementType());
  return single(tg::SoftmaxCrossEntropyOp::create(n.b, n.loc, out, n.operands[0],
                                                  n.operands[1]));
}

NodeResults importCrossEntropy(NodeContext &n) {
  if (failed(n.arity(2)) || failed(n.attrs({"ignore_index"})) ||
      failed(n.requireFloat(0)) ||
      failed(checkTargets(n, "targets", /*rowsOnly=*/false)))
    return failure();
  FailureOr<int64_t> ignore = n.intAttr("ignore_index", 0);
  if (failed(ignore))
    return failure();
  IntegerAttr ignoreAttr;
  if (n.hasAttr("ignore_index"))
    ignoreAttr = n.b.getI64IntegerAttr(*ignore);
  auto out = RankedTensorType::get({}, n.type(0).getElementType());
  return single(tg::CrossEntropyOp::create(n.b, n.loc, out, n.operands[0],
                                           n.operands[1], ignoreAttr));
}

// mean, sum, max: `axes` (default all, negative counts from the end),
// keep_dims.
NodeResults importReduce(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"axes", "keep_dims"})) ||
      failed(n.requireFloat(0)))
    return failure();
  auto in = n.type(0);
  FailureOr<SmallVector<int64_t>> axes = n.intsAttr("axes");
  FailureOr<bool> keep = n.boolAttr("keep_dims", false);
  if (failed(axes) || failed(keep))
    return failure();
  if (axes->empty())
    for (int64_t i = 0; i < in.getRank(); ++i)
      axes->push_back(i);
  for (int64_t &a : *axes) {
    FailureOr<int64_t> axis = normalizeAxis(n, a, in);
    if (failed(axis))
      return failure();
    a = *axis;
  }
  llvm::sort(*axes);
  if (std::adjacent_find(axes->begin(), axes->end()) != axes->end())
    return n.error() << "axes repeat an axis";
  if (axes->empty())
    return n.error() << "cannot reduce a scalar";
  if (n.op() == "mean")
    return single(tg::build::reduceMean(n.b, n.loc, n.operands[0], *axes, *keep));
  if (n.op() == "max")
    return single(tg::build::reduceMax(n.b, n.loc, n.operands[0], *axes, *keep));
  return single(tg::build::reduceSum(n.b, n.loc, n.operands[0], *axes, *keep));
}

NodeResults importSoftmax(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"axis"})) ||
      failed(n.requireFloat(0)))
    return failure();
  FailureOr<int64_t> axis = n.intAttr("axis", -1);
  if (failed(axis))
    return failure();
  if (n.type(0).getRank() == 0)
    return n.error() << "op " << n.op() << " needs a tensor of rank >= 1";
  FailureOr<int64_t> a = normalizeAxis(n, *axis, n.type(0));
  if (failed(a))
    return failure();
  IntegerAttr axisAttr = n.b.getI64IntegerAttr(*a);
  if (n.op() == "softmax")
    return single(tg::SoftmaxOp::create(n.b, n.loc, n.type(0), n.operands[0],
                                        axisAttr));
  return single(tg::LogSoftmaxOp::create(n.b, n.loc, n.type(0), n.operands[0],
                                         axisAttr));
}

// layer_norm(x [, weight [, bias]]), rms_norm(x [, weight]): over the last
// axis; weight and bias are (C).
NodeResults importNorm(NodeContext &n) {
  bool layer = n.op() == "layer_norm";
  if (failed(inputCount(n, 1, layer ? 3 : 2)) || failed(n.attrs({"eps"})))
    return failure();
  for (size_t i = 0; i < n.operands.size(); ++i)
    if (failed(n.requireFloat(i)))
      return failure();
  FailureOr<double> eps = n.floatAttr("eps", layer ? 1e-5 : 1e-6);
  if (failed(eps))
    return failure();
  if (!(*eps >= 0) || !std::isfinite(*eps))
    return n.error() << "eps must be a finite number >= 0, got " << *eps;
  auto x = n.type(0);
  if (x.getRank() == 0)
    return n.error() << "op " << n.op()
                     << " normalizes over the last axis; got a scalar";
  for (size_t i = 1; i < n.operands.size(); ++i) {
    auto t = n.type(i);
    if (t.getShape() != x.getShape().take_back() ||
        t.getElementType() != x.getElementType())
      return n.error() << (i == 1 ? "weight '" : "bias '") << n.node.inputs(i)
                       << "' must be " << tcc::formatShape(x.getShape().take_back())
                       << " of " << x.getElementType() << " (the last axis of "
                       << tcc::formatShape(x.getShape()) << "), got " << t;
  }
  Value weight = n.operands.size() > 1 ? n.operands[1] : Value();
  Value bias = n.operands.size() > 2 ? n.operands[2] : Value();
  FloatAttr epsAttr = n.b.getF64FloatAttr(*eps);
  if (layer)
    return single(tg::LayerNormOp::create(n.b, n.loc, x, n.operands[0], weight,
                                          bias, epsAttr));
  return single(
      tg::RmsNormOp::create(n.b, n.loc, x, n.operands[0], weight, epsAttr));
}

// embedding(table (V, C), ids (...)) -> (..., C).
NodeResults importEmbedding(NodeContext &n) {
  if (failed(n.arity(2)) || failed(n.attrs({})) || failed(n.requireFloat(0)))
    return failure();
  auto table = n.type(0), ids = n.type(1);
  if (!isa<IntegerType>(ids.getElementType()) ||
      ids.getElementType().isInteger(1))
    return n.error() << "ids '" << n.node.inputs(1)
                     << "' must be I32 or I64, got " << ids;
  if (table.getRank() != 2)
    return n.error() << "embedding table '" << n.node.inputs(0)
                     << "' must be (V, C), got "
                     << tcc::formatShape(table.getShape());
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  return single(tg::GatherOp::create(
      n.b, n.loc, RankedTensorType::get(shape, table.getElementType()),
      n.operands[0], n.operands[1]));
}

// reshape {shape}: one dimension may be -1 (inferred).
NodeResults importReshape(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"shape"})))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = n.intsAttr("shape");
  if (failed(shape))
    return failure();
  auto in = n.type(0);
  int64_t known = 1, inferred = -1;
  for (auto [i, d] : llvm::enumerate(*shape)) {
    if (d == -1 && inferred < 0) {
      inferred = i;
      continue;
    }
    if (d <= 0)
      return n.error() << "reshape target " << tcc::formatShape(*shape)
                       << (d == -1 ? " has more than one -1"
                                   : " has a non-positive dimension");
    known *= d;
  }
  if (inferred >= 0) {
    if (in.getNumElements() % known != 0)
      return n.error() << "cannot reshape " << tcc::formatShape(in.getShape())
                       << " to " << tcc::formatShape(*shape) << ": "
                       << in.getNumElements() << " elements are not a multiple of "
                       << known;
    (*shape)[inferred] = in.getNumElements() / known;
    known *= (*shape)[inferred];
  }
  if (known != in.getNumElements())
    return n.error() << "cannot reshape " << tcc::formatShape(in.getShape())
                     << " to " << tcc::formatShape(*shape);
  auto out = RankedTensorType::get(*shape, in.getElementType());
  return single(tg::ReshapeOp::create(n.b, n.loc, out, n.operands[0]));
}

// transpose {perm} (negative entries count from the end; default: reverse).
NodeResults importTranspose(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"perm"})))
    return failure();
  FailureOr<SmallVector<int64_t>> perm = n.intsAttr("perm");
  if (failed(perm))
    return failure();
  auto in = n.type(0);
  if (!n.hasAttr("perm"))
    for (int64_t d = in.getRank() - 1; d >= 0; --d)
      perm->push_back(d);
  if (perm->size() != static_cast<size_t>(in.getRank()))
    return n.error() << "perm " << tcc::formatShape(*perm) << " must have "
                     << in.getRank() << " entries for "
                     << tcc::formatShape(in.getShape());
  for (int64_t &p : *perm) {
    FailureOr<int64_t> axis = normalizeAxis(n, p, in);
    if (failed(axis))
      return failure();
    p = *axis;
  }
  SmallVector<int64_t> sorted(*perm);
  llvm::sort(sorted);
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return n.error() << "perm " << tcc::formatShape(*perm)
                     << " is not a permutation (repeats an axis)";
  return single(tg::build::transpose(n.b, n.loc, n.operands[0], *perm));
}

NodeResults importBroadcastTo(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"shape"})) ||
      failed(n.requireFloat(0)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = n.intsAttr("shape");
  if (failed(shape))
    return failure();
  auto in = n.type(0);
  auto b = tcc::broadcastShapes(in.getShape(), *shape);
  if (llvm::any_of(*shape, [](int64_t d) { return d <= 0; }) || !b ||
      ArrayRef<int64_t>(*b) != ArrayRef<int64_t>(*shape))
    return n.error() << "cannot broadcast " << tcc::formatShape(in.getShape())
                     << " to " << tcc::formatShape(*shape);
  return single(tg::BroadcastToOp::create(
      n.b, n.loc, RankedTensorType::get(*shape, in.getElementType()),
      n.operands[0]));
}

// slice {starts, ends, axes (default 0..n-1)}, step 1, like numpy: negative
// starts/ends count from the end, then are clamped to [0, size].
NodeResults importSlice(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"starts", "ends", "axes"})))
    return failure();
  FailureOr<SmallVector<int64_t>> starts = n.intsAttr("starts");
  FailureOr<SmallVector<int64_t>> ends = n.intsAttr("ends");
  FailureOr<SmallVector<int64_t>> axes = n.intsAttr("axes");
  if (failed(starts) || failed(ends) || failed(axes))
    return failure();
  auto in = n.type(0);
  if (!n.hasAttr("axes"))
    for (size_t i = 0; i < starts->size(); ++i)
      axes->push_back(i);
  if (starts->size() != ends->size() || starts->size() != axes->size() ||
      starts->empty())
    return n.error() << "slice needs as many starts as ends and axes (at least "
                        "one), got "
                     << starts->size() << " starts, " << ends->size()
                     << " ends, " << axes->size() << " axes";
  SmallVector<int64_t> lo(in.getRank(), 0), hi(in.getShape());
  SmallVector<bool> seen(in.getRank(), false);
  for (auto [s, e, a] : llvm::zip_equal(*starts, *ends, *axes)) {
    FailureOr<int64_t> axis = normalizeAxis(n, a, in);
    if (failed(axis))
      return failure();
    if (seen[*axis])
      return n.error() << "axes repeat axis " << *axis;
    seen[*axis] = true;
    int64_t size = in.getDimSize(*axis);
    auto clamp = [&](int64_t i) {
      return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size);
    };
    lo[*axis] = clamp(s);
    hi[*axis] = clamp(e);
    if (lo[*axis] >= hi[*axis])
      return n.error() << "slice [" << s << ", " << e << ") of axis " << *axis
                       << " (size " << size << ") is empty";
  }
  return single(tg::build::slice(n.b, n.loc, n.operands[0], lo, hi));
}

NodeResults importConcat(NodeContext &n) {
  if (n.operands.empty())
    return n.error() << "op concat takes at least 1 input, got 0";
  if (failed(n.arity(n.operands.size())) || failed(n.attrs({"axis"})))
    return failure();
  FailureOr<int64_t> axis = n.intAttr("axis", 0);
  if (failed(axis))
    return failure();
  auto first = n.type(0);
  FailureOr<int64_t> a = normalizeAxis(n, *axis, first);
  if (failed(a))
    return failure();
  for (size_t i = 1; i < n.operands.size(); ++i) {
    auto t = n.type(i);
    bool ok = t.getRank() == first.getRank() &&
              t.getElementType() == first.getElementType();
    for (int64_t d = 0; ok && d < first.getRank(); ++d)
      ok = d == *a || t.getDimSize(d) == first.getDimSize(d);
    if (!ok)
      return n.error() << "input '" << n.node.inputs(i) << "' is "
                       << tcc::formatShape(t.getShape()) << " of "
                       << t.getElementType() << "; it must match "
                       << tcc::formatShape(first.getShape()) << " of "
                       << first.getElementType() << " except along axis " << *a;
  }
  return single(tg::build::concat(n.b, n.loc, n.operands, *a));
}

// split {axis, sizes}: one output per size.
NodeResults importSplit(NodeContext &n) {
  if (failed(n.attrs({"axis", "sizes"})))
    return failure();
  FailureOr<int64_t> axis = n.intAttr("axis", 0);
  FailureOr<SmallVector<int64_t>> sizes = n.intsAttr("sizes");
  if (failed(axis) || failed(sizes))
    return failure();
  if (sizes->empty())
    return n.error() << "split needs 'sizes' (one positive size per output)";
  if (failed(n.arity(1, sizes->size())))
    return failure();
  auto in = n.type(0);
  FailureOr<int64_t> a = normalizeAxis(n, *axis, in);
  if (failed(a))
    return failure();
  int64_t total = 0;
  for (int64_t s : *sizes) {
    if (s <= 0)
      return n.error() << "split sizes " << tcc::formatShape(*sizes)
                       << " must be positive";
    total += s;
  }
  if (total != in.getDimSize(*a))
    return n.error() << "split sizes " << tcc::formatShape(*sizes) << " add up to "
                     << total << ", but axis " << *a << " of "
                     << tcc::formatShape(in.getShape()) << " has size "
                     << in.getDimSize(*a);
  SmallVector<Type> types;
  for (int64_t s : *sizes) {
    SmallVector<int64_t> shape(in.getShape());
    shape[*a] = s;
    types.push_back(RankedTensorType::get(shape, in.getElementType()));
  }
  auto split = tg::SplitOp::create(n.b, n.loc, types, n.operands[0],
                                   n.b.getI64IntegerAttr(*a));
  return SmallVector<Value, 1>(split.getResults().begin(),
                               split.getResults().end());
}

NodeResults importCausalMask(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"value"})) ||
      failed(n.requireFloat(0)))
    return failure();
  FailureOr<double> value =
      n.floatAttr("value", -std::numeric_limits<double>::infinity());
  if (failed(value))
    return failure();
  if (n.type(0).getRank() < 2)
    return n.error() << "causal_mask needs scores (..., T, S), got "
                     << tcc::formatShape(n.type(0).getShape());
  return single(tg::CausalMaskOp::create(n.b, n.loc, n.type(0), n.operands[0],
                                         n.b.getF64FloatAttr(*value)));
}

} // namespace

std::optional<NodeResults> importStructuralNode(NodeContext &n) {
  StringRef op = n.op();
  if (op == "matmul")
    return importMatmul(n);
  if (op == "softmax_cross_entropy")
    return importSoftmaxCrossEntropy(n);
  if (op == "cross_entropy")
    return importCrossEntropy(n);
  if (op == "mean" || op == "sum" || op == "max")
    return importReduce(n);
  if (op == "softmax" || op == "log_softmax")
    return importSoftmax(n);
  if (op == "layer_norm" || op == "rms_norm")
    return importNorm(n);
  if (op == "embedding")
    return importEmbedding(n);
  if (op == "reshape")
    return importReshape(n);
  if (op == "transpose")
    return importTranspose(n);
  if (op == "broadcast_to")
    return importBroadcastTo(n);
  if (op == "slice")
    return importSlice(n);
  if (op == "concat")
    return importConcat(n);
  if (op == "split")
    return importSplit(n);
  if (op == "causal_mask")
    return importCausalMask(n);
  return std::nullopt;
}

} // namespace tcc
