// tg-fuse-matmul-epilogue: the elementwise ops that follow a product,
//
//   pre = add(matmul(x, w), bias)                 bias (N)
//   act = gelu(pre)                                optional (tanh or erf)
//   out = add(residual, [cast](act or pre))       optional residual
//
// or, for a product without a bias (LLaMA's attention and MLP outputs, the
// two halves of SwiGLU's input gradient),
//
//   out = add(residual, [cast](matmul(x, w)))
//
// become one tg.matmul_epilogue, which lowers to one GEMM with an epilogue
// (cuBLASLt BIAS / GELU_AUX_BIAS / DEFAULT with beta = 1 on the residual; a product
// and one loop on cpu) instead of the product plus one or two kernels that
// re-read its (M, N) result. Runs after the training recipe and the first
// CSE, so the backward's readers of the pre-activation (gelu_grad) are
// there: they read the op's pre_activation result.
//
// The backward's gelu_grad(pre, matmul(dy, w^T)) becomes one
// tg.matmul_dgelu (cuBLASLt's DGELU epilogue reading the saved
// pre-activation), so the (M, N) product is never stored and re-read.
//
// The backward's bias gradient, reduce_sum(dY) over every dimension but the
// last, becomes the second result of the weight-gradient product that reads
// the same dY, dW = matmul(X, dY) with X transposed: one
// tg.matmul_bias_grad (cuBLASLt's BGRADA epilogue) instead of a reduction
// kernel re-reading dY. GPT-2's c_fc bias gradient is taken from its
// weight-gradient product too, not from the DGELU product that writes that
// dY (DGELU_BGRAD): on the H200 (2026-11-25, tests/cuda/
// gemm_epilogue_test.cu --bench) the 16384x3072x768 DGELU_BGRAD product
// took 0.44 ms against 0.15 ms for DGELU and 0.04 ms more for BGRADA on
// the weight gradient. A bias gradient of the residual stream's gradient
// (the products that write the residual stream) is left to the
// layer_norm_grad that writes that dY (LowerNorms.h): the norm kernel adds
// it up as it writes, and the weight gradient runs as a plain GEMM
// (expected to run faster without BGRADA; not measured end to end yet:
// docs/performance.md, GPT-2 section).
//
// Every tg.matmul is reported: the tg.matmul_epilogue that replaced it
// carries tg.fuse_epilogue = "fused: <epilogue>" (with what was left out of
// the epilogue and why), a matmul left alone "not fused: <why>".
// writeMatmulEpilogueReport lists both (NN-tg-fuse-matmul-epilogue-report.txt
// in a --dump-dir).
#include "passes/Passes.h"
#include "passes/common/NodeNames.h"
#include "passes/lowering/LowerNorms.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgTypeHelpers.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {
#define GEN_PASS_DEF_TGFUSEMATMULEPILOGUE
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

constexpr const char kFuseEpilogueAttr[] = "tg.fuse_epilogue";

// The chain found after one matmul, and what was left out of it and why.
struct EpilogueMatch {
  tg::MatmulOp product;
  tg::AddOp biasAdd;       // null: no bias (then a residual add)
  Value bias;
  tg::GeluOp gelu;         // null: no activation
  tg::CastOp cast;         // null: the residual add reads the value directly
  tg::AddOp residualAdd;   // null: no residual
  Value residual;
  std::string leftOut;     // "; gelu left out: ..." notes for the report
};

bool isCuda(StringRef target) { return target == "cuda"; }

std::string quoted(Location loc) { return "'" + nodeName(loc) + "'"; }

// The one user of `v`, or null.
Operation *soleUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

