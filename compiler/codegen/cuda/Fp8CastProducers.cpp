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

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

// Whether `op` may read `source` (an op without memory effects may).
bool CudaStepEmitter::mayRead(Operation *op, const Footprint &source) {
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return true;
  SmallVector<MemoryEffects::EffectInstance> list;
  effects.getEffects(list);
  for (const MemoryEffects::EffectInstance &e : list)
    if (isa<MemoryEffects::Read>(e.getEffect()) &&
        (!e.getValue() || overlaps(footprint(e.getValue()), source)))
      return true;
  return false;
}

std::optional<std::string> CudaStepEmitter::fp8CastComputes(kern::ElementwiseOp e) {
  if (fp8Slot_.elements == 0)
    fp8Slot_ = Fp8Slot::of(e->getParentOfType<ModuleOp>());
  // Not looked for: FP8 readers of multi-result ops, of step arguments
  // (their bytes outlive the step), in a module without FP8 products.
  if (fp8Slot_.elements == 0 || e.getOutputs().size() != 1)
    return std::nullopt;
  Value h = e.getOutputs()[0];
  const Footprint result = footprint(h);
  if (result.argument)
    return std::nullopt;
  auto same = [&](Value v) {
    Footprint f = footprint(v);
    return !f.argument && f.begin == result.begin && f.end == result.end;
  };
  // The products that read the result as an FP8 operand, in order, until
  // something else reads it or its bytes are written again.
  SmallVector<std::pair<Operation *, int>> readers;
  std::string why;
  for (Operation *op = e->getNextNode(); op; op = op->getNextNode()) {
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
  if (readers.empty())
    return std::nullopt;
  if (!why.empty())
    return why;
  if (e->getParentOp() != f_.getOperation())
    return std::string("not in the step's top-level block");
  MemRefType ht = mrt(h);
  Type het = ht.getElementType();
  const int64_t n = ht.getNumElements();
  if (!het.isBF16() && !het.isF16())
    return std::string("its result is not 16-bit");
  if (n % 8 != 0 || ht.getShape() != e.getShape())
    return std::string("its result is not whole groups of 8");
  for (Value in : e.getInputs()) {
    MemRefType t = mrt(in);
    Type et = t.getElementType();
    if (overlaps(footprint(in), result))
      return std::string("it works in place");
    if (t.getNumElements() == 1)
      continue;
    if (t.getShape() != e.getShape())
      return std::string("an input is broadcast");
    if (!et.isBF16() && !et.isF16() && !et.isF32() && !et.isInteger(32))
      return std::string("an input is not bf16, f16, f32 or i32");
  }
  // One cast, by the first reader, serves every reader: a kept cast (the
  // later readers take its layouts), or a slot cast with no other reader.
  if (!fp8Kept_)
    fp8Kept_ = Fp8KeptPlan::of(f_);
  auto first = fp8Kept_->uses.find(readers.front());
  if (first == fp8Kept_->uses.end()) {
    if (readers.size() != 1)
      return std::string("several FP8 products read it without one kept cast");
  } else {
    const Fp8KeptCast &kept = fp8Kept_->casts[first->second.first];
    if (!first->second.second || kept.batched)
      return std::string("its kept cast is not made by its first reader");
    for (auto reader : llvm::drop_begin(readers)) {
      auto use = fp8Kept_->uses.find(reader);
      if (use == fp8Kept_->uses.end() || use->second.first != first->second.first ||
          use->second.second)
        return std::string("a later FP8 reader does not take the first one's kept cast");
    }
  }
  // The inputs must still hold e's operands when the first reader casts.
  for (Operation *op = e->getNextNode(); op != readers.front().first; op = op->getNextNode())
    for (Value in : e.getInputs())
      if (mayWrite(op, footprint(in)))
        return "an input is written (by " + op->getName().getStringRef().str() +
               ") before the cast";
  fp8Deferred_.push_back({result, e});
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
  std::string members, aligned, vecLoads, scalarArgs, vecArgs;
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
    aligned += (aligned.empty() ? "reinterpret_cast<uintptr_t>(" : " | reinterpret_cast<uintptr_t>(") +
               p + ")";
    // 8 elements: one 16-byte load of a 16-bit input, two of a 32-bit one.
    vecLoads += llvm::formatv("    alignas(16) {0} {1}[8];\n"
                              "    for (int j = 0; j < {2}; ++j)\n"
                              "      reinterpret_cast<uint4 *>({1})[j] = "
                              "__ldg(reinterpret_cast<const uint4 *>({3} + i) + j);\n",
                              storageType(et), x, kern::elementBytes(et) / 2, p)
                    .str();
    vecArgs += load(et, x + "[k]") + ", ";
    scalarArgs += load(et, p + "[i]") + ", ";
  }
  const std::string out = scalarType(het);
  src.definition =
      "struct @NAME@_src {\n" + members +
      "  __device__ __forceinline__ uint4 load8(int64_t i) const {\n" + printed->preamble +
      printed->lambda + vecLoads + "    alignas(16) " + storageType(het) +
      " y[8];\n#pragma unroll\n    for (int k = 0; k < 8; ++k) {\n      " + out +
      " o0;\n      body(" + vecArgs + "i + k, o0);\n      y[k] = " + store(het, "o0") +
      ";\n    }\n    return *reinterpret_cast<const uint4 *>(y);\n  }\n" +
      "  __device__ __forceinline__ " + familyElementType(het, CodeTarget::Cuda) +
      " load(int64_t i) const {\n" + printed->preamble + printed->lambda + "    " + out +
      " o0;\n    body(" + scalarArgs + "i, o0);\n    return {" + store(het, "o0") + "};\n  }\n" +
      "  __host__ __device__ bool aligned16() const {\n    return " +
      (aligned.empty() ? std::string("true") : "(" + aligned + ") % 16 == 0") + ";\n  }\n};\n";
  src.params = llvm::join(params, ", ");
  src.init = "@NAME@_src{" + llvm::join(inits, ", ") + "}";
  src.args = llvm::join(args, ", ");
  src.flops = static_cast<double>(n) * printed->ops;
  return src;
}

} // namespace tcc::codegen::cuda
