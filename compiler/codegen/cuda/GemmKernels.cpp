// kern.gemm through cuBLASLt (tcc_cuda_host::gemm in cuda_host_support.h,
// one cached plan per call site): one product when the batch folds into M,
// one strided-batched product when both operands are fully batched or one
// is shared by the whole batch (batch stride 0), else a host loop of
// products over the broadcast batch.
#include "compiler/codegen/cuda/CudaStepEmitter.h"
#include "compiler/codegen/cuda/Fp8Gemm.h"
#include "compiler/codegen/cuda/cutlass/sm90_epilogue_choice.h"

#include <algorithm>

#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

namespace {
tcc_cutlass::Sm90Type sm90Type(Type et) {
  return et.isBF16()  ? tcc_cutlass::Sm90Type::kBF16
         : et.isF32() ? tcc_cutlass::Sm90Type::kF32
                      : tcc_cutlass::Sm90Type::kOther;
}
} // namespace

// out (batch..., M, N) = op(a) x op(b) per batch, batch dims broadcast.
LogicalResult CudaStepEmitter::emitGemm(kern::GemmOp g, llvm::raw_ostream &os,
                                        double &flops) {
  Fp8Gemm fp8 = Fp8Gemm::of(g);
  if (fp8.runs())
    return emitGemmFp8(g, fp8, os, flops);
  GemmShape s = GemmShape::of(g);
  MemRefType a = mrt(g.getA()), b = mrt(g.getB()), c = mrt(g.getOut());
  double work = s.flops();
  flops += work;
  if (s.batchCount * s.m * s.n == 0)
    return success();
  Type et = c.getElementType();
  const char *type = et.isF64() ? "tcc_cuda_host::kGemmF64"
                     : et.isBF16() ? "tcc_cuda_host::kGemmBF16"
                     : et.isF16()  ? "tcc_cuda_host::kGemmF16"
                                   : "tcc_cuda_host::kGemmF32";
  double alpha = g.getAlpha().convertToDouble(), beta = g.getBeta().convertToDouble();
  std::string wsArg = "ws + tcc_gemm_workspace_offset, tcc_gemm_workspace_bytes";
  double bytes = bufferBytes(a) + bufferBytes(b) + 2.0 * bufferBytes(c);
  auto call = [&](int64_t mm, int64_t count, int64_t sa, int64_t sb, int64_t sc,
                  const std::string &pa, const std::string &pb, const std::string &pc) {
    int site = gemmSites_++;
    return llvm::formatv(
               "static tcc_cuda_host::GemmPlan tcc_gemm_plan_{0};\n"
               "  if (int32_t rc = tcc_cuda_host::gemm(tcc_gemm_plan_{0}, s, {1}, {2}, {3}, "
               "{4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13:e}, {14:e}, {15}, {16}, "
               "{17}, {18})) return rc;",
               site, nextId(), type, options_.tf32 ? "true" : "false",
               s.ta ? "true" : "false", s.tb ? "true" : "false", mm, s.n, s.k, count, sa, sb,
               sc, alpha, beta, pa, pb, pc, wsArg)
        .str();
  };
  // The product cuBLASLt runs: a batch folded into M shows as one (B*M)xNxK
  // product, a real batch as "x<count>".
  bool folded = s.foldsBatchIntoM();
  std::string shape =
      llvm::formatv("{0}x{1}x{2}{3}", folded ? s.batchCount * s.m : s.m, s.n, s.k,
                    !folded && s.batchCount > 1 ? " x" + std::to_string(s.batchCount)
                                                : std::string())
          .str() +
      (fp8.marked ? " (not fp8: " + fp8.declined + ")" : std::string());
  if (folded) {
    launch(os, g, "cublasLtMatmul",
           call(s.batchCount * s.m, 1, 0, 0, 0, name(g.getA()), name(g.getB()),
                name(g.getOut())),
           shape, work, bytes, LaunchCheck::InCall);
    return success();
  }
  // Both operands batched, or one shared by the whole batch (a resampling
  // matrix times every image's rows: batch stride 0; the folded case above
  // covers a shared b without transpose_a): one strided-batched product.
  if (s.stridedBatch()) {
    launch(os, g, "cublasLtMatmul",
           call(s.m, s.batchCount, s.aBatch == 1 ? 0 : s.m * s.k,
                s.bBatch == 1 ? 0 : s.k * s.n, s.m * s.n, name(g.getA()), name(g.getB()),
                name(g.getOut())),
           shape, work, bytes, LaunchCheck::InCall);
    return success();
  }
  // Broadcast batch dims otherwise (rare: a partly shared operand of rank >
  // 2): one product per batch element.
  LoopNest nest = s.batchLoop();
  std::string loop;
  for (auto [d, size] : llvm::enumerate(nest.sizes))
    loop += llvm::formatv("for (int64_t i{0} = 0; i{0} < {1}; ++i{0}) ", d, size).str();
  std::string inner = call(s.m, 1, 0, 0, 0, name(g.getA()) + " + " + nest.index(0),
                           name(g.getB()) + " + " + nest.index(1),
                           name(g.getOut()) + " + " + nest.index(2));
  // The plan declaration stays outside the loop.
  size_t split = inner.find('\n');
  launch(os, g, "cublasLtMatmul",
         inner.substr(0, split + 1) + "  " + loop + "{\n  " + inner.substr(split + 3) +
             "\n  }",
         shape, work, bytes, LaunchCheck::InCall);
  return success();
}

