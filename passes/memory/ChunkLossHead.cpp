//===- ChunkLossHead.cpp - the loss head's logits in row chunks ------------===//
//
// A language model's loss head makes the step's largest tensor: the logits
// (N rows = batch x context, V = vocabulary columns; GPT-2 124M at B=16:
// 16384 x 50304, 1.6 GB in bf16), alive from the forward's last GEMM to the
// cross-entropy gradient at the start of the backward, on top of every
// saved activation. Nothing else in the step needs them whole: each row's
// loss and gradient depend on that row only, and the two GEMMs that read the
// gradient either keep rows apart (dX = G W) or sum over them (dW = G^T X).
//
// After autodiff, the head is
//
//   L  = matmul(X, W^T)                      (..., V)     X (..., D)
//   R  = reshape(L)                          (N, V)
//   r  = softmax_cross_entropy(R, labels)    (N)          -> the loss
//   G  = softmax_cross_entropy_grad(R, labels, up)        (N, V)
//   dX = matmul(G, W)                        (..., D)     rows apart
//   dW = matmul(G^T, X)                      (V, D)       a sum over rows
//
// This pass computes it in `chunks` pieces of N / chunks rows, all at the
// place of L (the forward's end), so one piece of logits lives at a time:
//
//   for k:  X_k = rows of X;  L_k = X_k W^T;  r_k = sce(L_k);
//           G_k = sce_grad(L_k, up_k);  dX_k = G_k W;
//           dW  = (k == 0 ? 0 : dW) + G_k^T X_k      (f32, one GEMM epilogue)
//   r = concat(r_k);  dX = concat(dX_k)
//
// The losses and dX are those of the unchunked step row for row; dW is
// summed in f32 across chunks (the unchunked GEMM rounds once to the
// operands' type): more exact, not bit-identical. Its readers that cast it
// to f32 read the sum directly. The upstream gradient `up` and the labels
// are moved up to the head when they are computed later (they depend on
// constants and arguments only; otherwise the head is left, and the report
// says why).
//
// The extra cost is the f32 sum (each chunk reads and writes it) and the
// smaller GEMMs: @train_step's tg.loss_chunk_seconds (set when a head was
// chunked) estimates it at the nominal rates tg-remat uses, so that tcc
// compile --memory-budget can weigh chunks against recomputation.
// tg.loss_chunk_decisions is the report.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Builders.h"
#include "passes/common/DecisionReport.h"
#include "passes/common/NodeNames.h"
#include "passes/common/TensorBytes.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {
#define GEN_PASS_DEF_TGCHUNKLOSSHEAD
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;
namespace build = tcc::tg::build;

