// The reference interpreter's optimizer ops (TgOptimizerOps.td) (see TgInterpreter.h): one plain,
// float64 function per op.
#include <algorithm>
#include <cmath>

#include "compiler/interpreter/InterpreterSupport.h"
#include "dialects/tg/TgDialect.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tcc::interp {
namespace {

Tensor evalSgdUpdate(const Tensor &param, const Tensor &grad,
                     const Tensor &learningRate) {
  Tensor out = param;
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.data[i] = param.data[i] - learningRate.data[0] * grad.data[i];
  return out;
}

} // namespace

std::optional<OpResults> evaluateOptimizerOp(Operation *op,
                                             ArrayRef<const Tensor *> in) {
  return llvm::TypeSwitch<Operation *, std::optional<OpResults>>(op)
      .Case([&](tg::SgdUpdateOp) {
        return singleResult(evalSgdUpdate(*in[0], *in[1], *in[2]));
      })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace tcc::interp