// Why `m` cannot take an epilogue at all, or "" when it can.
std::string productRefusal(tg::MatmulOp m, StringRef target) {
  auto lhs = tg::rtt(m.getLhs()), rhs = tg::rtt(m.getRhs());
  Type elem = lhs.getElementType();
  // One GEMM: a weight matrix shared by every row block of the lhs.
  for (int64_t d : rhs.getShape().drop_back(2))
    if (d != 1)
      return "batched rhs: the epilogue GEMM takes one (K, N) matrix";
  if (m.getTransposeLhs() && lhs.getRank() > 2)
    return "transposed batched lhs: its rows are not one (M, K) matrix";
  if (isCuda(target) && elem.isF64())
    return "f64 product: cuBLASLt's bias epilogues take 16-bit and f32 "
           "products";
  return "";
}

// tg-amp chose FP8 for it: cuBLASLt's FP8 product takes a residual (C with
// beta = 1) but tcc gives it no bias, activation or gradient epilogue yet,
// so those stay separate kernels.
std::string fp8Refusal(tg::MatmulOp m) {
  if (auto fp8 = m->getAttrOfType<StringAttr>(model::kFp8Attr))
    return "an FP8 product (" + fp8.getValue().str() +
           "): FP8 products take only a residual, no bias, activation or gradient "
           "epilogue yet";
  return "";
}

// Transposed operands on cuda: the device check (tests/cuda/
// gemm_epilogue_test.cu, H200, 2026-11-24) found GELU_AUX_BIAS wrong with a
// transposed 16-bit A and B, so forward epilogues take plain operands only;
// DGELU was checked with a transposed B (the backward's dY W^T).
std::string transposeRefusal(tg::MatmulOp m, StringRef target, bool backward) {
  if (!isCuda(target))
    return "";
  if (m.getTransposeLhs())
    return "transposed lhs: not a layout the cuBLASLt epilogues were checked with";
  if (m.getTransposeRhs() && !backward)
    return "transposed rhs: not a layout the cuBLASLt bias epilogues were checked "
           "with";
  return "";
}

// The bias add after `m`: add(m, bias) or add(bias, m) with bias (N).
FailureOr<std::pair<tg::AddOp, Value>> biasAddOf(tg::MatmulOp m,
                                                 std::string &why) {
  Value p = m.getResult();
  if (p.use_empty()) {
    why = "the product is unused";
    return failure();
  }
  auto add = dyn_cast_or_null<tg::AddOp>(soleUser(p));
  if (!add) {
    why = p.hasOneUse()
              ? ("its user " + soleUser(p)->getName().getStringRef().str() +
                 " is not a bias add")
              : llvm::formatv("the product has {0} readers (the epilogue would "
                              "hide it)",
                              std::distance(p.use_begin(), p.use_end()))
                    .str();
    return failure();
  }
  Value bias = add.getLhs() == p ? add.getRhs() : add.getLhs();
  int64_t n = tg::rtt(p).getShape().back();
  auto bt = tg::rtt(bias);
  if (add.getLhs() == add.getRhs() || bt.getRank() != 1 ||
      bt.getDimSize(0) != n || bt.getElementType() != tg::rtt(p).getElementType() ||
      add.getType() != p.getType()) {
    why = "the add after it is not a (" + std::to_string(n) +
          ") bias of the product's type";
    return failure();
  }
  return std::make_pair(add, bias);
}

// Whether a reader of `v` other than `chain` comes before `at`: the fused
// op replaces the last op of the chain, so the pre-activation it returns
// must not be read earlier.
bool readBefore(Value v, Operation *at, Operation *chain) {
  return llvm::any_of(v.getUsers(), [&](Operation *user) {
    return user != chain && user != at && user->getBlock() == at->getBlock() &&
           user->isBeforeInBlock(at);
  });
}