namespace {

constexpr llvm::StringLiteral kChunkAttr = "tg.loss_chunk";
constexpr llvm::StringLiteral kDecisionsAttr = "tg.loss_chunk_decisions";
// tg-remat's nominal rates (Rematerialize.cpp).
constexpr double kBytesPerSecond = 2.5e12;
constexpr double kLaunchSeconds = 4e-6;

// v through reshapes back to the value they view.
Value throughReshapes(Value v) {
  while (auto r = v.getDefiningOp<tg::ReshapeOp>())
    v = r.getInput();
  return v;
}

// The users of v and of reshapes of it, other than those reshapes; the
// reshapes themselves into `views`.
void collectReaders(Value v, SmallVectorImpl<Operation *> &readers,
                    SmallVectorImpl<Operation *> &views) {
  for (Operation *user : v.getUsers()) {
    if (auto r = dyn_cast<tg::ReshapeOp>(user)) {
      views.push_back(r);
      collectReaders(r.getResult(), readers, views);
    } else {
      readers.push_back(user);
    }
  }
}

// Whether `v` is the rows the logits were made from (X as (rows, D)):
// sliced with them, not apart.
bool isLogitsInput(Value v, tg::MatmulOp product, int64_t rows) {
  auto t = cast<RankedTensorType>(v.getType());
  auto x = cast<RankedTensorType>(product.getLhs().getType());
  return throughReshapes(v) == throughReshapes(product.getLhs()) && t.getRank() == 2 &&
         t.getDimSize(0) == rows && t.getDimSize(1) == x.getShape().back();
}

// A GEMM that sums over G's rows: G^T Y (gradLhs) or Y^T G.
struct SumGemm {
  tg::MatmulOp op;
  bool gradLhs;
  Value rows; // Y: (rows, D)
};

struct Head {
  tg::MatmulOp logits;                 // L = X W^T
  tg::SoftmaxCrossEntropyOp loss;      // r
  tg::SoftmaxCrossEntropyGradOp grad;  // G
  SmallVector<Operation *> logitViews; // reshapes of L (R among them)
  SmallVector<Operation *> gradViews;  // reshapes of G
  SmallVector<tg::MatmulOp> rowGemms;  // dX = G W: rows apart
  SmallVector<SumGemm> sumGemms;       // dW: sums over the rows
  int64_t rows = 0, classes = 0;
};

// Why `g`'s head cannot be chunked ("" when it can; `head` then filled).
std::string match(tg::SoftmaxCrossEntropyGradOp g, Head &head) {
  Value rowsOfLogits = g.getLogits();
  auto type = cast<RankedTensorType>(rowsOfLogits.getType());
  if (type.getRank() != 2)
    return "its logits are not (rows, classes)";
  head.rows = type.getDimSize(0);
  head.classes = type.getDimSize(1);
  head.grad = g;
  auto product = throughReshapes(rowsOfLogits).getDefiningOp<tg::MatmulOp>();
  if (!product || product->getBlock() != g->getBlock())
    return "its logits are not made by a tg.matmul of the step";
  if (product.getTransposeLhs() || cast<RankedTensorType>(product.getRhs().getType()).getRank() != 2)
    return "the logits' matmul is not rows x a weight matrix";
  head.logits = product;
  // L is read by the loss and its gradient only (through reshapes).
  SmallVector<Operation *> readers;
  collectReaders(product.getResult(), readers, head.logitViews);
  for (Operation *reader : readers) {
    if (reader == g.getOperation())
      continue;
    auto loss = dyn_cast<tg::SoftmaxCrossEntropyOp>(reader);
    if (!loss || loss.getLogits() != rowsOfLogits || loss.getLabels() != g.getLabels() ||
        head.loss)
      return llvm::formatv("the logits are also read by {0}", reader->getName()).str();
    head.loss = loss;
  }
  if (!head.loss)
    return "no tg.softmax_cross_entropy reads the logits";
  // G feeds GEMMs only: rows apart, or summed over the rows.
  readers.clear();
  collectReaders(g.getResult(), readers, head.gradViews);
  for (Operation *reader : readers) {
    auto gemm = dyn_cast<tg::MatmulOp>(reader);
    if (!gemm)
      return llvm::formatv("the logits' gradient is read by {0}", reader->getName()).str();
    bool gradLhs = throughReshapes(gemm.getLhs()) == g.getResult();
    Value other = gradLhs ? gemm.getRhs() : gemm.getLhs();
    auto otherType = cast<RankedTensorType>(other.getType());
    if (throughReshapes(other) == g.getResult())
      return "a GEMM reads the logits' gradient twice";
    // Reshapes of G keep its rows in order when the classes stay last.
    auto gradType = cast<RankedTensorType>((gradLhs ? gemm.getLhs() : gemm.getRhs()).getType());
    if (gradType.getShape().back() != head.classes)
      return "a GEMM reads the logits' gradient reshaped across its rows";
    if (gradLhs && !gemm.getTransposeLhs() && otherType.getRank() == 2) {
      head.rowGemms.push_back(gemm);
      continue;
    }
    if (gemm.getTransposeLhs() && !gemm.getTransposeRhs() && gradType.getRank() == 2 &&
        otherType.getRank() == 2 && otherType.getDimSize(0) == head.rows) {
      head.sumGemms.push_back({gemm, gradLhs, other});
      continue;
    }
    return "a GEMM reads the logits' gradient neither by rows nor summed over them";
  }
  return "";
}

// Moves what makes v (pure tg ops on arguments and constants) before
// `point`; false (nothing moved that would matter) when v depends on an op
// in `avoid` or on anything that cannot move.
bool hoist(Value v, Operation *point, const llvm::DenseSet<Operation *> &avoid, int depth = 0) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return true; // an argument
  if (def->getBlock() != point->getBlock())
    return def->getParentRegion()->isProperAncestor(point->getParentRegion());
  if (def->isBeforeInBlock(point))
    return true;
  if (avoid.contains(def) || depth > 16 || def->getNumRegions() != 0 ||
      !isa<tg::TgDialect>(def->getDialect()))
    return false;
  for (Value operand : def->getOperands())
    if (!hoist(operand, point, avoid, depth + 1))
      return false;
  def->moveBefore(point);
  return true;
}

struct TgChunkLossHeadPass : tcc::impl::TgChunkLossHeadBase<TgChunkLossHeadPass> {
  using TgChunkLossHeadBase::TgChunkLossHeadBase;

