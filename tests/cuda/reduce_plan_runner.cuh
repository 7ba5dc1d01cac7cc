// Runs a reduction plan (compiler/codegen/cuda/ReducePlan.h) the way the
// CUDA code generator's kern.reduce wrapper does (ReductionKernels.cpp):
// each phase one prelude launcher, partials in `scratch` (at least
// plan.scratchBytes(sizeof(acc_t<T>)) bytes, 256-byte aligned), a mean's
// earlier phases summing and the last dividing by plan.count. For the
// kernel test and bench/reduce; include after the prelude.
#ifndef TCC_TESTS_CUDA_REDUCE_PLAN_RUNNER_CUH
#define TCC_TESTS_CUDA_REDUCE_PLAN_RUNNER_CUH

#include "compiler/codegen/cuda/ReducePlan.h"

namespace tcc_test {

template <class In, class Out, int Kind>
void runReducePhase(const tcc::codegen::cuda::ReducePhase &p, const In *src, Out *dst,
                    int64_t count, void *fallback, cudaStream_t s) {
  if (p.cluster > 1)
    tcc_cuda::launch_reduce_phase_middle_cluster<In, Out, Kind>(
        src, dst, p.outer, p.reduced, p.inner, p.cluster, count, fallback, s);
  else if (p.strided)
    tcc_cuda::launch_reduce_phase_strided<In, Out, Kind>(src, dst, p.outer, p.reduced, p.inner,
                                                         p.cols, count, s);
  else if (p.rows)
    tcc_cuda::launch_reduce_phase_rows<In, Out, Kind>(src, dst, p.outer, p.reduced, p.segs,
                                                      p.chunk, count, s);
  else
    tcc_cuda::launch_reduce_phase_middle<In, Out, Kind>(src, dst, p.outer, p.reduced, p.inner,
                                                        p.segs, p.chunk, count, s);
}

template <class In, class Out>
void runReducePhaseKind(const tcc::codegen::cuda::ReducePhase &p, int kind, const void *src,
                        void *dst, int64_t count, void *fallback, cudaStream_t s) {
  const In *i = static_cast<const In *>(src);
  Out *o = static_cast<Out *>(dst);
  if (kind == 0)
    runReducePhase<In, Out, 0>(p, i, o, count, fallback, s);
  else if (kind == 1)
    runReducePhase<In, Out, 1>(p, i, o, count, fallback, s);
  else
    runReducePhase<In, Out, 2>(p, i, o, count, fallback, s);
}

template <class T, int Kind>
void runReducePlan(const tcc::codegen::cuda::ReducePlan &plan, const T *in, T *out,
                   char *scratch, cudaStream_t s) {
  using A = tcc_cuda::acc_t<T>;
  for (const tcc::codegen::cuda::ReducePhase &p : plan.phases) {
    const int kind = p.finishes ? Kind : (Kind == 1 ? 0 : Kind);
    const void *src = p.src < 0 ? static_cast<const void *>(in)
                                : scratch + plan.slotOffset(p.src, sizeof(A));
    void *dst = p.dst < 0 ? static_cast<void *>(out) : scratch + plan.slotOffset(p.dst, sizeof(A));
    void *fallback = p.fallback < 0 ? nullptr : scratch + plan.slotOffset(p.fallback, sizeof(A));
    if (p.src < 0 && p.dst < 0)
      runReducePhaseKind<T, T>(p, kind, src, dst, plan.count, fallback, s);
    else if (p.src < 0)
      runReducePhaseKind<T, A>(p, kind, src, dst, plan.count, fallback, s);
    else if (p.dst < 0)
      runReducePhaseKind<A, T>(p, kind, src, dst, plan.count, fallback, s);
    else
      runReducePhaseKind<A, A>(p, kind, src, dst, plan.count, fallback, s);
  }
}

} // namespace tcc_test

#endif // TCC_TESTS_CUDA_REDUCE_PLAN_RUNNER_CUH
