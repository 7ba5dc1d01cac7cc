// The reference interpreter's rules for the position ops (tg.rope), written
// from the op's definition with plain loops.
#include "interpreter/InterpreterSupport.h"

#include "dialects/tg/TgDialect.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tcc::interp {

namespace {

// x (..., T, D), cos / sin (T, D), h = D / 2; for position j of a row:
//   plain:      out[j] = x[j] cos[j] + r[j] sin[j],  r = (-x[h:], x[:h])
//   transposed: out[j] = x[j] cos[j] + rT(x sin)[j], rT(y) = (y[h:], -y[:h])
Tensor evalRope(const Tensor &x, const Tensor &cos, const Tensor &sin,
                bool transposed) {
  int64_t d = x.shape.back(), h = d / 2, table = cos.numElements();
  Tensor out = Tensor::zeros(x.shape);
  for (int64_t row = 0; row < x.numElements() / d; ++row) {
    const double *xr = &x.data[row * d];
    int64_t t = (row * d) % table; // the row's position in the (T, D) tables
    const double *c = &cos.data[t], *s = &sin.data[t];
    for (int64_t j = 0; j < d; ++j) {
      double rotated;
      if (!transposed)
        rotated = (j < h ? -xr[j + h] : xr[j - h]) * s[j];
      else
        rotated = j < h ? xr[j + h] * s[j + h] : -xr[j - h] * s[j - h];
      out.data[row * d + j] = xr[j] * c[j] + rotated;
    }
  }
  return out;
}

} // namespace

std::optional<OpResults> evaluatePositionOp(Operation *op,
                                            ArrayRef<const Tensor *> in) {
  return llvm::TypeSwitch<Operation *, std::optional<OpResults>>(op)
      .Case([&](tg::RopeOp r) {
        return singleResult(evalRope(*in[0], *in[1], *in[2], r.getTransposed()));
      })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace tcc::interp
