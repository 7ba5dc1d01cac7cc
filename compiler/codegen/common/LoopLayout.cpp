#include "compiler/codegen/common/LoopLayout.h"

#include <algorithm>

#include "compiler/codegen/common/CTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen {

SmallVector<int64_t> contiguousStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> in, ArrayRef<int64_t> outShape) {
  SmallVector<int64_t> strides(outShape.size(), 0);
  int64_t stride = 1;
  int64_t lead = outShape.size() - in.size();
  for (int64_t i = in.size() - 1; i >= 0; --i) {
    if (in[i] != 1)
      strides[i + lead] = stride;
    stride *= in[i];
  }
  return strides;
}

LoopNest LoopNest::build(ArrayRef<int64_t> shape,
                         ArrayRef<SmallVector<int64_t>> operandStrides) {
  LoopNest nest;
  nest.strides.resize(operandStrides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    bool merge = !nest.sizes.empty();
    for (size_t k = 0; merge && k < operandStrides.size(); ++k)
      merge = nest.strides[k].back() == operandStrides[k][d] * shape[d];
    if (merge) {
      nest.sizes.back() *= shape[d];
      for (size_t k = 0; k < operandStrides.size(); ++k)
        nest.strides[k].back() = operandStrides[k][d];
      continue;
    }
    nest.sizes.push_back(shape[d]);
    for (size_t k = 0; k < operandStrides.size(); ++k)
      nest.strides[k].push_back(operandStrides[k][d]);
  }
  return nest;
}

int64_t LoopNest::numElements() const {
  int64_t n = 1;
  for (int64_t s : sizes)
    n *= s;
  return n;
}

std::string LoopNest::index(size_t k, int64_t base) const {
  std::string s;
  for (auto [d, st] : llvm::enumerate(strides[k])) {
    if (!st)
      continue;
    s += s.empty() ? "" : " + ";
    s += st == 1 ? llvm::formatv("i{0}", d).str()
                 : llvm::formatv("i{0} * {1}", d, st).str();
  }
  if (base)
    s += (s.empty() ? "" : " + ") + std::to_string(base);
  return s.empty() ? std::string("0") : s;
}

void LoopNest::emit(llvm::raw_ostream &os, StringRef body, double work) const {
  std::string indent = "  ";
  if (sizes.empty()) { // a single element
    os << indent << "{\n";
    for (StringRef line : llvm::split(body, '\n'))
      if (!line.empty())
        os << indent << "  " << line << "\n";
    os << indent << "}\n";
    return;
  }
  if (work >= kParallelWork && numElements() >= 2) {
    size_t outer = sizes.size() > 1 ? sizes.size() - 1 : 1;
    os << indent << "#pragma omp parallel for schedule(static)";
    if (outer > 1)
      os << " collapse(" << outer << ")";
    os << "\n";
  }
  for (auto [d, size] : llvm::enumerate(sizes)) {
    os << indent
       << llvm::formatv("for (int64_t i{0} = 0; i{0} < {1}; ++i{0}) {{\n", d, size);
    indent += "  ";
  }
  for (StringRef line : llvm::split(body, '\n'))
    if (!line.empty())
      os << indent << line << "\n";
  for (size_t d = 0; d < sizes.size(); ++d) {
    indent.resize(indent.size() - 2);
    os << indent << "}\n";
  }
}

GemmShape GemmShape::of(kern::GemmOp g) {
  GemmShape s;
  ArrayRef<int64_t> as = mrt(g.getA()).getShape(), bs = mrt(g.getB()).getShape(),
                    cs = mrt(g.getOut()).getShape();
  s.ta = g.getTransposeA();
  s.tb = g.getTransposeB();
  s.m = cs[cs.size() - 2];
  s.n = cs[cs.size() - 1];
  s.k = as[as.size() - (s.ta ? 2 : 1)];
  s.batch.assign(cs.begin(), cs.end() - 2);
  s.aBatchShape.assign(as.begin(), as.end() - 2);
  s.bBatchShape.assign(bs.begin(), bs.end() - 2);
  for (int64_t d : s.batch) s.batchCount *= d;
  for (int64_t d : s.aBatchShape) s.aBatch *= d;
  for (int64_t d : s.bBatchShape) s.bBatch *= d;
  return s;
}

LoopNest GemmShape::batchLoop() const {
  SmallVector<int64_t> aStrides = broadcastStrides(aBatchShape, batch);
  SmallVector<int64_t> bStrides = broadcastStrides(bBatchShape, batch);
  for (int64_t &st : aStrides) st *= m * k;
  for (int64_t &st : bStrides) st *= k * n;
  LoopNest nest = LoopNest::build(batch, {aStrides, bStrides, contiguousStrides(batch)});
  for (int64_t &st : nest.strides[2]) st *= m * n;
  return nest;
}

SmallVector<StridedCopy> stridedCopies(Operation *op) {
  SmallVector<StridedCopy> copies;
  if (auto t = dyn_cast<kern::TransposeOp>(op)) {
    ArrayRef<int64_t> outShape = mrt(t.getOut()).getShape();
    SmallVector<int64_t> inStrides = contiguousStrides(mrt(t.getInput()).getShape()), permuted;
    for (int64_t p : t.getPerm())
      permuted.push_back(inStrides[p]);
    copies.push_back({SmallVector<int64_t>(outShape), t.getInput(), t.getOut(), permuted,
                      contiguousStrides(outShape), 0, 0});
  } else if (auto s = dyn_cast<kern::SliceOp>(op)) {
    ArrayRef<int64_t> outShape = mrt(s.getOut()).getShape();
    SmallVector<int64_t> inStrides = contiguousStrides(mrt(s.getInput()).getShape());
    int64_t base = 0;
    for (auto [d, start] : llvm::enumerate(s.getStarts()))
      base += start * inStrides[d];
    copies.push_back({SmallVector<int64_t>(outShape), s.getInput(), s.getOut(), inStrides,
                      contiguousStrides(outShape), base, 0});
  } else if (auto c = dyn_cast<kern::ConcatOp>(op)) {
    SmallVector<int64_t> outStrides = contiguousStrides(mrt(c.getOut()).getShape());
    int64_t offset = 0;
    for (Value v : c.getInputs()) {
      ArrayRef<int64_t> inShape = mrt(v).getShape();
      copies.push_back({SmallVector<int64_t>(inShape), v, c.getOut(), contiguousStrides(inShape),
                        outStrides, 0, offset * outStrides[c.getAxis()]});
      offset += inShape[c.getAxis()];
    }
  }
  return copies;
}

ReduceAxes ReduceAxes::of(kern::ReduceOp r) {
  return of(mrt(r.getInput()).getShape(), r.getAxes());
}

ReduceAxes ReduceAxes::of(ArrayRef<int64_t> shape, ArrayRef<int64_t> axes) {
  ReduceAxes a;
  SmallVector<int64_t> strides = contiguousStrides(shape);
  int64_t lastKept = -1, firstReduced = shape.size();
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (shape[d] == 1)
      continue;
    if (llvm::is_contained(axes, d)) {
      a.count *= shape[d];
      a.reducedSizes.push_back(shape[d]);
      a.reducedStrides.push_back(strides[d]);
      firstReduced = std::min(firstReduced, d);
    } else {
      a.keptSizes.push_back(shape[d]);
      a.keptStrides.push_back(strides[d]);
      lastKept = d;
    }
  }
  a.reducesContiguousTail = lastKept < firstReduced;
  return a;
}

} // namespace tcc::codegen
