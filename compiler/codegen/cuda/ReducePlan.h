// How a CUDA step reduces a tensor over any set of axes: a short sequence of
// phases, each one of the prelude's two coalesced shapes
// (launch_reduce_phase_rows / launch_reduce_phase_middle), with partials in
// the step's workspace between them. Plain C++ (no MLIR, no CUDA), so the
// code generator, the kernel test and the reduction benchmark share it.
//
// The input is viewed as runs of neighbouring dimensions, alternately kept
// and reduced (size-1 dimensions dropped): batch norm's statistics over
// (N, C, H, W) are runs [N reduced][C kept][H*W reduced]. Each phase folds
// one reduced run away (or shortens it, when a long reduction with few
// outputs is split over more blocks):
//   rows:   the innermost run is reduced and long (>= kRowsMinCols), or is
//           the last reduced run: out (rows) = reduce in (rows, cols);
//   middle: another reduced run, the longest: out (outer, inner) = reduce
//           in (outer, reduced, inner), inner the contiguous rest, so loads
//           are coalesced however the axes interleave.
//   strided: first, when the innermost run is reduced, a kept run is
//           before it and a reduced run before that, with enough outputs
//           to fill the GPU (kStridedMinOutputs) and rows of whole 16-byte
//           loads: both reduced runs at once, out (outer, kept) = reduce in
//           (outer, reduced, kept, cols), in one launch
//           (launch_reduce_phase_strided): batch norm's statistics over
//           (N, C, H, W) with >= 128 channels.
// A finishing middle phase with too few outputs and a long reduction runs
// as clusters of up to kMaxCluster blocks sharing each tile (one launch, no
// partials in memory), when its 128-byte tiles give the clusters at least
// kClusterMinBlocks blocks. Any other phase with too few independent
// outputs to fill the GPU (fewer than kMinParallel rows, or
// kMinParallelMiddle tiles of one 128-byte line of columns, the narrowest
// launch_reduce_phase_middle makes) and a long reduction splits it into
// segments (deterministic two-level partials, no atomics).
//
// Example: (128, 64, 32, 32) over {0, 2, 3} (batch norm, 16 MiB of bf16):
//   rows   (8192 rows x 1024)      -> partial (128, 64)  [acc type]
//   middle (1 x 128 x 64)          -> out (64), finished (mean / 131072)
#ifndef TCC_COMPILER_CODEGEN_CUDA_REDUCEPLAN_H
#define TCC_COMPILER_CODEGEN_CUDA_REDUCEPLAN_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tcc::codegen::cuda {

struct ReducePhase {
  bool rows = false;            // launch_reduce_phase_rows, else _middle
  bool strided = false;         // launch_reduce_phase_strided (rows false)
  int64_t outer = 1;            // rows: the row count
  int64_t reduced = 1;          // rows: cols
  int64_t inner = 1;            // rows: 1; strided: the kept run
  int64_t cols = 1;             // strided: the innermost (reduced) run
  // middle, finishing: > 1 splits `reduced` over this many blocks of one
  // thread-block cluster, combined in the launch
  // (launch_reduce_phase_middle_cluster); `fallback` is the slot its
  // partials use where clusters are not available.
  int64_t cluster = 1;
  int fallback = -1;
  int64_t segs = 1, chunk = 1;  // segs > 1: raw partials over chunks
  bool finishes = false;        // the last phase: writes out, finished
  int src = -1, dst = -1;       // -1: the op's input / output; 0, 1: slots
  int64_t outElements = 0;      // what the phase writes

  // "rows(8192 x 1024)", "middle(1 x 128 x 64, 4 segments of 32)",
  // "middle(1 x 16384 x 768, clusters of 8)", "strided(1 x 128 x 256 x 64)".
  std::string describe() const;
};

struct ReducePlan {
  std::vector<ReducePhase> phases;
  int64_t count = 1;               // input elements per output element
  int64_t slotElements[2] = {0, 0}; // partial slots, in accumulator elements
  // Byte offsets of the slots in the scratch area and its total size, for
  // accumulators of `accBytes` (slots 256-byte aligned).
  int64_t slotOffset(int slot, int64_t accBytes) const;
  int64_t scratchBytes(int64_t accBytes) const;
};

// Runs of (reduced?, size) from the outermost, merged and without size-1
// dimensions: what planReduce takes.
std::vector<std::pair<bool, int64_t>> reduceRuns(const std::vector<int64_t> &shape,
                                                 const std::vector<int64_t> &axes);

// The phases for `runs` (reduceRuns) of elements of `elemBytes` bytes
// (partials: 4, or 8 for doubles); empty runs (a 1-element input) or no
// reduced run give one rows phase of cols 1 (a copy / cast).
ReducePlan planReduce(const std::vector<std::pair<bool, int64_t>> &runs, int64_t elemBytes);

// The thresholds, for the plan's tests and docs.
inline constexpr int64_t kRowsMinCols = 128;   // shorter innermost runs go last
// Rows phases split while fewer than kMinParallel rows (two per SM of
// 132); middle phases while fewer than kMinParallelMiddle tiles of one
// 128-byte line (8 per SM: their blocks are at most 256 threads,
// launch_reduce_phase_middle). bench/reduce builds variants with -D.
#ifndef TCC_REDUCE_MIN_PARALLEL
#define TCC_REDUCE_MIN_PARALLEL 264
#endif
#ifndef TCC_REDUCE_MIN_PARALLEL_MIDDLE
#define TCC_REDUCE_MIN_PARALLEL_MIDDLE 1056
#endif
inline constexpr int64_t kMinParallel = TCC_REDUCE_MIN_PARALLEL;
inline constexpr int64_t kMinParallelMiddle = TCC_REDUCE_MIN_PARALLEL_MIDDLE;
inline constexpr int64_t kSplitMinReduced = 1024; // reductions worth splitting
#ifndef TCC_REDUCE_MAX_CLUSTER
#define TCC_REDUCE_MAX_CLUSTER 8
#endif
inline constexpr int64_t kMaxCluster = TCC_REDUCE_MAX_CLUSTER; // 0 or 1: no clusters
// ... when tiles of one 128-byte line give that many blocks (the
// launcher's TCC_REDUCE_CLUSTER_MIN_BLOCKS: it narrows tiles to a line).
inline constexpr int64_t kClusterMinBlocks = 512;
// Strided phases need this many outputs (about one 1024-thread block per SM
// at most); fewer go down the leading run first, split into segments.
#ifndef TCC_REDUCE_STRIDED_MIN_OUTPUTS
#define TCC_REDUCE_STRIDED_MIN_OUTPUTS 128
#endif
inline constexpr int64_t kStridedMinOutputs = TCC_REDUCE_STRIDED_MIN_OUTPUTS;

} // namespace tcc::codegen::cuda

#endif // TCC_COMPILER_CODEGEN_CUDA_REDUCEPLAN_H