// The residual add after `value` (an epilogue's last value):
// add(residual, [cast](value)) of the fed value's type, residual either
// operand. Null `add` when the value does not feed one.
struct ResidualAdd {
  tg::CastOp cast; // null: the add reads the value directly
  tg::AddOp add;
  Value residual;
};
ResidualAdd residualAddAfter(Value value) {
  ResidualAdd r;
  Operation *next = soleUser(value);
  if (auto c = dyn_cast_or_null<tg::CastOp>(next)) {
    r.cast = c;
    next = soleUser(c.getResult());
  }
  auto add = dyn_cast_or_null<tg::AddOp>(next);
  Value fed = r.cast ? r.cast.getResult() : value;
  if (!add || add.getLhs() == add.getRhs() || add.getType() != fed.getType())
    return {};
  r.add = add;
  r.residual = add.getLhs() == fed ? add.getRhs() : add.getLhs();
  return r;
}

constexpr const char kResidualBroadcasts[] = "the residual broadcasts";
constexpr const char kSumTypeNotCD[] =
    "the sum is neither of the product's type nor f32 after a 16-bit product (the "
    "GEMM's C/D types)";

// Whether the sum's element type is one the GEMM's C/D can be after a
// product of `productElem`: the same, or f32 after a 16-bit product.
bool gemmTakesSumType(ResidualAdd r, Type productElem) {
  Type sumElem = tg::rtt(r.add.getResult()).getElementType();
  return sumElem == productElem ||
         ((productElem.isBF16() || productElem.isF16()) && sumElem.isF32());
}

// Extends the bias add with a gelu and a residual add where the target can
// run them in the epilogue.
void extend(EpilogueMatch &e, StringRef target) {
  Value pre = e.biasAdd.getResult();
  for (Operation *user : pre.getUsers())
    if (auto g = dyn_cast<tg::GeluOp>(user)) {
      if (isCuda(target) && g.getApproximate() != "tanh") {
        e.leftOut += "; gelu (erf) left out: cuBLASLt's GELU epilogue is the "
                     "tanh form";
        break;
      }
      if (isCuda(target) && tg::rtt(pre).getShape().back() % 8 != 0) {
        e.leftOut += "; gelu left out: N is not a multiple of 8 (cuBLASLt's "
                     "GELU aux leading dimension)";
        break;
      }
      if (readBefore(pre, g, g)) {
        e.leftOut += "; gelu left out: the pre-activation is read before it";
        break;
      }
      e.gelu = g;
      break;
    }
  ResidualAdd r = residualAddAfter(e.gelu ? e.gelu.getResult() : pre);
  if (!r.add)
    return;
  std::string why;
  if (tg::rtt(r.residual) != r.add.getType())
    why = kResidualBroadcasts;
  else if (isCuda(target) && e.gelu)
    why = "cuBLASLt applies the activation after adding C (beta * residual)";
  else if (!gemmTakesSumType(r, tg::rtt(pre).getElementType()))
    why = kSumTypeNotCD;
  else if (e.gelu && readBefore(pre, r.add, e.gelu))
    why = "the pre-activation is read before the residual add";
  if (!why.empty()) {
    e.leftOut += "; residual add left out: " + why;
    return;
  }
  e.cast = r.cast;
  e.residualAdd = r.add;
  e.residual = r.residual;
}

// A product without a bias whose value, or its cast, is added to a residual
// of the sum's type: out = add(residual, [cast](matmul)). Sets `why` when
// the chain is there but cannot be fused; failure without `why` when the
// product is not followed by such an add at all.
FailureOr<EpilogueMatch> residualOnlyOf(tg::MatmulOp m, std::string &why) {
  Value p = m.getResult();
  // The loss head's gradient products (reading the softmax cross-entropy's
  // gradient, through reshapes) stay plain: tg-chunk-loss-head, later,
  // splits exactly those into row chunks (a tied embedding's dW is added
  // to the embedding's gradient).
  auto readsLossGradient = [](Value v) {
    while (auto r = v.getDefiningOp<tg::ReshapeOp>())
      v = r.getInput();
    return static_cast<bool>(v.getDefiningOp<tg::SoftmaxCrossEntropyGradOp>());
  };
  ResidualAdd r = residualAddAfter(p);
  if (!r.add)
    return failure();
  if (tg::rtt(r.residual) != r.add.getType())
    why = kResidualBroadcasts;
  else if (!gemmTakesSumType(r, tg::rtt(p).getElementType()))
    why = kSumTypeNotCD;
  else if (readsLossGradient(m.getLhs()) || readsLossGradient(m.getRhs()))
    why = "a product of the loss head's gradient (kept for tg-chunk-loss-head)";
  if (!why.empty())
    return failure();
  EpilogueMatch e{m, nullptr, Value()};
  e.cast = r.cast;
  e.residualAdd = r.add;
  e.residual = r.residual;
  return e;
}

