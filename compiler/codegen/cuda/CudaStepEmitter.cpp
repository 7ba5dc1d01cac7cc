// The host side of one CUDA entry point: its arguments (through the shared
// argument emitter, with the control block as this target's place for
// hyper-parameters, the loss and train outputs), its launches and their
// labels, the dispatch of kern ops to the kernel-family files, and the
// functions and tables that make up its tcc_cuda_host::Entry.
#include "compiler/codegen/cuda/CudaStepEmitter.h"

#include "compiler/codegen/common/CTypes.h"
#include "dialects/common/ModelAttrs.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

LogicalResult CudaStepEmitter::emit(int64_t outputScratchBase, double &flops) {
  llvm::raw_string_ostream os(body_);
  scratch_.base = outputScratchBase;
  if (entry_ == "eval") // outputs left NULL: a buffer of their own (run_call.h)
    scratch_.baseExpr = "tcc_cuda_host::current_call()->output_scratch";
  os << "static int32_t tcc_" << entry_
     << "_body(const tcc_step_args *args, cudaStream_t s, char *ws) {\n";
  os << "  int32_t *status = reinterpret_cast<int32_t *>(ws + tcc_control_offset);\n";
  os << "  (void)status;\n";
  if (failed(emitStepArguments(f_, "cuda codegen", names_, scratch_, *this, os, entryOf_)))
    return failure();
  if (FailureOr<SmallVector<ArgumentRole>> roles = classifyArguments(f_, "cuda codegen");
      succeeded(roles))
    for (const ArgumentRole &r : *roles) {
      numInputs_ += r.kind == ArgumentRole::Input;
      numOutputs_ += r.kind == ArgumentRole::Output;
      numState_ += r.kind == ArgumentRole::EntryState;
    }
  for (Operation &op : f_.getBody().front().without_terminator()) {
    waitIfTouchingReduced(&op, os);
    if (failed(emitOp(&op, os, flops)))
      return failure();
    forgetFp8Casts(&op);
  }
  // Every op left to an FP8 cast was computed by one (else its result
  // would be missing: an internal error, never a wrong step).
  if (!fp8Deferred_.empty())
    return fp8Deferred_.front().op->emitError(
        "cuda codegen: left to an FP8 cast that never ran (an internal error)");
  waitForReductions(os); // the loss and the control block are read back
  os << "  return 0;\n}\n\n";
  // The batched FP8 casts' records, known once their first readers ran.
  for (auto [cast, record] : fp8BatchRecords_) {
    std::string placeholder = llvm::formatv("@TCC_FP8_RECORD_{0}@", cast).str();
    std::string offset = std::to_string(record * model::kFp8ScalingRecordFloats);
    for (size_t at = body_.find(placeholder); at != std::string::npos;
         at = body_.find(placeholder, at + offset.size()))
      body_.replace(at, placeholder.size(), offset);
  }
  // The batch launches' kernel-list shapes name those records.
  for (auto [group, casts] : llvm::enumerate(fp8BatchGroups_)) {
    std::string list;
    for (int cast : casts)
      list += (list.empty() ? "" : ", ") + std::to_string(fp8BatchRecords_.lookup(cast));
    std::string placeholder = llvm::formatv("@TCC_FP8_BATCH_RECORDS_{0}@", group).str();
    for (Launch &l : launches_)
      if (size_t at = l.shape.find(placeholder); at != std::string::npos)
        l.shape.replace(at, placeholder.size(), list);
  }
  if (body_.find("@TCC_FP8_RECORD_") != std::string::npos)
    return f_.emitError("cuda codegen: a batched FP8 cast whose first reader never ran (an "
                        "internal error)");
  return success();
}

