// CPU code generator: walks the kern functions @train_step and @forward and
// prints C++. Shape-specialized loops are generated inline (constant trip
// counts let the host compiler vectorize), with `#pragma omp parallel for`
// on loops with enough work; kern.elementwise bodies become C expressions;
// fixed kernels come from cpu_prelude.h; matrix products call BLAS
// (CpuGemm.cpp), reductions are generated loops (CpuReduce.cpp), attention,
// norms and convolutions the prelude's kernels (CpuAttention.cpp,
// CpuNorm.cpp, CpuConv.cpp).
#include "compiler/codegen/cpu/CpuCodegen.h"

#include <algorithm>
#include <cmath>

#include "compiler/codegen/common/CTypes.h"
#include "compiler/codegen/cpu/CpuAttention.h"
#include "compiler/codegen/cpu/CpuConv.h"
#include "compiler/codegen/cpu/CpuGemm.h"
#include "compiler/codegen/cpu/CpuReduce.h"
#include "compiler/codegen/cpu/CpuNorm.h"
#include "compiler/codegen/common/EmbeddedSources.h"
#include "compiler/codegen/common/LoopLayout.h"
#include "compiler/codegen/common/ScalarPrinter.h"
#include "compiler/codegen/common/StepArguments.h"
#include "compiler/codegen/common/StepInterface.h"
#include "dialects/kern/KernDialect.h"
#include "dialects/kern/RopeLayout.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace tcc {
namespace {

using namespace codegen;

class FunctionEmitter : public ArgumentPlacement {
public:
  // `entryOf`: f is a further entry of that step (tcc.entry).
  FunctionEmitter(func::FuncOp f, llvm::raw_ostream &os, int firstProfileId,
                  const StepInterface *entryOf = nullptr)
      : f_(f), os_(os), profileId_(firstProfileId), entryOf_(entryOf) {}

  // Emits `static int32_t <cName>(const tcc_step_args *args)`.
  LogicalResult emit(StringRef cName, int64_t outputScratchBase,
                     double &flops) {
    os_ << "static int32_t " << cName << "(const tcc_step_args *args) {\n";
    os_ << "  tcc_cpu::init_threads();\n";
    os_ << "  char *ws = static_cast<char *>(args->workspace);\n";
    os_ << "  (void)ws;\n";
    if (failed(emitArguments(outputScratchBase)))
      return failure();
    for (Operation &op : f_.getBody().front().without_terminator())
      if (failed(emitOp(&op, flops)))
        return failure();
    if (!lossName_.empty())
      os_ << "  *args->loss = static_cast<float>(" << lossName_ << "[0]);\n";
    os_ << "  return TCC_STATUS_OK;\n}\n\n";
    return success();
  }

  int64_t outputScratchBytes() const { return scratch_.bytes; }

private:
  std::string fresh(Value v) { return names_.fresh(v); }
  std::string name(Value v) { return names_(v); }

  LogicalResult emitArguments(int64_t outputScratchBase) {
    scratch_.base = outputScratchBase;
    return emitStepArguments(f_, "cpu codegen", names_, scratch_, *this, os_, entryOf_);
  }

  // Hyper-parameters and the loss are locals; train outputs, like outputs,
  // the caller's buffer or scratch.
  FailureOr<std::string> placeArgument(const ArgumentRole &role, const std::string &n,
                                       MemRefType t) override {
    std::string st = storageType(t.getElementType());
    switch (role.kind) {
    case ArgumentRole::Hyper:
      return llvm::formatv("  {0} {1}[1] = {{static_cast<{0}>({2})}; // {3}\n", st, n,
                           role.hyperValue, role.label)
          .str();
    case ArgumentRole::Loss:
      lossName_ = n;
      return llvm::formatv("  {0} {1}[1]; // loss\n", st, n).str();
    case ArgumentRole::TrainOutput:
      return llvm::formatv("  {0} *{1} = {2}; // train output {3} {4}\n", st, n,
                           scratch_.buffer("train_outputs", role.index, t), role.label,
                           shapeComment(t))
          .str();
    default:
      return f_.emitError("cpu codegen: no CPU place for argument ") << n;
    }
  }

