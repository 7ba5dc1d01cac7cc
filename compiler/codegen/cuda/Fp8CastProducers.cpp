// Elementwise results computed by the FP8 cast that reads them (tg-amp's
// fp8 precision, issue 37). In a LLaMA-style MLP, SwiGLU's silu(gate) x up
// is a 16-bit tensor that only the MLP output product (forward) and its
// weight gradient (backward) read, and both read it as FP8 from one kept
// cast (Fp8Gemm.h). Written out, it costs a 16-bit write, then a 16-bit
// read by the cast. Instead the elementwise op is not launched; the cast's
// source computes each element from the op's inputs (the same body,
// rounded to the same 16 bits, so the FP8 bytes, scales and statistics
// are those of the unfused step), and the 16-bit result is never written.
#include "compiler/codegen/cuda/CudaStepEmitter.h"
#include "compiler/codegen/cuda/Fp8Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

// The FP8 products that read `result` (written by `e`) as an operand, in
// order, up to the value's last use (the memory plan may give its bytes
// to another buffer after that) or until something else reads it; `why`
// says what else reads it.
SmallVector<std::pair<Operation *, int>>
CudaStepEmitter::fp8ReadersOf(Operation *e, Value value, std::string &why) {
  const Footprint result = footprint(value);
  auto same = [&](Value v) { return sameWorkspaceBytes(footprint(v), result); };
  // The last op of the block that uses the result or a reshape of it.
  Operation *last = e;
  SmallVector<Value> views = {value};
  while (!views.empty()) {
    Value v = views.pop_back_val();
    for (Operation *user : v.getUsers()) {
      Operation *at = e->getBlock()->findAncestorOpInBlock(*user);
      if (!at)
        continue;
      if (last->isBeforeInBlock(at))
        last = at;
      if (auto reshape = dyn_cast<kern::ReshapeOp>(user))
        views.push_back(reshape.getResult());
    }
  }
  SmallVector<std::pair<Operation *, int>> readers;
  for (Operation *op = e->getNextNode(); op && op != last->getNextNode();
       op = op->getNextNode()) {
    if (Fp8Gemm f = Fp8Gemm::of(op); f.runs()) {
      const bool a = same(f.a), b = same(f.b);
      if (a && b) {
        why = "one product reads it as both operands";
        break;
      }
      if (a || b) {
        if ((f.residual && overlaps(footprint(f.residual), result)) ||
            overlaps(footprint(f.out), result)) {
          why = "its FP8 reader also adds or writes it";
          break;
        }
        readers.push_back({op, a ? 0 : 1});
        continue;
      }
    }
    if (mayRead(op, result)) {
      why = "read by " + op->getName().getStringRef().str() + " too";
      break;
    }
    if (mayWrite(op, result))
      break; // its life is over
  }
  return readers;
}

std::optional<std::string>
CudaStepEmitter::fp8OneCastFor(ArrayRef<std::pair<Operation *, int>> readers) {
  if (!fp8Kept_)
    fp8Kept_ = Fp8KeptPlan::of(f_);
  auto first = fp8Kept_->uses.find(readers.front());
  if (first == fp8Kept_->uses.end()) {
    if (readers.size() != 1)
      return std::string("several FP8 products read it without one kept cast");
    return std::nullopt; // one reader casting into a slot
  }
  const int cast = first->second.first;
  if (!first->second.second || fp8Kept_->casts[cast].batched)
    return std::string("its kept cast is not made by its first reader");
  if (!fp8LaterReadersTake(readers, cast))
    return std::string("a later FP8 reader does not take the first one's kept cast");
  return std::nullopt;
}

bool CudaStepEmitter::fp8LaterReadersTake(ArrayRef<std::pair<Operation *, int>> readers,
                                          int cast) const {
  return llvm::all_of(llvm::drop_begin(readers), [&](std::pair<Operation *, int> reader) {
    auto use = fp8Kept_->uses.find(reader);
    return use != fp8Kept_->uses.end() && use->second.first == cast && !use->second.second;
  });
}

bool CudaStepEmitter::fp8ProductsIn(Operation *op) {
  if (fp8Slot_.elements == 0)
    fp8Slot_ = Fp8Slot::of(op->getParentOfType<ModuleOp>());
  return fp8Slot_.elements != 0;
}

