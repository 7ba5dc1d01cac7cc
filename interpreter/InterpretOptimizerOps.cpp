// The reference interpreter's optimizer ops (TgOptimizerOps.td) (see
// TgInterpreter.h): one plain, float64 function per op, written from the
// PyTorch definitions rather than from the ops' scalar bodies.
#include <algorithm>
#include <cmath>

#include "interpreter/InterpreterSupport.h"
#include "dialects/tg/TgDialect.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tcc::interp {
namespace {

// torch.optim.SGD without momentum: p - lr * (g + wd * p).
Tensor evalSgdUpdate(tg::SgdUpdateOp op, const Tensor &param,
                     const Tensor &grad, const Tensor &learningRate) {
  double lr = learningRate.data[0];
  double wd = op.getWeightDecay().convertToDouble();
  Tensor out = param;
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.data[i] = param.data[i] - lr * (grad.data[i] + wd * param.data[i]);
  return out;
}

// torch.optim.SGD with momentum (dampening 0, no nesterov), buffer from 0.
std::vector<Tensor> evalMomentumUpdate(tg::MomentumUpdateOp op,
                                       const Tensor &param, const Tensor &grad,
                                       const Tensor &buffer,
                                       const Tensor &learningRate) {
  double lr = learningRate.data[0];
  double momentum = op.getMomentum().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  Tensor newParam = param, newBuffer = buffer;
  for (int64_t i = 0; i < param.numElements(); ++i) {
    double d = grad.data[i] + wd * param.data[i];
    newBuffer.data[i] = momentum * buffer.data[i] + d;
    newParam.data[i] = param.data[i] - lr * newBuffer.data[i];
  }
  return {std::move(newParam), std::move(newBuffer)};
}

// torch.optim.AdamW (amsgrad off) at optimizer step `step` (0-based).
std::vector<Tensor> evalAdamWUpdate(tg::AdamWUpdateOp op, const Tensor &param,
                                    const Tensor &grad, const Tensor &m,
                                    const Tensor &v, const Tensor &learningRate,
                                    const Tensor &step) {
  double lr = learningRate.data[0];
  double t = step.data[0] + 1.0;
  double beta1 = op.getBeta1().convertToDouble();
  double beta2 = op.getBeta2().convertToDouble();
  double eps = op.getEps().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  double biasCorrection1 = 1.0 - std::pow(beta1, t);
  double biasCorrection2 = 1.0 - std::pow(beta2, t);
  Tensor newParam = param, newM = m, newV = v;
  for (int64_t i = 0; i < param.numElements(); ++i) {
    double g = grad.data[i];
    double p = param.data[i] * (1.0 - lr * wd);
    newM.data[i] = beta1 * m.data[i] + (1.0 - beta1) * g;
    newV.data[i] = beta2 * v.data[i] + (1.0 - beta2) * g * g;
    double mHat = newM.data[i] / biasCorrection1;
    double vHat = newV.data[i] / biasCorrection2;
    // PyTorch's denominator: sqrt(v') / sqrt(bc2) + eps (= sqrt(v_hat) + eps).
    newParam.data[i] = p - lr * mHat / (std::sqrt(vHat) + eps);
  }
  return {std::move(newParam), std::move(newM), std::move(newV)};
}

} // namespace

std::optional<OpResults> evaluateOptimizerOp(Operation *op,
                                             ArrayRef<const Tensor *> in) {
  return llvm::TypeSwitch<Operation *, std::optional<OpResults>>(op)
      .Case([&](tg::SgdUpdateOp sgd) {
        return singleResult(evalSgdUpdate(sgd, *in[0], *in[1], *in[2]));
      })
      .Case([&](tg::MomentumUpdateOp mom) -> std::optional<OpResults> {
        return evalMomentumUpdate(mom, *in[0], *in[1], *in[2], *in[3]);
      })
      .Case([&](tg::AdamWUpdateOp adam) -> std::optional<OpResults> {
        return evalAdamWUpdate(adam, *in[0], *in[1], *in[2], *in[3], *in[4],
                               *in[5]);
      })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace tcc::interp
