// CPU code for the matrix products: kern.gemm through BLAS (one call, or a
// loop over broadcast batches spread over threads when there are many; bf16
// and f16 through float copies), and the fused GEMM epilogues as one call of
// the prelude each (cpu/cpu_gemm_epilogue.h).
#include "compiler/codegen/cpu/CpuGemm.h"

#include "compiler/codegen/common/CTypes.h"
#include "compiler/codegen/common/LoopLayout.h"
#include "compiler/codegen/common/ScalarPrinter.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen {

namespace {
bool isHalf(Type et) { return et.isBF16() || et.isF16(); }
} // namespace

// out (batch..., M, N) = op(a) x op(b) per batch, batch dims broadcast.
LogicalResult emitCpuGemm(kern::GemmOp g, const ValueNames &names, llvm::raw_ostream &os,
                          double &flops) {
  GemmShape s = GemmShape::of(g);
  Type et = mrt(g.getOut()).getElementType();
  double work = s.flops();
  flops += work;
  std::string alpha = floatLiteral(g.getAlpha().convertToDouble(), et);
  std::string beta = floatLiteral(g.getBeta().convertToDouble(), et);
  const char *tA = s.ta ? "true" : "false", *tB = s.tb ? "true" : "false";
  if (isHalf(et)) {
    // bf16 / f16: one product at a time through float copies.
    auto call = [&](int64_t m, const std::string &a, const std::string &b,
                    const std::string &c) {
      return llvm::formatv("if (int32_t rc = tcc_cpu::gemm_via_float({0}, {1}, {2}, {3}, {4}, "
                           "{5}, {6}, {7}, {8}, {9})) return rc; // out of memory",
                           tA, tB, m, s.n, s.k, alpha,
                           familyPointer(et, a, false, CodeTarget::Cpu),
                           familyPointer(et, b, false, CodeTarget::Cpu), beta,
                           familyPointer(et, c, true, CodeTarget::Cpu))
          .str();
    };
    if (s.foldsBatchIntoM()) {
      os << "  " << call(s.batchCount * s.m, names(g.getA()), names(g.getB()), names(g.getOut()))
          << "\n";
      return success();
    }
    LoopNest nest = s.batchLoop();
    nest.emit(os,
              call(s.m, names(g.getA()) + " + " + nest.index(0),
                   names(g.getB()) + " + " + nest.index(1),
                   names(g.getOut()) + " + " + nest.index(2)),
              0);
    return success();
  }
  if (s.foldsBatchIntoM()) {
    os << llvm::formatv("  tcc_cpu::gemm({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9});\n",
                         tA, tB, s.batchCount * s.m, s.n, s.k, alpha, names(g.getA()),
                         names(g.getB()), beta, names(g.getOut()));
    return success();
  }
  LoopNest nest = s.batchLoop();
  // Many products at once: spread the batch over threads, one
  // single-threaded product each; otherwise each product splits itself.
  bool parallelBatch = s.batchCount >= 2 && work >= kParallelWork * 8;
  std::string a0 = names(g.getA()) + " + " + nest.index(0);
  std::string b0 = names(g.getB()) + " + " + nest.index(1);
  std::string c0 = names(g.getOut()) + " + " + nest.index(2);
  std::string call =
      parallelBatch
          ? llvm::formatv("tcc_cpu::gemm_serial({0}, {1}, {2}, {3}, {4}, {5}, "
                          "{6}, {7}, {8}, {9}, {10}, {11}, {12});",
                          tA, tB, s.m, s.n, s.k, alpha, a0, s.ta ? s.m : s.k, b0,
                          s.tb ? s.k : s.n, beta, c0, s.n)
                .str()
          : llvm::formatv("tcc_cpu::gemm({0}, {1}, {2}, {3}, {4}, {5}, {6}, "
                          "{7}, {8}, {9});",
                          tA, tB, s.m, s.n, s.k, alpha, a0, b0, beta, c0)
                .str();
  nest.emit(os, call, parallelBatch ? work : 0);
  return success();
}

