// trun --profile across ranks: how a step's collectives used the time.
//
// The NCCL back end records CUDA events around each collective on the
// communication stream and around each wait of the step stream for them
// (RankGroup::SetCommProfiling). Per rank and step:
//
//   comm       the communication stream busy with the step's collectives
//   exposed    the step stream stopped, waiting for them
//   overlapped comm - exposed: communication hidden behind kernels
//   compute    the step's time - exposed
//
// Every rank's sums are gathered to rank 0, which prints one row per rank.
#ifndef TCC_RUNTIME_TRUN_DIST_COMMPROFILE_H
#define TCC_RUNTIME_TRUN_DIST_COMMPROFILE_H

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tcc::trun {

// One rank's sums over the profiled steps.
struct CommProfile {
  double steps = 0;       // profiled steps
  double step_ms = 0;     // their wall time (trun's clock, from one step's start to the next)
  double collectives = 0; // the step's collective calls (a bucket is one)
  double bytes = 0;       // bytes of the buffers given to them
  double comm_ms = 0;     // the communication stream busy with them
  double exposed_ms = 0;  // the step stream waiting for them

  // As doubles, for RankGroup::AllGather (fixed size on every rank).
  std::string Serialize() const;
  static CommProfile Deserialize(const std::string &bytes);
};

// The table, per step (sums / steps), one row per rank. `backend` names
// the back end ("NCCL 2.28.3").
void PrintCommProfile(const std::vector<CommProfile> &ranks, const std::string &backend,
                      std::ostream &out);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DIST_COMMPROFILE_H