std::string CudaStepEmitter::source() const {
  std::string s = attentionDecls_ + body_;
  s += "static void tcc_" + entry_ + "_hyper(const tcc_step_args *args, char *control) {\n" +
       hyper_ + "  (void)args;\n  (void)control;\n}\n\n";
  s += "static void tcc_" + entry_ +
       "_finish(const tcc_step_args *args, const char *control) {\n" + finish_ +
       "  (void)args;\n  (void)control;\n}\n\n";
  if (!labels_.empty()) {
    s += "static const char *const tcc_" + entry_ + "_labels[] = {\n";
    for (const std::string &l : labels_) {
      std::string escaped;
      llvm::raw_string_ostream e(escaped);
      llvm::printEscapedString(l, e);
      s += "  \"" + escaped + "\",\n";
    }
    s += "};\n";
    // For profiling: each launch's kernel and its FLOPs and bytes.
    s += "static const char *const tcc_" + entry_ + "_kernels[] = {\n";
    for (const Launch &l : launches_)
      s += "  \"" + l.kernel + "\",\n";
    s += "};\n";
    s += "static const double tcc_" + entry_ + "_costs[] = {\n";
    for (const Launch &l : launches_)
      s += llvm::formatv("  {0:e}, {1:e},\n", l.flops, l.bytes).str();
    s += "};\n";
  }
  std::string prepare = "nullptr";
  if (!attentionSites_.empty()) {
    prepare = "tcc_" + entry_ + "_prepare";
    s += "static tcc_cuda_host::AttentionSite *const tcc_" + entry_ + "_attention_sites[] = {\n";
    for (const std::string &site : attentionSites_)
      s += "  &" + site + ",\n";
    s += "};\n";
    if (convSites_.empty())
      s += llvm::formatv("static int32_t {0}(tcc_cuda_host::EntryState &es) {{\n"
                         "  return tcc_cuda_host::prepare_entry_attention(es, tcc_{1}_attention_sites, "
                         "{2}, tcc_shared_workspace_bytes);\n}\n\n",
                         prepare, entry_, attentionSites_.size())
               .str();
  }
  if (!convSites_.empty()) { // cuDNN convolutions (ConvKernels.cpp), with any attention
    prepare = "tcc_" + entry_ + "_prepare";
    s += "static tcc_cuda_host::ConvSite *const tcc_" + entry_ + "_conv_sites[] = {\n";
    for (const std::string &site : convSites_)
      s += "  &" + site + ",\n";
    s += "};\n";
    s += llvm::formatv("static int32_t {0}(tcc_cuda_host::EntryState &es) {{\n"
                       "  return tcc_cuda_host::prepare_entry_cudnn(es, {1}, {2}, tcc_{3}_conv_sites, "
                       "{4}, tcc_shared_workspace_bytes);\n}\n\n",
                       prepare,
                       attentionSites_.empty() ? "nullptr" : "tcc_" + entry_ + "_attention_sites",
                       attentionSites_.size(), entry_, convSites_.size())
             .str();
  }
  std::string table = labels_.empty() ? "nullptr" : "tcc_" + entry_ + "_labels";
  std::string kernelTable = labels_.empty() ? "nullptr" : "tcc_" + entry_ + "_kernels";
  std::string costTable = labels_.empty() ? "nullptr" : "tcc_" + entry_ + "_costs";
  int profileEntry = profileEntry_ >= 0 ? profileEntry_ : entry_ == "train" ? 0 : 1;
  s += llvm::formatv(
      "static const tcc_cuda_host::Entry tcc_{0}_entry = {{\"{8}\", {1}, {4}, {5}, {2}, "
      "tcc_control_offset, {3}, tcc_{0}_hyper, tcc_{0}_body, tcc_{0}_finish, {6}, {7}, "
      "{9}, {10}, {11}, {12}};\n"
      "static tcc_cuda_host::EntryState tcc_{0}_state;\n"
      "static int32_t tcc_{0}(const tcc_step_args *args) {{\n"
      "  return tcc_cuda_host::run_call(tcc_{0}_entry, tcc_{0}_state, "
      "*tcc_step_get_descriptor(), args);\n}\n\n",
      entry_, table, labels_.size(), controlBytes_, kernelTable, costTable, prepare,
      entry_ == "eval" ? scratch_.bytes : 0,
      displayName_.empty() ? entry_ : displayName_, profileEntry, numInputs_, numOutputs_,
      numState_);
  return s;
}

