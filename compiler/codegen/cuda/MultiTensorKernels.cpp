// The multi-tensor kernels of kern-fuse-horizontal: kern.multi_elementwise
// as one generated kernel per body whose launcher takes a table of the
// members' pointers and sizes (passed to the kernel by value, blocks mapped
// to (member, chunk)), and kern.multi_sum through the prelude's
// launch_multi_sum.
#include "compiler/codegen/cuda/CudaStepEmitter.h"

#include <algorithm>

#include "compiler/codegen/common/ScalarPrinter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

namespace {

// Kernel parameters may take 32764 bytes since CUDA 12.1 (Volta and newer;
// 4096 before): a launch's table stays under this, larger groups take
// several launches.
constexpr int64_t kMaxTableBytes = 32000;
// Elements per block of a multi-elementwise launch: 256 threads x 4
// elements x 4 iterations.
constexpr int64_t kMultiChunk = 4096;
// Members per kern.multi_sum launch (its table: 28 bytes a member).
constexpr int kMultiSumCap = 1024;

// How slot k of a multi_elementwise reaches the kernel.
enum class Slot {
  Full,      // per member, read at the position
  Scalar,    // per member, one element read once
  Shared,    // the same single-element buffer for every member: a kernel parameter
};

std::string hostPointerList(ArrayRef<std::string> names) {
  std::string s;
  for (const std::string &n : names)
    s += (s.empty() ? "" : ", ") + std::string("(void *)(") + n + ")";
  return s;
}

} // namespace