std::optional<std::string> CudaStepEmitter::fp8InputWrittenBefore(Operation *producer,
                                                                  ValueRange inputs,
                                                                  Operation *maker) {
  for (Operation *op = producer->getNextNode(); op != maker; op = op->getNextNode())
    for (Value in : inputs)
      if (mayWrite(op, footprint(in)))
        return "an input is written (by " + op->getName().getStringRef().str() +
               ") before the cast";
  return std::nullopt;
}

std::optional<std::string> CudaStepEmitter::fp8CastComputes(kern::ElementwiseOp e) {
  // Not looked for in a module without FP8 products, or for results that
  // are step arguments (their bytes outlive the step).
  if (!fp8ProductsIn(e))
    return std::nullopt;
  const size_t results = e.getOutputs().size();
  SmallVector<Footprint> footprints;
  SmallVector<SmallVector<std::pair<Operation *, int>>> readers;
  std::string why;
  for (Value result : e.getOutputs()) {
    footprints.push_back(footprint(result));
    if (footprints.back().argument)
      return std::nullopt;
    readers.push_back(fp8ReadersOf(e.getOperation(), result, why));
    if (readers.back().empty() || !why.empty())
      break;
  }
  if (readers.size() != results || llvm::any_of(readers, [](auto &r) { return r.empty(); })) {
    // Said only where a result is read by FP8 products.
    if (llvm::none_of(readers, [](auto &r) { return !r.empty(); }))
      return std::nullopt;
    return why.empty() ? std::string("a result is not read by FP8 products") : why;
  }
  if (!why.empty())
    return why;
  if (e->getParentOp() != f_.getOperation())
    return std::string("not in the step's top-level block");
  MemRefType ht = mrt(e.getOutputs()[0]);
  Type het = ht.getElementType();
  const int64_t n = ht.getNumElements();
  if (!het.isBF16() && !het.isF16())
    return std::string("its result is not 16-bit");
  for (Value result : e.getOutputs())
    if (mrt(result).getElementType() != het || mrt(result).getShape() != e.getShape())
      return std::string("its results differ in type or shape");
  if (n % 8 != 0)
    return std::string("its result is not whole groups of 8");
  for (Value in : e.getInputs()) {
    MemRefType t = mrt(in);
    Type et = t.getElementType();
    if (llvm::any_of(footprints, [&](const Footprint &f) { return overlaps(footprint(in), f); }))
      return std::string("it works in place");
    if (t.getNumElements() == 1)
      continue;
    if (t.getShape() != e.getShape())
      return std::string("an input is broadcast");
    if (!et.isBF16() && !et.isF16() && !et.isF32() && !et.isInteger(32))
      return std::string("an input is not bf16, f16, f32 or i32");
  }
  // One cast, by the first reader, serves every reader of a result: a kept
  // cast (the later readers take its layouts), or a slot cast with no
  // other reader. Several results: the kept casts of one group
  // (Fp8KeptPlan::Group), all made by the group's maker.
  if (!fp8Kept_)
    fp8Kept_ = Fp8KeptPlan::of(f_);
  const Fp8KeptPlan::Group *group = nullptr;
  if (results > 1) {
    auto it = llvm::find_if(fp8Kept_->groups, [&](const Fp8KeptPlan::Group &g) {
      return g.op == e.getOperation();
    });
    if (it == fp8Kept_->groups.end())
      return std::string("its results are not each one kept FP8 cast of one format and shape");
    group = &*it;
  }
  Operation *maker = readers.front().front().first;
  for (size_t j = 0; j < results; ++j) {
    if (std::optional<std::string> no = fp8OneCastFor(readers[j]))
      return no;
    if (!group)
      continue;
    auto first = fp8Kept_->uses.find(readers[j].front());
    if (first == fp8Kept_->uses.end() || first->second.first != group->casts[j])
      return std::string("its kept cast is not made by its first reader");
    if (first->second.first == group->maker)
      maker = readers[j].front().first;
  }
  // The inputs must still hold e's operands when the first reader casts.
  if (std::optional<std::string> written = fp8InputWrittenBefore(e, e.getInputs(), maker))
    return written;
  for (const Footprint &f : footprints)
    fp8Deferred_.push_back({f, e});
  return std::string();
}