std::string describe(EpilogueMatch e) {
  std::string residual;
  if (e.residualAdd) {
    llvm::raw_string_ostream os(residual);
    os << "residual(" << tg::rtt(e.residual).getElementType() << ")";
  }
  if (!e.biasAdd) // residualOnlyOf's match
    return "fused: " + residual + ", no bias" + e.leftOut;
  std::string text = "fused: bias";
  if (e.gelu)
    text += e.gelu.getApproximate() == "tanh" ? "+gelu_tanh" : "+gelu_erf";
  if (e.residualAdd)
    text += "+" + residual;
  return text + e.leftOut;
}

// The backward's GELU epilogue: gelu_grad(pre, matmul(dy, w^T)) with the
// product read only there becomes one tg.matmul_dgelu. Returns the refusal
// ("" when fused, "-" when the product does not feed a gelu_grad).
std::string fuseDgelu(tg::MatmulOp m, StringRef target, bool enabled) {
  auto grad = dyn_cast_or_null<tg::GeluGradOp>(soleUser(m.getResult()));
  if (!grad || grad.getGrad() != m.getResult())
    return "-";
  if (std::string why = transposeRefusal(m, target, /*backward=*/true); !why.empty())
    return why;
  if (isCuda(target) && grad.getApproximate() != "tanh")
    return "gelu_grad (erf): cuBLASLt's DGELU epilogue is the tanh form";
  if (isCuda(target) && tg::rtt(m.getResult()).getShape().back() % 8 != 0)
    return "gelu_grad: N is not a multiple of 8 (cuBLASLt's GELU aux leading "
           "dimension)";
  if (grad.getType() != m.getResult().getType())
    return "gelu_grad: its input is not of the product's type";
  if (!enabled)
    return "matches (dgelu), but fusion is off (tcc compile --no-fuse-epilogue)";
  OpBuilder b(grad);
  Location loc = FusedLoc::get(b.getContext(), {m.getLoc(), grad.getLoc()});
  auto fused = tg::MatmulDgeluOp::create(
      b, loc, grad.getType(), m.getLhs(), m.getRhs(), grad.getInput(),
      m.getTransposeLhsAttr(), m.getTransposeRhsAttr(), grad.getApproximateAttr());
  fused->setAttr(kFuseEpilogueAttr,
                 b.getStringAttr(grad.getApproximate() == "tanh"
                                     ? "fused: dgelu_tanh (gelu_grad of the product)"
                                     : "fused: dgelu_erf (gelu_grad of the product)"));
  grad.getResult().replaceAllUsesWith(fused.getResult());
  grad->erase();
  m->erase();
  return "";
}

// The bias gradient summed from the rhs of `m`: a tg.reduce_sum over every
// dimension but the last of the rhs, or of the value the rhs reshapes into
// rows (dY (B, T, N) -> (B*T, N)), keeping N. Null when there is none.
tg::ReduceSumOp biasGradientOf(tg::MatmulOp m) {
  Value rhs = m.getRhs();
  int64_t n = tg::rtt(rhs).getShape().back();
  SmallVector<Value, 2> sources{rhs};
  if (auto reshape = rhs.getDefiningOp<tg::ReshapeOp>())
    sources.push_back(reshape.getInput());
  for (Value source : sources) {
    auto type = tg::rtt(source);
    if (type.getRank() < 2 || type.getShape().back() != n)
      continue;
    auto allButLast = llvm::to_vector(llvm::seq<int64_t>(0, type.getRank() - 1));
    for (Operation *user : source.getUsers())
      if (auto sum = dyn_cast<tg::ReduceSumOp>(user);
          sum && sum.getAxes() == ArrayRef<int64_t>(allButLast))
        return sum;
  }
  return nullptr;
}

