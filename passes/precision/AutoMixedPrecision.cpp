// tg-amp: the precision policy of `tcc compile --precision`, applied to
// @forward before autodiff, so the backward inherits it (the gradient of a
// cast is the cast back; a bf16 matmul's gradients are bf16 matmuls).
//
// With bf16 (or f16) every op of @forward gets one of three rules:
//
//   low   matmul: f32 operands cast to the low type, result low. cuBLASLt
//         and the CPU gemm accumulate in f32 (COMPUTE_32F) and round once.
//         conv2d likewise (cuDNN / the conv kernels accumulate in f32).
//         attention likewise (q, k, v and the result low; its lse f32).
//   fp32  what numerics need in f32: losses (cross_entropy, log_softmax),
//         reductions (sum/mean/max), layer and RMS norms (their
//         statistics). Low operands cast to f32. softmax_cross_entropy
//         reads low logits as they are (its kernels compute in f32) and
//         returns f32 losses; its gradient comes back in the logits' type.
//   rope  follows its input; its cos / sin tables stay fp32 (read in f32).
//   follow everything else (elementwise ops, softmax, dropout, masks,
//         reshape/transpose/slice/concat, gather): computes in its operands'
//         type; the kernels compute in f32 and round once on store, and
//         softmax's expansion keeps its max and sum in f32. Operands of
//         mixed types: when every f32 one is a weight, a constant (a bias,
//         a scale, a mask value) or a smaller operand that broadcasts (batch
//         norm's per-channel statistics), they are cast to the low type, as
//         autocast casts a linear's bias and keeps batch norm in its input's
//         type; when a full-size f32 operand is an activation (the residual
//         stream), the low one is cast to f32 and the op stays f32.
//
// Parameters (master weights) and optimizer state stay f32; a weight's cast
// is inserted once, right after the weight, however many ops read it. The
// function's results keep their declared types (cast back at the return).
// Saved activations are whatever the forward computes, so the products and
// everything downstream of them until the next fp32 op are stored in 16 bits.
//
// Every op the policy looked at carries `tg.amp = "<type>: <why>"` in the
// dump after this pass; writeAmpReport lists them as a table (the
// --dump-dir file NN-tg-amp-report.txt). fp8 is bf16 with FP8 products:
// Fp8Products.cpp marks the matmuls that run on FP8 tensor cores and says
// in each one's tg.amp why it does or does not. fp32 and tf32 change no op: the
// pass only records the precision on the module (tf32 is a choice of the
// GPU's matmul instructions, not of the graph).
#include "passes/Passes.h"
#include "passes/common/NodeNames.h"
#include "passes/precision/Fp8Products.h"