// out (M, N) = act(op(a) x op(b) + bias) [+ residual], aux = the
// pre-activation, or op(a) x op(b) + residual without a bias: one cuBLASLt
// product with its epilogue
// (tcc_cuda_host::gemm_epilogue).
LogicalResult CudaStepEmitter::emitGemmEpilogue(kern::GemmEpilogueOp g,
                                                llvm::raw_ostream &os, double &flops) {
  Fp8Gemm fp8 = Fp8Gemm::of(g);
  if (fp8.runs())
    return emitGemmFp8(g, fp8, os, flops);
  MemRefType a = mrt(g.getA()), out = mrt(g.getOut());
  int64_t m = out.getDimSize(0), n = out.getDimSize(1);
  int64_t k = a.getDimSize(g.getTransposeA() ? 0 : 1);
  double work = 2.0 * m * n * k;
  flops += work;
  StringRef act = g.getActivation();
  if (act == "gelu_erf")
    return g.emitError("cuda: cuBLASLt has no erf-GELU epilogue (tg-fuse-matmul-"
                       "epilogue fuses only the tanh form for cuda)");
  if (act != "none" && g.getResidual())
    return g.emitError("cuda: cuBLASLt adds the residual (C) before the activation");
  if (m * n == 0)
    return success();
  auto typeName = [](Type et) {
    return et.isF64() ? "tcc_cuda_host::kGemmF64"
           : et.isBF16() ? "tcc_cuda_host::kGemmBF16"
           : et.isF16()  ? "tcc_cuda_host::kGemmF16"
                         : "tcc_cuda_host::kGemmF32";
  };
  // The host code's epilogue, and what it is to the CUTLASS choice.
  using tcc_cutlass::Sm90Product;
  auto [epilogue, product] =
      !g.getBias()    ? std::pair{"tcc_cuda_host::kEpilogueNone", Sm90Product::kOther}
      : act == "none" ? std::pair{"tcc_cuda_host::kEpilogueBias", Sm90Product::kBias}
      : g.getAux()    ? std::pair{"tcc_cuda_host::kEpilogueGeluAuxBias", Sm90Product::kGeluAuxBias}
                      : std::pair{"tcc_cuda_host::kEpilogueGeluBias", Sm90Product::kOther};
  auto ptr = [&](Value v) { return v ? name(v) : std::string("nullptr"); };
  // The test the host code applies at run time (host_support/gemm.h
  // cutlass_epilogue_for; alignment is checked there).
  if (tcc_cutlass::sm90_epilogue_for(product, sm90Type(a.getElementType()),
                                     sm90Type(out.getElementType()), g.getTransposeA(),
                                     g.getTransposeB(), n, k,
                                     static_cast<bool>(g.getResidual())) >= 0)
    ++cutlassSm90Sites_;
  int site = gemmSites_++;
  std::string call =
      llvm::formatv(
          "static tcc_cuda_host::GemmPlan tcc_gemm_plan_{0};\n"
          "  if (int32_t rc = tcc_cuda_host::gemm_epilogue(tcc_gemm_plan_{0}, s, {1}, {2}, "
          "{3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}, "
          "ws + tcc_gemm_workspace_offset, tcc_gemm_workspace_bytes)) return rc;",
          site, nextId(), typeName(a.getElementType()), typeName(out.getElementType()),
          options_.tf32 ? "true" : "false", g.getTransposeA() ? "true" : "false",
          g.getTransposeB() ? "true" : "false", m, n, k, epilogue, name(g.getA()),
          name(g.getB()), ptr(g.getBias()), ptr(g.getResidual()), name(g.getOut()),
          ptr(g.getAux()))
          .str();
  double bytes = bufferBytes(a) + bufferBytes(mrt(g.getB())) + bufferBytes(out) +
                 (g.getResidual() ? bufferBytes(out) : 0) +
                 (g.getAux() ? bufferBytes(mrt(g.getAux())) : 0);
  std::string kind = g.getBias() ? "cublasLtMatmul+bias" : "cublasLtMatmul";
  if (act != "none")
    kind += g.getAux() ? "+gelu_aux" : "+gelu";
  if (g.getResidual())
    kind += "+residual";
  launch(os, g, kind, call, llvm::formatv("{0}x{1}x{2}", m, n, k).str(), work, bytes,
         LaunchCheck::InCall);
  return success();
}

