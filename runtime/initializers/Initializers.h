// Parameter initialization from the seeded specs in the step descriptor:
// the values trun trains from and `tcc run` interprets with (the library
// tcc_initializers, shared by both, links neither trun nor MLIR).
#ifndef TCC_RUNTIME_INITIALIZERS_INITIALIZERS_H
#define TCC_RUNTIME_INITIALIZERS_INITIALIZERS_H

#include "tcc/step_abi.h"

#include "absl/status/status.h"

#include <cstdint>
#include <string>

namespace tcc::trun {

// "zeros", "ones", "normal", "uniform" or "constant" for a TCC_INIT_* kind; "init(N)"
// for an unknown one.
std::string InitKindName(int32_t kind);

// Element `index` of tensor `t` for run seed `run_seed` (tcc/counter_rng.h):
//   key = stream_key(run_seed, TCC_RNG_DOMAIN_PARAM_INIT, t.init_seed)
//   zeros: 0; ones: 1; constant: float(scale)
//   uniform: u = unit_double(key_bits(key, index));
//            float(scale * (2u - 1)), nudged below scale if rounding hits it
//   normal:  Box-Muller on the pair p = index / 2:
//            u1 = unit_double(key_bits(key, 2p)),
//            u2 = unit_double(key_bits(key, 2p+1))
//            r = sqrt(-2 ln(1 - u1)), theta = 2 pi u2
//            float(scale * (index even ? r cos(theta) : r sin(theta)))
float InitialValue(const tcc_tensor_desc &t, uint64_t run_seed, int64_t index);

// Fills `data` (t.size_bytes) with InitialValue for every element. Only f32
// tensors are supported; other dtypes are an error naming the tensor.
// `first_index`: the flattened index of data[0] in the tensor `t` describes
// (a ZeRO-3 rank's shard starts at rank * its elements). `threads`: at most
// this many threads fill it, in chunks of 2^20 elements (0:
// InitializerThreads()); the values are the same for any count.
absl::Status InitializeTensor(const tcc_tensor_desc &t, uint64_t run_seed,
                              void *data, int64_t first_index = 0, int threads = 0);

// The threads InitializeTensor takes by default: OMP_NUM_THREADS when it is
// one positive count (trun sets it before a step loads: --threads, else the
// CPUs it may use under its cgroup's CPU quota), else the CPUs in this
// process's affinity mask; at most 64.
int InitializerThreads();

} // namespace tcc::trun

#endif // TCC_RUNTIME_INITIALIZERS_INITIALIZERS_H
