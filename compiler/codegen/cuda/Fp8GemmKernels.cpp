// kern.gemm as a cuBLASLt FP8 product (tg-amp's fp8 precision; Fp8Gemm.h
// says when and how): two current-scaling casts into the shared
// workspace, then tcc_cuda_host::gemm_fp8 (host_support/gemm_fp8.h).
#include "compiler/codegen/cuda/CudaStepEmitter.h"
#include "compiler/codegen/cuda/Fp8Gemm.h"
#include "dialects/common/ModelAttrs.h"

#include <algorithm>

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

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
// its scale; gemm_fp8 dequantizes with their inverses.
LogicalResult CudaStepEmitter::emitGemmFp8(Operation *g, const Fp8Gemm &f,
                                           llvm::raw_ostream &os, double &flops) {
  double work = 2.0 * f.m * f.n * f.k;
  flops += work;
  if (fp8Slot_.elements == 0)
    fp8Slot_ = Fp8Slot::of(g->getParentOfType<ModuleOp>());
  if (!fp8Kept_)
    fp8Kept_ = Fp8KeptPlan::of(f_);
  if (!fp8Records_)
    fp8Records_ = fp8ScalingRecords(f_);
  const std::string scratch = "(ws + tcc_gemm_workspace_offset + tcc_gemm_workspace_bytes)";
  const std::string keptRegion = "(ws + tcc_fp8_kept_offset)";
  auto slotBase = [&](int slot) { return slot * fp8Slot_.bytes(); };
  auto at = [](const std::string &base, int64_t offset) {
    return llvm::formatv("{0} + {1}", base, offset).str();
  };
  // Whether a product after `g`, before anything forgets the slots or
  // writes `source`, reads it in `e5m2` as stored rows x cols in the other
  // layout (then one pass writes both).
  auto neededLater = [&](const Footprint &source, Type et, int64_t rows, int64_t cols,
                         bool e5m2, bool transposed) {
    int scanned = 0;
    for (Operation *op = g->getNextNode(); op && scanned < 64; op = op->getNextNode(), ++scanned) {
      if (Fp8Gemm lf = Fp8Gemm::of(op); lf.runs())
        for (int which = 0; which < 2; ++which) {
          OperandCast c = operandOf(lf, which);
          if (c.e5m2 == e5m2 && c.transposed != transposed && c.rows == rows &&
              c.cols == cols && mrt(c.value).getElementType() == et &&
              sameStart(footprint(c.value), source))
            return true;
        }
      if (!keepsFp8Slots(op) || mayWrite(op, source))
        return false;
    }
    return false;
  };
  // Where a batched cast's layouts lie in the kept region ("" = not made).
  auto batchedLayout = [&](const Fp8KeptCast &kept, bool transposed) -> std::string {
    if (transposed ? kept.transposed : kept.plain)
      return at(keptRegion, transposed ? kept.transposedOffset() : kept.plainOffset());
    if (kept.ownEntry >= 0) {
      const Fp8KeptCast &own = fp8Kept_->casts[kept.ownEntry];
      if (transposed ? own.transposed : own.plain)
        return at(keptRegion, transposed ? own.transposedOffset() : own.plainOffset());
    }
    return "";
  };
  if (fp8Kept_->batchAt == g && !fp8BatchEmitted_) {
    fp8BatchEmitted_ = true;
    if (!fp8Records_ || fp8Records_->second == 0)
      return g->emitError("cuda codegen: FP8 casts batched without delayed-scaling records "
                         "(an internal error)");
    // One launch per (element type, format, whether read from the f32
    // inputs of casts left to it: fp8BatchComputes): the weights are all
    // bf16 E4M3, and all read from their f32 masters when nothing else
    // reads their bf16 copies.
    llvm::MapVector<std::tuple<Type, unsigned, unsigned>, SmallVector<int>> groups;
    for (int k : fp8Kept_->batchedCasts) {
      auto [reader, operand] = fp8Kept_->firstReader.lookup(k);
      OperandCast c = operandOf(Fp8Gemm::of(reader), operand);
      const unsigned fromF32 = fp8BatchSources_.contains(k) ? 1u : 0u;
      groups[{mrt(c.value).getElementType(), c.e5m2 ? 1u : 0u, fromF32}].push_back(k);
    }
    for (auto &[key, members] : groups) {
      auto [et, e5m2, fromF32] = key;
      const char *f8 = e5m2 ? "tcc_cuda::e5m2" : "tcc_cuda::e4m3";
      const std::string source =
          fromF32 ? std::string("float") : familyElementType(et, CodeTarget::Cuda);
      std::string params = "int32_t count, const void *const *in, void *const *out, "
                           "void *const *out_t, void *const *q, float *const *record, "
                           "const int32_t *rows, const int32_t *cols";
      std::string text =
          "extern \"C\" void @NAME@(cudaStream_t s, " + params + ") {\n  " +
          llvm::formatv("tcc_cuda::launch_fp8_quantize_delayed_batch<{0}, {1}, {2}>(count, "
                        "reinterpret_cast<const {2} *const *>(in), reinterpret_cast<{1} *const "
                        "*>(out), reinterpret_cast<{1} *const *>(out_t), "
                        "reinterpret_cast<tcc_cuda::Fp8TensorScale *const *>(q), "
                        "reinterpret_cast<tcc_cuda::Fp8ScalingRecord *const *>(record), rows, "
                        "cols, s);",
                        familyElementType(et, CodeTarget::Cuda), f8, source)
              .str() +
          "\n}\n";
      std::string kernel = kernels_.add(
          llvm::formatv("fp8_quantize_{0}_delayed_batch{1}", e5m2 ? "e5m2" : "e4m3",
                        fromF32 ? "_from_f32" : "")
              .str(),
          text,
          params);
      SmallVector<std::string> ins, outs, outsT, qs, records, rows, cols;
      double elements = 0, bytes = 0;
      for (int k : members) {
        auto [reader, operand] = fp8Kept_->firstReader.lookup(k);
        OperandCast c = operandOf(Fp8Gemm::of(reader), operand);
        const Fp8KeptCast &kept = fp8Kept_->casts[k];
        std::string plainAt = batchedLayout(kept, false), transAt = batchedLayout(kept, true);
        auto f32 = fp8BatchSources_.find(k);
        const Value read = f32 != fp8BatchSources_.end() ? f32->second : c.value;
        ins.push_back(name(read));
        outs.push_back(plainAt.empty() ? "nullptr" : plainAt);
        outsT.push_back(transAt.empty() ? "nullptr" : transAt);
        qs.push_back(at(keptRegion, kept.scaleOffset()));
        // The record the cast would have taken at its first reader, known
        // there (emit() fills the placeholder in).
        records.push_back(llvm::formatv("reinterpret_cast<float *>({0}) + @TCC_FP8_RECORD_{1}@",
                                        name(fp8Records_->first), k)
                              .str());
        rows.push_back(std::to_string(c.rows));
        cols.push_back(std::to_string(c.cols));
        const double n = static_cast<double>(c.rows) * c.cols;
        elements += n;
        bytes += bufferBytes(mrt(read)) + (!plainAt.empty() + !transAt.empty()) * n;
      }
      auto list = [](ArrayRef<std::string> xs) { return llvm::join(xs, ", "); };
      std::string call =
          llvm::formatv("{{ const void *const tcc_in[] = {{{0}};\n"
                        "    void *const tcc_out[] = {{{1}};\n"
                        "    void *const tcc_out_t[] = {{{2}};\n"
                        "    void *const tcc_q[] = {{{3}};\n"
                        "    float *const tcc_record[] = {{{4}};\n"
                        "    static const int32_t tcc_rows[] = {{{5}};\n"
                        "    static const int32_t tcc_cols[] = {{{6}};\n"
                        "    {7}(s, {8}, tcc_in, tcc_out, tcc_out_t, tcc_q, tcc_record, "
                        "tcc_rows, tcc_cols); }",
                        list(ins), list(outs), list(outsT), list(qs), list(records),
                        list(rows), list(cols), kernel, members.size())
              .str();
      fp8BatchGroups_.push_back(members);
      launch(os, g, kernel, call,
             llvm::formatv("{0} operands nothing writes from the first FP8 product to their "
                           "readers (the weights) cast at once, delayed scales (records "
                           "@TCC_FP8_BATCH_RECORDS_{1}@), kept{2}",
                           members.size(), fp8BatchGroups_.size() - 1,
                           fromF32 ? ", read from the f32 inputs of their 16-bit casts (left "
                                     "out of those casts' launch) and rounded as they would be"
                                   : "")
                 .str(),
             2.0 * elements, bytes);
    }
  }
  // Where a product reads one operand: its FP8 bytes and its scale record.
  struct Placed {
    std::string data, scale;
  };
  // Casts `c` now, into `plainAt` / `transposedAt` (either may be empty:
  // not written), its scale record at `scaleAt`.
  auto cast = [&](const OperandCast &c, const std::string &plainAt,
                  const std::string &transposedAt, const std::string &scaleAt,
                  const char *where) -> bool {
    Type et = mrt(c.value).getElementType();
    const bool plain = !plainAt.empty(), trans = !transposedAt.empty();
    // Delayed scaling when the function has records left (a train step
    // tg-fp8-scaling gave them), current scaling otherwise.
    std::optional<int64_t> record;
    if (fp8Records_ && fp8RecordsUsed_ < fp8Records_->second)
      record = fp8RecordsUsed_++;
    const char *f8 = c.e5m2 ? "tcc_cuda::e5m2" : "tcc_cuda::e4m3";
    const double elements = static_cast<double>(c.rows) * c.cols;
    auto recordArg = [&] {
      return record ? llvm::formatv(", reinterpret_cast<float *>({0}) + {1}",
                                    name(fp8Records_->first),
                                    *record * model::kFp8ScalingRecordFloats)
                          .str()
                    : std::string();
    };
    auto pointer = [](const std::string &p) {
      return p.empty() ? std::string("nullptr") : "reinterpret_cast<uint8_t *>(" + p + ")";
    };
    // The input: the buffer, or the op that fp8CastComputes /
    // fp8NormCastComputes / fp8NormGradCastComputes left to this cast,
    // whose result is not written: an elementwise op's inputs instead (a
    // cast source), or a norm's (one launch normalizes and casts), or a
    // norm backward's (one launch writes dx and casts; NormKernels.cpp).
    auto deferred = llvm::find_if(fp8Deferred_, [&](const Fp8Deferred &d) {
      auto e = dyn_cast<kern::ElementwiseOp>(d.op);
      return (isa<kern::LayerNormOp, kern::LayerNormGradOp>(d.op) ||
              (e && e.getOutputs().size() == 1)) &&
             sameStart(d.result, footprint(c.value));
    });
    // Or the ropes fp8RopeCastComputes left to it, writing bands of it
    // (Fp8RopeCast.cpp): a source computing them.
    SmallVector<kern::RopeOp> ropes;
    for (const Fp8Deferred &d : fp8Deferred_)
      if (auto r = dyn_cast<kern::RopeOp>(d.op); r && sameStart(d.result, footprint(c.value)))
        ropes.push_back(r);
    std::string kernel, call, computes;
    double inBytes = bufferBytes(mrt(c.value)), inFlops = 0;
    if (deferred != fp8Deferred_.end() &&
        isa<kern::LayerNormOp, kern::LayerNormGradOp>(deferred->op)) {
      auto grad = dyn_cast<kern::LayerNormGradOp>(deferred->op);
      Fp8NormCastKernel k =
          grad ? fp8NormGradCastKernel(grad, c, plain, trans, record.has_value())
               : fp8NormCastKernel(llvm::cast<kern::LayerNormOp>(deferred->op), c, plain, trans,
                                   record.has_value());
      kernel = kernels_.add(llvm::formatv("fp8_quantize_{0}{1}_norm{2}", c.e5m2 ? "e5m2" : "e4m3",
                                          record ? "_delayed" : "", grad ? "_grad" : "")
                                .str(),
                            k.text, k.params, "cudaError_t");
      call = llvm::formatv("if (cudaError_t e = {0}(s, {1}, {2}, {3}, {4}{5}); e != cudaSuccess) "
                           "return tcc_cuda_host::cuda_error(e, tcc_cuda_host::where({6}).c_str());",
                           kernel, k.args, pointer(plainAt), pointer(transposedAt), scaleAt,
                           recordArg(), nextId())
                 .str();
      inBytes = k.bytes;
      inFlops = k.flops;
    } else {
      std::string inParams = "const " + storageType(et) + " *p0",
                  inArg = familyPointer(et, "p0", false, CodeTarget::Cuda),
                  inCall = name(c.value), definition, source;
      if (deferred != fp8Deferred_.end() || !ropes.empty()) {
        FailureOr<Fp8CastSource> src =
            !ropes.empty() ? fp8RopeSource(ropes, c)
                           : fp8ElementwiseSource(llvm::cast<kern::ElementwiseOp>(deferred->op));
        if (failed(src))
          return false;
        inParams = src->params;
        inArg = src->init;
        inCall = src->args;
        definition = src->definition;
        source = ", " + src->type;
        inBytes = src->bytes;
        inFlops = src->flops;
      }
      std::string params =
          inParams + ", uint8_t *p1, uint8_t *p2, void *p3" + (record ? ", float *p4" : "");
      std::string text =
          definition + "extern \"C\" void @NAME@(cudaStream_t s, " + params + ") {\n  " +
          llvm::formatv("tcc_cuda::launch_fp8_quantize_{7}<{0}, {1}{9}>({2}, {3}, {4}, {5}, {6}, "
                        "static_cast<tcc_cuda::Fp8TensorScale *>(p3), {8}s);",
                        familyElementType(et, CodeTarget::Cuda), f8, c.rows, c.cols, inArg,
                        plain ? llvm::formatv("reinterpret_cast<{0} *>(p1)", f8).str() : "nullptr",
                        trans ? llvm::formatv("reinterpret_cast<{0} *>(p2)", f8).str() : "nullptr",
                        record ? "delayed" : "current",
                        record ? "reinterpret_cast<tcc_cuda::Fp8ScalingRecord *>(p4), " : "",
                        source)
              .str() +
          "\n}\n";
      kernel = kernels_.add(llvm::formatv("fp8_quantize_{0}{1}{2}", c.e5m2 ? "e5m2" : "e4m3",
                                          record ? "_delayed" : "",
                                          !ropes.empty()        ? "_rope"
                                          : definition.empty() ? ""
                                                               : "_ew")
                                .str(),
                            text, params);
      call = llvm::formatv("{0}(s, {1}, {2}, {3}, {4}{5});", kernel, inCall, pointer(plainAt),
                           pointer(transposedAt), scaleAt, recordArg())
                 .str();
    }
    if (!ropes.empty()) {
      computes = ", computes " + llvm::join(llvm::map_range(ropes,
                                                            [](kern::RopeOp r) {
                                                              return locName(r->getLoc());
                                                            }),
                                            "+");
      llvm::erase_if(fp8Deferred_, [&](const Fp8Deferred &d) {
        return llvm::is_contained(ropes, dyn_cast<kern::RopeOp>(d.op));
      });
    } else if (deferred != fp8Deferred_.end()) {
      computes = ", computes " + locName(deferred->op->getLoc());
      fp8Deferred_.erase(deferred);
    }
    flops += inFlops;
    // Delayed scaling reads the operand once (the amax launch returns at
    // once after the site's first cast).
    launch(os, g, kernel, call,
           llvm::formatv("{0}x{1}{2}, {3}{4}{5}", c.rows, c.cols,
                         plain && trans ? " and transposed" : trans ? " transposed" : "",
                         record ? llvm::formatv("delayed scale (record {0})", *record).str()
                                : std::string("current scale"),
                         where, computes)
               .str(),
           2.0 * elements + inFlops, (record ? 1.0 : 2.0) * inBytes + (plain + trans) * elements);
    return true;
  };
  // One operand as the product reads it. A kept cast (Fp8KeptPlan): its
  // first reader casts it, the layouts later readers want into the kept
  // region, its own layout there too when a later reader wants it, else
  // into a slot; a later reader casts nothing. Otherwise from an earlier
  // cast in a slot when one holds it (no launch), else cast now into a
  // slot (both layouts when a later product within reach wants the other).
  int busySlot = -1;
  auto freeSlot = [&] { // a free slot, else the least recently used (not the other operand's)
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
    return slot;
  };
  auto quantize = [&](int which) -> Placed {
    OperandCast c = operandOf(f, which);
    Type et = mrt(c.value).getElementType();
    Footprint source = footprint(c.value);
    ++fp8Clock_;
    if (auto use = fp8Kept_->uses.find({g, which}); use != fp8Kept_->uses.end()) {
      const Fp8KeptCast &kept = fp8Kept_->casts[use->second.first];
      auto keptAt = [&](bool transposed) {
        return at(keptRegion, transposed ? kept.transposedOffset() : kept.plainOffset());
      };
      std::string scale = at(keptRegion, kept.scaleOffset());
      if (!use->second.second) // a later reader
        return {keptAt(c.transposed), scale};
      if (kept.batched) { // made by the batch: take the record it would have had here
        if (!fp8Records_ || fp8RecordsUsed_ >= fp8Records_->second) {
          g->emitError("cuda codegen: no delayed-scaling record left for a batched FP8 cast "
                      "(an internal error)");
          return {"", ""};
        }
        fp8BatchRecords_[use->second.first] = fp8RecordsUsed_++;
        return {batchedLayout(kept, c.transposed), scale};
      }
      // A group's member (Fp8KeptPlan::Group) whose op was left to the
      // group's cast: the maker makes it, the others take their records.
      if (auto member = fp8Kept_->groupOf.find(use->second.first);
          member != fp8Kept_->groupOf.end()) {
        const int group = member->second;
        if (fp8GroupsMade_.contains(group)) {
          if (fp8Records_ && fp8Records_->second > 0) {
            if (fp8RecordsUsed_ >= fp8Records_->second) {
              g->emitError("cuda codegen: no delayed-scaling record left for an FP8 cast made "
                           "with its group (an internal error)");
              return {"", ""};
            }
            fp8BatchRecords_[use->second.first] = fp8RecordsUsed_++;
          }
          return {keptAt(c.transposed), scale};
        }
        Operation *op = fp8Kept_->groups[group].op;
        if (use->second.first == fp8Kept_->groups[group].maker &&
            llvm::any_of(fp8Deferred_, [&](const Fp8Deferred &d) { return d.op == op; })) {
          if (!emitFp8GroupCast(g, group, os, flops))
            return {"", ""};
          return {keptAt(c.transposed), scale};
        }
      }
      // The first reader: its own layout in the kept region when kept,
      // else in a slot.
      const bool ownKept = c.transposed ? kept.transposed : kept.plain;
      std::string own;
      if (!ownKept) {
        int slot = freeSlot();
        busySlot = slot;
        own = at(scratch, slotBase(slot) + (c.transposed ? fp8Slot_.transposedOffset() : 0));
      } else {
        own = keptAt(c.transposed);
      }
      std::string plainAt = !c.transposed ? own : kept.plain ? keptAt(false) : "";
      std::string transAt = c.transposed ? own : kept.transposed ? keptAt(true) : "";
      if (!cast(c, plainAt, transAt, scale, ", kept"))
        return {"", ""};
      return {own, scale};
    }
    for (Fp8Cast &prior : fp8Casts_)
      if (prior.e5m2 == c.e5m2 && prior.rows == c.rows && prior.cols == c.cols &&
          prior.element == et && sameStart(prior.source, source) &&
          (c.transposed ? prior.transposed : prior.plain)) {
        prior.lastUse = fp8Clock_;
        busySlot = prior.slot;
        return {at(scratch, slotBase(prior.slot) +
                                (c.transposed ? fp8Slot_.transposedOffset() : 0)),
                at(scratch, slotBase(prior.slot) + fp8Slot_.scaleOffset())};
      }
    int slot = freeSlot();
    busySlot = slot;
    const bool both = neededLater(source, et, c.rows, c.cols, c.e5m2, c.transposed);
    const bool plain = !c.transposed || both, trans = c.transposed || both;
    std::string plainAt = at(scratch, slotBase(slot)),
                transAt = at(scratch, slotBase(slot) + fp8Slot_.transposedOffset()),
                scale = at(scratch, slotBase(slot) + fp8Slot_.scaleOffset());
    if (!cast(c, plain ? plainAt : "", trans ? transAt : "", scale, ""))
      return {"", ""};
    fp8Casts_.push_back({source, et, c.rows, c.cols, c.e5m2, plain, trans, slot, fp8Clock_});
    return {c.transposed ? transAt : plainAt, scale};
  };
  Placed a = quantize(0);
  Placed b = quantize(1);
  if (a.data.empty() || b.data.empty())
    return failure();
  MemRefType out = mrt(f.out);
  // Transformer Engine's choice: fast accumulation in the forward (E4M3 x
  // E4M3), promoted accumulation for the gradients (an E5M2 operand).
  const bool fast = !f.aE5M2 && !f.bE5M2;
  int site = gemmSites_++;
  std::string call =
      llvm::formatv(
          "static tcc_cuda_host::GemmPlan tcc_gemm_plan_{0};\n"
          "  if (int32_t rc = tcc_cuda_host::gemm_fp8(tcc_gemm_plan_{0}, s, {1}, {2}, {3}, {4}, "
          "{5}, {6}, {7}, {8}, reinterpret_cast<const float *>({9}), "
          "reinterpret_cast<const float *>({10}), {11}, {12}, {13}, {14}, "
          "ws + tcc_gemm_workspace_offset, tcc_gemm_workspace_bytes)) return rc;",
          site, nextId(), f.aE5M2 ? "tcc_cuda_host::kFp8E5M2" : "tcc_cuda_host::kFp8E4M3",
          f.bE5M2 ? "tcc_cuda_host::kFp8E5M2" : "tcc_cuda_host::kFp8E4M3",
          out.getElementType().isBF16() ? "tcc_cuda_host::kGemmBF16" : "tcc_cuda_host::kGemmF32",
          fast ? "true" : "false", f.m, f.n, f.k, a.scale, b.scale, a.data, b.data,
          f.residual ? name(f.residual) : std::string("nullptr"), name(f.out))
          .str();
  launch(os, g, "cublasLtMatmul_fp8", call,
         llvm::formatv("{0}x{1}x{2} {3}x{4}{5}", f.m, f.n, f.k, f.aE5M2 ? "e5m2" : "e4m3",
                       f.bE5M2 ? "e5m2" : "e4m3", f.residual ? " + residual" : "")
             .str(),
         work,
         static_cast<double>(f.m * f.k + f.n * f.k) + (f.residual ? 2 : 1) * bufferBytes(out),
         LaunchCheck::InCall);
  return success();
}

} // namespace tcc::codegen::cuda
