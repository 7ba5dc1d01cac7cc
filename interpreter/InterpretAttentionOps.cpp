// The reference interpreter's flash-attention ops (tg.attention and
// tg.attention_grad, TgStructuralOps.td) (see TgInterpreter.h): their
// definitions written out one score at a time in float64, with none of a
// kernel's tiling or online softmax, so a kernel is compared against the
// plain formula. The dropout mask is tg.dropout's (counter_rng.h) on the
// (B, H, T, S) probabilities; bf16/f16 results are rounded by the core.
#include <cmath>
#include <limits>

#include "interpreter/InterpreterSupport.h"
#include "dialects/tg/TgDialect.h"
#include "llvm/ADT/TypeSwitch.h"
#include "tcc/counter_rng.h"

using namespace mlir;

namespace tcc::interp {
namespace {

// What both ops share: the shapes, the scores, the causal mask and the
// dropout mask of one tg.attention (attributes and rng operands).
class AttentionReference {
public:
  // `seed` and `step` are the rng operands' values (null without dropout).
  template <typename OpTy>
  AttentionReference(OpTy op, const Tensor &q, const Tensor &k, const Tensor &v,
                     const Tensor *seed, const Tensor *step)
      : batch(q.shape[0]), heads(q.shape[1]), queries(q.shape[2]),
        headDim(q.shape[3]), kvHeads(k.shape[1]), keys(k.shape[2]),
        scale(op.getScale().convertToDouble()), q_(q), k_(k), v_(v),
        causal_(op.getCausal()), rate_(op.getDropoutRate().convertToDouble()) {
    if (rate_ > 0) { // the verifier guarantees the operands and op_id
      rngSeed_ = static_cast<uint64_t>(static_cast<int64_t>(seed->data[0]));
      step_ = static_cast<uint64_t>(static_cast<int64_t>(step->data[0]));
      opId_ = static_cast<uint64_t>(op.getOpIdAttr().getInt());
    }
  }

  // B, H, T, D of q; Hkv, S of k and v.
  const int64_t batch, heads, queries, headDim, kvHeads, keys;
  const double scale;

  // Key j is hidden from query i (causal, bottom-right aligned like
  // tg.causal_mask: the queries are the last T of S positions).
  bool masked(int64_t i, int64_t j) const {
    return causal_ && j > i + (keys - queries);
  }

  // The key/value head that query head h reads (grouped heads).
  int64_t kvHeadOf(int64_t h) const { return h / (heads / kvHeads); }

  // Row index of (b, h, i) in q-shaped tensors, and of (b, h's key/value
  // head, j) in k-shaped ones; a row holds D values.
  int64_t queryRow(int64_t b, int64_t h, int64_t i) const {
    return (b * heads + h) * queries + i;
  }
  int64_t keyRow(int64_t b, int64_t h, int64_t j) const {
    return (b * kvHeads + kvHeadOf(h)) * keys + j;
  }
  const double *qRow(int64_t b, int64_t h, int64_t i) const {
    return &q_.data[queryRow(b, h, i) * headDim];
  }
  const double *kRow(int64_t b, int64_t h, int64_t j) const {
    return &k_.data[keyRow(b, h, j) * headDim];
  }
  const double *vRow(int64_t b, int64_t h, int64_t j) const {
    return &v_.data[keyRow(b, h, j) * headDim];
  }

  // s[b,h,i,j] = scale * q[b,h,i,:] . k[b,h',j,:].
  double score(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return scale * dot(qRow(b, h, i), kRow(b, h, j));
  }

  // The factor dropout applies to p[b,h,i,j]: 1 / (1 - rate) where
  // tg.dropout keeps element ((b*H + h)*T + i)*S + j of a (B, H, T, S)
  // tensor, else 0; 1 without dropout.
  double dropoutFactor(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (rate_ <= 0)
      return 1.0;
    auto index = static_cast<uint64_t>(queryRow(b, h, i) * keys + j);
    return tcc_dropout_keep(rngSeed_, opId_, step_, index, rate_)
               ? 1.0 / (1.0 - rate_)
               : 0.0;
  }

