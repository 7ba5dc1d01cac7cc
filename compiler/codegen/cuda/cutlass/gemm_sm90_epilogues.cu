// CUTLASS 3.x Hopper GEMMs with fused epilogues: the instances that
// gemm_sm90_epilogues.h declares. nvcc -std=c++20 for sm_90a only (wgmma
// and TMA) with -DNDEBUG (an assert in the mainloop is a call that makes
// ptxas serialize the wgmma pipeline). Each instance costs ~1-2 minutes of
// nvcc: -DTCC_CUTLASS_INSTANCE=i builds instance i alone (the driver runs
// one nvcc per instance, in parallel, and caches the objects); without it
// every instance is built (tests/cuda/cutlass_gemm_test.cu).
//
// Shapes in CUTLASS's (transposed) terms: M' = tcc's n (features),
// N' = tcc's m (rows, e.g. B*T tokens), K. D' and aux' are column-major
// with leading dimension M' (= tcc's row-major D and aux).
//
// Measured on the H200 (2026-12-02, tests/cuda/cutlass_gemm_test --bench):
// another epilogue, DGELU with the bias gradient as a per-row reduction of
// D' (LinCombDeEltActDePerRowBias), ran at 0.19-0.22 ms on GPT-2's c_fc
// backward against 0.131 ms for cuBLASLt's DGELU plus 0.039 ms for its
// BGRADB on the weight gradient, so it is not built.
#ifndef TCC_CUTLASS_GEMM_SM90_EPILOGUES_H
#include "compiler/codegen/cuda/cutlass/gemm_sm90_epilogues.h"
#endif

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include <type_traits>