  LogicalResult emitOp(Operation *op, double &flops) {
    // Buffer definitions stay in the function's scope; kernels get a block
    // of their own (timed when built with -DTCC_PROFILE).
    bool kernel = !isa<kern::WorkspaceViewOp, kern::ReshapeOp, kern::ConstantOp>(op);
    if (!kernel)
      return emitKernel(op, flops);
    std::string label = kernelLabel(op);
    os_ << "  // " << label << "\n";
    std::string literal;
    llvm::raw_string_ostream escaped(literal);
    llvm::printEscapedString(f_.getName().str() + " " + label, escaped);
    os_ << "  { TCC_PROFILE_SCOPE(" << profileId_++ << ", \"" << literal << "\");\n";
    LogicalResult result = emitKernel(op, flops);
    os_ << "  }\n";
    return result;
  }

  // ZeRO-1 (kern.reduce_scatter, kern.rank_shard, kern.all_gather): a
  // shard is this rank's 1/R of the whole buffer. The step refuses to run
  // at another world size than the R it was compiled for; one rank
  // without collectives (R = 1) copies.
  LogicalResult emitShardExchange(Operation *op) {
    Value in = op->getOperand(0), out = op->getOperand(1);
    int64_t ranks = cast<IntegerAttr>(op->getAttr("ranks")).getInt();
    MemRefType shard = mrt(isa<kern::AllGatherOp>(op) ? in : out);
    int64_t count = shard.getNumElements();
    int64_t bytes = count * kern::elementBytes(shard.getElementType());
    os_ << "  {\n    const tcc_collectives *c = static_cast<const tcc_collectives *>("
           "args->collectives);\n"
        << llvm::formatv("    if (c ? c->world_size != {0} : {0} != 1) return TCC_STATUS_BAD_ARGS; "
                         "// compiled for {0} ranks (--shard-optimizer)\n",
                         ranks);
    std::string dtype = abiDType(shard.getElementType());
    if (auto rs = dyn_cast<kern::ReduceScatterOp>(op))
      os_ << llvm::formatv(
          "    if (!c) std::memcpy({1}, {0}, {3});\n"
          "    else if (int32_t rc = c->reduce_scatter(c->context, {0}, {1}, {2}, {4}, {5}, "
          "nullptr)) return rc;\n",
          name(in), name(out), count, bytes, dtype,
          rs.getReduction() == "sum" ? "TCC_REDUCE_SUM" : "TCC_REDUCE_MEAN");
    else if (isa<kern::AllGatherOp>(op))
      os_ << llvm::formatv(
          "    if (!c) std::memcpy({1}, {0}, {3});\n"
          "    else if (int32_t rc = c->all_gather(c->context, {0}, {1}, {2}, {4}, nullptr)) "
          "return rc;\n",
          name(in), name(out), count, bytes, dtype);
    else
      os_ << llvm::formatv("    std::memcpy({1}, {0} + static_cast<int64_t>(c ? c->rank : 0) * {2}, "
                           "{3}); // this rank's shard\n",
                           name(in), name(out), count, bytes);
    os_ << "  }\n";
    return success();
  }

