//===- ElementwiseShapes.cpp - one shape for kernels linked by reshapes ----===//
//
// kern-fuse-elementwise merges kernels of one shape. A reshape between two
// elementwise kernels (a kern.reshape view of the buffer one writes and
// the other reads) gives them two shapes: a group norm normalizes in its
// (1, N*G, C/G*H*W) view and applies its per-channel weight and the SiLU
// after it in (N, C, H, W); a channels-last batch norm normalizes in
// (N*H*W, C) and its ReLU runs in (N, H, W, C). Neither can be broadcast in
// the other's shape ((1, N*G, 1) has no broadcast form in (N, C, H, W)),
// so the buffer between them was written and read back, and kept for the
// backward when its readers there were on the other side of a reshape too.
//
// Both shapes are row-major reshapes of their common refinement: the shape
// whose axis boundaries are those of both ((1, 256, 65536) and
// (32, 32, 128, 128) -> (32, 8, 4, 128, 128)). Every operand of either
// kernel, broadcast or not, is a view of that shape (a broadcast axis of
// one shape becomes broadcast axes of the refinement). So each cluster of
// elementwise kernels linked through full-size buffers (directly or
// through reshapes) is rewritten to compute in its refinement: buffers
// written by the cluster are allocated in it (their other readers get a
// view), operands are views. Positions and the flat index are unchanged
// (row-major), so every kernel computes the same values; the fusion that
// follows then sees one shape.
//
// Clusters whose shapes have no common refinement ((6, 4) and (4, 6)) stay
// as they are; each rewritten cluster is listed in the function's
// kern.elementwise_shape_decisions (--dump-dir:
// NN-kern-fuse-elementwise-report.txt).
//
//===----------------------------------------------------------------------===//
#include "passes/kern/ElementwiseShapes.h"

#include "mlir/IR/Builders.h"
#include "passes/common/NodeNames.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <functional>
#include <set>

using namespace mlir;

namespace tcc {
namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<MemRefType>(v.getType()).getShape(); }

std::string shapeText(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
}

// The common refinement of `shapes` (equal element counts): the axis
// boundaries (running products) of all of them; none when one boundary
// does not divide the next.
std::optional<SmallVector<int64_t>> refinement(ArrayRef<SmallVector<int64_t>> shapes) {
  std::set<int64_t> bounds;
  for (const SmallVector<int64_t> &shape : shapes) {
    int64_t running = 1;
    for (int64_t d : shape)
      if (d != 1)
        bounds.insert(running *= d);
  }
  SmallVector<int64_t> refined;
  int64_t previous = 1;
  for (int64_t b : bounds) {
    if (b % previous != 0)
      return std::nullopt;
    refined.push_back(b / previous);
    previous = b;
  }
  if (refined.empty())
    refined.push_back(1);
  return refined;
}

// The shape of an operand of shape `in`, numpy-broadcast to `shape`, seen
// in `refined` (a refinement of `shape`): each axis of `shape` is a run of
// refined axes, kept where the operand is full and 1 where it broadcasts.
std::optional<SmallVector<int64_t>> operandInRefinement(ArrayRef<int64_t> in,
                                                       ArrayRef<int64_t> shape,
                                                       ArrayRef<int64_t> refined) {
  if (in.size() > shape.size())
    return std::nullopt;
  SmallVector<int64_t> padded(shape.size() - in.size(), 1);
  llvm::append_range(padded, in);
  SmallVector<int64_t> out;
  size_t j = 0;
  for (auto [d, b] : llvm::zip(shape, padded)) {
    int64_t run = 1;
    size_t first = j;
    while (run < d && j < refined.size())
      run *= refined[j++];
    if (run != d)
      return std::nullopt;
    for (size_t k = first; k < j; ++k)
      out.push_back(b == d ? refined[k] : 1);
  }
  if (j != refined.size())
    return std::nullopt;
  return out;
}

// `v` seen with `shape`: the base of its reshape chain when that has the
// shape (fusion needs the buffer itself), else `v` or a new view of the
// base.
Value viewAs(OpBuilder &b, Value v, ArrayRef<int64_t> shape) {
  Value base = kern::rootBuffer(v);
  if (shapeOf(base) == shape)
    return base;
  if (shapeOf(v) == shape)
    return v;
  auto type = MemRefType::get(shape, cast<MemRefType>(v.getType()).getElementType());
  return kern::ReshapeOp::create(b, v.getLoc(), type, base);
}

} // namespace

