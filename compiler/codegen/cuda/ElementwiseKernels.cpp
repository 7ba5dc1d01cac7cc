// kern.elementwise as one generated kernel per distinct (shape, body): the
// body is printed once as a device lambda (ScalarPrinter, CUDA flavour) and
// called per element, or per four elements with 16-byte loads and stores.
#include "compiler/codegen/cuda/CudaStepEmitter.h"

#include <algorithm>

#include "compiler/codegen/common/ScalarPrinter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

FailureOr<ElementwiseBody> printBodyLambda(Block &body, ArrayRef<BodyArgument> args, Value flat,
                                           ArrayRef<Type> outTypes, StringRef indent) {
  ElementwiseBody b;
  llvm::DenseMap<Value, std::string> scalars;
  llvm::DenseSet<Value> invariant;
  std::string text, lambdaParams;
  for (auto [k, a] : llvm::enumerate(args)) {
    if (a.kind == BodyArgument::Skip)
      continue;
    BlockArgument arg = body.getArgument(k);
    std::string sn = "a" + std::to_string(k);
    scalars[arg] = sn;
    if (a.kind == BodyArgument::Scalar) {
      b.preamble += "  const " + scalarType(a.type) + " " + sn + " = " +
                    load(a.type, "in" + std::to_string(k) + "[0]") + ";\n";
      invariant.insert(arg);
      continue;
    }
    b.perElementInput.push_back(k);
    lambdaParams += (lambdaParams.empty() ? "" : ", ") + scalarType(a.type) + " " + sn;
  }
  scalars[flat] = "flat";
  ScalarPrinter printer(scalars, CodeTarget::Cuda);
  for (Operation &op : body.without_terminator()) {
    bool hoist = llvm::all_of(op.getOperands(), [&](Value v) { return invariant.contains(v); });
    std::string stmt;
    if (failed(printer.print(&op, stmt)))
      return failure();
    if (!stmt.empty())
      (hoist ? b.preamble : text) += (hoist ? std::string("  ") : indent.str()) + stmt;
    if (hoist)
      invariant.insert(op.getResult(0));
    else if (!isa<arith::ConstantOp>(op))
      ++b.ops;
  }
  auto yield = cast<kern::YieldOp>(body.getTerminator());
  std::string outParams;
  for (auto [j, pair] : llvm::enumerate(llvm::zip(outTypes, yield.getValues()))) {
    auto [et, v] = pair;
    outParams += ", " + scalarType(et) + " &o" + std::to_string(j);
    text += indent.str() + "o" + std::to_string(j) + " = " + scalars.lookup(v) + ";\n";
  }
  b.lambda = "  auto body = [&](" + lambdaParams + (lambdaParams.empty() ? "" : ", ") +
             "int64_t flat" + outParams + ") {\n" + text + "  };\n";
  return b;
}

// kern.elementwise's body: unused inputs left out, single-element ones
// loaded once. Shared by the elementwise kernels and the FP8 casts that
// compute an elementwise result themselves.
FailureOr<ElementwiseBody> CudaStepEmitter::printElementwiseBody(kern::ElementwiseOp e) {
  Block &body = e.getBodyBlock();
  SmallVector<BodyArgument> args;
  for (auto [k, in] : llvm::enumerate(e.getInputs())) {
    MemRefType t = mrt(in);
    args.push_back({body.getArgument(k).use_empty()  ? BodyArgument::Skip
                    : t.getNumElements() == 1 ? BodyArgument::Scalar
                                              : BodyArgument::PerElement,
                    t.getElementType()});
  }
  SmallVector<Type> outTypes;
  for (Value out : e.getOutputs())
    outTypes.push_back(mrt(out).getElementType());
  return printBodyLambda(body, args, e.getFlatIndex(), outTypes, "      ");
}