LogicalResult CudaStepEmitter::emitMultiElementwise(kern::MultiElementwiseOp e,
                                                    llvm::raw_ostream &os, double &flops) {
  int64_t members = e.members(), k = e.inputsPerMember(), j = e.outputsPerMember();
  // Members the first FP8 product's batched casts compute (their 16-bit
  // results only those casts read): not launched here.
  SmallVector<bool> leftOut(members, false);
  int64_t launched = members;
  std::string refused;
  for (int64_t m = 0; m < members; ++m) {
    std::optional<std::string> no = fp8BatchComputes(e, m);
    if (no && no->empty()) {
      leftOut[m] = true;
      --launched;
    } else if (no && refused.empty()) {
      refused = *no;
    }
  }
  std::string note;
  if (launched < members)
    note = llvm::formatv(" ({0} of {1} members computed by the first FP8 product's batched "
                         "casts, which read their f32 inputs)",
                         members - launched, members)
               .str();
  if (!refused.empty())
    note += " (not computed by the FP8 batch: " + refused + ")";
  if (launched == 0) { // every member left to the FP8 batch, which says so
    os << "  // " << locName(e->getLoc()) << ": every member computed by the FP8 batch\n";
    return success();
  }

  Block &body = e.getBodyBlock();
  // Slot kinds, from every member.
  SmallVector<Slot> slots(k, Slot::Shared);
  for (int64_t s = 0; s < k; ++s) {
    bool allSingle = true, allSame = true;
    for (int64_t m = 0; m < members; ++m) {
      Value in = e.memberInputs(m)[s];
      allSingle &= mrt(in).getNumElements() == 1;
      allSame &= in == e.memberInputs(0)[s];
    }
    slots[s] = !allSingle ? Slot::Full : allSame ? Slot::Shared : Slot::Scalar;
  }
  // Output j that is, in every member, its full input slot: no pointer of
  // its own (in-place updates).
  SmallVector<int64_t> aliasOf(j, -1);
  for (int64_t o = 0; o < j; ++o)
    for (int64_t s = 0; s < k && aliasOf[o] < 0; ++s) {
      if (slots[s] != Slot::Full)
        continue;
      bool all = true;
      for (int64_t m = 0; m < members && all; ++m)
        all = e.memberOutputs(m)[o] == e.memberInputs(m)[s];
      if (all)
        aliasOf[o] = s;
    }
  auto inType = [&](int64_t s) { return mrt(e.memberInputs(0)[s]).getElementType(); };
  auto outType = [&](int64_t o) { return mrt(e.memberOutputs(0)[o]).getElementType(); };

  // Per-member pointers in table order: non-shared inputs, then outputs
  // with a pointer of their own.
  int64_t perMember = 0;
  for (int64_t s = 0; s < k; ++s)
    perMember += slots[s] != Slot::Shared;
  for (int64_t o = 0; o < j; ++o)
    perMember += aliasOf[o] < 0;
  int64_t sharedBytes = 8 * std::count(slots.begin(), slots.end(), Slot::Shared);
  int64_t cap = std::max<int64_t>(
      1, std::min<int64_t>(members, (kMaxTableBytes - 64 - sharedBytes) / (8 * perMember + 12)));

  // The table, the member lookup and the pointers of the block's member.
  std::string table = "struct @NAME@_table {\n";
  std::string memberPtrs, launcherFill, sharedParams, sharedArgs;
  int64_t p = 0;
  for (int64_t s = 0; s < k; ++s) {
    std::string st = storageType(inType(s));
    if (slots[s] == Slot::Shared) {
      sharedParams += llvm::formatv(", const {0} *in{1}", st, s).str();
      sharedArgs += llvm::formatv(", in{0}", s).str();
      continue;
    }
    table += llvm::formatv("  const {0} *in{1}[{2}];\n", st, s, cap).str();
    memberPtrs += llvm::formatv("  const {0} *in{1} = t.in{1}[m];\n", st, s).str();
    launcherFill += llvm::formatv("    t.in{0}[m] = static_cast<const {1} *>(p[(base + m) * "
                                  "{2} + {3}]);\n",
                                  s, st, perMember, p++)
                        .str();
  }
  for (int64_t o = 0; o < j; ++o) {
    std::string st = storageType(outType(o));
    if (aliasOf[o] >= 0) {
      memberPtrs += llvm::formatv("  {0} *out{1} = const_cast<{0} *>(in{2});\n", st, o,
                                  aliasOf[o])
                        .str();
      continue;
    }
    table += llvm::formatv("  {0} *out{1}[{2}];\n", st, o, cap).str();
    memberPtrs += llvm::formatv("  {0} *out{1} = t.out{1}[m];\n", st, o).str();
    launcherFill += llvm::formatv("    t.out{0}[m] = static_cast<{1} *>(p[(base + m) * "
                                  "{2} + {3}]);\n",
                                  o, st, perMember, p++)
                        .str();
  }
  table += llvm::formatv("  int64_t n[{0}];\n  uint32_t first[{0} + 1];\n  int32_t count;\n};\n",
                         cap)
               .str();

  // The body as a lambda; scalars and what depends only on them hoisted.
  SmallVector<BodyArgument> args;
  for (int64_t s = 0; s < k; ++s)
    args.push_back({slots[s] == Slot::Full             ? BodyArgument::PerElement
                    : body.getArgument(s).use_empty() ? BodyArgument::Skip
                                                      : BodyArgument::Scalar,
                    inType(s)});
  SmallVector<Type> outTypes;
  for (size_t o = 0; o < body.getTerminator()->getNumOperands(); ++o)
    outTypes.push_back(outType(o));
  FailureOr<ElementwiseBody> printed =
      printBodyLambda(body, args, body.getArguments().back(), outTypes, "    ");
  if (failed(printed))
    return failure();
  const std::string &preamble = printed->preamble, &lambda = printed->lambda;
  const int64_t ops = printed->ops;
  SmallVector<int64_t> fullSlots(printed->perElementInput.begin(),
                                 printed->perElementInput.end());

  // One element at i, and four at i with one access per operand.
  std::string one = "{\n", four = "{\n", call1 = "body(", call4 = "body(", aligned;
  for (int64_t s : fullSlots) {
    std::string st = storageType(inType(s));
    one += llvm::formatv("      const {0} x{1} = {2};\n", scalarType(inType(s)), s,
                         load(inType(s), "in" + std::to_string(s) + "[i]"))
               .str();
    call1 += "x" + std::to_string(s) + ", ";
    four += llvm::formatv("      const tcc_cuda::detail::MultiVec4<{0}> x{1} = "
                          "*reinterpret_cast<const tcc_cuda::detail::MultiVec4<{0}> *>(in{1} + i);\n",
                          st, s)
                .str();
    call4 += load(inType(s), "x" + std::to_string(s) + ".v[q]") + ", ";
    aligned += llvm::formatv(" | (reinterpret_cast<uintptr_t>(in{0}) % sizeof("
                             "tcc_cuda::detail::MultiVec4<{1}>))",
                             s, st)
                   .str();
  }
  call1 += "i";
  call4 += "i + q";
  std::string stores1, stores4, decl4;
  for (int64_t o = 0; o < j; ++o) {
    std::string st = storageType(outType(o)), ct = scalarType(outType(o));
    one += llvm::formatv("      {0} o{1};\n", ct, o).str();
    call1 += ", o" + std::to_string(o);
    stores1 += llvm::formatv("      out{0}[i] = {1};\n", o,
                             store(outType(o), "o" + std::to_string(o)))
                   .str();
    decl4 += llvm::formatv("      tcc_cuda::detail::MultiVec4<{0}> y{1};\n", st, o).str();
    call4 += ", o" + std::to_string(o);
    stores4 += llvm::formatv("        y{0}.v[q] = {1};\n", o,
                             store(outType(o), "o" + std::to_string(o)))
                   .str();
    aligned += llvm::formatv(" | (reinterpret_cast<uintptr_t>(out{0}) % sizeof("
                             "tcc_cuda::detail::MultiVec4<{1}>))",
                             o, st)
                   .str();
  }
  one += "      " + call1 + ");\n" + stores1 + "    }\n";
  std::string outDecls4;
  for (int64_t o = 0; o < j; ++o)
    outDecls4 += llvm::formatv("        {0} o{1};\n", scalarType(outType(o)), o).str();
  four += decl4 + "#pragma unroll\n      for (int q = 0; q < 4; ++q) {\n" + outDecls4 + "        " +
          call4 + ");\n" + stores4 + "      }\n";
  for (int64_t o = 0; o < j; ++o)
    four += llvm::formatv("      *reinterpret_cast<tcc_cuda::detail::MultiVec4<{0}> *>(out{1} + "
                          "i) = y{1};\n",
                          storageType(outType(o)), o)
                .str();
  four += "    }\n";

  std::string params = "int32_t count, void *const *p, const int64_t *n" + sharedParams;
  std::string text2 =
      table +
      llvm::formatv("static __global__ void __launch_bounds__(256) @NAME@_kernel(const "
                    "@NAME@_table t{0}) {{\n"
                    "  const int m = tcc_cuda::detail::multi_member(t.first, t.count, "
                    "blockIdx.x);\n"
                    "  const int64_t begin = static_cast<int64_t>(blockIdx.x - t.first[m]) * "
                    "{1};\n"
                    "  const int64_t end = begin + {1} < t.n[m] ? begin + {1} : t.n[m];\n",
                    sharedParams, kMultiChunk)
          .str() +
      memberPtrs + preamble + lambda +
      "  if (((uintptr_t)0" + aligned + ") == 0) {\n"
      "    const int64_t whole = begin + ((end - begin) & ~int64_t(3));\n"
      "    for (int64_t i = begin + 4 * threadIdx.x; i < whole; i += 4 * blockDim.x) " +
      four +
      "    for (int64_t i = whole + threadIdx.x; i < end; i += blockDim.x) " + one +
      "  } else {\n"
      "    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) " + one +
      "  }\n}\n" +
      llvm::formatv("extern \"C\" void @NAME@(cudaStream_t s, {0}) {{\n"
                    "  for (int32_t base = 0; base < count; base += {1}) {{\n"
                    "    @NAME@_table t{{};\n"
                    "    t.count = count - base < {1} ? count - base : {1};\n"
                    "    uint32_t blocks = 0;\n"
                    "    for (int32_t m = 0; m < t.count; ++m) {{\n"
                    "{2}"
                    "      t.n[m] = n[base + m];\n"
                    "      t.first[m] = blocks;\n"
                    "      blocks += static_cast<uint32_t>((n[base + m] + {3} - 1) / {3});\n"
                    "    }\n"
                    "    t.first[t.count] = blocks;\n"
                    "    if (blocks) @NAME@_kernel<<<blocks, 256, 0, s>>>(t{4});\n"
                    "  }\n}\n",
                    params, cap, launcherFill, kMultiChunk, sharedArgs)
          .str();
  // The launcher's loop body indents its fills one level deeper.
  std::string kernel = kernels_.add("multi_ew", text2, params);

  // The host call: the members' pointers and sizes as local tables.
  SmallVector<std::string> pointers;
  std::string counts;
  double bytes = 0, work = 0;
  int64_t blocks = 0;
  for (int64_t m = 0; m < members; ++m) {
    if (leftOut[m])
      continue;
    ValueRange ins = e.memberInputs(m), outs = e.memberOutputs(m);
    for (int64_t s = 0; s < k; ++s)
      if (slots[s] != Slot::Shared)
        pointers.push_back(name(ins[s]));
    for (int64_t o = 0; o < j; ++o)
      if (aliasOf[o] < 0)
        pointers.push_back(name(outs[o]));
    int64_t n = mrt(outs[0]).getNumElements();
    counts += (counts.empty() ? "" : ", ") + std::to_string(n);
    work += static_cast<double>(n) * ops;
    blocks += (n + kMultiChunk - 1) / kMultiChunk;
    for (Value v : ins)
      bytes += bufferBytes(mrt(v));
    for (Value v : outs)
      bytes += bufferBytes(mrt(v));
  }
  flops += work;
  std::string shared;
  for (int64_t s = 0; s < k; ++s)
    if (slots[s] == Slot::Shared)
      shared += ", " + name(e.memberInputs(0)[s]);
  std::string call = llvm::formatv("{{ void *const tcc_p[] = {{{0}};\n"
                                   "    static const int64_t tcc_n[] = {{{1}};\n"
                                   "    {2}(s, {3}, tcc_p, tcc_n{4}); }",
                                   hostPointerList(pointers), counts, kernel, launched, shared)
                         .str();
  int64_t launches = (launched + cap - 1) / cap;
  launch(os, e, kernel, call,
         llvm::formatv("{0} tensors, {1} launch(es), {2} blocks{3}", launched, launches, blocks,
                       note)
             .str(),
         work, bytes);
  return success();
}