SmallVector<std::string> unifyElementwiseShapes(func::FuncOp f) {
  SmallVector<std::string> decisions;
  SmallVector<kern::ReshapeOp> made; // views made, or read by rebuilt kernels
  // Writers of each root buffer among the elementwise kernels.
  SmallVector<kern::ElementwiseOp> kernels;
  f.walk([&](kern::ElementwiseOp k) { kernels.push_back(k); });
  llvm::DenseMap<Value, SmallVector<kern::ElementwiseOp>> writers;
  for (kern::ElementwiseOp k : kernels)
    for (Value out : k.getOutputs())
      writers[kern::rootBuffer(out)].push_back(k);

  // Clusters: a kernel reading, at its full size, a buffer another kernel
  // of the same block and element count writes.
  llvm::EquivalenceClasses<Operation *> clusters;
  for (kern::ElementwiseOp k : kernels)
    clusters.insert(k);
  for (kern::ElementwiseOp reader : kernels) {
    int64_t n = ShapedType::getNumElements(reader.getShape());
    for (Value in : reader.getInputs()) {
      if (shapeOf(in) != reader.getShape())
        continue; // broadcast: another size
      for (kern::ElementwiseOp w : writers.lookup(kern::rootBuffer(in)))
        if (w != reader && w->getBlock() == reader->getBlock() &&
            ShapedType::getNumElements(w.getShape()) == n &&
            ShapedType::getNumElements(shapeOf(kern::rootBuffer(in))) == n)
          clusters.unionSets(w, reader);
    }
  }

  // Leaders first, in program order (the decisions' order is stable).
  SmallVector<Operation *> leaders;
  for (kern::ElementwiseOp k : kernels)
    if (clusters.getLeaderValue(k) == k.getOperation())
      leaders.push_back(k);
  for (Operation *leader : leaders) {
    SmallVector<kern::ElementwiseOp> members;
    SmallVector<SmallVector<int64_t>> shapes;
    for (Operation *m : clusters.members(leader)) {
      auto k = cast<kern::ElementwiseOp>(m);
      members.push_back(k);
      SmallVector<int64_t> s(k.getShape());
      if (!llvm::is_contained(shapes, s))
        shapes.push_back(s);
    }
    if (shapes.size() < 2)
      continue;
    std::optional<SmallVector<int64_t>> refined = refinement(shapes);
    std::vector<std::string> shapeNames;
    for (const SmallVector<int64_t> &s : shapes)
      shapeNames.push_back(shapeText(s));
    if (!refined) {
      decisions.push_back(llvm::formatv("{0} kernels of shapes {1}: kept (no common refinement)",
                                        members.size(), llvm::join(shapeNames, ", "))
                              .str());
      continue;
    }
    // Every operand must be a view of the refinement (always, for
    // numpy-broadcast operands; checked all the same).
    bool ok = true;
    for (kern::ElementwiseOp k : members)
      for (Value in : k.getInputs())
        ok &= operandInRefinement(shapeOf(in), k.getShape(), *refined).has_value();
    if (!ok)
      continue;
    llvm::sort(members, [](kern::ElementwiseOp a, kern::ElementwiseOp b) {
      return a->isBeforeInBlock(b);
    });

    // Temporaries the cluster writes: allocated in the refinement, their
    // old shape a view for every other reader (a buffer written twice is
    // seen the second time through that view: its root is already new).
    for (kern::ElementwiseOp k : members)
      for (Value out : k.getOutputs()) {
        Value root = kern::rootBuffer(out);
        auto alloc = root.getDefiningOp<kern::AllocOp>();
        if (!alloc || shapeOf(root) == ArrayRef<int64_t>(*refined))
          continue;
        OpBuilder b(alloc);
        auto type = MemRefType::get(*refined, cast<MemRefType>(root.getType()).getElementType());
        auto fresh = kern::AllocOp::create(b, alloc.getLoc(), type);
        for (NamedAttribute a : alloc->getDiscardableAttrs())
          fresh->setAttr(a.getName(), a.getValue());
        auto view = kern::ReshapeOp::create(b, alloc.getLoc(), root.getType(), fresh.getBuffer());
        made.push_back(view);
        root.replaceAllUsesWith(view.getResult());
        alloc.erase();
      }

    // Each kernel rebuilt in the refinement, its body moved over.
    std::vector<std::string> names;
    for (kern::ElementwiseOp k : members) {
      OpBuilder b(k);
      SmallVector<Value> inputs, outputs;
      for (Value in : k.getInputs())
        inputs.push_back(viewAs(b, in, *operandInRefinement(shapeOf(in), k.getShape(), *refined)));
      for (Value out : k.getOutputs())
        outputs.push_back(viewAs(b, out, *refined));
      auto rebuilt = kern::ElementwiseOp::create(b, k.getLoc(), inputs, outputs);
      for (NamedAttribute a : k->getDiscardableAttrs())
        rebuilt->setAttr(a.getName(), a.getValue());
      rebuilt.getBody().takeBody(k.getBody());
      for (Value v : k->getOperands())
        if (auto view = v.getDefiningOp<kern::ReshapeOp>())
          made.push_back(view);
      std::string name = nodeName(k.getLoc());
      if (!llvm::is_contained(names, name))
        names.push_back(name);
      k.erase();
    }
    decisions.push_back(llvm::formatv("{0} kernels of shapes {1} computed in {2} ({3})",
                                      members.size(), llvm::join(shapeNames, ", "),
                                      shapeText(*refined), llvm::join(names, ", "))
                            .str());
  }
  // Views nobody reads any more among those this made (the old shapes of
  // reallocated buffers) and those the rebuilt kernels read: a view left
  // behind would keep kern-fuse-elementwise from fusing its buffer.
  llvm::SetVector<Operation *> dead;
  std::function<void(kern::ReshapeOp)> collect = [&](kern::ReshapeOp v) {
    if (!v->use_empty() || dead.contains(v))
      return;
    dead.insert(v);
    Value in = v.getInput();
    v->dropAllReferences();
    if (auto up = in.getDefiningOp<kern::ReshapeOp>())
      collect(up);
  };
  for (kern::ReshapeOp v : made)
    collect(v);
  for (Operation *v : dead)
    v->erase();
  return decisions;
}

} // namespace tcc