// out (M, N) = gelu'(pre) * (op(a) x op(b)): cuBLASLt's DGELU epilogue
// reading pre as its aux matrix.
LogicalResult CudaStepEmitter::emitGemmDgelu(kern::GemmDgeluOp g, llvm::raw_ostream &os,
                                             double &flops) {
  MemRefType a = mrt(g.getA()), out = mrt(g.getOut());
  int64_t m = out.getDimSize(0), n = out.getDimSize(1);
  int64_t k = a.getDimSize(g.getTransposeA() ? 0 : 1);
  double work = 2.0 * m * n * k;
  flops += work;
  if (g.getApproximate() != "tanh")
    return g.emitError("cuda: cuBLASLt has no erf-GELU derivative epilogue "
                       "(tg-fuse-matmul-epilogue fuses only the tanh form for cuda)");
  if (m * n == 0)
    return success();
  Type et = out.getElementType();
  const char *type = et.isF64()    ? "tcc_cuda_host::kGemmF64"
                     : et.isBF16() ? "tcc_cuda_host::kGemmBF16"
                     : et.isF16()  ? "tcc_cuda_host::kGemmF16"
                                   : "tcc_cuda_host::kGemmF32";
  // host_support/gemm.h cutlass_epilogue_for (alignment is checked there).
  if (tcc_cutlass::sm90_epilogue_for(tcc_cutlass::Sm90Product::kDGelu,
                                     sm90Type(a.getElementType()), sm90Type(et),
                                     g.getTransposeA(), g.getTransposeB(), n, k,
                                     /*residual=*/false) >= 0)
    ++cutlassSm90Sites_;
  int site = gemmSites_++;
  std::string call =
      llvm::formatv(
          "static tcc_cuda_host::GemmPlan tcc_gemm_plan_{0};\n"
          "  if (int32_t rc = tcc_cuda_host::gemm_epilogue(tcc_gemm_plan_{0}, s, {1}, {2}, "
          "{2}, {3}, {4}, {5}, {6}, {7}, {8}, tcc_cuda_host::kEpilogueDGelu, {9}, {10}, "
          "nullptr, nullptr, {11}, const_cast<void *>(static_cast<const void *>({12})), "
          "ws + tcc_gemm_workspace_offset, tcc_gemm_workspace_bytes)) return rc;",
          site, nextId(), type, options_.tf32 ? "true" : "false",
          g.getTransposeA() ? "true" : "false", g.getTransposeB() ? "true" : "false", m, n, k,
          name(g.getA()), name(g.getB()), name(g.getOut()), name(g.getPre()))
          .str();
  double bytes = bufferBytes(a) + bufferBytes(mrt(g.getB())) + 2.0 * bufferBytes(out);
  launch(os, g, "cublasLtMatmul+dgelu", call, llvm::formatv("{0}x{1}x{2}", m, n, k).str(),
         work, bytes, LaunchCheck::InCall);
  return success();
}

// out (M, N) = op(a) x b and bias_grad (N) = the sums of b over its K rows:
// cuBLASLt's BGRADA epilogue (b is cuBLAS's A), the bias pointer written.
LogicalResult CudaStepEmitter::emitGemmBiasGrad(kern::GemmBiasGradOp g,
                                                llvm::raw_ostream &os, double &flops) {
  MemRefType a = mrt(g.getA()), b = mrt(g.getB()), out = mrt(g.getOut());
  int64_t m = out.getDimSize(0), n = out.getDimSize(1), k = b.getDimSize(0);
  double work = 2.0 * m * n * k;
  flops += work;
  Type et = out.getElementType();
  if (et.isF64())
    return g.emitError("cuda: cuBLASLt's bias-gradient epilogue takes 16-bit and f32 "
                       "products (tg-fuse-matmul-epilogue fuses no f64 product for cuda)");
  if (m * n == 0)
    return success();
  const char *type = et.isBF16()  ? "tcc_cuda_host::kGemmBF16"
                     : et.isF16() ? "tcc_cuda_host::kGemmF16"
                                  : "tcc_cuda_host::kGemmF32";
  int site = gemmSites_++;
  std::string call =
      llvm::formatv(
          "static tcc_cuda_host::GemmPlan tcc_gemm_plan_{0};\n"
          "  if (int32_t rc = tcc_cuda_host::gemm_epilogue(tcc_gemm_plan_{0}, s, {1}, {2}, "
          "{2}, {3}, {4}, false, {5}, {6}, {7}, tcc_cuda_host::kEpilogueBGradB, {8}, {9}, "
          "{10}, nullptr, {11}, nullptr, ws + tcc_gemm_workspace_offset, "
          "tcc_gemm_workspace_bytes)) return rc;",
          site, nextId(), type, options_.tf32 ? "true" : "false",
          g.getTransposeA() ? "true" : "false", m, n, k, name(g.getA()), name(g.getB()),
          name(g.getBiasGrad()), name(g.getOut()))
          .str();
  double bytes = bufferBytes(a) + bufferBytes(b) + bufferBytes(out) +
                 bufferBytes(mrt(g.getBiasGrad()));
  launch(os, g, "cublasLtMatmul+bgrad", call, llvm::formatv("{0}x{1}x{2}", m, n, k).str(),
         work, bytes, LaunchCheck::InCall);
  return success();
}

} // namespace tcc::codegen::cuda