FailureOr<std::string> CudaStepEmitter::placeArgument(const ArgumentRole &role,
                                                     const std::string &n, MemRefType t) {
  using namespace control;
  std::string st = storageType(t.getElementType());
  switch (role.kind) {
  case ArgumentRole::Hyper: {
    // Hyper-parameters live in the control block (slots of 8 bytes after
    // the loss), written from the host before each call.
    constexpr int kHyperSlots = (kControlHeaderBytes - kControlHyperOffset) / 8;
    if (hyperSlots_ >= kHyperSlots)
      return f_.emitError("cuda codegen: more than ") << kHyperSlots << " hyper-parameters";
    int64_t offset = kControlHyperOffset + 8 * hyperSlots_++;
    hyper_ += llvm::formatv("  {{ const {0} v = static_cast<{0}>({1}); "
                            "std::memcpy(control + {2}, &v, sizeof(v)); }\n",
                            st, role.hyperValue, offset);
    return llvm::formatv("  {0} *{1} = reinterpret_cast<{0} *>(ws + tcc_control_offset + "
                         "{2}); // {3}\n",
                         st, n, offset, role.label)
        .str();
  }
  case ArgumentRole::Loss:
    finish_ += llvm::formatv("  {{ {0} v; std::memcpy(&v, control + {1}, sizeof(v)); "
                             "*args->loss = static_cast<float>(v); }\n",
                             st, kControlLossOffset);
    return llvm::formatv("  {0} *{1} = reinterpret_cast<{0} *>(ws + tcc_control_offset + "
                         "{2}); // loss\n",
                         st, n, kControlLossOffset)
        .str();
  case ArgumentRole::TrainOutput: {
    // After the header, each 64-byte aligned.
    constexpr int64_t kTrainOutputAlignment = 64;
    int64_t offset = controlBytes_;
    finish_ += llvm::formatv(
        "  if (args->train_outputs && args->train_outputs[{0}]) "
        "std::memcpy(args->train_outputs[{0}], control + {1}, {2});\n",
        role.index, offset, bufferBytes(t));
    controlBytes_ += (bufferBytes(t) + kTrainOutputAlignment - 1) / kTrainOutputAlignment *
                     kTrainOutputAlignment;
    return llvm::formatv("  {0} *{1} = reinterpret_cast<{0} *>(ws + tcc_control_offset + "
                         "{2}); // train output {3} {4}\n",
                         st, n, offset, role.label, shapeComment(t))
        .str();
  }
  default:
    return f_.emitError("cuda codegen: no control-block place for argument ") << n;
  }
}

void CudaStepEmitter::launch(llvm::raw_ostream &os, Operation *op, const std::string &kernel,
                             const std::string &call, const std::string &shape, double flops,
                             double bytes, LaunchCheck check) {
  int32_t id = static_cast<int32_t>(labels_.size());
  std::string node = locName(op->getLoc());
  labels_.push_back(kernelLabel(op) + " (" + kernel + ")");
  os << "  " << call << "\n";
  if (check == LaunchCheck::AfterLaunch)
    os << "  if (int32_t rc = tcc_cuda_host::after_launch(s, " << id << ")) return rc;\n";
  launches_.push_back({entry_, kernel, shape, node, flops, bytes});
}

void CudaStepEmitter::launchGridStride(llvm::raw_ostream &os, Operation *op,
                                       const GridStrideKernel &k, ValueRange buffers,
                                       double flops, double bytes) {
  std::string kernel = kernels_.addGridStride(k);
  std::string call = kernel + "(s";
  for (Value v : buffers)
    call += ", " + name(v);
  launch(os, op, kernel, call + ");",
         llvm::formatv("{0}x{1}", blocksFor(k.items), kThreads).str(), flops, bytes);
}

void CudaStepEmitter::declareCollectives(llvm::raw_ostream &os) {
  if (declaredCollectives_)
    return;
  os << "  const tcc_collectives *tcc_ranks = static_cast<const tcc_collectives "
        "*>(args->collectives);\n";
  declaredCollectives_ = true;
}

