// Kernels that move or set stored elements unchanged: one generated
// grid-stride kernel per strided copy (kern.transpose, slice, concat: one
// per concat input) and per non-zero kern.fill (zero fills are a
// cudaMemsetAsync), and dense kern.constant data as __device__ arrays.
#include "compiler/codegen/cuda/CudaStepEmitter.h"

#include <algorithm>
#include <cmath>

#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {


// dst[dst index] = src[src index] over c.shape (transpose, slice, concat).
LogicalResult CudaStepEmitter::emitCopy(Operation *op, llvm::raw_ostream &os,
                                        const StridedCopy &c, StringRef kind) {
  Value src = c.src, dst = c.dst;
  int64_t n = 1;
  for (int64_t d : c.shape)
    n *= d;
  if (n == 0)
    return success();
  LoopNest nest = LoopNest::build(c.shape, {c.srcStrides, c.dstStrides});
  std::string st = storageType(mrt(src).getElementType());
  std::string it = indexType(std::max<int64_t>(bufferBytes(mrt(src)), bufferBytes(mrt(dst))));
  GridStrideKernel k;
  k.kind = kind.str();
  k.params = "const " + st + " *src, " + st + " *dst";
  k.args = "src, dst";
  k.indexType = it;
  k.var = "i";
  k.items = n;
  k.body = "{\n" + coordinates(nest.sizes, "i", it) + "    dst[" + nest.index(1, c.dstBase) +
           "] = src[" + nest.index(0, c.srcBase) + "];\n  }\n";
  launchGridStride(os, op, k, {src, dst}, 0,
                   2.0 * n * kern::elementBytes(mrt(src).getElementType()));
  return success();
}

LogicalResult CudaStepEmitter::emitFill(kern::FillOp fill, llvm::raw_ostream &os) {
  MemRefType t = mrt(fill.getOut());
  Type et = t.getElementType();
  double v = fill.getValue().convertToDouble();
  int64_t n = t.getNumElements();
  if (n == 0)
    return success();
  if (v == 0 && !std::signbit(v)) {
    int32_t id = nextId();
    launch(os, fill, "cudaMemsetAsync",
           llvm::formatv("if (int32_t rc = tcc_cuda_host::memset_zero(s, {0}, {1}, {2})) "
                         "return rc;",
                         name(fill.getOut()), bufferBytes(t), id),
           "memset", 0, bufferBytes(t), LaunchCheck::InCall);
    return success();
  }
  std::string value = fillValue(et, v, CodeTarget::Cuda);
  GridStrideKernel k;
  k.kind = "fill";
  k.params = storageType(et) + " *dst";
  k.args = "dst";
  k.indexType = indexType(n);
  k.var = "i";
  k.items = n;
  k.body = "dst[i] = " + value + ";\n";
  launchGridStride(os, fill, k, {fill.getOut()}, 0, bufferBytes(t));
  return success();
}

LogicalResult CudaStepEmitter::emitConstant(kern::ConstantOp c, llvm::raw_ostream &os) {
  MemRefType t = c.getType();
  Type et = t.getElementType();
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense)
    return c.emitError("cuda codegen: only dense constants are supported");
  std::string st = storageType(et), values = denseInitializer(dense, et);
  std::string text = llvm::formatv(
      "static __device__ const {0} @NAME@_data[] = {{{1}\n};\n"
      "extern \"C\" void *@NAME@(void) {{\n"
      "  void *p = nullptr;\n"
      "  return cudaGetSymbolAddress(&p, @NAME@_data) == cudaSuccess ? p : nullptr;\n}\n",
      st, values);
  std::string accessor = kernels_.addConstant(text);
  std::string n = fresh(c.getResult());
  os << llvm::formatv("  {0} *{1} = static_cast<{0} *>({2}()); // constant {3}\n", st, n,
                      accessor, shapeComment(t));
  os << llvm::formatv("  if (!{0}) return tcc_cuda_host::set_error(\"cannot find the "
                      "device constant {1}\");\n",
                      n, accessor);
  return success();
}

} // namespace tcc::codegen::cuda
