// CPU code for kern.reduce (CpuReduce.h): sums, means and maxima over any
// axes as generated loops, accumulating in double for sums.
#include "compiler/codegen/cpu/CpuReduce.h"

#include "compiler/codegen/common/CTypes.h"
#include "compiler/codegen/common/LoopLayout.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen {

namespace {
bool isHalf(Type et) { return et.isBF16() || et.isF16(); }
std::string load(Type et, const std::string &e) { return loadElement(et, e, CodeTarget::Cpu); }
std::string store(Type et, const std::string &e) { return storeElement(et, e, CodeTarget::Cpu); }
} // namespace

// out = sum / mean / max of input over axes. Innermost axes reduced: one
// accumulator (double for sums) per output element, outputs spread over
// threads. Otherwise (e.g. a column sum): accumulate into out in input
// order, which keeps the inner loop contiguous.
LogicalResult emitCpuReduce(Value input, Value output, kern::ReduceKind kind,
                            ArrayRef<int64_t> axesList, const ValueNames &names,
                            llvm::raw_ostream &os, double &flops) {
  MemRefType in = mrt(input), out = mrt(output);
  ArrayRef<int64_t> shape = in.getShape();
  Type et = out.getElementType();
  // The input's own type: a bf16 / f16 input may be read into an f32 out
  // (kern.reduce's folded widening cast).
  Type it = in.getElementType();
  std::string ct = scalarType(et);
  std::string o = names(output), x = names(input);
  bool isMax = kind == kern::ReduceKind::max;
  bool isMean = kind == kern::ReduceKind::mean;
  SmallVector<int64_t> inStrides = contiguousStrides(shape);
  ReduceAxes axes = ReduceAxes::of(shape, axesList);
  int64_t count = axes.count;
  flops += in.getNumElements();
  std::string init = isMax ? "-std::numeric_limits<" + ct + ">::infinity()"
                           : ct + "(0)";
  std::string scale = isMean ? llvm::formatv(" * ({0}(1) / {0}({1}))", ct, count).str() : "";
  if (axes.reducesContiguousTail) {
    // out[o] = reduce(in[o * count + j]) over the contiguous tail.
    std::string acc = isMax ? ct : std::string("double");
    LoopNest outer = LoopNest::build(axes.keptSizes,
                                     {axes.keptStrides, contiguousStrides(axes.keptSizes)});
    std::string body = llvm::formatv(
        "{0} acc = {1};\nconst {2} *row = {3} + {4};\n"
        "#pragma omp simd reduction({5}:acc)\n"
        "for (int64_t j = 0; j < {6}; ++j) {7}\n"
        "{8}[{9}] = {10};\n",
        acc, isMax ? init : "0.0", storageType(it), x, outer.index(0),
        isMax ? "max" : "+", count,
        isMax ? "acc = " + load(it, "row[j]") + " > acc ? " + load(it, "row[j]") + " : acc;"
              : "acc += " + load(it, "row[j]") + ";",
        o, outer.index(1),
        store(et, "static_cast<" + ct + ">(acc" + scale + ")"))
        .str();
    outer.emit(os, body, static_cast<double>(in.getNumElements()));
    return success();
  }
  if (isHalf(et)) {
    // bf16 / f16 in general order: one accumulator per output element
    // (float for max, double for sums), each output rounded once; folding
    // into the 16-bit out would round after every element.
    LoopNest outer = LoopNest::build(axes.keptSizes,
                                     {axes.keptStrides, contiguousStrides(axes.keptSizes)});
    std::string loops, offset = outer.index(0);
    for (auto [d, size] : llvm::enumerate(axes.reducedSizes)) {
      loops += llvm::formatv("for (int64_t j{0} = 0; j{0} < {1}; ++j{0}) ", d, size).str();
      offset += llvm::formatv(" + j{0} * {1}", d, axes.reducedStrides[d]).str();
    }
    std::string value = load(it, x + "[" + offset + "]");
    std::string body = llvm::formatv(
        "{0} acc = {1};\n{2}{3}\n{4}[{5}] = {6};\n", isMax ? ct : "double",
        isMax ? init : "0.0", loops,
        isMax ? "{ const " + ct + " v = " + value + "; acc = v > acc ? v : acc; }"
              : "acc += " + value + ";",
        o, outer.index(1), store(et, "static_cast<" + ct + ">(acc" + scale + ")"))
        .str();
    outer.emit(os, body, static_cast<double>(in.getNumElements()));
    return success();
  }
  // General order: initialize, then fold every input element into its
  // output element.
  LoopNest fill = LoopNest::build({out.getNumElements()}, {{1}});
  fill.emit(os, o + "[" + fill.index(0) + "] = " + store(et, init) + ";", 0);
  SmallVector<int64_t> outStrides(shape.size(), 0);
  int64_t stride = 1;
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    if (llvm::is_contained(axesList, d))
      continue;
    outStrides[d] = stride;
    stride *= shape[d];
  }
  LoopNest nest = LoopNest::build(shape, {inStrides, outStrides});
  std::string target = o + "[" + nest.index(1) + "]";
  std::string value = load(it, x + "[" + nest.index(0) + "]");
  std::string cur = load(et, target);
  std::string body = isMax ? "{ const " + ct + " v = " + value + ", c = " + cur +
                                 "; " + target + " = " + store(et, "v > c ? v : c") + "; }"
                           : target + " = " + store(et, cur + " + " + value) + ";";
  nest.emit(os, body, 0);
  if (isMean) {
    std::string at = o + "[" + fill.index(0) + "]";
    fill.emit(os, at + " = " + store(et, load(et, at) + scale) + ";", 0);
  }
  return success();
}

} // namespace tcc::codegen