LogicalResult CudaStepEmitter::emitAllReduce(kern::AllReduceOp r, llvm::raw_ostream &os) {
  auto t = cast<MemRefType>(r.getBuffer().getType());
  Type et = t.getElementType();
  if (!et.isF64() && !et.isF32() && !et.isBF16() && !et.isF16())
    return r.emitError("cuda codegen: kern.all_reduce of ") << et << " (f32, bf16, f16, f64 only)";
  declareCollectives(os);
  std::string node = locName(r->getLoc());
  os << llvm::formatv(
      "  if (tcc_ranks && tcc_ranks->all_reduce(tcc_ranks->context, {0}, {1}, {2}, {3}, s)) "
      "return tcc_cuda_host::set_error(\"data parallel: the all-reduce ({4}) of {5} failed (trun adds "
      "the back end's error)\");\n",
      name(r.getBuffer()), t.getNumElements(), abiDType(et),
      r.getReduction() == "sum" ? "TCC_REDUCE_SUM" : "TCC_REDUCE_MEAN", r.getReduction(),
      node.empty() ? std::string("a buffer") : node);
  reducing_.push_back(footprint(r.getBuffer()));
  return success();
}

LogicalResult CudaStepEmitter::emitAllReduceBucket(kern::AllReduceBucketOp bucket,
                                                   llvm::raw_ostream &os) {
  Type et = cast<MemRefType>(bucket.getBuffers().front().getType()).getElementType();
  if (!et.isF64() && !et.isF32() && !et.isBF16() && !et.isF16())
    return bucket.emitError("cuda codegen: kern.all_reduce_bucket of ")
           << et << " (f32, bf16, f16, f64 only)";
  declareCollectives(os);
  std::string buffers, counts;
  for (Value v : bucket.getBuffers()) {
    buffers += (buffers.empty() ? "" : ", ") + name(v);
    counts += (counts.empty() ? "" : ", ") +
              std::to_string(cast<MemRefType>(v.getType()).getNumElements());
    reducing_.push_back(footprint(v));
  }
  size_t n = bucket.getBuffers().size();
  std::string reduction = bucket.getReduction() == "sum" ? "TCC_REDUCE_SUM" : "TCC_REDUCE_MEAN";
  std::string node = locName(bucket->getLoc());
  // One NCCL group for the bucket; a runtime without the bucket entry gets
  // one all_reduce per buffer.
  os << llvm::formatv(
      "  if (tcc_ranks) {{\n"
      "    void *const bucket[] = {{{0}};\n"
      "    const int64_t counts[] = {{{1}};\n"
      "    bool failed = false;\n"
      "    if (tcc_ranks->all_reduce_bucket)\n"
      "      failed = tcc_ranks->all_reduce_bucket(tcc_ranks->context, {2}, bucket, counts, {3}, {4}, "
      "s) != 0;\n"
      "    else\n"
      "      for (int32_t i = 0; i < {2} && !failed; ++i)\n"
      "        failed = tcc_ranks->all_reduce(tcc_ranks->context, bucket[i], counts[i], {3}, {4}, s) "
      "!= 0;\n"
      "    if (failed) return tcc_cuda_host::set_error(\"data parallel: the bucket of {2} "
      "all-reduces ({5}) ending at {6} failed (trun adds the back end's error)\");\n"
      "  }\n",
      buffers, counts, n, abiDType(et), reduction, bucket.getReduction(),
      node.empty() ? std::string("a buffer") : node);
  return success();
}