  LogicalResult emitKernel(Operation *op, double &flops) {
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](kern::WorkspaceViewOp v) {
          os_ << workspaceViewDefinition(v, names_);
          return success();
        })
        .Case([&](kern::ReshapeOp r) {
          os_ << reshapeDefinition(r, names_);
          return success();
        })
        .Case([&](kern::ConstantOp c) { return emitConstant(c); })
        .Case([&](kern::GemmOp g) { return emitCpuGemm(g, names_, os_, flops); })
        .Case([&](kern::GemmEpilogueOp g) {
          return emitCpuGemmEpilogue(g, names_, os_, flops);
        })
        .Case([&](kern::GemmDgeluOp g) { return emitCpuGemmDgelu(g, names_, os_, flops); })
        .Case([&](kern::GemmBiasGradOp g) {
          return emitCpuGemmBiasGrad(g, names_, os_, flops);
        })
        .Case([&](kern::ElementwiseOp e) { return emitElementwise(e, flops); })
        .Case([&](kern::ReduceOp r) {
          return emitCpuReduce(r.getInput(), r.getOut(), r.getKind(), r.getAxes(), names_, os_,
                               flops);
        })
        .Case([&](kern::MultiElementwiseOp e) { return emitMultiElementwise(e, flops); })
        .Case([&](kern::MultiSumOp m) { return emitMultiSum(m, flops); })
        .Case([&](kern::AllReduceOp r) {
          // The runtime's collectives (none: one rank, nothing to do).
          MemRefType t = mrt(r.getBuffer());
          os_ << llvm::formatv(
              "  if (const tcc_collectives *c = static_cast<const tcc_collectives *>("
              "args->collectives))\n"
              "    if (int32_t rc = c->all_reduce(c->context, {0}, {1}, {2}, {3}, nullptr)) "
              "return rc; // data parallel: {4} over the ranks\n",
              name(r.getBuffer()), t.getNumElements(), abiDType(t.getElementType()),
              r.getReduction() == "sum" ? "TCC_REDUCE_SUM" : "TCC_REDUCE_MEAN",
              r.getReduction());
          return success();
        })
        .Case<kern::ReduceScatterOp, kern::RankShardOp, kern::AllGatherOp>(
            [&](Operation *zero) { return emitShardExchange(zero); })
        .Case([&](kern::AllReduceBucketOp bucket) {
          // One call for the bucket, or one all_reduce per buffer when the
          // runtime has no bucket entry (none: one rank, nothing to do).
          MemRefType first = mrt(bucket.getBuffers().front());
          std::string buffers, counts;
          for (Value v : bucket.getBuffers()) {
            buffers += (buffers.empty() ? "" : ", ") + name(v);
            counts += (counts.empty() ? "" : ", ") + std::to_string(mrt(v).getNumElements());
          }
          os_ << llvm::formatv(
              "  if (const tcc_collectives *c = static_cast<const tcc_collectives *>("
              "args->collectives)) {{\n"
              "    void *const bucket[] = {{{0}};\n"
              "    const int64_t counts[] = {{{1}};\n"
              "    if (c->all_reduce_bucket) {{\n"
              "      if (int32_t rc = c->all_reduce_bucket(c->context, {2}, bucket, counts, {3}, {4}, "
              "nullptr)) return rc;\n"
              "    } else {{\n"
              "      for (int32_t i = 0; i < {2}; ++i)\n"
              "        if (int32_t rc = c->all_reduce(c->context, bucket[i], counts[i], {3}, {4}, "
              "nullptr)) return rc;\n"
              "    }\n"
              "  } // data parallel: a bucket of {2} buffers, {5} over the ranks\n",
              buffers, counts, bucket.getBuffers().size(), abiDType(first.getElementType()),
              bucket.getReduction() == "sum" ? "TCC_REDUCE_SUM" : "TCC_REDUCE_MEAN",
              bucket.getReduction());
          return success();
        })
        .Case([&](kern::FillOp fill) {
          MemRefType t = mrt(fill.getOut());
          Type et = t.getElementType();
          std::string value =
              fillValue(et, fill.getValue().convertToDouble(), CodeTarget::Cpu);
          LoopNest nest = LoopNest::build({t.getNumElements()}, {{1}});
          nest.emit(os_, name(fill.getOut()) + "[" + nest.index(0) + "] = " + value + ";",
                    t.getNumElements());
          return success();
        })
        .Case<kern::TransposeOp, kern::SliceOp, kern::ConcatOp>(
            [&](Operation *copy) { return emitCopies(copy); })
        .Case([&](kern::GatherOp g) {
          MemRefType table = mrt(g.getTable());
          int64_t v = table.getDimSize(0), row = table.getNumElements() / std::max<int64_t>(v, 1);
          os_ << llvm::formatv("  if (!tcc_cpu::gather_rows({0}, {1}, {2}, {3}, {4}, {5})) "
                               "return TCC_STATUS_BAD_ARGS; // id out of range\n",
                               mrt(g.getIds()).getNumElements(), row, v,
                               name(g.getTable()), name(g.getIds()), name(g.getOut()));
          return success();
        })
        .Case([&](kern::ScatterAddOp s) {
          MemRefType out = mrt(s.getOut());
          int64_t v = out.getDimSize(0), row = out.getNumElements() / std::max<int64_t>(v, 1);
          int64_t n = mrt(s.getIds()).getNumElements();
          flops += static_cast<double>(n) * row;
          if (isHalf(out.getElementType())) {
            os_ << llvm::formatv("  if (int32_t rc = tcc_cpu::scatter_add_rows_via_float({0}, {1}, "
                                 "{2}, {3}, {4}, {5})) return rc; // 1: id out of range, "
                                 "2: out of memory\n",
                                 n, row, v, cpuPointer(s.getUpdates(), false),
                                 name(s.getIds()), cpuPointer(s.getOut(), true));
            return success();
          }
          os_ << llvm::formatv("  if (!tcc_cpu::scatter_add_rows({0}, {1}, {2}, {3}, {4}, {5})) "
                               "return TCC_STATUS_BAD_ARGS; // id out of range\n",
                               n, row, v, name(s.getUpdates()), name(s.getIds()),
                               name(s.getOut()));
          return success();
        })
        .Case([&](kern::SoftmaxCrossEntropyOp x) {
          MemRefType l = mrt(x.getLogits());
          os_ << llvm::formatv("  if (!tcc_cpu::softmax_cross_entropy({0}, {1}, {2}, {3}, {4})) "
                               "return TCC_STATUS_BAD_ARGS; // label out of range\n",
                               l.getDimSize(0), l.getDimSize(1),
                               cpuPointer(x.getLogits(), false), name(x.getLabels()),
                               cpuPointer(x.getLoss(), true));
          flops += 4.0 * l.getNumElements();
          return success();
        })
        .Case([&](kern::SoftmaxCrossEntropyGradOp x) {
          MemRefType l = mrt(x.getLogits());
          os_ << llvm::formatv("  if (!tcc_cpu::softmax_cross_entropy_grad({0}, {1}, {2}, {3}, {4}, {5})) "
                               "return TCC_STATUS_BAD_ARGS; // label out of range\n",
                               l.getDimSize(0), l.getDimSize(1),
                               cpuPointer(x.getLogits(), false), name(x.getLabels()),
                               cpuPointer(x.getGrad(), false), cpuPointer(x.getOut(), true));
          flops += 5.0 * l.getNumElements();
          return success();
        })
        .Case([&](kern::SoftmaxCrossEntropyWithGradOp x) {
          MemRefType l = mrt(x.getLogits());
          os_ << llvm::formatv("  if (!tcc_cpu::softmax_cross_entropy_with_grad({0}, {1}, {2}, {3}, "
                               "{4}, {5}, {6})) return TCC_STATUS_BAD_ARGS; // label out of range\n",
                               l.getDimSize(0), l.getDimSize(1),
                               cpuPointer(x.getLogits(), false), name(x.getLabels()),
                               cpuPointer(x.getGrad(), false), cpuPointer(x.getLoss(), true),
                               cpuPointer(x.getOut(), true));
          flops += 9.0 * l.getNumElements();
          return success();
        })
        .Case([&](kern::AttentionOp a) { return emitCpuAttention(a, names_, os_, flops); })
        .Case([&](kern::AttentionGradOp a) {
          return emitCpuAttentionGrad(a, names_, os_, flops);
        })
        .Case([&](kern::LayerNormOp n) { return emitCpuLayerNorm(n, names_, os_, flops); })
        .Case([&](kern::LayerNormGradOp n) {
          return emitCpuLayerNormGrad(n, names_, os_, flops);
        })
        .Case([&](kern::BatchNormStatsOp n) {
          return emitCpuBatchNormStats(n, names_, os_, flops);
        })
        .Case([&](kern::BatchNormGradSumsOp n) {
          return emitCpuBatchNormGradSums(n, names_, os_, flops);
        })
        .Case([&](kern::Conv2dOp c) { return emitCpuConv2d(c, names_, os_, flops); })
        .Case([&](kern::Pool2dOp p) { return emitCpuPool2d(p, names_, os_, flops); })
        .Case([&](kern::RopeOp r) {
          // (B, H, T, D) rows, strided after kern-fold-attention-layout.
          kern::RopeSizes s = kern::ropeSizes(r);
          SmallVector<kern::AttentionTensorLayout, 2> l = kern::ropeLayouts(r, s);
          auto strides = [](const kern::AttentionTensorLayout &t) {
            return llvm::formatv("tcc_cpu::RopeStrides{{{0}, {1}, {2}, {3}}", t.offset,
                                 t.batch, t.head, t.row)
                .str();
          };
          os_ << llvm::formatv(
              "  tcc_cpu::rope({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10});\n",
              s.batch, s.heads, s.positions, s.dim, cpuPointer(r.getInput(), false),
              strides(l[0]), cpuPointer(r.getCos(), false), cpuPointer(r.getSin(), false),
              r.getTransposed() ? "true" : "false", cpuPointer(r.getOut(), true),
              strides(l[1]));
          flops += 3.0 * static_cast<double>(s.elements());
          return success();
        })
        .Default([&](Operation *other) {
          return other->emitError("cpu codegen: cannot generate code for ")
                 << other->getName()
                 << (isa<kern::AllocOp>(other) ? " (run kern-plan-memory first)" : "");
        });
  }

  static bool isHalf(Type et) { return et.isBF16() || et.isF16(); }

  // Buffer `v` as the prelude's fixed kernels take it (bf16 / f16 as
  // tcc_cpu::bf16 / f16 pointers).
  std::string cpuPointer(Value v, bool written) {
    return familyPointer(mrt(v).getElementType(), name(v), written, CodeTarget::Cpu);
  }

  // Loading a stored element as its compute type, and back.
  static std::string load(Type et, const std::string &e) {
    return loadElement(et, e, CodeTarget::Cpu);
  }
  static std::string store(Type et, const std::string &e) {
    return storeElement(et, e, CodeTarget::Cpu);
  }

  LogicalResult emitConstant(kern::ConstantOp c) {
    MemRefType t = c.getType();
    Type et = t.getElementType();
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!dense)
      return c.emitError("cpu codegen: only dense constants are supported");
    std::string st = storageType(et), n = fresh(c.getResult());
    std::string values = denseInitializer(dense, et);
    os_ << llvm::formatv("  static const {0} {1}_data[] = {{{2}\n  };\n", st, n, values);
    os_ << llvm::formatv("  {0} *{1} = const_cast<{0} *>({1}_data); // {2}\n", st, n,
                         shapeComment(t));
    return success();
  }

  // outputs[i] = body(inputs broadcast to the shape [i], i).
  LogicalResult emitElementwise(kern::ElementwiseOp e, double &flops) {
    return emitElementwiseLoop(e.getInputs(), e.getOutputs(), e.getBodyBlock(), flops);
  }

  // A multi-tensor kernel: each member's loop exactly as its own
  // kern.elementwise would be (same body, same order: the same bits), in a
  // scope of its own.
  LogicalResult emitMultiElementwise(kern::MultiElementwiseOp e, double &flops) {
    for (int64_t m = 0; m < e.members(); ++m) {
      os_ << "  {\n";
      if (failed(emitElementwiseLoop(e.memberInputs(m), e.memberOutputs(m), e.getBodyBlock(),
                                     flops)))
        return failure();
      os_ << "  }\n";
    }
    return success();
  }

  // Each member summed as its own whole-tensor kern.reduce would be; sums
  // of squares square each element in float, then add it in double, as
  // the f32 square kernel and the sum of what it stored did.
  LogicalResult emitMultiSum(kern::MultiSumOp s, double &flops) {
    for (auto [in, out] : llvm::zip(s.getInputs(), s.getOutputs())) {
      if (s.getSquares()) {
        Type it = mrt(in).getElementType(), et = mrt(out).getElementType();
        int64_t n = mrt(in).getNumElements();
        flops += 2.0 * n;
        os_ << llvm::formatv("  {{\n    double acc = 0.0;\n    const {0} *row = {1};\n"
                             "#pragma omp simd reduction(+:acc)\n"
                             "    for (int64_t j = 0; j < {2}; ++j) {{ const float v = {3}; "
                             "acc += static_cast<double>(v * v); }\n    {4}[0] = {5};\n  }\n",
                             storageType(it), name(in), n, load(it, "row[j]"), name(out),
                             store(et, "static_cast<float>(acc)"));
        continue;
      }
      SmallVector<int64_t> axes;
      for (int64_t d = 0; d < mrt(in).getRank(); ++d)
        axes.push_back(d);
      os_ << "  {\n";
      if (failed(emitCpuReduce(in, out, kern::ReduceKind::sum, axes, names_, os_, flops)))
        return failure();
      os_ << "  }\n";
    }
    return success();
  }

  // outputs[i] = body(inputs broadcast to the shape [i], i).
  LogicalResult emitElementwiseLoop(ValueRange inputs, ValueRange outputs, Block &body,
                                    double &flops) {
    ArrayRef<int64_t> shape = mrt(outputs[0]).getShape();
    BlockArgument flatIndex = body.getArguments().back();
    SmallVector<SmallVector<int64_t>> strides;
    for (Value in : inputs)
      strides.push_back(broadcastStrides(mrt(in).getShape(), shape));
    strides.push_back(contiguousStrides(shape)); // outputs and the flat index
    LoopNest nest = LoopNest::build(shape, strides);
    size_t outSlot = inputs.size();

    // Scalars that do not change along the loop (single-element inputs,
    // constants and what only depends on them) are computed once, before
    // it: e.g. the learning rate and bias corrections of an optimizer
    // update, or the per-step key of a dropout mask.
    llvm::DenseMap<Value, std::string> scalars;
    llvm::DenseSet<Value> invariant;
    std::string preamble, text;
    for (auto [k, in] : llvm::enumerate(inputs)) {
      BlockArgument arg = body.getArgument(k);
      if (arg.use_empty())
        continue;
      std::string sn = "a" + std::to_string(k);
      Type et = mrt(in).getElementType();
      bool scalar = mrt(in).getNumElements() == 1;
      (scalar ? preamble : text) +=
          "const " + scalarType(et) + " " + sn + " = " +
          load(et, name(in) + "[" + (scalar ? std::string("0") : nest.index(k)) +
                       "]") +
          ";\n";
      scalars[arg] = sn;
      if (scalar)
        invariant.insert(arg);
    }
    if (!flatIndex.use_empty()) {
      text += "const int64_t flat = " + nest.index(outSlot) + ";\n";
      scalars[flatIndex] = "flat";
    }
    ScalarPrinter printer(scalars);
    int64_t ops = 0;
    for (Operation &op : body.without_terminator()) {
      bool hoist = llvm::all_of(op.getOperands(), [&](Value v) {
        return invariant.contains(v);
      });
      if (failed(printer.print(&op, hoist ? preamble : text)))
        return failure();
      if (hoist)
        invariant.insert(op.getResult(0));
      else if (!isa<arith::ConstantOp>(op))
        ++ops;
    }
    auto yield = cast<kern::YieldOp>(body.getTerminator());
    for (auto [out, v] : llvm::zip(outputs, yield.getValues()))
      text += name(out) + "[" + nest.index(outSlot) + "] = " +
              store(mrt(out).getElementType(), scalars.lookup(v)) + ";\n";
    double n = static_cast<double>(mrt(outputs[0]).getNumElements());
    // (In the kernel's own block: see emitOp.)
    for (StringRef line : llvm::split(preamble, '\n'))
      if (!line.empty())
        os_ << "  " << line << "\n";
    nest.emit(os_, text, n * std::max<int64_t>(ops, 1));
    flops += n * ops;
    return success();
  }

  // Copies (transpose, slice, concat) move stored elements unchanged.
  LogicalResult emitCopies(Operation *op) {
    for (const StridedCopy &c : stridedCopies(op)) {
      LoopNest nest = LoopNest::build(c.shape, {c.srcStrides, c.dstStrides});
      nest.emit(os_, name(c.dst) + "[" + nest.index(1, c.dstBase) + "] = " + name(c.src) + "[" +
                         nest.index(0, c.srcBase) + "];",
                static_cast<double>(nest.numElements()));
    }
    return success();
  }

  func::FuncOp f_;
  llvm::raw_ostream &os_;
  ValueNames names_;
  OutputScratch scratch_{0, 0, 64};
  std::string lossName_;
  int profileId_;
  const StepInterface *entryOf_;
};

} // namespace