// The readers of `v` (and theirs, transitively) placed before `at`, in
// block order, or failure when one is in another block or has effects:
// the fused op replaces the reduce_sum at the product, after them.
FailureOr<SmallVector<Operation *>> readersBefore(Value v, Operation *at) {
  SmallVector<Operation *> found, work(v.getUsers().begin(), v.getUsers().end());
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!work.empty()) {
    Operation *user = work.pop_back_val();
    if (user->getBlock() != at->getBlock())
      return failure();
    if (!user->isBeforeInBlock(at) || !seen.insert(user).second)
      continue;
    if (!isMemoryEffectFree(user))
      return failure();
    found.push_back(user);
    for (Value r : user->getResults())
      work.append(r.getUsers().begin(), r.getUsers().end());
  }
  llvm::sort(found, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  return found;
}

// The weight gradient with its bias gradient: matmul(X, dY) and the
// reduce_sum of dY over its rows become one tg.matmul_bias_grad. Returns
// the refusal ("" when fused, "-" when no reduce_sum sums the rhs's rows).
std::string fuseBiasGradient(tg::MatmulOp m, bool enabled, bool biasGradient,
                             bool normBiasGradient) {
  tg::ReduceSumOp sum = biasGradientOf(m);
  if (!sum)
    return "-";
  std::string what = "bias gradient (reduce_sum " + quoted(sum.getLoc()) +
                     " of the rhs over its rows)";
  auto lhs = tg::rtt(m.getLhs()), rhs = tg::rtt(m.getRhs());
  if (lhs.getRank() != 2 || rhs.getRank() != 2)
    return what + " left out: the product is batched (tg.matmul_bias_grad is one "
                  "(M, K) x (K, N) product)";
  if (m.getTransposeRhs())
    return what + " left out: the rhs is transposed (cuBLASLt has no BGRADA "
                  "algorithm for a transposed B: H200, 2026-11-25)";
  if (normBiasGradient && foldsIntoNormGradient(sum))
    return what + " left out: the layer_norm_grad that writes dY sums it as it "
                  "writes (tg-lower-to-kern folds it into kern.layer_norm_grad), so this "
                  "GEMM runs without the BGRADA epilogue";
  Type elem = rhs.getElementType(); // reduce_sum keeps its input's type
  if (sum->getBlock() != m->getBlock())
    return what + " left out: the sum is in another block";
  FailureOr<SmallVector<Operation *>> early = readersBefore(sum.getResult(), m);
  if (failed(early))
    return what + " left out: a reader of the sum is in another block or has "
                  "side effects (it cannot follow the product)";
  if (!enabled)
    return "matches (bias_grad), but fusion is off (tcc compile --no-fuse-epilogue)";
  if (!biasGradient)
    return what + " left out: bias-gradient fusion is off (tcc compile "
                  "--no-fuse-bias-grad)";
  OpBuilder b(m);
  Location loc = FusedLoc::get(b.getContext(), {m.getLoc(), sum.getLoc()});
  auto gradType = RankedTensorType::get({rhs.getDimSize(1)}, elem);
  auto fused = tg::MatmulBiasGradOp::create(b, loc, m.getType(), gradType, m.getLhs(),
                                            m.getRhs(), m.getTransposeLhsAttr());
  fused->setAttr(kFuseEpilogueAttr, b.getStringAttr("fused: " + what));
  for (NamedAttribute attr : m->getDiscardableAttrs())
    if (attr.getName() != kFuseEpilogueAttr && !fused->hasAttr(attr.getName()))
      fused->setAttr(attr.getName(), attr.getValue());
  Value grad = fused.getBiasGrad();
  Operation *last = fused;
  if (grad.getType() != sum.getType()) { // keep_dims or a rank > 2 dY
    grad = tg::ReshapeOp::create(b, sum.getLoc(), sum.getType(), grad);
    last = grad.getDefiningOp();
  }
  for (Operation *reader : *early) {
    reader->moveAfter(last);
    last = reader;
  }
  m.getResult().replaceAllUsesWith(fused.getResult());
  sum.getResult().replaceAllUsesWith(grad);
  sum->erase();
  m->erase();
  return "";
}