// out = act(op(a) x op(b) + bias) [+ residual], aux = the pre-activation
// (tcc_cpu::gemm_epilogue, cpu_gemm_epilogue.h).
LogicalResult emitCpuGemmEpilogue(kern::GemmEpilogueOp g, const ValueNames &names,
                                llvm::raw_ostream &os, double &flops) {
  MemRefType out = mrt(g.getOut());
  Type p = mrt(g.getA()).getElementType(), o = out.getElementType();
  int64_t m = out.getDimSize(0), n = out.getDimSize(1);
  int64_t k = mrt(g.getA()).getDimSize(g.getTransposeA() ? 0 : 1);
  flops += 2.0 * m * n * k;
  StringRef act = g.getActivation();
  const char *actName = act == "gelu_tanh" ? "tcc_cpu::kActGeluTanh"
                        : act == "gelu_erf" ? "tcc_cpu::kActGeluErf"
                                            : "tcc_cpu::kActNone";
  auto ptr = [&](Value v, Type et, bool written) {
    if (!v)
      return "static_cast<" + familyElementType(et, CodeTarget::Cpu) + " *>(nullptr)";
    return familyPointer(et, names(v), written, CodeTarget::Cpu);
  };
  os << llvm::formatv(
      "  if (int32_t rc = tcc_cpu::gemm_epilogue({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
      "{8}, {9}, {10}, {11})) return rc; // out of memory\n",
      g.getTransposeA() ? "true" : "false", g.getTransposeB() ? "true" : "false", m, n,
      k, ptr(g.getA(), p, false), ptr(g.getB(), p, false), ptr(g.getBias(), o, false),
      ptr(g.getResidual(), o, false), actName, ptr(g.getOut(), o, true),
      ptr(g.getAux(), p, true));
  return success();
}

// out = gelu'(pre) * (op(a) x op(b)) (tcc_cpu::gemm_dgelu).
LogicalResult emitCpuGemmDgelu(kern::GemmDgeluOp g, const ValueNames &names,
                             llvm::raw_ostream &os, double &flops) {
  MemRefType out = mrt(g.getOut());
  Type p = out.getElementType();
  int64_t m = out.getDimSize(0), n = out.getDimSize(1);
  int64_t k = mrt(g.getA()).getDimSize(g.getTransposeA() ? 0 : 1);
  flops += 2.0 * m * n * k;
  os << llvm::formatv(
      "  if (int32_t rc = tcc_cpu::gemm_dgelu({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, "
      "{9})) return rc; // out of memory\n",
      g.getTransposeA() ? "true" : "false", g.getTransposeB() ? "true" : "false", m, n, k,
      familyPointer(p, names(g.getA()), false, CodeTarget::Cpu),
      familyPointer(p, names(g.getB()), false, CodeTarget::Cpu),
      familyPointer(p, names(g.getPre()), false, CodeTarget::Cpu),
      g.getApproximate() == "tanh" ? "true" : "false",
      familyPointer(p, names(g.getOut()), true, CodeTarget::Cpu));
  return success();
}

// out = op(a) x b, bias_grad = the sums of b over its rows
// (tcc_cpu::gemm_bias_grad).
LogicalResult emitCpuGemmBiasGrad(kern::GemmBiasGradOp g, const ValueNames &names,
                                llvm::raw_ostream &os, double &flops) {
  MemRefType out = mrt(g.getOut()), b = mrt(g.getB());
  Type p = out.getElementType();
  int64_t m = out.getDimSize(0), n = out.getDimSize(1), k = b.getDimSize(0);
  flops += 2.0 * m * n * k + static_cast<double>(k) * n;
  os << llvm::formatv(
      "  if (int32_t rc = tcc_cpu::gemm_bias_grad({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7})) "
      "return rc; // out of memory\n",
      g.getTransposeA() ? "true" : "false", m, n, k,
      familyPointer(p, names(g.getA()), false, CodeTarget::Cpu),
      familyPointer(p, names(g.getB()), false, CodeTarget::Cpu),
      familyPointer(p, names(g.getOut()), true, CodeTarget::Cpu),
      familyPointer(p, names(g.getBiasGrad()), true, CodeTarget::Cpu));
  return success();
}

} // namespace tcc::codegen