  void runOnOperation() override {
    auto f = getOperation().lookupSymbol<func::FuncOp>("train_step");
    if (!f || chunks <= 1)
      return;
    OpBuilder attrs(f);
    SmallVector<Attribute> decisions;
    double seconds = 0;
    bool chunked = false;
    SmallVector<tg::SoftmaxCrossEntropyGradOp> grads(
        f.getBody().front().getOps<tg::SoftmaxCrossEntropyGradOp>());
    for (tg::SoftmaxCrossEntropyGradOp g : grads) {
      Head head;
      std::string why = match(g, head);
      std::string name = head.logits ? nodeName(head.logits.getLoc()) : nodeName(g.getLoc());
      if (why.empty() && head.rows % chunks != 0)
        why = llvm::formatv("{0} rows do not split into {1} equal chunks", head.rows,
                            int64_t(chunks))
                  .str();
      if (why.empty())
        why = prepare(head);
      if (!why.empty()) {
        decisions.push_back(attrs.getStringAttr(
            llvm::formatv("not chunked: {0}: {1}", name, why).str()));
        continue;
      }
      decisions.push_back(attrs.getStringAttr(chunk(head, name, seconds)));
      chunked = true;
    }
    if (decisions.empty())
      decisions.push_back(attrs.getStringAttr("no softmax_cross_entropy_grad in @train_step"));
    f->setAttr(kDecisionsAttr, attrs.getArrayAttr(decisions));
    if (chunked)
      f->setAttr(kLossChunkSecondsAttr, attrs.getF64FloatAttr(seconds));
  }

  // Moves the labels, the upstream gradient and the GEMMs' other operands
  // up to the logits' matmul, where the chunks go.
  std::string prepare(Head &head) {
    llvm::DenseSet<Operation *> avoid{head.loss, head.grad};
    for (Operation *v : head.logitViews)
      avoid.insert(v);
    for (Operation *v : head.gradViews)
      avoid.insert(v);
    for (tg::MatmulOp m : head.rowGemms)
      avoid.insert(m);
    for (const SumGemm &s : head.sumGemms)
      avoid.insert(s.op);
    Operation *point = head.logits;
    if (!hoist(head.grad.getLabels(), point, avoid))
      return "the labels are computed from the forward";
    if (!hoist(head.grad.getGrad(), point, avoid))
      return "the loss's upstream gradient depends on the forward";
    for (tg::MatmulOp m : head.rowGemms)
      if (!hoist(m.getRhs(), point, avoid))
        return "the weight the gradient GEMM reads is computed after the logits";
    for (const SumGemm &s : head.sumGemms)
      if (!isLogitsInput(s.rows, head.logits, head.rows) && !hoist(s.rows, point, avoid))
        return "the rows the weight gradient sums are computed after the logits";
    return "";
  }