// Replaces the chain by one tg.matmul_epilogue placed where its last op was.
void fuse(EpilogueMatch e) {
  Operation *last = e.residualAdd ? e.residualAdd.getOperation()
                    : e.gelu      ? e.gelu.getOperation()
                                  : e.biasAdd.getOperation();
  OpBuilder b(last);
  SmallVector<Location> locs{e.product.getLoc()};
  if (e.biasAdd)
    locs.push_back(e.biasAdd.getLoc());
  if (e.gelu)
    locs.push_back(e.gelu.getLoc());
  if (e.residualAdd)
    locs.push_back(e.residualAdd.getLoc());
  Location loc = FusedLoc::get(b.getContext(), locs);
  auto result = cast<RankedTensorType>(last->getResult(0).getType());
  Value bias = e.bias;
  if (bias && tg::rtt(bias).getElementType() != result.getElementType())
    bias = tg::CastOp::create(
        b, e.biasAdd.getLoc(),
        RankedTensorType::get(tg::rtt(bias).getShape(), result.getElementType()),
        bias);
  Type preType = e.gelu ? e.biasAdd.getType() : Type();
  StringRef act = !e.gelu ? "none"
                  : e.gelu.getApproximate() == "tanh" ? "gelu_tanh"
                                                      : "gelu_erf";
  auto fused = tg::MatmulEpilogueOp::create(
      b, loc, result, preType, e.product.getLhs(), e.product.getRhs(), bias,
      e.residual, e.product.getTransposeLhsAttr(),
      e.product.getTransposeRhsAttr(), b.getStringAttr(act));
  fused->setAttr(kFuseEpilogueAttr, b.getStringAttr(describe(e)));
  for (NamedAttribute attr : e.product->getDiscardableAttrs())
    if (attr.getName() != kFuseEpilogueAttr && !fused->hasAttr(attr.getName()))
      fused->setAttr(attr.getName(), attr.getValue());
  last->getResult(0).replaceAllUsesWith(fused.getResult());
  if (e.gelu)
    e.biasAdd.getResult().replaceAllUsesExcept(fused.getPreActivation(),
                                               e.gelu.getOperation());
  for (Operation *op : {e.residualAdd.getOperation(), e.cast.getOperation(),
                        e.gelu.getOperation(), e.biasAdd.getOperation(),
                        e.product.getOperation()})
    if (op)
      op->erase();
}

// The residual-only epilogue (residualOnlyOf) of `m`: "" when fused, else
// the refusal: `noChain` when no residual add follows the product, else
// `prefix` + why the add is left out. cuBLASLt's default epilogue with
// beta = 1 is a plain product, so a transposed rhs is fused (the bias
// epilogues' transpose refusal does not apply); on cuda a transposed lhs
// is not, as for the other epilogues.
std::string fuseResidualOnly(tg::MatmulOp m, StringRef target, bool enabled,
                             const std::string &prefix, const std::string &noChain) {
  std::string why;
  FailureOr<EpilogueMatch> residualOnly = residualOnlyOf(m, why);
  if (succeeded(residualOnly) && isCuda(target) && m.getTransposeLhs())
    why = "transposed lhs";
  if (!why.empty())
    return prefix + "residual add left out: " + why;
  if (failed(residualOnly))
    return noChain;
  if (!enabled)
    return "matches (" + describe(*residualOnly).substr(7) +
           "), but fusion is off (tcc compile --no-fuse-epilogue)";
  fuse(*residualOnly);
  return "";
}

