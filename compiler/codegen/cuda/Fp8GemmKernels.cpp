// kern.gemm as a cuBLASLt FP8 product (tg-amp's fp8 precision; Fp8Gemm.h
// says when and how): two current-scaling casts into the shared
// workspace, then tcc_cuda_host::gemm_fp8 (host_support/gemm_fp8.h).
#include "compiler/codegen/cuda/CudaStepEmitter.h"
#include "compiler/codegen/cuda/Fp8Gemm.h"
#include "dialects/common/ModelAttrs.h"

#include <algorithm>

#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

Fp8Gemm Fp8Gemm::of(kern::GemmOp g) {
  Fp8Gemm f;
  auto attr = g->getAttrOfType<StringAttr>(model::kFp8GemmAttr);
  if (!attr)
    return f;
  f.marked = true;
  auto [a, b] = attr.getValue().split('x');
  auto known = [](StringRef s) { return s == "e4m3" || s == "e5m2"; };
  if (!known(a) || !known(b)) {
    f.declined = "unknown FP8 formats '" + attr.getValue().str() + "'";
    return f;
  }
  f.aE5M2 = a == "e5m2";
  f.bE5M2 = b == "e5m2";
  GemmShape s = GemmShape::of(g);
  f.ta = s.ta;
  f.tb = s.tb;
  f.m = s.batchCount * s.m;
  f.n = s.n;
  f.k = s.k;
  Type out = mrt(g.getOut()).getElementType();
  auto castable = [](Type t) { return t.isF32() || t.isBF16() || t.isF16(); };
  if (f.aE5M2 && f.bE5M2)
    f.declined = "two E5M2 operands (cuBLASLt has no such product)";
  else if (!out.isBF16() && !out.isF32())
    f.declined = "its result is neither bf16 nor f32";
  else if (!castable(mrt(g.getA()).getElementType()) ||
           !castable(mrt(g.getB()).getElementType()))
    f.declined = "an operand is not f32, bf16 or f16";
  else if (g.getAlpha().convertToDouble() != 1.0 || g.getBeta().convertToDouble() != 0.0)
    f.declined = "alpha != 1 or beta != 0";
  else if (s.batchCount > 1 && !s.foldsBatchIntoM())
    f.declined = "a batch that does not fold into M";
  else if (f.k % 16 != 0 || f.n % 16 != 0)
    f.declined = llvm::formatv("K = {0} and N = {1} must be multiples of 16", f.k, f.n).str();
  else if (f.m == 0)
    f.declined = "an empty product";
  return f;
}

Fp8Slot Fp8Slot::of(Operation *root) {
  Fp8Slot slot;
  root->walk([&](kern::GemmOp g) {
    Fp8Gemm f = Fp8Gemm::of(g);
    if (f.runs())
      slot.elements = std::max({slot.elements, f.m * f.k, f.n * f.k});
  });
  return slot;
}

namespace {

// Ops that leave the slots alone: they use no shared workspace (cuBLASLt
// keeps to its first kGemmWorkspaceBytes, before the slots).
bool keepsFp8Slots(Operation *op) {
  return isa<kern::GemmOp, kern::GemmEpilogueOp, kern::GemmDgeluOp, kern::GemmBiasGradOp,
             kern::ElementwiseOp, kern::MultiElementwiseOp, kern::FillOp, kern::ConstantOp,
             kern::TransposeOp, kern::SliceOp, kern::ConcatOp, kern::ReshapeOp,
             kern::WorkspaceViewOp, kern::AllocOp, kern::RopeOp, kern::GatherOp,
             kern::ScatterAddOp, kern::SoftmaxCrossEntropyOp,
             kern::SoftmaxCrossEntropyGradOp, kern::SoftmaxCrossEntropyWithGradOp>(op);
}

} // namespace

bool CudaStepEmitter::overlaps(const Footprint &a, const Footprint &b) {
  return a.argument ? a.argument == b.argument
                    : !b.argument && a.begin < b.end && b.begin < a.end;
}

// The same bytes from the same start: what a cast of `b` may be reused for.
bool CudaStepEmitter::sameStart(const Footprint &a, const Footprint &b) {
  return overlaps(a, b) && a.begin == b.begin;
}

// Whether `op` may write `source` (an op without memory effects may).
bool CudaStepEmitter::mayWrite(Operation *op, const Footprint &source) {
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return true;
  SmallVector<MemoryEffects::EffectInstance> list;
  effects.getEffects(list);
  for (const MemoryEffects::EffectInstance &e : list)
    if (isa<MemoryEffects::Write>(e.getEffect()) &&
        (!e.getValue() || overlaps(footprint(e.getValue()), source)))
      return true;
  return false;
}

// After `op`: the casts whose source it may have written, or all when it
// may use the shared workspace, are gone.
void CudaStepEmitter::forgetFp8Casts(Operation *op) {
  if (fp8Casts_.empty())
    return;
  if (!keepsFp8Slots(op)) {
    fp8Casts_.clear();
    return;
  }
  llvm::erase_if(fp8Casts_, [&](const Fp8Cast &c) { return mayWrite(op, c.source); });
}