FailureOr<GeneratedStep> generateCpuStep(ModuleOp module) {
  FailureOr<StepInterface> iface = collectStepInterface(module, "cpu codegen");
  if (failed(iface))
    return failure();

  GeneratedStep step;
  std::string body;
  llvm::raw_string_ostream os(body);
  // Each function's output scratch starts after its own plan (see
  // outputScratchBase); the workspace is the larger of the two ends.
  int64_t planned = iface->plannedWorkspace;
  int64_t trainBase = outputScratchBase(iface->train, planned, 64);
  int64_t evalBase = outputScratchBase(iface->eval, planned, 64);
  FunctionEmitter trainEmitter(iface->train, os, /*firstProfileId=*/0);
  if (failed(trainEmitter.emit("tcc_train", trainBase, step.trainFlops)))
    return failure();
  FunctionEmitter evalEmitter(iface->eval, os, /*firstProfileId=*/1 << 20);
  if (failed(evalEmitter.emit("tcc_eval", evalBase, step.evalFlops)))
    return failure();
  step.workspaceBytes =
      std::max({planned, trainBase + trainEmitter.outputScratchBytes(),
                evalBase + evalEmitter.outputScratchBytes()});
  // Further entries (tcc.entry): profile ids from (2 + k) << 20; the
  // workspace covers each one's plan and output scratch.
  SmallVector<double> entryFlops;
  for (auto [k, e] : llvm::enumerate(iface->entries)) {
    int64_t base = outputScratchBase(e.f, planned, 64);
    FunctionEmitter emitter(e.f, os, static_cast<int>(2 + k) << 20, &*iface);
    double flops = 0;
    if (failed(emitter.emit(e.cName(), base, flops)))
      return failure();
    entryFlops.push_back(flops);
    step.workspaceBytes = std::max(step.workspaceBytes, base + emitter.outputScratchBytes());
  }

  std::string src;
  llvm::raw_string_ostream s(src);
  s << "// Generated by tcc from model '" << iface->modelName
    << "' for target cpu. Do not edit: regenerate with tcc compile.\n\n";
  // (The prelude's path as it was before codegen/ was split by target: the
  // generated text stays byte-identical across that move.)
  s << "// ---- step ABI (runtime/include/tcc/step_abi.h) ----\n"
    << embedded::kStepAbiHeader << "\n";
  s << "// ---- CPU kernels (compiler/codegen/cpu_prelude.h) ----\n"
    << embedded::kCpuPrelude << "\n";
  s << "// ---- the step ----\n";
  s << body;
  emitDescriptor(s, *iface, "cpu",
                 "#if defined(__x86_64__)\n  \"x86_64\",\n#elif defined(__aarch64__)\n"
                 "  \"aarch64\",\n#else\n  \"unknown\",\n#endif\n",
                 step.workspaceBytes, step.trainFlops, step.evalFlops, "nullptr", entryFlops);
  step.source = std::move(src);
  return step;
}

} // namespace tcc
