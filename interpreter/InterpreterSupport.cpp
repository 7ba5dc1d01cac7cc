// The helpers the reference interpreter's core and its op-group files share
// (declared in InterpreterSupport.h).
#include "interpreter/InterpreterSupport.h"

#include "tcc/counter_rng.h"

#include <cmath>
#include <cstdio>

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace tcc::interp {

// Shortest exact form of a number for messages: "2", "-1", "0.5".
std::string numberStr(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", x);
  return buffer;
}

ArrayRef<int64_t> staticShape(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

// Row-major multi-index of the flat position `flat` in `shape`.
std::vector<int64_t> unravel(int64_t flat, ArrayRef<int64_t> shape) {
  std::vector<int64_t> index(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

// Flat position of a multi-index in `shape`.
int64_t ravel(ArrayRef<int64_t> index, ArrayRef<int64_t> shape) {
  int64_t flat = 0;
  for (auto [i, d] : llvm::zip_equal(index, shape))
    flat = flat * d + i;
  return flat;
}

// numpy broadcast of `in` to `shape`: dimensions align at the trailing end;
// a size-1 (or missing leading) dimension of `in` repeats.
Tensor broadcast(const Tensor &in, ArrayRef<int64_t> shape) {
  Tensor out = Tensor::zeros(shape);
  size_t lead = shape.size() - in.shape.size();
  for (int64_t flat = 0; flat < out.numElements(); ++flat) {
    std::vector<int64_t> outIndex = unravel(flat, shape);
    std::vector<int64_t> inIndex(in.shape.size());
    for (size_t d = 0; d < in.shape.size(); ++d)
      inIndex[d] = in.shape[d] == 1 ? 0 : outIndex[d + lead];
    out.data[flat] = in.data[ravel(inIndex, in.shape)];
  }
  return out;
}

double roundTo(double x, const llvm::fltSemantics &semantics, APFloat::roundingMode mode) {
  APFloat v(x);
  bool losesInfo = false;
  v.convert(semantics, mode, &losesInfo);
  v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &losesInfo);
  return v.convertToDouble();
}

bool isRoundedElementType(Type elementType) {
  auto f = dyn_cast<FloatType>(elementType);
  return f && f.getWidth() < 32;
}

void roundToElementType(Tensor &t, Type elementType) {
  if (!isRoundedElementType(elementType))
    return;
  const llvm::fltSemantics &semantics =
      cast<FloatType>(elementType).getFloatSemantics();
  for (double &x : t.data)
    x = roundTo(x, semantics);
}

void roundToElementTypeAtRandom(Tensor &t, Type elementType, uint64_t seed,
                                uint64_t &counter, bool includeF32) {
  bool f32 = includeF32 && elementType.isF32();
  if (!isRoundedElementType(elementType) && !f32)
    return;
  const llvm::fltSemantics &semantics =
      cast<FloatType>(elementType).getFloatSemantics();
  for (double &x : t.data) {
    bool up = tcc_rng_bits(seed, /*stream=*/0, counter++) & 1;
    // Directed rounding saturates at the largest finite value; nearest
    // rounding (what a kernel does) overflows to infinity: keep that.
    double nearest = roundTo(x, semantics);
    x = std::isinf(nearest)
            ? nearest
            : roundTo(x, semantics,
                      up ? APFloat::rmTowardPositive : APFloat::rmTowardNegative);
  }
}

} // namespace tcc::interp
