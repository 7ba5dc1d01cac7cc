// kern.reduce: the prelude's row and middle-axis reduction families after
// merging neighbouring dimensions, or a generated kernel (one thread per
// output element) for the rare interleaved cases.
#include "compiler/codegen/cuda/CudaStepEmitter.h"

#include <algorithm>

#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

// out = sum / mean / max of input over axes, as one of the prelude's
// families after merging neighbouring dimensions: rows (innermost
// reduced), middle (outer x reduced x inner), or a generated kernel with
// one thread per output for the rare interleaved cases.
LogicalResult CudaStepEmitter::emitReduce(kern::ReduceOp r, llvm::raw_ostream &os,
                                          double &flops) {
  MemRefType in = mrt(r.getInput()), out = mrt(r.getOut());
  ArrayRef<int64_t> shape = in.getShape();
  Type et = out.getElementType();
  int kind = r.getKind() == kern::ReduceKind::sum ? 0
             : r.getKind() == kern::ReduceKind::mean ? 1
                                                      : 2;
  // Runs of kept (false) / reduced (true) dimensions, size-1 dims dropped.
  SmallVector<std::pair<bool, int64_t>> runs;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (shape[d] == 1)
      continue;
    bool reduced = llvm::is_contained(r.getAxes(), d);
    if (!runs.empty() && runs.back().first == reduced)
      runs.back().second *= shape[d];
    else
      runs.push_back({reduced, shape[d]});
  }
  flops += in.getNumElements();
  if (in.getNumElements() == 0 || out.getNumElements() == 0)
    return success(); // (an empty input: the output is left to the plan)
  std::string ft = familyElementType(et, CodeTarget::Cuda);
  std::string args = familyPointer(et, "p0", false, CodeTarget::Cuda) + ", " +
                     familyPointer(et, "p1", true, CodeTarget::Cuda);
  double bytes = bufferBytes(in) + bufferBytes(out);
  auto family = [&](StringRef launcher, const std::string &sizes) {
    FamilyLaunch l;
    l.kind = "reduce";
    l.launcherCall =
        llvm::formatv("tcc_cuda::{0}<{1}, {2}>({3}, {4}, s);", launcher, ft, kind, args, sizes);
    l.buffers = {r.getInput(), r.getOut()};
    l.written = {false, true};
    l.flops = in.getNumElements();
    l.bytes = bytes;
    l.shape = launcher.drop_front(7).str() + "(" + sizes + ")"; // "reduce_rows(...)"
    return emitFamily(r, os, l);
  };
  auto isPattern = [&](std::initializer_list<bool> p) {
    if (runs.size() != p.size())
      return false;
    size_t i = 0;
    for (bool b : p)
      if (runs[i++].first != b)
        return false;
    return true;
  };
  if (runs.empty())
    return family("launch_reduce_rows", "1, 1");
  if (isPattern({true}))
    return family("launch_reduce_rows", "1, " + std::to_string(runs[0].second));
  if (isPattern({false}))
    return family("launch_reduce_rows", std::to_string(runs[0].second) + ", 1");
  if (isPattern({false, true}))
    return family("launch_reduce_rows", llvm::formatv("{0}, {1}", runs[0].second,
                                                      runs[1].second));
  if (isPattern({true, false}))
    return family("launch_reduce_middle",
                  llvm::formatv("1, {0}, {1}", runs[0].second, runs[1].second));
  if (isPattern({false, true, false}))
    return family("launch_reduce_middle", llvm::formatv("{0}, {1}, {2}", runs[0].second,
                                                        runs[1].second, runs[2].second));
  return emitGenericReduce(r, os, kind, bytes);
}

LogicalResult CudaStepEmitter::emitGenericReduce(kern::ReduceOp r, llvm::raw_ostream &os,
                                                 int kind, double bytes) {
  MemRefType in = mrt(r.getInput()), out = mrt(r.getOut());
  Type et = out.getElementType();
  ReduceAxes axes = ReduceAxes::of(r);
  const SmallVector<int64_t> &keptSizes = axes.keptSizes, &keptStrides = axes.keptStrides,
                             &redSizes = axes.reducedSizes, &redStrides = axes.reducedStrides;
  int64_t count = axes.count;
  std::string st = storageType(et), ct = scalarType(et);
  std::string acc = kind == 2 ? ct : "double";
  std::string it = indexType(in.getNumElements());
  std::string keptOff = "0", redOff = "0";
  for (auto [d, s] : llvm::enumerate(keptStrides))
    keptOff += llvm::formatv(" + o{0} * {1}", d, s).str();
  for (auto [d, s] : llvm::enumerate(redStrides))
    redOff += llvm::formatv(" + j{0} * {1}", d, s).str();
  std::string init = kind == 2 ? "-std::numeric_limits<" + ct + ">::infinity()" : "0.0";
  std::string combine =
      kind == 2 ? "{ const " + ct + " v = " + load(et, "in[base + " + redOff + "]") +
                      "; acc = (v > acc || v != v) ? v : acc; }"
                : "acc += " + load(et, "in[base + " + redOff + "]") + ";";
  std::string scale = kind == 1 ? llvm::formatv(" * (1.0 / {0})", count).str() : "";
  int64_t n = out.getNumElements();
  GridStrideKernel k;
  k.kind = "reduce";
  k.params = "const " + st + " *in, " + st + " *out";
  k.args = "in, out";
  k.indexType = it;
  k.var = "o";
  k.items = n;
  k.body = llvm::formatv("{{\n{0}"
                         "    const {1} base = {2};\n"
                         "    {3} acc = {4};\n"
                         "    for ({1} r = 0; r < {5}u; ++r) {{\n{6}"
                         "      {7}\n    }\n"
                         "    out[o] = {8};\n  }\n",
                         coordinates(keptSizes, "o", it, "o"), it, keptOff, acc, init, count,
                         coordinates(redSizes, "r", it, "j"), combine,
                         store(et, "static_cast<" + ct + ">(acc" + scale + ")"))
               .str();
  launchGridStride(os, r, k, {r.getInput(), r.getOut()}, in.getNumElements(), bytes);
  return success();
}

} // namespace tcc::codegen::cuda