LogicalResult CudaStepEmitter::emitShardExchange(Operation *op, llvm::raw_ostream &os) {
  Value in = op->getOperand(0), out = op->getOperand(1);
  int64_t ranks = cast<IntegerAttr>(op->getAttr("ranks")).getInt();
  auto shard = cast<MemRefType>((isa<kern::AllGatherOp>(op) ? in : out).getType());
  int64_t count = shard.getNumElements();
  int64_t bytes = count * kern::elementBytes(shard.getElementType());
  std::string node = locName(op->getLoc());
  if (node.empty())
    node = "a buffer";
  declareCollectives(os);
  os << llvm::formatv(
      "  if (tcc_ranks ? tcc_ranks->world_size != {0} : {0} != 1) "
      "return tcc_cuda_host::set_error(\"the step shards its optimizer over {0} ranks (tcc "
      "compile --shard-optimizer {0}) and runs at another world size\");\n",
      ranks);
  std::string copy = llvm::formatv("cudaMemcpyAsync({1}, {0}, {2}, cudaMemcpyDeviceToDevice, s)",
                                   name(in), name(out), bytes);
  if (auto rs = dyn_cast<kern::ReduceScatterOp>(op)) {
    os << llvm::formatv(
        "  if (tcc_ranks ? tcc_ranks->reduce_scatter(tcc_ranks->context, {0}, {1}, {2}, {3}, {4}, s) "
        "!= 0 : {5} != cudaSuccess) return tcc_cuda_host::set_error(\"data parallel: the "
        "reduce-scatter of {6} failed (trun adds the back end's error)\");\n",
        name(in), name(out), count, abiDType(shard.getElementType()),
        rs.getReduction() == "sum" ? "TCC_REDUCE_SUM" : "TCC_REDUCE_MEAN", copy, node);
  } else if (isa<kern::AllGatherOp>(op)) {
    os << llvm::formatv(
        "  if (tcc_ranks ? tcc_ranks->all_gather(tcc_ranks->context, {0}, {1}, {2}, {3}, s) != 0 "
        ": {4} != cudaSuccess) return tcc_cuda_host::set_error(\"data parallel: the all-gather "
        "of {5} failed (trun adds the back end's error)\");\n",
        name(in), name(out), count, abiDType(shard.getElementType()), copy, node);
  } else {
    // This rank's shard: a copy on the step stream (the rank is fixed for
    // the process, so a captured CUDA graph may keep the offset).
    os << llvm::formatv(
        "  if (cudaMemcpyAsync({1}, {0} + static_cast<int64_t>(tcc_ranks ? tcc_ranks->rank : 0) * "
        "{2}, {3}, cudaMemcpyDeviceToDevice, s) != cudaSuccess) return "
        "tcc_cuda_host::set_error(\"copying this rank's shard of {4} failed\");\n",
        name(in), name(out), count, bytes, node);
    return success();
  }
  // Queued on the communication stream: later kernels touching either
  // buffer wait for it.
  reducing_.push_back(footprint(in));
  reducing_.push_back(footprint(out));
  return success();
}

void CudaStepEmitter::waitForReductions(llvm::raw_ostream &os) {
  if (reducing_.empty())
    return;
  os << "  if (tcc_ranks && tcc_ranks->wait && tcc_ranks->wait(tcc_ranks->context, s)) "
        "return tcc_cuda_host::set_error(\"data parallel: waiting for the all-reduces failed\");\n";
  reducing_.clear();
}

void CudaStepEmitter::waitIfTouchingReduced(Operation *op, llvm::raw_ostream &os) {
  if (reducing_.empty() ||
      isa<kern::AllReduceOp, kern::AllReduceBucketOp, kern::ReduceScatterOp, kern::AllGatherOp,
          kern::WorkspaceViewOp, kern::ReshapeOp, kern::ConstantOp>(op))
    return; // (the exchanges are ordered on the communication stream)
  for (Value operand : op->getOperands()) {
    if (!isa<MemRefType>(operand.getType()))
      continue;
    Footprint f = footprint(operand);
    for (const Footprint &busy : reducing_) {
      bool overlap = overlaps(f, busy);
      if (overlap) {
        os << "  // the buffers below are still being reduced over the ranks\n";
        waitForReductions(os);
        return;
      }
    }
  }
}

// An op that an FP8 cast computes (`refused` empty: fp8CastComputes,
// fp8NormCastComputes, fp8NormGradCastComputes, fp8RopeCastComputes) is not launched; otherwise `emit` launches it, its
// launch saying why the cast does not compute it where one could have.
LogicalResult
CudaStepEmitter::emitUnlessCastComputes(const std::optional<std::string> &refused,
                                        llvm::raw_ostream &os,
                                        llvm::function_ref<LogicalResult()> emit) {
  if (refused && refused->empty()) {
    os << "  // computed by the FP8 cast of its first reader\n";
    return success();
  }
  const size_t before = launches_.size();
  if (failed(emit()))
    return failure();
  if (refused && launches_.size() > before)
    launches_.back().shape += " (not computed by its FP8 cast: " + *refused + ")";
  return success();
}