// outputs[i] = body(inputs broadcast to the shape [i], i): one thread per
// element (grid-stride), or per 4 elements with 16-byte loads and stores
// when every non-scalar operand is a full, contiguous f32 / i32 buffer, or
// per 8 elements (one 16-byte access per bf16 / f16 operand, two per f32 /
// i32 one) when such operands mix in bf16 / f16. In groups of 8 a
// broadcast operand may join when the innermost loop is a multiple of 8
// long: one that does not move along it (a per-channel vector in NCHW, a
// group norm's statistics) is loaded once per group; one that walks it
// contiguously with its other strides multiples of 8 (a per-channel
// vector in NHWC) with 16-byte loads at the group's position.
LogicalResult CudaStepEmitter::emitElementwise(kern::ElementwiseOp e, llvm::raw_ostream &os,
                                               double &flops) {
  ArrayRef<int64_t> shape = e.getShape();
  int64_t n = mrt(e.getOutputs()[0]).getNumElements();
  SmallVector<SmallVector<int64_t>> strides;
  for (Value in : e.getInputs())
    strides.push_back(broadcastStrides(mrt(in).getShape(), shape));
  strides.push_back(contiguousStrides(shape));
  LoopNest nest = LoopNest::build(shape, strides);

  FailureOr<ElementwiseBody> printed = printElementwiseBody(e);
  if (failed(printed))
    return failure();
  std::string preamble = printed->preamble, params, loads;
  bool vectorize = n % 4 == 0 && n >= 4;
  // Groups of 8: full operands of 2 or 4 bytes, at least one of 2.
  bool vectorize8 = n % 8 == 0 && n >= 8, anyHalf = false;
  auto groupable = [&](Type et) {
    anyHalf |= et.isBF16() || et.isF16();
    return et.isBF16() || et.isF16() || et.isF32() || et.isInteger(32);
  };
  SmallVector<std::string> perElement; // lambda argument names in order
  ArrayRef<size_t> perElementInput = printed->perElementInput;
  // Groups of 8 with broadcast operands: how each per-element input is
  // read (full: at the group's offset; once: one scalar per group;
  // along: 16-byte loads at its index of the group's first element).
  enum class GroupRead { Full, Once, Along };
  SmallVector<GroupRead> groupReads;
  const int64_t innermost = nest.sizes.empty() ? 1 : nest.sizes.back();
  for (auto [k, in] : llvm::enumerate(e.getInputs()))
    params += llvm::formatv("{0}const {1} *in{2}", k ? ", " : "", storageType(mrt(in).getElementType()), k).str();
  for (size_t k : perElementInput) {
    Value in = e.getInputs()[k];
    MemRefType t = mrt(in);
    Type et = t.getElementType();
    std::string sn = "a" + std::to_string(k);
    perElement.push_back(sn);
    loads += "    const " + scalarType(et) + " " + sn + " = " +
             load(et, "in" + std::to_string(k) + "[" + nest.index(k) + "]") + ";\n";
    bool full = t.getNumElements() == n && kern::elementBytes(et) == 4 &&
                (et.isF32() || et.isInteger(32));
    vectorize &= full;
    if (t.getNumElements() == n) {
      vectorize8 &= groupable(et);
      groupReads.push_back(GroupRead::Full);
      continue;
    }
    // A broadcast operand, read along the innermost loop or not at all.
    ArrayRef<int64_t> st = nest.strides[k];
    bool runs8 = innermost % 8 == 0 && !st.empty();
    if (runs8 && st.back() == 0) {
      groupReads.push_back(GroupRead::Once);
    } else if (runs8 && st.back() == 1 && groupable(et) &&
               llvm::all_of(st.drop_back(), [](int64_t x) { return x % 8 == 0; })) {
      groupReads.push_back(GroupRead::Along);
    } else {
      vectorize8 = false;
      groupReads.push_back(GroupRead::Full);
    }
  }
  for (auto [j, out] : llvm::enumerate(e.getOutputs())) {
    Type et = mrt(out).getElementType();
    params += llvm::formatv("{0}{1} *out{2}", params.empty() ? "" : ", ", storageType(et), j)
                  .str();
    vectorize &= et.isF32() || et.isInteger(32);
    vectorize8 &= groupable(et);
  }
  vectorize8 &= anyHalf && !vectorize;
  const int64_t ops = printed->ops;
  std::string outDecls, outStores;
  for (auto [j, out] : llvm::enumerate(e.getOutputs())) {
    Type et = mrt(out).getElementType();
    outDecls += "    " + scalarType(et) + " o" + std::to_string(j) + ";\n";
    outStores += "    out" + std::to_string(j) + "[i] = " + store(et, "o" + std::to_string(j)) + ";\n";
  }
  double bytes = 0;
  for (Value v : e.getInputs())
    bytes += bufferBytes(mrt(v));
  for (Value v : e.getOutputs())
    bytes += bufferBytes(mrt(v));
  double work = static_cast<double>(n) * ops;
  flops += work;
  if (n == 0)
    return success();

  std::string it = indexType(n);
  const std::string &lambda = printed->lambda;
  std::string argList = llvm::join(perElement, ", ");
  // The grid-stride loop's body, over elements or groups of four.
  std::string loop;
  int64_t items = vectorize ? n / 4 : vectorize8 ? n / 8 : n;
  // 16-byte accesses of an operand in a group of 8 (1 for 2-byte, 2 for
  // 4-byte elements), through a 16-byte aligned local copy.
  auto accesses = [](Type et) { return 8 * kern::elementBytes(et) / 16; };
  if (vectorize8) {
    loop = "{\n    const int64_t i = static_cast<int64_t>(q) * 8;\n";
    if (llvm::any_of(groupReads, [](GroupRead r) { return r != GroupRead::Full; }))
      loop += coordinates(nest.sizes, "i", "int64_t");
    for (auto [p, k, read] : llvm::zip(perElement, perElementInput, groupReads)) {
      Type et = mrt(e.getInputs()[k]).getElementType();
      if (read == GroupRead::Once) {
        loop += llvm::formatv("    const {0} g{1} = {2};\n", scalarType(et), k,
                              load(et, "in" + std::to_string(k) + "[" + nest.index(k) + "]"))
                    .str();
        continue;
      }
      std::string at = read == GroupRead::Full ? std::string("q * 8")
                                               : "(" + nest.index(k) + ")";
      loop += llvm::formatv("    alignas(16) {0} x{1}[8];\n"
                            "    for (int j = 0; j < {2}; ++j)\n"
                            "      reinterpret_cast<uint4 *>(x{1})[j] = "
                            "reinterpret_cast<const uint4 *>(in{1} + {3})[j];\n",
                            storageType(et), k, accesses(et), at)
                  .str();
    }
    for (auto [j, out] : llvm::enumerate(e.getOutputs()))
      loop += llvm::formatv("    alignas(16) {0} y{1}[8];\n",
                            storageType(mrt(out).getElementType()), j)
                  .str();
    loop += "#pragma unroll\n    for (int k = 0; k < 8; ++k) {\n";
    std::string call = "      body(";
    for (auto [p, k, read] : llvm::zip(perElement, perElementInput, groupReads)) {
      Type et = mrt(e.getInputs()[k]).getElementType();
      call += (read == GroupRead::Once ? "g" + std::to_string(k)
                                       : load(et, "x" + std::to_string(k) + "[k]")) +
              ", ";
    }
    call += "i + k";
    for (auto [j, out] : llvm::enumerate(e.getOutputs())) {
      loop += llvm::formatv("      {0} o{1};\n", scalarType(mrt(out).getElementType()), j).str();
      call += ", o" + std::to_string(j);
    }
    loop += call + ");\n";
    for (auto [j, out] : llvm::enumerate(e.getOutputs()))
      loop += llvm::formatv("      y{0}[k] = {1};\n", j,
                            store(mrt(out).getElementType(), "o" + std::to_string(j)))
                  .str();
    loop += "    }\n";
    for (auto [j, out] : llvm::enumerate(e.getOutputs()))
      loop += llvm::formatv("    for (int j = 0; j < {1}; ++j)\n"
                            "      reinterpret_cast<uint4 *>(out{0})[q * {1} + j] = "
                            "reinterpret_cast<const uint4 *>(y{0})[j];\n",
                            j, accesses(mrt(out).getElementType()))
                  .str();
    loop += "  }\n";
  } else if (vectorize) {
    loop = "{\n    const int64_t i = static_cast<int64_t>(q) * 4;\n";
    for (auto [p, k] : llvm::zip(perElement, perElementInput)) {
      Type et = mrt(e.getInputs()[k]).getElementType();
      loop += llvm::formatv("    const {0} x{1} = reinterpret_cast<const {0} *>(in{1})[q];\n",
                            et.isF32() ? "float4" : "int4", k)
                  .str();
    }
    SmallVector<std::string> outVecs;
    for (auto [j, out] : llvm::enumerate(e.getOutputs())) {
      Type et = mrt(out).getElementType();
      loop += llvm::formatv("    {0} y{1};\n", et.isF32() ? "float4" : "int4", j).str();
    }
    for (const char *lane : {"x", "y", "z", "w"}) {
      std::string call = "    body(";
      for (auto [p, k] : llvm::zip(perElement, perElementInput))
        call += "x" + std::to_string(k) + "." + lane + ", ";
      call += std::string("i + ") + std::to_string(lane[0] == 'w' ? 3 : lane[0] - 'x');
      for (size_t j = 0; j < e.getOutputs().size(); ++j)
        call += ", y" + std::to_string(j) + "." + lane;
      loop += call + ");\n";
    }
    for (size_t j = 0; j < e.getOutputs().size(); ++j) {
      Type et = mrt(e.getOutputs()[j]).getElementType();
      loop += llvm::formatv("    reinterpret_cast<{0} *>(out{1})[q] = y{1};\n",
                            et.isF32() ? "float4" : "int4", j)
                  .str();
    }
    loop += "  }\n";
  } else {
    loop = "{\n" + coordinates(nest.sizes, "i", it);
    loop += loads + outDecls + "    body(" + argList + (argList.empty() ? "" : ", ") +
            "static_cast<int64_t>(i)";
    for (size_t j = 0; j < e.getOutputs().size(); ++j)
      loop += ", o" + std::to_string(j);
    loop += ");\n" + outStores + "  }\n";
  }
  std::string argNames;
  for (size_t k = 0; k < e.getInputs().size(); ++k)
    argNames += (k ? ", in" : "in") + std::to_string(k);
  for (size_t j = 0; j < e.getOutputs().size(); ++j)
    argNames += (argNames.empty() ? "out" : ", out") + std::to_string(j);
  GridStrideKernel k;
  k.kind = vectorize ? "ew4" : vectorize8 ? "ew8" : "ew";
  k.params = params;
  k.args = argNames;
  k.indexType = it;
  k.var = vectorize || vectorize8 ? "q" : "i";
  k.items = items;
  k.before = preamble + lambda;
  k.body = loop;
  SmallVector<Value> buffers(e.getInputs());
  buffers.append(e.getOutputs().begin(), e.getOutputs().end());
  launchGridStride(os, e, k, buffers, work, bytes);
  return success();
}

} // namespace tcc::codegen::cuda