#include <cmath>

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {
#define GEN_PASS_DEF_TGAMP
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;
namespace build = tcc::tg::build;

namespace {

enum class Rule { Low, Fp32, Fp32Result, Follow };

struct Policy {
  Rule rule;
  llvm::StringRef why;
};

Policy policyFor(Operation *op, bool lowConvolutions) {
  if (isa<tg::MatmulOp>(op))
    return {Rule::Low, "matmul (f32 accumulation)"};
  // As autocast: a convolution is a product too (cuDNN's tensor-core
  // engines and the prelude's kernels accumulate in f32). Left in f32 it
  // ran every convolution of a bf16 ResNet without tensor cores. The cpu
  // target's 16-bit convolutions are direct loops, its f32 ones im2col +
  // BLAS: there they stay f32.
  if (isa<tg::Conv2dOp, tg::Conv2dInputGradOp>(op)) // conv2d, conv_transpose2d
    return lowConvolutions
               ? Policy{Rule::Low, "convolution (f32 accumulation)"}
               : Policy{Rule::Fp32, "convolution on the cpu target (f32 im2col + BLAS; "
                                    "its 16-bit kernels are direct loops)"};
  // Flash attention: both products on the low type with f32 accumulation,
  // softmax statistics in f32; lse stays f32 (its verifier's contract).
  if (isa<tg::AttentionOp>(op))
    return {Rule::Low, "attention (f32 accumulation and softmax; lse fp32)"};
  // The fused loss reads 16-bit logits itself (its math is f32 inside) and
  // writes f32 per-row losses: the (N, C) logits are never widened, and its
  // gradient is written straight in the logits' type.
  if (isa<tg::SoftmaxCrossEntropyOp>(op))
    return {Rule::Fp32Result, "loss (fp32 math and result; logits read as they are)"};
  if (isa<tg::CrossEntropyOp>(op))
    return {Rule::Fp32, "loss"};
  if (isa<tg::LogSoftmaxOp>(op))
    return {Rule::Fp32, "log-probabilities (loss input)"};
  if (isa<tg::ReduceSumOp, tg::ReduceMeanOp, tg::ReduceMaxOp>(op))
    return {Rule::Fp32, "reduction"};
  if (isa<tg::LayerNormOp, tg::RmsNormOp>(op))
    return {Rule::Fp32, "norm statistics"};
  return {Rule::Follow, ""};
}

llvm::StringRef typeName(Type t) {
  if (t.isBF16())
    return "bf16";
  if (t.isF16())
    return "fp16";
  if (t.isF32())
    return "fp32";
  if (t.isF64())
    return "fp64";
  return "other";
}

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

bool isFloat(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

// The largest finite f16 value: a constant beyond it would become inf.
constexpr double kMaxF16 = 65504.0;

class Rewriter {
public:
  Rewriter(func::FuncOp fn, Type low, bool lowConvolutions)
      : fn_(fn), low_(low), lowConvolutions_(lowConvolutions), b_(fn.getContext()) {}

  LogicalResult run() {
    for (BlockArgument a : fn_.getArguments())
      if (fn_.getArgAttr(a.getArgNumber(), model::kParamAttr))
        weightLike_.insert(a);
    SmallVector<Operation *> ops;
    for (Operation &op : fn_.getBody().front())
      ops.push_back(&op);
    for (Operation *op : ops)
      if (failed(visit(op)))
        return failure();
    return success();
  }

private:
  LogicalResult visit(Operation *op) {
    if (auto ret = dyn_cast<func::ReturnOp>(op))
      return restoreResultTypes(ret);
    if (isa<tg::ConstantOp, tg::IotaOp>(op)) {
      for (Value r : op->getResults())
        weightLike_.insert(r);
      return success();
    }
    if (isa<tg::CastOp>(op)) { // the model's own casts are kept as written
      markWeightLike(op);
      return success();
    }
    if (auto rope = dyn_cast<tg::RopeOp>(op))
      return visitRope(rope);
    if (auto bn = dyn_cast<tg::BatchNormOp>(op))
      return visitBatchNorm(bn);
    Policy p = policyFor(op, lowConvolutions_);
    SmallVector<Value> floats;
    for (Value v : op->getOperands())
      if (isFloat(v))
        floats.push_back(v);
    Type target;
    std::string why;
    if (p.rule == Rule::Low) {
      target = low_;
      why = p.why.str();
    } else if (p.rule == Rule::Fp32) {
      target = b_.getF32Type();
      why = p.why.str();
    } else if (p.rule == Rule::Fp32Result) {
      for (OpResult r : op->getResults())
        if (isFloat(r))
          r.setType(tensorType(r).clone(b_.getF32Type()));
      op->setAttr(model::kAmpAttr, b_.getStringAttr("fp32: " + p.why.str()));
      markWeightLike(op);
      return success();
    } else {
      // An f32 operand with fewer elements than the result broadcasts (batch
      // norm's per-channel mean and 1/std, a bias): like a weight, it is cast
      // down and the op stays low, as autocast's batch norm returns its
      // input's type with f32 statistics. Only a full-size f32 activation
      // (the residual stream) keeps the op f32.
      int64_t resultElements = 0;
      for (OpResult r : op->getResults())
        if (isFloat(r))
          resultElements = std::max(resultElements, tensorType(r).getNumElements());
      bool anyLow = false, activationF32 = false, broadcastF32 = false;
      for (Value v : floats) {
        Type t = tensorType(v).getElementType();
        if (t == low_)
          anyLow = true;
        else if (weightLike_.contains(v))
          continue;
        else if (tensorType(v).getNumElements() < resultElements)
          broadcastF32 = true;
        else
          activationF32 = true;
      }
      if (floats.empty()) {
        markWeightLike(op);
        return success();
      }
      if (!anyLow) {
        target = b_.getF32Type();
        why = "follows its fp32 operands";
      } else if (activationF32) {
        target = b_.getF32Type();
        why = llvm::formatv("an fp32 activation meets a {0} one (kept fp32, as "
                            "the residual stream)",
                            typeName(low_))
                  .str();
      } else {
        target = low_;
        bool mixed = llvm::any_of(floats, [&](Value v) {
          return tensorType(v).getElementType() != low_;
        });
        why = broadcastF32
                  ? llvm::formatv("follows its {0} operands (broadcast fp32 statistics, "
                                  "weights and constants cast to {0})",
                                  typeName(low_))
                        .str()
              : mixed ? llvm::formatv("follows its {0} operands (weights and "
                                      "constants cast to {0})",
                                      typeName(low_))
                            .str()
                      : llvm::formatv("follows its {0} operands", typeName(low_)).str();
      }
    }
    if (isa<tg::SoftmaxOp>(op) && target == low_)
      why += "; its max and sum in fp32";
    if (failed(checkRange(op, target)))
      return failure();
    for (OpOperand &use : op->getOpOperands()) {
      if (!isFloat(use.get()) || tensorType(use.get()).getElementType() == target)
        continue;
      FailureOr<Value> converted = convert(use.get(), target, op);
      if (failed(converted))
        return failure();
      use.set(*converted);
    }
    for (OpResult r : op->getResults())
      if (isFloat(r))
        r.setType(tensorType(r).clone(target));
    if (auto attention = dyn_cast<tg::AttentionOp>(op))
      attention.getLse().setType(
          tensorType(attention.getLse()).clone(b_.getF32Type()));
    op->setAttr(model::kAmpAttr,
                b_.getStringAttr(typeName(target) + ": " + why));
    markWeightLike(op);
    return success();
  }

  // tg.rope follows its input x; the cos / sin tables stay fp32 for a
  // 16-bit x (the kernels read them in f32: a table cast to bf16 would lose
  // the angle's precision and cost a cast every step), and take x's type
  // otherwise.
  LogicalResult visitRope(tg::RopeOp op) {
    Type x = tensorType(op.getInput()).getElementType();
    Type table = x == low_ ? b_.getF32Type() : x;
    for (OpOperand *use : {&op.getCosMutable(), &op.getSinMutable()}) {
      if (tensorType(use->get()).getElementType() == table)
        continue;
      FailureOr<Value> converted = convert(use->get(), table, op);
      if (failed(converted))
        return failure();
      use->set(*converted);
    }
    op.getResult().setType(tensorType(op.getInput()));
    op->setAttr(model::kAmpAttr,
                b_.getStringAttr(llvm::formatv("{0}: follows its input{1}", typeName(x),
                                               x == low_ ? " (cos / sin read in fp32)" : "")
                                     .str()));
    markWeightLike(op);
    return success();
  }

  // tg.batch_norm follows its input, as autocast's batch norm: a 16-bit
  // activation stays 16-bit (its kernels compute in f32 inside), the
  // statistics become f32, and weight and bias are read as they are (f32
  // master weights: no cast kernels).
  LogicalResult visitBatchNorm(tg::BatchNormOp op) {
    Type x = tensorType(op.getInput()).getElementType();
    Type stats = build::batchNormStatsType(x);
    op.getResult().setType(tensorType(op.getInput()));
    op.getMean().setType(tensorType(op.getMean()).clone(stats));
    op.getVar().setType(tensorType(op.getVar()).clone(stats));
    op->setAttr(model::kAmpAttr,
                b_.getStringAttr(llvm::formatv("{0}: follows its input{1}", typeName(x),
                                               x == low_ ? " (statistics in fp32)" : "")
                                     .str()));
    markWeightLike(op);
    return success();
  }

  // Values computed from weights and constants only stay "weights": a
  // transposed or broadcast bias is still cast rather than promoting the
  // activation it meets.
  void markWeightLike(Operation *op) {
    if (op->getNumOperands() == 0 ||
        llvm::all_of(op->getOperands(),
                     [&](Value v) { return weightLike_.contains(v); }))
      for (Value r : op->getResults())
        weightLike_.insert(r);
  }

  // f16 holds magnitudes up to 65504: a finite constant or mask value
  // beyond that would silently become inf in an f16 op.
  LogicalResult checkRange(Operation *op, Type target) {
    if (!target.isF16())
      return success();
    auto tooBig = [](double v) { return std::isfinite(v) && std::fabs(v) > kMaxF16; };
    if (auto mask = dyn_cast<tg::CausalMaskOp>(op)) {
      double v = mask.getValue().convertToDouble();
      if (tooBig(v))
        return op->emitError() << "--precision fp16: the mask value " << v
                               << " is outside the fp16 range (+-65504) and would "
                                  "become inf; use -inf, a value within the range, "
                                  "or --precision bf16";
    }
    for (Value v : op->getOperands()) {
      auto c = v.getDefiningOp<tg::ConstantOp>();
      if (!c || !isFloat(v))
        continue;
      for (APFloat x : cast<DenseElementsAttr>(c.getValue()).getValues<APFloat>()) {
        bool lost = false;
        x.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
        if (tooBig(x.convertToDouble()))
          return op->emitError()
                 << "--precision fp16: this op would compute in fp16 with the "
                    "constant "
                 << x.convertToDouble() << " (from " << c.getLoc()
                 << "), outside the fp16 range (+-65504); use --precision bf16 "
                    "or fp32";
      }
    }
    return success();
  }

  // `v` as `target`: a splat constant is re-made in the new type (so
  // lowering still folds it into the kernel); anything else gets one
  // tg.cast right after its definition, shared by all its readers.
  FailureOr<Value> convert(Value v, Type target, Operation *user) {
    auto key = std::make_pair(v, target);
    if (auto it = casts_.find(key); it != casts_.end())
      return it->second;
    Value result;
    auto c = v.getDefiningOp<tg::ConstantOp>();
    auto splat = c ? dyn_cast<SplatElementsAttr>(c.getValue()) : nullptr;
    if (splat && isa<FloatType>(splat.getElementType())) {
      b_.setInsertionPointAfter(c);
      double value = splat.getSplatValue<APFloat>().convertToDouble();
      result = build::splat(b_, c.getLoc(), tensorType(v).clone(target), value);
      result.getDefiningOp()->setAttr(
          model::kAmpAttr,
          b_.getStringAttr(llvm::formatv("{0}: constant re-made for {1}",
                                         typeName(target), user->getName())
                               .str()));
    } else {
      Location loc = v.getLoc();
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        b_.setInsertionPointToStart(arg.getOwner());
        // A weight's cast is named after the parameter in dumps and reports.
        if (auto info = model::ParamInfo::fromAttr(
                fn_.getArgAttr(arg.getArgNumber(), model::kParamAttr)))
          loc = NameLoc::get(b_.getStringAttr(info->name), loc);
      } else {
        b_.setInsertionPointAfter(v.getDefiningOp());
      }
      result = build::castTo(b_, loc, v, target);
      result.getDefiningOp()->setAttr(
          model::kAmpAttr,
          b_.getStringAttr(llvm::formatv("cast to {0}: operand of {1}{2}",
                                         typeName(target), user->getName(),
                                         weightLike_.contains(v)
                                             ? " (a weight: cast once per step)"
                                             : "")
                               .str()));
    }
    if (weightLike_.contains(v))
      weightLike_.insert(result);
    casts_[key] = result;
    return result;
  }

  // Results keep the types the function declares (the loss f32, eval
  // outputs as the model wrote them).
  LogicalResult restoreResultTypes(func::ReturnOp ret) {
    ArrayRef<Type> declared = fn_.getFunctionType().getResults();
    for (auto [i, operand] : llvm::enumerate(ret->getOpOperands())) {
      auto want = dyn_cast<RankedTensorType>(declared[i]);
      if (!want || operand.get().getType() == want)
        continue;
      b_.setInsertionPoint(ret);
      Value back = build::castTo(b_, operand.get().getLoc(), operand.get(),
                                 want.getElementType());
      back.getDefiningOp()->setAttr(
          model::kAmpAttr,
          b_.getStringAttr("cast to " + typeName(want.getElementType()).str() +
                           ": the function's declared result type"));
      operand.set(back);
    }
    return success();
  }

  func::FuncOp fn_;
  Type low_;
  bool lowConvolutions_;
  OpBuilder b_;
  llvm::DenseSet<Value> weightLike_;
  llvm::DenseMap<std::pair<Value, Type>, Value> casts_;
};

struct TgAmpPass : tcc::impl::TgAmpBase<TgAmpPass> {
  using TgAmpBase::TgAmpBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Precision> parsed = parsePrecision(precision);
    if (!parsed) {
      module.emitError() << "tg-amp: unknown precision '" << precision
                         << "' (expected bf16, fp16, tf32, fp32 or fp8)";
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    module->setAttr(model::kPrecisionAttr, b.getStringAttr(precision));
    if (*parsed == Precision::Fp32 || *parsed == Precision::Tf32)
      return;
    auto forward = module.lookupSymbol<func::FuncOp>(model::kForwardFunc);
    if (!forward) {
      module.emitError("tg-amp: the module has no @forward");
      return signalPassFailure();
    }
    // The policy is written for f32 models (master weights f32); an f64
    // model is a numerics test that should not be silently made bf16.
    WalkResult walk = forward.walk([&](Operation *op) {
      for (Type t : op->getResultTypes())
        if (auto rt = dyn_cast<RankedTensorType>(t); rt && rt.getElementType().isF64()) {
          op->emitError() << "--precision " << precision
                          << ": the model computes in f64 here; mixed precision "
                             "starts from an f32 model";
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    Type low = *parsed == Precision::Fp16 ? Type(b.getF16Type()) : Type(b.getBF16Type());
    if (target != "cpu" && target != "cuda") {
      module.emitError() << "tg-amp: unknown target '" << target << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    if (failed(Rewriter(forward, low, /*lowConvolutions=*/target == "cuda").run()))
      return signalPassFailure();
    if (*parsed == Precision::Fp8)
      markFp8Products(forward, fp8Keep);
  }
};


} // namespace

namespace tcc {

std::optional<Precision> parsePrecision(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Precision>>(name)
      .Case("bf16", Precision::Bf16)
      .Case("fp16", Precision::Fp16)
      .Case("tf32", Precision::Tf32)
      .Case("fp32", Precision::Fp32)
      .Case("fp8", Precision::Fp8)
      .Default(std::nullopt);
}

void writeAmpReport(ModuleOp module, llvm::raw_ostream &os) {
  auto precision = module->getAttrOfType<StringAttr>(model::kPrecisionAttr);
  os << "# tg-amp report: precision " << (precision ? precision.getValue() : "unset")
     << "\n";
  auto forward = module.lookupSymbol<func::FuncOp>(model::kForwardFunc);
  if (!precision || !forward)
    return;
  if (precision.getValue() == "fp32" || precision.getValue() == "tf32") {
    os << "# no casts: every op computes in fp32"
       << (precision.getValue() == "tf32"
               ? "; on the GPU the matmuls round their inputs to TF32 (cuBLASLt "
                 "COMPUTE_32F_FAST_TF32)\n"
               : "\n");
    return;
  }
  os << "# every op of @forward with the type it computes in and why (the gradient\n"
        "# ops autodiff builds from them inherit these types)\n";
  os << llvm::formatv("{0,-32} {1,-28} {2}\n", "# node", "op", "type: why");
  llvm::StringMap<int> counts;
  int weightCasts = 0, fp8Products = 0, fp8Kept = 0;
  forward.walk([&](Operation *op) {
    auto why = op->getAttrOfType<StringAttr>(model::kAmpAttr);
    if (!why)
      return;
    os << llvm::formatv("{0,-32} {1,-28} {2}\n", nodeName(op->getLoc()),
                        op->getName().getStringRef(), why.getValue());
    llvm::StringRef kind = why.getValue().split(':').first;
    ++counts[kind];
    if (why.getValue().contains("a weight"))
      ++weightCasts;
    fp8Products += why.getValue().contains("; FP8 product");
    fp8Kept += why.getValue().contains("; not FP8");
  });
  os << "# summary:";
  SmallVector<std::string> parts;
  for (auto &[kind, n] : counts)
    parts.push_back(llvm::formatv(" {0} x {1}", n, kind).str());
  llvm::sort(parts);
  for (const std::string &p : parts)
    os << p << ";";
  os << " " << weightCasts << " weight casts (once per step each)\n";
  if (precision.getValue() == "fp8")
    os << "# fp8: " << fp8Products << " matmuls FP8 (each with its two gradient products), "
       << fp8Kept << " kept bf16 (the reason on each line)\n";
}

} // namespace tcc