struct TgFuseMatmulEpiloguePass
    : tcc::impl::TgFuseMatmulEpilogueBase<TgFuseMatmulEpiloguePass> {
  using TgFuseMatmulEpilogueBase::TgFuseMatmulEpilogueBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (target != "cpu" && target != "cuda") {
      module.emitError() << "tg-fuse-matmul-epilogue: unknown target '"
                         << target << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    SmallVector<tg::MatmulOp> candidates;
    module.walk([&](tg::MatmulOp op) { candidates.push_back(op); });
    OpBuilder b(module.getContext());
    auto refuse = [&](tg::MatmulOp m, const std::string &why) {
      m->setAttr(kFuseEpilogueAttr, b.getStringAttr("not fused: " + why));
    };
    for (tg::MatmulOp m : candidates) {
      if (std::string why = productRefusal(m, target); !why.empty()) {
        refuse(m, why);
        continue;
      }
      if (std::string fp8 = fp8Refusal(m); !fp8.empty()) {
        if (std::string why = fuseResidualOnly(m, target, enabled, fp8 + "; ", fp8);
            !why.empty())
          refuse(m, why);
        continue;
      }
      if (std::string dgelu = fuseDgelu(m, target, enabled); dgelu != "-") {
        if (!dgelu.empty())
          refuse(m, dgelu);
        continue;
      }
      if (std::string grad = fuseBiasGradient(m, enabled, biasGradient, normBiasGradient);
          grad != "-") {
        if (!grad.empty())
          refuse(m, grad);
        continue;
      }
      std::string why;
      auto biasAdd = biasAddOf(m, why);
      if (failed(biasAdd)) { // no bias: the residual add alone
        if (std::string refusal = fuseResidualOnly(m, target, enabled, "no bias; ", why);
            !refusal.empty())
          refuse(m, refusal);
        continue;
      }
      if (std::string why = transposeRefusal(m, target, /*backward=*/false);
          !why.empty()) {
        refuse(m, why);
        continue;
      }
      EpilogueMatch e{m, biasAdd->first, biasAdd->second};
      extend(e, target);
      if (!enabled) {
        refuse(m, "matches (" + describe(e).substr(7) +
                      "), but fusion is off (tcc compile --no-fuse-epilogue)");
        continue;
      }
      fuse(e);
    }
  }
};

} // namespace

namespace tcc {

void writeMatmulEpilogueReport(ModuleOp module, llvm::raw_ostream &os) {
  os << "# tg-fuse-matmul-epilogue report: every matmul, fused with its "
        "epilogue into tg.matmul_epilogue (tg.matmul_dgelu, tg.matmul_bias_grad "
        "in the backward) or not and why\n";
  os << llvm::formatv("{0,-12} {1,-32} {2}\n", "# function", "node", "decision");
  int fused = 0, refused = 0;
  module.walk([&](Operation *op) {
    auto text = op->getAttrOfType<StringAttr>(kFuseEpilogueAttr);
    if (!text)
      return;
    (isa<tg::MatmulEpilogueOp, tg::MatmulDgeluOp, tg::MatmulBiasGradOp>(op) ? fused
                                                                            : refused) += 1;
    auto fn = op->getParentOfType<func::FuncOp>();
    os << llvm::formatv("{0,-12} {1,-32} {2}\n", fn ? fn.getSymName() : "",
                        nodeName(op->getLoc()), text.getValue());
  });
  os << "# summary: " << fused << " fused, " << refused << " not fused\n";
}

} // namespace tcc