std::optional<std::string> CudaStepEmitter::fp8BatchComputes(kern::MultiElementwiseOp e,
                                                             int64_t member) {
  if (!options_.fp8CastFusion || !fp8ProductsIn(e))
    return std::nullopt;
  // A plain cast: one input, one result, the body yield(truncf(x)).
  if (e.inputsPerMember() != 1 || e.outputsPerMember() != 1)
    return std::nullopt;
  Block &body = e.getBodyBlock();
  auto trunc = dyn_cast_or_null<arith::TruncFOp>(
      body.getTerminator()->getOperand(0).getDefiningOp());
  if (!trunc || &body.front() != trunc.getOperation() ||
      trunc.getIn() != body.getArgument(0))
    return std::nullopt;
  Value in = e.memberInputs(member)[0], out = e.memberOutputs(member)[0];
  Type ot = mrt(out).getElementType();
  if (!mrt(in).getElementType().isF32() || (!ot.isBF16() && !ot.isF16()) ||
      mrt(in).getNumElements() != mrt(out).getNumElements() || footprint(out).argument)
    return std::nullopt;
  std::string why;
  SmallVector<std::pair<Operation *, int>> readers = fp8ReadersOf(e, out, why);
  if (readers.empty())
    return std::nullopt; // no FP8 product reads it (or something else first)
  if (!why.empty())
    return why;
  if (e->getParentOp() != f_.getOperation())
    return std::string("not in the step's top-level block");
  if (!fp8Kept_)
    fp8Kept_ = Fp8KeptPlan::of(f_);
  if (!fp8Kept_->batchAt)
    return std::string("the function batches no FP8 casts (no delayed scaling)");
  auto first = fp8Kept_->uses.find(readers.front());
  if (first == fp8Kept_->uses.end() || !first->second.second ||
      !fp8Kept_->casts[first->second.first].batched)
    return std::string("its FP8 cast is not made by the first product's batch");
  const int cast = first->second.first;
  if (!fp8LaterReadersTake(readers, cast))
    return std::string("a later FP8 reader does not take the batch's cast");
  if (fp8Kept_->batchAt->getBlock() != e->getBlock() ||
      !e->isBeforeInBlock(fp8Kept_->batchAt))
    return std::string("the batch comes before the cast");
  // The input must still hold what the member would have rounded.
  if (std::optional<std::string> written =
          fp8InputWrittenBefore(e, ValueRange{in}, fp8Kept_->batchAt))
    return written;
  fp8BatchSources_[cast] = in;
  return std::string();
}