  double dot(const double *x, const double *y) const {
    double sum = 0.0;
    for (int64_t d = 0; d < headDim; ++d)
      sum += x[d] * y[d];
    return sum;
  }

private:
  const Tensor &q_, &k_, &v_;
  bool causal_;
  double rate_;
  uint64_t rngSeed_ = 0, step_ = 0, opId_ = 0;
};

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// result = dropout(softmax(masked scores)) @ v; lse = log-sum-exp of the
// masked, undropped scores (-inf and a zero result for a row with no key).
std::vector<Tensor> evalAttention(tg::AttentionOp op,
                                  ArrayRef<const Tensor *> in) {
  bool dropout = static_cast<bool>(op.getRngSeed());
  AttentionReference ref(op, *in[0], *in[1], *in[2], dropout ? in[3] : nullptr,
                         dropout ? in[4] : nullptr);
  Tensor out = Tensor::zeros(in[0]->shape);
  Tensor lse = Tensor::zeros({ref.batch, ref.heads, ref.queries});
  std::vector<double> scores(ref.keys);
  for (int64_t b = 0; b < ref.batch; ++b)
    for (int64_t h = 0; h < ref.heads; ++h)
      for (int64_t i = 0; i < ref.queries; ++i) {
        int64_t row = ref.queryRow(b, h, i);
        double maximum = kMinusInfinity;
        bool anyKey = false;
        for (int64_t j = 0; j < ref.keys; ++j)
          if (!ref.masked(i, j)) {
            scores[j] = ref.score(b, h, i, j);
            maximum = std::max(maximum, scores[j]);
            anyKey = true;
          }
        if (!anyKey) { // the result row stays 0
          lse.data[row] = kMinusInfinity;
          continue;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < ref.keys; ++j)
          if (!ref.masked(i, j))
            sum += std::exp(scores[j] - maximum);
        double rowLse = maximum + std::log(sum);
        lse.data[row] = rowLse;
        double *outRow = &out.data[row * ref.headDim];
        for (int64_t j = 0; j < ref.keys; ++j) {
          if (ref.masked(i, j))
            continue;
          double weight =
              std::exp(scores[j] - rowLse) * ref.dropoutFactor(b, h, i, j);
          const double *vRow = ref.vRow(b, h, j);
          for (int64_t d = 0; d < ref.headDim; ++d)
            outRow[d] += weight * vRow[d];
        }
      }
  return {std::move(out), std::move(lse)};
}

// With p = exp(s - lse) (from the lse operand, as the kernels recompute it)
// and P' = p * dropout factor:
//   dv += P'^T grad, dp = (grad . v) * dropout factor,
//   ds = p * (dp - rowsum(grad * out)), dq = scale ds k, dk += scale ds^T q;
// dk and dv sum over the query heads that share a key/value head.
std::vector<Tensor> evalAttentionGrad(tg::AttentionGradOp op,
                                      ArrayRef<const Tensor *> in) {
  const Tensor &out = *in[3], &lse = *in[4], &grad = *in[5];
  bool dropout = static_cast<bool>(op.getRngSeed());
  AttentionReference ref(op, *in[0], *in[1], *in[2], dropout ? in[6] : nullptr,
                         dropout ? in[7] : nullptr);
  Tensor dq = Tensor::zeros(in[0]->shape);
  Tensor dk = Tensor::zeros(in[1]->shape);
  Tensor dv = Tensor::zeros(in[2]->shape);
  for (int64_t b = 0; b < ref.batch; ++b)
    for (int64_t h = 0; h < ref.heads; ++h)
      for (int64_t i = 0; i < ref.queries; ++i) {
        int64_t row = ref.queryRow(b, h, i);
        double rowLse = lse.data[row];
        if (rowLse == kMinusInfinity) // a row with no key: p = 0
          continue;
        const double *gradRow = &grad.data[row * ref.headDim];
        const double *qRow = ref.qRow(b, h, i);
        double *dqRow = &dq.data[row * ref.headDim];
        double delta = ref.dot(gradRow, &out.data[row * ref.headDim]);
        for (int64_t j = 0; j < ref.keys; ++j) {
          if (ref.masked(i, j))
            continue;
          double p = std::exp(ref.score(b, h, i, j) - rowLse);
          double factor = ref.dropoutFactor(b, h, i, j);
          double ds = p * (ref.dot(gradRow, ref.vRow(b, h, j)) * factor - delta);
          int64_t kvRow = ref.keyRow(b, h, j);
          const double *kRow = ref.kRow(b, h, j);
          double *dkRow = &dk.data[kvRow * ref.headDim];
          double *dvRow = &dv.data[kvRow * ref.headDim];
          for (int64_t d = 0; d < ref.headDim; ++d) {
            dvRow[d] += p * factor * gradRow[d];
            dqRow[d] += ref.scale * ds * kRow[d];
            dkRow[d] += ref.scale * ds * qRow[d];
          }
        }
      }
  return {std::move(dq), std::move(dk), std::move(dv)};
}

} // namespace

std::optional<OpResults> evaluateAttentionOp(Operation *op,
                                             ArrayRef<const Tensor *> in) {
  return llvm::TypeSwitch<Operation *, std::optional<OpResults>>(op)
      .Case([&](tg::AttentionOp a) { return OpResults(evalAttention(a, in)); })
      .Case([&](tg::AttentionGradOp a) {
        return OpResults(evalAttentionGrad(a, in));
      })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace tcc::interp