namespace tcc_cutlass {
namespace {

using namespace cute;
using Bf16 = cutlass::bfloat16_t;
using ColumnMajor = cutlass::layout::ColumnMajor;
using RowMajor = cutlass::layout::RowMajor;

// Tile (M' x N' x K), cluster (M' x N'), and the warp schedule: ping-pong
// (two consumer warpgroups on alternate tiles, one's epilogue under the
// other's products) or cooperative (both on one tile; see the header for
// why none is built).
template <int TM, int TN, int CM, int CN, bool Pingpong> struct Config {
  using Tile = Shape<Int<TM>, Int<TN>, _64>;
  using Cluster = Shape<Int<CM>, Int<CN>, _1>;
  using KernelSchedule =
      std::conditional_t<Pingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                         cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
  using EpilogueSchedule = std::conditional_t<Pingpong, cutlass::epilogue::TmaWarpSpecialized,
                                              cutlass::epilogue::TmaWarpSpecializedCooperative>;
};
// In sm90_config_name's order.
using Config0 = Config<128, 128, 2, 1, true>;

// bf16 operands, fp32 accumulation, C (void: none read) and D of the given
// types, fusion `Fusion`.
template <class Cfg, class LayoutA, class LayoutB, class Fusion, class ElementC = void,
          class ElementD = Bf16>
struct Kernel {
  using FusionOp = Fusion;
  using C = ElementC;
  using D = ElementD;
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<ElementD>::value;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Cfg::Tile,
      typename Cfg::Cluster, cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      ElementC, ColumnMajor, kAlignD, ElementD, ColumnMajor, kAlignD,
      typename Cfg::EpilogueSchedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, LayoutA, 8, Bf16, LayoutB, 8,
      float, typename Cfg::Tile, typename Cfg::Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      typename Cfg::KernelSchedule>::CollectiveOp;
  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

// aux' = acc + bias (per row M'), D' = gelu_tanh(aux').
using GeluAuxBias =
    cutlass::epilogue::fusion::LinCombPerRowBiasEltActAux<ColumnMajor,
                                                          cutlass::epilogue::thread::GELU_taylor,
                                                          Bf16, float, Bf16, Bf16, void>;
// D' = gelu_tanh'(aux') * acc.
using DGelu =
    cutlass::epilogue::fusion::LinCombDeEltAct<ColumnMajor, cutlass::epilogue::thread::dGELU,
                                               Bf16, float, Bf16, void>;
// D' = C' + (acc + bias (per row M')), all fp32 (beta = 1).
using BiasResidualF32 = cutlass::epilogue::fusion::LinCombPerRowBias<float, float, float, float>;

// tcc NN: B (k x n) row-major is A' (n x k) column-major; A (m x k)
// row-major is B' (k x m) column-major.
template <class Cfg> using GeluAuxBiasKernel = Kernel<Cfg, ColumnMajor, ColumnMajor, GeluAuxBias>;
// tcc NT: B (n x k) row-major is A' (n x k) row-major.
template <class Cfg> using DGeluKernel = Kernel<Cfg, RowMajor, ColumnMajor, DGelu>;
// tcc NN, fp32 C (the residual) and D.
template <class Cfg>
using BiasResidualF32Kernel =
    Kernel<Cfg, ColumnMajor, ColumnMajor, BiasResidualF32, float, float>;

// tcc's row-major (m x n) product as CUTLASS's (n x m) column-major one,
// with the epilogue's aux (and bias) pointers.
template <class K> typename K::Gemm::Arguments arguments(const Sm90GemmArgs &a) {
  using GemmKernel = typename K::GemmKernel;
  int Mp = static_cast<int>(a.n), Np = static_cast<int>(a.m), Kp = static_cast<int>(a.k);
  auto strideA = cutlass::make_cute_packed_stride(typename GemmKernel::StrideA{}, {Mp, Kp, 1});
  auto strideB = cutlass::make_cute_packed_stride(typename GemmKernel::StrideB{}, {Np, Kp, 1});
  auto strideD = cutlass::make_cute_packed_stride(typename GemmKernel::StrideD{}, {Mp, Np, 1});
  constexpr bool readsC = !std::is_void_v<typename K::C>;
  typename K::Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {Mp, Np, Kp, 1},
      // CUTLASS's A is tcc's B (transposed), its B tcc's A.
      {static_cast<const Bf16 *>(a.B), strideA, static_cast<const Bf16 *>(a.A), strideB},
      {{}, nullptr, strideD, static_cast<typename K::D *>(a.D), strideD}};
  if constexpr (readsC)
    args.epilogue.ptr_C = static_cast<const typename K::C *>(a.residual);
  auto &f = args.epilogue.thread;
  f.alpha = 1.0f;
  f.beta = readsC ? 1.0f : 0.0f;
  if constexpr (!std::is_same_v<typename K::FusionOp, BiasResidualF32>) {
    f.aux_ptr = static_cast<Bf16 *>(a.aux);
    f.dAux = cutlass::make_cute_packed_stride(decltype(f.dAux){}, {Mp, Np, 1});
  }
  if constexpr (std::is_same_v<typename K::FusionOp, GeluAuxBias>)
    f.bias_ptr = static_cast<const Bf16 *>(a.bias);
  if constexpr (std::is_same_v<typename K::FusionOp, BiasResidualF32>)
    f.bias_ptr = static_cast<const float *>(a.bias);
  return args;
}

template <class K>
int run(const Sm90GemmArgs &a, size_t *workspace_needed, const char **why) {
  typename K::Gemm::Arguments args = arguments<K>(a);
  size_t workspace = K::Gemm::get_workspace_size(args);
  if (workspace_needed) {
    *workspace_needed = workspace;
    return 0;
  }
  typename K::Gemm gemm;
  cutlass::Status s = gemm.can_implement(args);
  if (s == cutlass::Status::kSuccess && workspace > a.workspace_bytes) {
    *why = "the workspace is smaller than the kernel needs";
    return 1;
  }
  if (s == cutlass::Status::kSuccess)
    s = gemm.initialize(args, a.workspace, a.stream);
  if (s == cutlass::Status::kSuccess)
    s = gemm.run(a.stream);
  if (s != cutlass::Status::kSuccess) {
    *why = cutlass::cutlassGetStatusString(s);
    return 1;
  }
  return 0;
}

} // namespace

#define TCC_CUTLASS_SM90_INSTANCE(index, name, Kernel)                                         \
  int name(const Sm90GemmArgs &args, size_t *workspace_needed, const char **why) {             \
    return run<Kernel>(args, workspace_needed, why);                                           \
  }
#if !defined(TCC_CUTLASS_INSTANCE) || TCC_CUTLASS_INSTANCE == 0
TCC_CUTLASS_SM90_INSTANCE(0, sm90_gelu_aux_bias_bf16_c0, GeluAuxBiasKernel<Config0>)
#endif
#if !defined(TCC_CUTLASS_INSTANCE) || TCC_CUTLASS_INSTANCE == 1
TCC_CUTLASS_SM90_INSTANCE(1, sm90_dgelu_bf16_c0, DGeluKernel<Config0>)
#endif
#if !defined(TCC_CUTLASS_INSTANCE) || TCC_CUTLASS_INSTANCE == 2
TCC_CUTLASS_SM90_INSTANCE(2, sm90_bias_residual_f32_c0, BiasResidualF32Kernel<Config0>)
#endif
#undef TCC_CUTLASS_SM90_INSTANCE

} // namespace tcc_cutlass