LogicalResult CudaStepEmitter::emitMultiSum(kern::MultiSumOp m, llvm::raw_ostream &os,
                                            double &flops) {
  Type et = mrt(m.getInputs()[0]).getElementType();
  for (Value v : m.getInputs())
    if (mrt(v).getElementType() != et)
      return m.emitError("cuda codegen: kern.multi_sum inputs of different element types");
  std::string ft = familyElementType(et, CodeTarget::Cuda);
  std::string ot = familyElementType(mrt(m.getOutputs()[0]).getElementType(), CodeTarget::Cuda);
  int64_t chunk = m.getChunkAttr().getInt();
  std::string text = llvm::formatv(
      "extern \"C\" void @NAME@(cudaStream_t s, int32_t count, void *const *in, void *const "
      "*out, const int64_t *n, double *partials) {{\n"
      "  tcc_cuda::launch_multi_sum<{0}, {1}, {3}, {4}>(count, reinterpret_cast<const {0} "
      "*const *>(in), reinterpret_cast<{3} *const *>(out), n, {2}, partials, s);\n}\n",
      ft, kMultiSumCap, chunk, ot, m.getSquares() ? "true" : "false");
  std::string params =
      "int32_t count, void *const *in, void *const *out, const int64_t *n, double *partials";
  std::string kernel = kernels_.add("multi_sum", text, params);
  SmallVector<std::string> ins, outs;
  std::string counts;
  double bytes = 0, work = 0;
  SmallVector<int64_t> sizes;
  for (auto [k, pair] : llvm::enumerate(llvm::zip(m.getInputs(), m.getOutputs()))) {
    auto [in, out] = pair;
    ins.push_back(name(in));
    outs.push_back(name(out));
    int64_t n = mrt(in).getNumElements();
    sizes.push_back(n);
    counts += (k ? ", " : "") + std::to_string(n);
    work += m.getSquares() ? 2 * n : n;
    bytes += bufferBytes(mrt(in)) + bufferBytes(mrt(out));
  }
  flops += work;
  int64_t count = static_cast<int64_t>(ins.size());
  std::string call = llvm::formatv("{{ void *const tcc_in[] = {{{0}};\n"
                                   "    void *const tcc_out[] = {{{1}};\n"
                                   "    static const int64_t tcc_n[] = {{{2}};\n"
                                   "    {3}(s, {4}, tcc_in, tcc_out, tcc_n, {5}); }",
                                   hostPointerList(ins), hostPointerList(outs), counts, kernel,
                                   count, name(m.getPartials()))
                         .str();
  int64_t partials = kern::MultiSumOp::partialsFor(sizes, chunk);
  int64_t launches = 2 * ((count + kMultiSumCap - 1) / kMultiSumCap);
  launch(os, m, kernel, call,
         llvm::formatv("{0} tensors{3}, {1} launches: {2}x256 + {0}x32", count, launches,
                       partials, m.getSquares() ? " (sums of squares)" : "")
             .str(),
         work, bytes);
  return success();
}

} // namespace tcc::codegen::cuda
