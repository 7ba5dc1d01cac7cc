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

int64_t fp8GemmScratchBytes(Operation *root) {
  int64_t most = 0;
  root->walk([&](kern::GemmOp g) {
    Fp8Gemm f = Fp8Gemm::of(g);
    if (f.runs())
      most = std::max(most, f.scratchBytes());
  });
  return most;
}

// out (M, N) = op(a) x op(b): a as FP8 (M, K), b as FP8 (N, K), each with
// the scale of its own amax; gemm_fp8 dequantizes with their inverses.
LogicalResult CudaStepEmitter::emitGemmFp8(kern::GemmOp g, const Fp8Gemm &f,
                                           llvm::raw_ostream &os, double &flops) {
  double work = 2.0 * f.m * f.n * f.k;
  flops += work;
  const std::string scratch = "(ws + tcc_gemm_workspace_offset + tcc_gemm_workspace_bytes)";
  // One operand's cast: `stored` rows x cols as it lies in memory; K runs
  // along cols unless `transposed` (then the transposing form writes the
  // K-contiguous copy).
  auto quantize = [&](Value operand, bool e5m2, int64_t rows, int64_t cols, bool transposed,
                      int64_t offset, int scaleSlot) {
    Type et = mrt(operand).getElementType();
    const char *f8 = e5m2 ? "tcc_cuda::e5m2" : "tcc_cuda::e4m3";
    std::string params = "const " + storageType(et) + " *p0, uint8_t *p1, void *p2";
    std::string out = llvm::formatv("reinterpret_cast<{0} *>(p1)", f8).str();
    std::string text =
        "extern \"C\" void @NAME@(cudaStream_t s, " + params + ") {\n  " +
        llvm::formatv("tcc_cuda::launch_fp8_quantize_current<{0}, {1}>({2}, {3}, {4}, {5}, {6}, "
                      "static_cast<tcc_cuda::Fp8TensorScale *>(p2), s);",
                      familyElementType(et, CodeTarget::Cuda), f8, rows, cols,
                      familyPointer(et, "p0", false, CodeTarget::Cuda),
                      transposed ? "nullptr" : out, transposed ? out : "nullptr")
            .str() +
        "\n}\n";
    std::string kernel = kernels_.add(e5m2 ? "fp8_quantize_e5m2" : "fp8_quantize_e4m3", text,
                                      params);
    std::string call =
        llvm::formatv("{0}(s, {1}, reinterpret_cast<uint8_t *>({2} + {3}), {2} + {4});", kernel,
                      name(operand), scratch, offset, f.scalesOffset() + 64 * scaleSlot)
            .str();
    double elements = static_cast<double>(rows) * cols;
    launch(os, g, kernel, call,
           llvm::formatv("{0}x{1}{2}, current scale", rows, cols,
                         transposed ? " transposed" : "")
               .str(),
           2.0 * elements, 2.0 * bufferBytes(mrt(operand)) + elements);
  };
  // op(a) (M, K): a is (M, K), or (K, M) transposed.
  quantize(g.getA(), f.aE5M2, f.ta ? f.k : f.m, f.ta ? f.m : f.k, f.ta, 0, 0);
  // op(b)^T (N, K): b is (N, K) when transposed, else (K, N).
  quantize(g.getB(), f.bE5M2, f.tb ? f.n : f.k, f.tb ? f.k : f.n, !f.tb, f.bOffset(), 1);
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
          "reinterpret_cast<const float *>({9} + {11}), {9}, {9} + {12}, {13}, "
          "ws + tcc_gemm_workspace_offset, tcc_gemm_workspace_bytes)) return rc;",
          site, nextId(), f.aE5M2 ? "tcc_cuda_host::kFp8E5M2" : "tcc_cuda_host::kFp8E4M3",
          f.bE5M2 ? "tcc_cuda_host::kFp8E5M2" : "tcc_cuda_host::kFp8E4M3",
          c.getElementType().isBF16() ? "tcc_cuda_host::kGemmBF16" : "tcc_cuda_host::kGemmF32",
          fast ? "true" : "false", f.m, f.n, f.k, scratch, f.scalesOffset(),
          f.scalesOffset() + 64, f.bOffset(), name(g.getOut()))
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