FailureOr<CudaStepEmitter::Fp8CastSource>
CudaStepEmitter::fp8ElementwiseSource(kern::ElementwiseOp e) {
  FailureOr<ElementwiseBody> printed = printElementwiseBody(e);
  if (failed(printed))
    return failure();
  Fp8CastSource src;
  Type het = mrt(e.getOutputs()[0]).getElementType();
  const int64_t n = mrt(e.getOutputs()[0]).getNumElements();
  std::string members, aligned, raw, fetches, views, scalarArgs, vecArgs;
  SmallVector<std::string> params, inits, args;
  for (auto [k, in] : llvm::enumerate(e.getInputs())) {
    Type et = mrt(in).getElementType();
    std::string p = "in" + std::to_string(k);
    members += llvm::formatv("  const {0} *{1};\n", storageType(et), p).str();
    params.push_back(llvm::formatv("const {0} *{1}", storageType(et), p).str());
    inits.push_back(p);
    args.push_back(name(in));
    src.bytes += bufferBytes(mrt(in));
  }
  for (size_t k : printed->perElementInput) {
    Type et = mrt(e.getInputs()[k]).getElementType();
    std::string p = "in" + std::to_string(k), x = "x" + std::to_string(k);
    aligned += std::string(aligned.empty() ? "" : " | ") + "reinterpret_cast<uintptr_t>(" + p + ")";
    // 8 elements: one 16-byte load of a 16-bit input, two of a 32-bit one,
    // fetched into Raw (fetch8), read as elements by compute8.
    const int64_t words = kern::elementBytes(et) / 2;
    raw += llvm::formatv("    uint4 {0}[{1}];\n", x, words).str();
    fetches +=
        llvm::formatv("    for (int j = 0; j < {0}; ++j)\n"
                      "      r.{1}[j] = __ldg(reinterpret_cast<const uint4 *>({2} + i) + j);\n",
                      words, x, p)
            .str();
    views += llvm::formatv("    const {0} *{1} = reinterpret_cast<const {0} *>(raw.{1});\n",
                           storageType(et), x)
                 .str();
    vecArgs += load(et, x + "[k]") + ", ";
    scalarArgs += load(et, p + "[i]") + ", ";
  }
  // The body's results o<j> into y<j>[8] (8 elements), or as scalars.
  const std::string out = scalarType(het), element = familyElementType(het, CodeTarget::Cuda);
  const size_t results = e.getOutputs().size();
  std::string outs, decls, ys, stores, words, scalars;
  for (size_t j = 0; j < results; ++j) {
    std::string o = "o" + std::to_string(j), y = "y" + std::to_string(j);
    outs += ", " + o;
    decls += "      " + out + " " + o + ";\n";
    ys += llvm::formatv("    alignas(16) {0} {1}[8];\n", storageType(het), y).str();
    stores += "      " + y + "[k] = " + store(het, o) + ";\n";
    words += llvm::formatv("    out[{0}] = *reinterpret_cast<const uint4 *>({1});\n", j, y).str();
    scalars += llvm::formatv("    out[{0}] = {{{1}};\n", j, store(het, o)).str();
  }
  const std::string eight = printed->preamble + printed->lambda + views + ys +
                            "#pragma unroll\n    for (int k = 0; k < 8; ++k) {\n" + decls +
                            "      body(" + vecArgs + "i + k" + outs + ");\n" + stores + "    }\n";
  const std::string one = printed->preamble + printed->lambda + decls + "    body(" + scalarArgs +
                          "i" + outs + ");\n";
  // The vector cast's two steps (prelude fp8_kernels.cuh), then one
  // result's load8(i) -> uint4, load(i) -> Element, or several results'
  // load8(i, out[K]), load(i, out[K]) (a multi-result source).
  std::string loads =
      "  static constexpr int kOutputs = " + std::to_string(results) + ";\n  struct Raw {\n" +
      raw + "  };\n  __device__ __forceinline__ Raw fetch8(int64_t i) const {\n    Raw r;\n" +
      fetches + "    return r;\n  }\n" +
      "  __device__ __forceinline__ void compute8(const Raw &raw, int64_t i, uint4 *out) "
      "const {\n" +
      eight + words + "  }\n" +
      (results == 1
           ? "  __device__ __forceinline__ uint4 load8(int64_t i) const {\n    uint4 out;\n"
             "    compute8(fetch8(i), i, &out);\n    return out;\n  }\n"
             "  __device__ __forceinline__ Element load(int64_t i) const {\n" + one +
                 "    return {" + store(het, "o0") + "};\n  }\n"
           : "  __device__ __forceinline__ void load8(int64_t i, uint4 *out) const {\n"
             "    compute8(fetch8(i), i, out);\n  }\n"
             "  __device__ __forceinline__ void load(int64_t i, Element *out) const {\n" + one +
                 scalars + "  }\n");
  src.definition = "struct @NAME@_src {\n" + members + "  using Element = " + element + ";\n" +
                   loads + "  __host__ __device__ bool aligned16() const {\n    return " +
                   (aligned.empty() ? std::string("true") : "(" + aligned + ") % 16 == 0") +
                   ";\n  }\n};\n";
  src.params = llvm::join(params, ", ");
  src.init = "@NAME@_src{" + llvm::join(inits, ", ") + "}";
  src.args = llvm::join(args, ", ");
  src.flops = static_cast<double>(n) * printed->ops;
  return src;
}