// out (M, N) = op(a) x op(b): a as FP8 (M, K), b as FP8 (N, K), each with
// the scale of its own amax; gemm_fp8 dequantizes with their inverses.
LogicalResult CudaStepEmitter::emitGemmFp8(kern::GemmOp g, const Fp8Gemm &f,
                                           llvm::raw_ostream &os, double &flops) {
  double work = 2.0 * f.m * f.n * f.k;
  flops += work;
  if (fp8Slot_.elements == 0)
    fp8Slot_ = Fp8Slot::of(g->getParentOfType<ModuleOp>());
  if (!fp8Records_) {
    fp8Records_.emplace(Value(), 0);
    for (BlockArgument arg : f_.getArguments()) {
      auto state = f_.getArgAttrOfType<DictionaryAttr>(arg.getArgNumber(), model::kOptStateAttr);
      auto stateName = state ? state.getAs<StringAttr>("name") : nullptr;
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (stateName && stateName.getValue() == model::kFp8ScalingState && type &&
          type.getRank() == 2 && type.getDimSize(1) == 32 && type.getElementType().isF32())
        fp8Records_.emplace(arg, type.getDimSize(0));
    }
  }
  const std::string scratch = "(ws + tcc_gemm_workspace_offset + tcc_gemm_workspace_bytes)";
  auto slotBase = [&](int slot) { return slot * fp8Slot_.bytes(); };
  // Whether a product after `g`, before anything forgets the slots or
  // writes `source`, reads it in `e5m2` as stored rows x cols in the other
  // layout (then one pass writes both).
  auto neededLater = [&](const Footprint &source, Type et, int64_t rows, int64_t cols,
                         bool e5m2, bool transposed) {
    int scanned = 0;
    for (Operation *op = g->getNextNode(); op && scanned < 64; op = op->getNextNode(), ++scanned) {
      if (auto later = dyn_cast<kern::GemmOp>(op)) {
        Fp8Gemm lf = Fp8Gemm::of(later);
        if (lf.runs()) {
          auto wants = [&](Value v, bool fE5M2, int64_t r, int64_t c, bool t) {
            return fE5M2 == e5m2 && t != transposed && r == rows && c == cols &&
                   mrt(v).getElementType() == et && sameStart(footprint(v), source);
          };
          if (wants(later.getA(), lf.aE5M2, lf.ta ? lf.k : lf.m, lf.ta ? lf.m : lf.k, lf.ta) ||
              wants(later.getB(), lf.bE5M2, lf.tb ? lf.n : lf.k, lf.tb ? lf.k : lf.n, !lf.tb))
            return true;
        }
      }
      if (!keepsFp8Slots(op) || mayWrite(op, source))
        return false;
    }
    return false;
  };
  // One operand as the product reads it: `stored` rows x cols as it lies
  // in memory, K along cols unless `transposed`. Returns its slot, from an
  // earlier cast when one holds it (no launch), else cast now (both
  // layouts when a later product wants the other).
  int busySlot = -1;
  auto quantize = [&](Value operand, bool e5m2, int64_t rows, int64_t cols, bool transposed) {
    Type et = mrt(operand).getElementType();
    Footprint source = footprint(operand);
    ++fp8Clock_;
    for (Fp8Cast &c : fp8Casts_)
      if (c.e5m2 == e5m2 && c.rows == rows && c.cols == cols && c.element == et &&
          sameStart(c.source, source) && (transposed ? c.transposed : c.plain)) {
        c.lastUse = fp8Clock_;
        return c.slot;
      }
    // A free slot, else the least recently used one (not the other
    // operand's).
    int slot = -1;
    uint64_t oldest = ~uint64_t(0);
    for (int candidate = 0; candidate < kFp8Slots; ++candidate) {
      if (candidate == busySlot)
        continue;
      auto it = llvm::find_if(fp8Casts_, [&](const Fp8Cast &c) { return c.slot == candidate; });
      uint64_t used = it == fp8Casts_.end() ? 0 : it->lastUse;
      if (used < oldest) {
        oldest = used;
        slot = candidate;
      }
    }
    llvm::erase_if(fp8Casts_, [&](const Fp8Cast &c) { return c.slot == slot; });
    const bool both = neededLater(source, et, rows, cols, e5m2, transposed);
    const bool plain = !transposed || both, trans = transposed || both;
    // Delayed scaling when the function has records left (a train step
    // tg-fp8-scaling gave them), current scaling otherwise.
    std::optional<int64_t> record;
    if (fp8Records_ && fp8RecordsUsed_ < fp8Records_->second)
      record = fp8RecordsUsed_++;
    const char *f8 = e5m2 ? "tcc_cuda::e5m2" : "tcc_cuda::e4m3";
    std::string params = "const " + storageType(et) + " *p0, uint8_t *p1, uint8_t *p2, void *p3" +
                         (record ? ", float *p4" : "");
    std::string text =
        "extern \"C\" void @NAME@(cudaStream_t s, " + params + ") {\n  " +
        llvm::formatv("tcc_cuda::launch_fp8_quantize_{7}<{0}, {1}>({2}, {3}, {4}, {5}, {6}, "
                      "static_cast<tcc_cuda::Fp8TensorScale *>(p3), {8}s);",
                      familyElementType(et, CodeTarget::Cuda), f8, rows, cols,
                      familyPointer(et, "p0", false, CodeTarget::Cuda),
                      plain ? llvm::formatv("reinterpret_cast<{0} *>(p1)", f8).str() : "nullptr",
                      trans ? llvm::formatv("reinterpret_cast<{0} *>(p2)", f8).str() : "nullptr",
                      record ? "delayed" : "current",
                      record ? "reinterpret_cast<tcc_cuda::Fp8ScalingRecord *>(p4), " : "")
            .str() +
        "\n}\n";
    std::string kernel = kernels_.add(
        llvm::formatv("fp8_quantize_{0}{1}", e5m2 ? "e5m2" : "e4m3", record ? "_delayed" : "")
            .str(),
        text, params);
    std::string call =
        llvm::formatv("{0}(s, {1}, reinterpret_cast<uint8_t *>({2} + {3}), "
                      "reinterpret_cast<uint8_t *>({2} + {4}), {2} + {5}{6});",
                      kernel, name(operand), scratch, slotBase(slot),
                      slotBase(slot) + fp8Slot_.transposedOffset(),
                      slotBase(slot) + fp8Slot_.scaleOffset(),
                      record ? llvm::formatv(", reinterpret_cast<float *>({0}) + {1}",
                                             name(fp8Records_->first), *record * 32)
                                   .str()
                             : std::string())
            .str();
    double elements = static_cast<double>(rows) * cols;
    // Delayed scaling reads the operand once (the amax launch returns at
    // once after the site's first cast).
    launch(os, g, kernel, call,
           llvm::formatv("{0}x{1}{2}, {3}", rows, cols,
                         both ? " and transposed" : transposed ? " transposed" : "",
                         record ? llvm::formatv("delayed scale (record {0})", *record).str()
                                : std::string("current scale"))
               .str(),
           2.0 * elements,
           (record ? 1.0 : 2.0) * bufferBytes(mrt(operand)) + (both ? 2 : 1) * elements);
    fp8Casts_.push_back({source, et, rows, cols, e5m2, plain, trans, slot, fp8Clock_});
    return slot;
  };
  // op(a) (M, K): a is (M, K), or (K, M) transposed.
  int slotA = quantize(g.getA(), f.aE5M2, f.ta ? f.k : f.m, f.ta ? f.m : f.k, f.ta);
  busySlot = slotA;
  // op(b)^T (N, K): b is (N, K) when transposed, else (K, N).
  int slotB = quantize(g.getB(), f.bE5M2, f.tb ? f.n : f.k, f.tb ? f.k : f.n, !f.tb);
  auto operand = [&](int slot, bool transposed) {
    return slotBase(slot) + (transposed ? fp8Slot_.transposedOffset() : 0);
  };
  MemRefType c = mrt(g.getOut());
  // Transformer Engine's choice: fast accumulation in the forward (E4M3 x
  // E4M3), promoted accumulation for the gradients (an E5M2 operand).
  const bool fast = !f.aE5M2 && !f.bE5M2;
  int site = gemmSites_++;
  std::string call =
      llvm::formatv(
          "static tcc_cuda_host::GemmPlan tcc_gemm_plan_{0};\n"
          "  if (int32_t rc = tcc_cuda_host::gemm_fp8(tcc_gemm_plan_{0}, s, {1}, {2}, {3}, {4}, "
          "{5}, {6}, {7}, {8}, reinterpret_cast<const float *>({9} + {10}), "
          "reinterpret_cast<const float *>({9} + {11}), {9} + {12}, {9} + {13}, {14}, "
          "ws + tcc_gemm_workspace_offset, tcc_gemm_workspace_bytes)) return rc;",
          site, nextId(), f.aE5M2 ? "tcc_cuda_host::kFp8E5M2" : "tcc_cuda_host::kFp8E4M3",
          f.bE5M2 ? "tcc_cuda_host::kFp8E5M2" : "tcc_cuda_host::kFp8E4M3",
          c.getElementType().isBF16() ? "tcc_cuda_host::kGemmBF16" : "tcc_cuda_host::kGemmF32",
          fast ? "true" : "false", f.m, f.n, f.k, scratch,
          slotBase(slotA) + fp8Slot_.scaleOffset(), slotBase(slotB) + fp8Slot_.scaleOffset(),
          operand(slotA, f.ta), operand(slotB, !f.tb), name(g.getOut()))
          .str();
  launch(os, g, "cublasLtMatmul_fp8", call,
         llvm::formatv("{0}x{1}x{2} {3}x{4}", f.m, f.n, f.k, f.aE5M2 ? "e5m2" : "e4m3",
                       f.bE5M2 ? "e5m2" : "e4m3")
             .str(),
         work, static_cast<double>(f.m * f.k + f.n * f.k) + bufferBytes(c),
         LaunchCheck::InCall);
  return success();
}

} // namespace tcc::codegen::cuda