  std::string chunk(Head &head, const std::string &name, double &seconds) {
    tg::MatmulOp product = head.logits;
    OpBuilder b(product);
    Location loc = product.getLoc();
    Operation *before = product->getPrevNode(); // the chunks go after it
    const int64_t n = head.rows / chunks;
    auto rowsOf = [&](Value v) { // v as (rows, last dimension)
      auto t = cast<RankedTensorType>(v.getType());
      return t.getRank() == 2 ? v : build::reshape(b, loc, v, {head.rows, t.getShape().back()});
    };
    Value x = rowsOf(product.getLhs());
    Value labels = head.grad.getLabels(), up = head.grad.getGrad();
    std::string note = llvm::formatv("{0}: logits in {1} chunks of {2} rows", name,
                                     int64_t(chunks), n)
                           .str();
    SmallVector<Value> losses;
    SmallVector<SmallVector<Value>> rowParts(head.rowGemms.size());
    SmallVector<Value> sums(head.sumGemms.size()), zeroBias(head.sumGemms.size());
    for (auto [i, s] : llvm::enumerate(head.sumGemms)) {
      RankedTensorType sumType = accumulatorType(s.op);
      zeroBias[i] = build::splat(
          b, loc, RankedTensorType::get({sumType.getShape().back()}, sumType.getElementType()),
          0.0);
    }
    for (int64_t k = 0; k < chunks; ++k) {
      Value xk = build::sliceAxis(b, loc, x, 0, k * n, n);
      Value labelsK = build::sliceAxis(b, loc, labels, 0, k * n, n);
      Value upK = build::sliceAxis(b, loc, up, 0, k * n, n);
      Value logitsK = build::matmul(b, loc, xk, product.getRhs(), false,
                                    product.getTransposeRhs());
      losses.push_back(tg::SoftmaxCrossEntropyOp::create(
          b, loc,
          RankedTensorType::get({n}, head.loss.getResult().getType().getElementType()),
          logitsK,
          labelsK));
      Value gradK = tg::SoftmaxCrossEntropyGradOp::create(b, loc, logitsK.getType(), logitsK,
                                                          labelsK, upK);
      for (auto [i, m] : llvm::enumerate(head.rowGemms))
        rowParts[i].push_back(build::matmul(b, loc, gradK, m.getRhs(), false,
                                            m.getTransposeRhs()));
      for (auto [i, s] : llvm::enumerate(head.sumGemms)) {
        // The rows the logits were made from are sliced once.
        Value rowsK = isLogitsInput(s.rows, product, head.rows)
                          ? xk
                          : build::sliceAxis(b, loc, s.rows, 0, k * n, n);
        Value lhs = s.gradLhs ? gradK : rowsK, rhs = s.gradLhs ? rowsK : gradK;
        sums[i] = tg::MatmulEpilogueOp::create(b, loc, accumulatorType(s.op), Type(), lhs, rhs,
                                               zeroBias[i], sums[i], b.getBoolAttr(true),
                                               b.getBoolAttr(false), b.getStringAttr("none"))
                      .getResult();
      }
    }
    // The readers of the unchunked values read the chunks'.
    Value loss = build::concat(b, loc, losses, 0);
    head.loss.getResult().replaceAllUsesWith(loss);
    int64_t sumBytes = 0;
    for (auto [i, m] : llvm::enumerate(head.rowGemms)) {
      Value whole = build::concat(b, loc, rowParts[i], 0);
      m.getResult().replaceAllUsesWith(
          build::reshape(b, loc, whole, cast<RankedTensorType>(m.getType()).getShape()));
    }
    for (auto [i, s] : llvm::enumerate(head.sumGemms)) {
      tg::MatmulOp m = s.op;
      Value sum = sums[i];
      sumBytes += tensorBytes(sum.getType());
      Type want = m.getType().getElementType();
      // A cast of the sum to its own type is the sum.
      for (Operation *user : llvm::make_early_inc_range(m.getResult().getUsers()))
        if (auto cast = dyn_cast<tg::CastOp>(user);
            cast && cast.getResult().getType() == sum.getType()) {
          cast.getResult().replaceAllUsesWith(sum);
          cast.erase();
        }
      if (!m.getResult().use_empty())
        m.getResult().replaceAllUsesWith(build::castTo(b, loc, sum, want));
    }
    // Every op made above carries the note.
    for (Operation *op = before ? before->getNextNode() : &product->getBlock()->front();
         op != product.getOperation(); op = op->getNextNode())
      op->setAttr(kChunkAttr, b.getStringAttr(note));

    // The unchunked head, readers first.
    SmallVector<Operation *> dead;
    SmallVector<Operation *> rowViews; // reshapes of X the sums read (now unread)
    for (tg::MatmulOp m : head.rowGemms)
      dead.push_back(m);
    for (const SumGemm &s : head.sumGemms) {
      dead.push_back(s.op);
      if (auto view = s.rows.getDefiningOp<tg::ReshapeOp>();
          view && isLogitsInput(s.rows, product, head.rows))
        rowViews.push_back(view);
    }
    for (Operation *v : llvm::reverse(head.gradViews))
      dead.push_back(v);
    dead.push_back(head.grad);
    dead.push_back(head.loss);
    for (Operation *v : llvm::reverse(head.logitViews))
      dead.push_back(v);
    dead.push_back(product);
    int64_t logitsBytes = tensorBytes(product.getType());
    for (Operation *op : dead) {
      assert(op->use_empty() && "a value of the unchunked head is still read");
      op->erase();
    }
    for (Operation *view : rowViews)
      if (view->use_empty())
        view->erase();
    // Each chunk's GEMM reads and writes the f32 sum but the first, which
    // writes it once; the unchunked step wrote dW in the operands' type and
    // cast it. Plus the launches of each chunk's pieces.
    double added = std::max(
        0.0, static_cast<double>((2 * chunks - 3) * sumBytes) / kBytesPerSecond +
                 static_cast<double>(chunks - 1) *
                     (4 + head.rowGemms.size() + head.sumGemms.size()) * kLaunchSeconds);
    seconds += added;
    return llvm::formatv("chunked {0}: {1} chunks of {2} rows; the live logits drop from "
                         "{3} to {4}; ~{5:F3} ms added at nominal rates ({6} summed in f32)",
                         name, int64_t(chunks), n, formatBytes(logitsBytes),
                         formatBytes(logitsBytes / chunks), added * 1e3,
                         formatBytes(sumBytes))
        .str();
  }

  // The weight gradient summed in f32 when its operands are 16-bit.
  static RankedTensorType accumulatorType(tg::MatmulOp m) {
    auto t = cast<RankedTensorType>(m.getType());
    Type elem = build::isHalfFloat(t.getElementType())
                    ? Type(Float32Type::get(t.getContext()))
                    : t.getElementType();
    return RankedTensorType::get(t.getShape(), elem);
  }
};

} // namespace

void tcc::writeChunkLossHeadReport(ModuleOp module, llvm::raw_ostream &os) {
  writeFunctionDecisions(
      module, kDecisionsAttr,
      "# tg-chunk-loss-head: the loss head's logits computed in row chunks with their\n"
      "# gradient, so one chunk of logits is live at a time (tcc compile --loss-chunks,\n"
      "# or chosen by --memory-budget).\n",
      os);
}