LogicalResult CudaStepEmitter::emitOp(Operation *op, llvm::raw_ostream &os, double &flops) {
  if (!isa<kern::WorkspaceViewOp, kern::ReshapeOp, kern::ConstantOp>(op)) {
    os << "  // " << kernelLabel(op) << "\n";
  }
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](kern::WorkspaceViewOp v) {
        os << workspaceViewDefinition(v, names_);
        return success();
      })
      .Case([&](kern::ReshapeOp r) {
        os << reshapeDefinition(r, names_);
        return success();
      })
      .Case([&](kern::ConstantOp c) { return emitConstant(c, os); })
      .Case([&](kern::GemmOp g) { return emitGemm(g, os, flops); })
      .Case([&](kern::GemmEpilogueOp g) { return emitGemmEpilogue(g, os, flops); })
      .Case([&](kern::GemmDgeluOp g) { return emitGemmDgelu(g, os, flops); })
      .Case([&](kern::GemmBiasGradOp g) { return emitGemmBiasGrad(g, os, flops); })
      .Case([&](kern::ElementwiseOp e) {
        return emitUnlessCastComputes(options_.fp8CastFusion ? fp8CastComputes(e) : std::nullopt,
                                      os, [&] { return emitElementwise(e, os, flops); });
      })
      .Case([&](kern::ReduceOp r) { return emitReduce(r, os, flops); })
      .Case([&](kern::FillOp f) { return emitFill(f, os); })
      .Case([&](kern::AllReduceOp r) { return emitAllReduce(r, os); })
      .Case([&](kern::AllReduceBucketOp b) { return emitAllReduceBucket(b, os); })
      .Case<kern::ReduceScatterOp, kern::RankShardOp, kern::AllGatherOp>(
          [&](Operation *zero) { return emitShardExchange(zero, os); })
      .Case<kern::TransposeOp, kern::SliceOp, kern::ConcatOp>([&](Operation *copy) {
        std::string family = isa<kern::TransposeOp>(copy) ? "transpose"
                             : isa<kern::SliceOp>(copy)   ? "slice"
                                                          : "concat";
        for (const StridedCopy &c : stridedCopies(copy))
          if (failed(emitCopy(op, os, c, family)))
            return failure();
        return success();
      })
      .Case([&](kern::GatherOp g) { return emitGather(g, os); })
      .Case([&](kern::ScatterAddOp sa) { return emitScatterAdd(sa, os, flops); })
      .Case([&](kern::SoftmaxCrossEntropyOp x) { return emitSoftmaxXent(x, os, flops); })
      .Case([&](kern::SoftmaxCrossEntropyGradOp x) { return emitSoftmaxXentGrad(x, os, flops); })
      .Case([&](kern::SoftmaxCrossEntropyWithGradOp x) {
        return emitSoftmaxXentWithGrad(x, os, flops);
      })
      .Case([&](kern::AttentionOp a) { return emitAttention(a, os, flops); })
      .Case([&](kern::AttentionGradOp g) { return emitAttentionGrad(g, os, flops); })
      .Case([&](kern::RopeOp r) {
        return emitUnlessCastComputes(
            options_.fp8CastFusion ? fp8RopeCastComputes(r) : std::nullopt, os,
            [&] { return emitRope(r, os, flops); });
      })
      .Case([&](kern::MultiElementwiseOp e) { return emitMultiElementwise(e, os, flops); })
      .Case([&](kern::MultiSumOp m) { return emitMultiSum(m, os, flops); })
      .Case([&](kern::LayerNormOp n) {
        return emitUnlessCastComputes(
            options_.fp8CastFusion ? fp8NormCastComputes(n) : std::nullopt, os,
            [&] { return emitLayerNorm(n, os, flops); });
      })
      .Case([&](kern::LayerNormGradOp g) {
        return emitUnlessCastComputes(
            options_.fp8CastFusion ? fp8NormGradCastComputes(g) : std::nullopt, os,
            [&] { return emitLayerNormGrad(g, os, flops); });
      })
      .Case([&](kern::BatchNormStatsOp b) { return emitBatchNormStats(b, os, flops); })
      .Case([&](kern::BatchNormGradSumsOp b) { return emitBatchNormGradSums(b, os, flops); })
      .Case([&](kern::Conv2dOp c) { return emitConv2d(c, os, flops); })
      .Case([&](kern::Pool2dOp p) { return emitPool2d(p, os, flops); })
      .Default([&](Operation *other) {
        return other->emitError("cuda codegen: cannot generate code for ")
               << other->getName()
               << (isa<kern::AllocOp>(other) ? " (run kern-plan-memory first)" : "");
      });
}

} // namespace tcc::codegen::cuda
