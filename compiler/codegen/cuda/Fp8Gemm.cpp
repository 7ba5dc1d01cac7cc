// Fp8Gemm.h's analysis, apart from the code it drives: which kern.gemm ops
// run as cuBLASLt FP8 products (Fp8Gemm::of), the shared-workspace slots
// of their current-scaling casts (Fp8Slot), and the kept casts of a
// function: each operand cast once for all its FP8 readers, batched at the
// first product where nothing writes the source before (Fp8KeptPlan). The
// emission is in Fp8GemmKernels.cpp and Fp8CastProducers.cpp.
#include "compiler/codegen/cuda/Fp8Gemm.h"
#include "compiler/codegen/common/CTypes.h"
#include "compiler/codegen/common/LoopLayout.h"
#include "compiler/codegen/cuda/BufferFootprint.h"
#include "dialects/common/ModelAttrs.h"

#include <algorithm>

#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

Fp8Gemm Fp8Gemm::of(Operation *op) {
  Fp8Gemm f;
  auto attr = op->getAttrOfType<StringAttr>(model::kFp8GemmAttr);
  auto g = dyn_cast<kern::GemmOp>(op);
  auto e = dyn_cast<kern::GemmEpilogueOp>(op);
  if (!attr || (!g && !e))
    return f;
  f.marked = true;
  auto [a, b] = attr.getValue().split('x');
  auto known = [](StringRef s) { return s == "e4m3" || s == "e5m2"; };
  if (!known(a) || !known(b)) {
    f.declined = "unknown FP8 formats '" + attr.getValue().str() + "'";
    return f;
  }
  f.aE5M2 = a == "e5m2";
  f.bE5M2 = b == "e5m2";
  bool unfoldedBatch = false; // a batch that does not fold into M
  if (g) {
    GemmShape s = GemmShape::of(g);
    f.ta = s.ta;
    f.tb = s.tb;
    f.m = s.batchCount * s.m;
    f.n = s.n;
    f.k = s.k;
    unfoldedBatch = s.batchCount > 1 && !s.foldsBatchIntoM();
    f.a = g.getA(), f.b = g.getB(), f.out = g.getOut();
  } else { // rank 2 (its verifier)
    f.ta = e.getTransposeA();
    f.tb = e.getTransposeB();
    MemRefType out = mrt(e.getOut());
    f.m = out.getDimSize(0);
    f.n = out.getDimSize(1);
    f.k = mrt(e.getA()).getDimSize(f.ta ? 0 : 1);
    f.a = e.getA(), f.b = e.getB(), f.out = e.getOut(), f.residual = e.getResidual();
  }
  Type out = mrt(f.out).getElementType();
  auto castable = [](Type t) { return t.isF32() || t.isBF16() || t.isF16(); };
  if (f.aE5M2 && f.bE5M2)
    f.declined = "two E5M2 operands (cuBLASLt has no such product)";
  else if (!out.isBF16() && !out.isF32())
    f.declined = "its result is neither bf16 nor f32";
  else if (!castable(mrt(f.a).getElementType()) || !castable(mrt(f.b).getElementType()))
    f.declined = "an operand is not f32, bf16 or f16";
  else if (g && (g.getAlpha().convertToDouble() != 1.0 || g.getBeta().convertToDouble() != 0.0))
    f.declined = "alpha != 1 or beta != 0";
  else if (e && (e.getBias() || e.getAux() || e.getActivation() != "none" || !f.residual))
    f.declined = "an epilogue other than a residual (tcc's FP8 products take none yet)";
  else if (unfoldedBatch)
    f.declined = "a batch that does not fold into M";
  else if (f.k % 16 != 0 || f.n % 16 != 0)
    f.declined = llvm::formatv("K = {0} and N = {1} must be multiples of 16", f.k, f.n).str();
  else if (f.m == 0)
    f.declined = "an empty product";
  return f;
}

Fp8Slot Fp8Slot::of(Operation *root) {
  Fp8Slot slot;
  root->walk([&](Operation *g) {
    Fp8Gemm f = Fp8Gemm::of(g);
    if (f.runs())
      slot.elements = std::max({slot.elements, f.m * f.k, f.n * f.k});
  });
  return slot;
}

int64_t Fp8KeptCast::bytes() const {
  return (plain ? Fp8Slot::align(elements) : 0) + (transposed ? Fp8Slot::align(elements) : 0) +
         (scale ? Fp8Slot::kScaleBytes : 0);
}
int64_t Fp8KeptCast::transposedOffset() const {
  return offset + (plain ? Fp8Slot::align(elements) : 0);
}
int64_t Fp8KeptCast::scaleOffset() const {
  return transposedOffset() + (transposed ? Fp8Slot::align(elements) : 0);
}