bool CudaStepEmitter::emitFp8GroupCast(Operation *g, int groupIndex, llvm::raw_ostream &os,
                                       double &flops) {
  const Fp8KeptPlan::Group &group = fp8Kept_->groups[groupIndex];
  auto e = cast<kern::ElementwiseOp>(group.op);
  FailureOr<Fp8CastSource> src = fp8ElementwiseSource(e);
  if (failed(src))
    return false;
  const std::string keptRegion = "(ws + tcc_fp8_kept_offset)";
  auto at = [&](int64_t offset) { return llvm::formatv("{0} + {1}", keptRegion, offset).str(); };
  // Delayed scaling as the maker's own cast would have it; the others'
  // records are those their first readers take (emit() fills them in).
  const bool delayed = fp8Records_ && fp8RecordsUsed_ < fp8Records_->second;
  SmallVector<std::string> outs, outsT, qs, records;
  OperandCast like;
  double written = 0;
  int64_t makerRecord = -1;
  for (int k : group.casts) {
    auto [reader, operand] = fp8Kept_->firstReader.lookup(k);
    like = operandOf(Fp8Gemm::of(reader), operand);
    const Fp8KeptCast &kept = fp8Kept_->casts[k];
    outs.push_back(kept.plain ? at(kept.plainOffset()) : "nullptr");
    outsT.push_back(kept.transposed ? at(kept.transposedOffset()) : "nullptr");
    qs.push_back(at(kept.scaleOffset()));
    written += (kept.plain + kept.transposed) * static_cast<double>(kept.elements);
    if (!delayed) {
      records.push_back("nullptr");
    } else if (k == group.maker) {
      makerRecord = fp8RecordsUsed_++;
      records.push_back(llvm::formatv("reinterpret_cast<float *>({0}) + {1}",
                                      name(fp8Records_->first),
                                      makerRecord * model::kFp8ScalingRecordFloats)
                            .str());
    } else {
      records.push_back(llvm::formatv("reinterpret_cast<float *>({0}) + @TCC_FP8_RECORD_{1}@",
                                      name(fp8Records_->first), k)
                            .str());
    }
  }
  Type et = mrt(like.value).getElementType();
  const char *f8 = like.e5m2 ? "tcc_cuda::e5m2" : "tcc_cuda::e4m3";
  const size_t results = group.casts.size();
  std::string params = src->params + ", void *const *out, void *const *out_t, void *const *q, "
                                     "float *const *record";
  std::string text =
      src->definition + "extern \"C\" void @NAME@(cudaStream_t s, " + params + ") {\n  " +
      llvm::formatv("tcc_cuda::launch_fp8_quantize_multi<{0}, {1}, @NAME@_src>({2}, {3}, {4}, "
                    "reinterpret_cast<{1} *const *>(out), reinterpret_cast<{1} *const *>(out_t), "
                    "reinterpret_cast<tcc_cuda::Fp8TensorScale *const *>(q), "
                    "reinterpret_cast<tcc_cuda::Fp8ScalingRecord *const *>(record), s);",
                    familyElementType(et, CodeTarget::Cuda), f8, like.rows, like.cols, src->init)
          .str() +
      "\n}\n";
  std::string kernel = kernels_.add(llvm::formatv("fp8_quantize_{0}{1}_ew{2}",
                                                  like.e5m2 ? "e5m2" : "e4m3",
                                                  delayed ? "_delayed" : "", results)
                                        .str(),
                                    text, params);
  auto list = [](ArrayRef<std::string> xs) { return llvm::join(xs, ", "); };
  std::string call = llvm::formatv("{{ void *const tcc_out[] = {{{0}};\n"
                                   "    void *const tcc_out_t[] = {{{1}};\n"
                                   "    void *const tcc_q[] = {{{2}};\n"
                                   "    float *const tcc_record[] = {{{3}};\n"
                                   "    {4}(s, {5}, tcc_out, tcc_out_t, tcc_q, tcc_record); }",
                                   list(outs), list(outsT), list(qs), list(records), kernel,
                                   src->args)
                         .str();
  const double elements = static_cast<double>(like.rows) * like.cols;
  flops += src->flops;
  launch(os, g, kernel, call,
         llvm::formatv("{0} results {1}x{2}, {3}, kept, computes {4}", results, like.rows,
                       like.cols,
                       delayed ? llvm::formatv("delayed scales (record {0}, the others' at their "
                                               "first readers)",
                                               makerRecord)
                                     .str()
                               : std::string("current scales"),
                       locName(e->getLoc()))
             .str(),
         2.0 * elements * results + src->flops,
         (delayed ? 1.0 : 1.0 + results) * src->bytes + written);
  fp8GroupsMade_.insert(groupIndex);
  llvm::erase_if(fp8Deferred_, [&](const Fp8Deferred &d) { return d.op == e.getOperation(); });
  return true;
}

} // namespace tcc::codegen::cuda