std::pair<Value, int64_t> fp8ScalingRecords(func::FuncOp f) {
  for (BlockArgument arg : f.getArguments()) {
    auto state = f.getArgAttrOfType<DictionaryAttr>(arg.getArgNumber(), model::kOptStateAttr);
    auto stateName = state ? state.getAs<StringAttr>("name") : nullptr;
    auto type = dyn_cast<MemRefType>(arg.getType());
    if (stateName && stateName.getValue() == model::kFp8ScalingState && type &&
        type.getRank() == 2 && type.getDimSize(1) == model::kFp8ScalingRecordFloats &&
        type.getElementType().isF32())
      return {arg, type.getDimSize(0)};
  }
  return {Value(), 0};
}

Fp8KeptPlan Fp8KeptPlan::of(func::FuncOp f) {
  Fp8KeptPlan plan;
  if (f.isExternal())
    return plan;
  const bool delayed = fp8ScalingRecords(f).second > 0;
  SmallVector<Operation *> ops; // by index - 1
  struct Open { // a cast made, while nothing has written its source
    Footprint source;
    Type element;
    OperandCast c;
    Operation *first;
    int operand;
    int64_t firstIndex; // the first reader's position
    int cast = -1;
  };
  SmallVector<Open> open;
  SmallVector<std::pair<int64_t, int64_t>> life; // per cast: first and last reader
  int64_t index = 0;
  int64_t batchIndex = 0; // the first FP8 product's
  for (Operation &op : f.getBody().front()) {
    ++index;
    ops.push_back(&op);
    if (Fp8Gemm fg = Fp8Gemm::of(&op); fg.runs()) {
      Operation *g = &op;
      if (!plan.batchAt) {
        plan.batchAt = &op;
        batchIndex = index;
      }
      for (int which = 0; which < 2; ++which) {
        OperandCast c = operandOf(fg, which);
        Type et = mrt(c.value).getElementType();
        Footprint source = footprint(c.value);
        auto it = llvm::find_if(open, [&](const Open &o) {
          return o.c.e5m2 == c.e5m2 && o.c.rows == c.rows && o.c.cols == c.cols &&
                 o.element == et && sameStart(o.source, source);
        });
        if (it == open.end()) {
          open.push_back({source, et, c, g, which, index});
          continue;
        }
        if (it->cast < 0) {
          it->cast = static_cast<int>(plan.casts.size());
          Fp8KeptCast kept;
          kept.elements = c.rows * c.cols;
          plan.casts.push_back(kept);
          life.push_back({it->firstIndex, index});
          plan.uses[{it->first, it->operand}] = {it->cast, true};
          plan.firstReader[it->cast] = {it->first, it->operand};
        }
        Fp8KeptCast &kept = plan.casts[it->cast];
        (c.transposed ? kept.transposed : kept.plain) = true;
        life[it->cast].second = index;
        plan.uses[{g, which}] = {it->cast, false};
      }
    }
    llvm::erase_if(open, [&](const Open &o) { return mayWrite(&op, o.source); });
  }
  // Groups (Fp8Gemm.h): every result of a multi-result elementwise op is
  // the source of a kept cast, all of one format and shape.
  llvm::DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = static_cast<int64_t>(i) + 1;
  for (Operation *op : ops) {
    auto e = dyn_cast<kern::ElementwiseOp>(op);
    if (!e || e.getOutputs().size() < 2)
      continue;
    Fp8KeptPlan::Group group;
    group.op = op;
    std::optional<OperandCast> like;
    for (Value result : e.getOutputs()) {
      Footprint f = footprint(result);
      int found = -1;
      for (int k = 0; k < static_cast<int>(plan.casts.size()) && !f.argument; ++k) {
        auto [reader, operand] = plan.firstReader.lookup(k);
        OperandCast c = operandOf(Fp8Gemm::of(reader), operand);
        Footprint s = footprint(c.value);
        if (!s.argument && s.begin == f.begin && s.end == f.end &&
            position.lookup(reader) > position.lookup(op) &&
            (!like || (c.e5m2 == like->e5m2 && c.rows == like->rows && c.cols == like->cols &&
                       mrt(c.value).getElementType() == mrt(like->value).getElementType()))) {
          found = k;
          like = c;
          break;
        }
      }
      if (found < 0 || plan.groupOf.count(found) || llvm::is_contained(group.casts, found))
        break;
      group.casts.push_back(found);
    }
    if (group.casts.size() != e.getOutputs().size())
      continue;
    group.maker = *llvm::min_element(
        group.casts, [&](int a, int b) { return life[a].first < life[b].first; });
    for (int k : group.casts) {
      plan.groupOf[k] = static_cast<int>(plan.groups.size());
      life[k].first = life[group.maker].first;
      auto [reader, operand] = plan.firstReader.lookup(k);
      OperandCast c = operandOf(Fp8Gemm::of(reader), operand);
      (c.transposed ? plan.casts[k].transposed : plan.casts[k].plain) = true;
    }
    plan.groups.push_back(std::move(group));
  }
  // Batched casts (Fp8Gemm.h): delayed scaling, the vector form's shapes,
  // a source defined before the first product and written by nothing from
  // there to the first reader.
  if (!delayed)
    plan.batchAt = nullptr;
  const int madeCasts = static_cast<int>(plan.casts.size()); // own entries come after
  llvm::DenseMap<int, int64_t> firstReaderIndex;
  for (int k = 0; plan.batchAt && k < madeCasts; ++k) {
    if (plan.groupOf.count(k))
      continue;
    auto [reader, operand] = plan.firstReader.lookup(k);
    OperandCast c = operandOf(Fp8Gemm::of(reader), operand);
    Type et = mrt(c.value).getElementType();
    if (!(et.isBF16() || et.isF16()) || c.rows % 8 != 0 || c.cols % 8 != 0 ||
        c.rows >= (int64_t{1} << 31) || c.cols >= (int64_t{1} << 31))
      continue;
    Operation *def = c.value.getDefiningOp();
    if (def && (def->getBlock() != plan.batchAt->getBlock() ||
                !def->isBeforeInBlock(plan.batchAt)))
      continue;
    Footprint source = footprint(c.value);
    bool written = false;
    for (int64_t i = life[k].first - 1; i >= batchIndex && !written; --i)
      written = mayWrite(ops[i - 1], source);
    if (written)
      continue;
    Fp8KeptCast &kept = plan.casts[k];
    kept.batched = true;
    plan.batchedCasts.push_back(k);
    const int64_t firstIndex = life[k].first;
    firstReaderIndex[k] = 2 * firstIndex + operand; // a before b, as their records go
    life[k].first = batchIndex;
    if (!(c.transposed ? kept.transposed : kept.plain)) { // the own layout, until the reader
      Fp8KeptCast own;
      own.elements = kept.elements;
      (c.transposed ? own.transposed : own.plain) = true;
      own.scale = false;
      kept.ownEntry = static_cast<int>(plan.casts.size());
      plan.casts.push_back(own);
      life.push_back({batchIndex, firstIndex});
    }
  }
  // In the order of their first readers (the order of their records).
  llvm::stable_sort(plan.batchedCasts, [&](int a, int b) {
    return firstReaderIndex.lookup(a) < firstReaderIndex.lookup(b);
  });
  if (plan.batchedCasts.empty())
    plan.batchAt = nullptr;
  // Offsets: first fit, in the order the casts start, among the casts
  // still live then.
  SmallVector<int> order(plan.casts.size()), live;
  for (int i = 0; i < static_cast<int>(order.size()); ++i)
    order[i] = i;
  llvm::stable_sort(order, [&](int a, int b) { return life[a].first < life[b].first; });
  for (int i : order) {
    llvm::erase_if(live, [&](int j) { return life[j].second < life[i].first; });
    llvm::sort(live, [&](int a, int b) { return plan.casts[a].offset < plan.casts[b].offset; });
    int64_t offset = 0, size = plan.casts[i].bytes();
    for (int j : live) {
      if (offset + size <= plan.casts[j].offset)
        break;
      offset = std::max(offset, Fp8Slot::align(plan.casts[j].offset + plan.casts[j].bytes()));
    }
    plan.casts[i].offset = offset;
    plan.bytes = std::max(plan.bytes, offset + size);
    live.push_back(i);
  }
  // No two casts alive at once share a byte (an internal invariant: a
  // violation would corrupt operands silently, so it stops the compiler).
  for (size_t i = 0; i < plan.casts.size(); ++i)
    for (size_t j = i + 1; j < plan.casts.size(); ++j) {
      const Fp8KeptCast &x = plan.casts[i], &y = plan.casts[j];
      bool together = life[i].first <= life[j].second && life[j].first <= life[i].second;
      bool shared = x.offset < y.offset + y.bytes() && y.offset < x.offset + x.bytes();
      if (together && shared)
        llvm::report_fatal_error("tcc: FP8 kept casts overlap in @" + f.getName() +
                                 " (an internal error)");
    }
  return plan;
}

int64_t fp8KeptCastBytes(Operation *root) {
  int64_t bytes = 0;
  root->walk([&](func::FuncOp f) { bytes = std::max(bytes, Fp8KeptPlan::of(f).bytes); });
  return bytes;
}

} // namespace tcc::codegen::cuda
