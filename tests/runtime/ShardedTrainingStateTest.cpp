// ZeRO-3 (tcc compile --shard-parameters N) on the runtime side: a rank's
// shard starts as the whole parameter's values at its elements, the
// descriptor's whole view, its validation, and the whole tensors cut into
// a rank's shards (ShardedTrainingState.h). The exchange between ranks
// (Gather) runs in e2e_data_parallel_cpu's ZeRO-3 part, on MPI ranks.
#include "runtime/trun/train/ShardedTrainingState.h"

#include "runtime/initializers/Initializers.h"
#include "runtime/trun/step/StepDescriptor.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace tcc::trun {
namespace {

using testing::FakeStep;

// FakeStep's w [6, 3] sharded over 2 ranks (9 elements each), b [3] whole
// (2 does not divide 3); no optimizer state.
struct ShardedFakeStep {
  FakeStep step{4, 6, 3};
  std::vector<tcc_tensor_desc> whole;
  std::vector<int64_t> shard_shape{9};
  int32_t no_state_shard_of[1] = {-1};

  ShardedFakeStep() {
    whole = step.params;
    step.params[0] = testing::MakeTensor("w", TCC_DTYPE_F32, shard_shape);
    step.params[0].shape = shard_shape.data();
    step.params[0].init_kind = whole[0].init_kind;
    step.params[0].init_scale = whole[0].init_scale;
    step.params[0].init_seed = whole[0].init_seed;
    step.params[0].trainable = 1;
    step.descriptor.params = step.params.data();
    step.descriptor.shard_optimizer_ranks = 2;
    step.descriptor.optimizer_state_shard_of = no_state_shard_of;
    step.descriptor.shard_parameter_ranks = 2;
    step.descriptor.whole_params = whole.data();
  }
  const tcc_step_descriptor &d() const { return step.descriptor; }
};

TEST(ShardedParametersTest, AShardStartsAsTheWholeParametersElements) {
  ShardedFakeStep s;
  std::vector<float> whole(18), shard(9);
  ASSERT_TRUE(InitializeTensor(s.whole[0], 7, whole.data()).ok());
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(InitializeTensor(s.d().params[0], 7, shard.data(), rank * 9).ok());
    for (int k = 0; k < 9; ++k)
      EXPECT_EQ(shard[k], whole[rank * 9 + k]) << "rank " << rank << " element " << k;
  }
}

TEST(ShardedParametersTest, TheWholeViewHasTheModelsShapes) {
  ShardedFakeStep s;
  ASSERT_TRUE(ValidateDescriptor(s.d(), "step.so").ok());
  EXPECT_EQ(ShardParameterRanks(s.d()), 2);
  EXPECT_EQ(ShardRanks(s.d()), 2);
  bool sharded = false;
  EXPECT_EQ(WholeParam(s.d(), 0, &sharded).num_elements, 18);
  EXPECT_TRUE(sharded);
  WholeParam(s.d(), 1, &sharded);
  EXPECT_FALSE(sharded);
  WholeParameters view(s.d());
  const tcc_step_descriptor &w = view.descriptor();
  EXPECT_EQ(ShardParameterRanks(w), 0);
  ASSERT_EQ(w.params[0].rank, 2);
  EXPECT_EQ(w.params[0].shape[0], 6);
  EXPECT_EQ(w.params[0].shape[1], 3);
  EXPECT_EQ(w.params[1].num_elements, 3);
}

TEST(ShardedParametersTest, ValidationRefusesAShardOfAnotherSize) {
  ShardedFakeStep s;
  s.shard_shape = {8};
  s.step.params[0] = testing::MakeTensor("w", TCC_DTYPE_F32, s.shard_shape);
  s.step.params[0].shape = s.shard_shape.data();
  s.step.descriptor.params = s.step.params.data();
  absl::Status status = ValidateDescriptor(s.d(), "step.so");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("'w' is neither whole nor a 1-D shard of 1/2 of its whole 18 "
                                  "elements"),
            std::string::npos)
      << status;
}

TEST(ShardedParametersTest, ValidationRefusesAWholeParameterWithoutAShape) {
  ShardedFakeStep s;
  s.whole[0].shape = nullptr; // read before this check, it crashed
  absl::Status status = ValidateDescriptor(s.d(), "step.so");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("whole parameter 0 does not describe parameter 'w'"),
            std::string::npos)
      << status;
}

TEST(ShardedParametersTest, ValidationRefusesOtherOptimizerRanks) {
  ShardedFakeStep s;
  s.step.descriptor.shard_optimizer_ranks = 4;
  absl::Status status = ValidateDescriptor(s.d(), "step.so");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("parameters sharded over 2 ranks but the optimizer state over 4"),
            std::string::npos)
      << status;
}

TEST(ShardedParametersTest, ScatterCutsEachRanksShardOutOfTheWholeTensors) {
  ShardedFakeStep s;
  std::unique_ptr<ShardedTrainingState> state = ShardedTrainingState::ForStep(s.d());
  ASSERT_NE(state, nullptr);
  EXPECT_TRUE(state->shards_parameters());
  EXPECT_EQ(state->whole_descriptor().params[0].num_elements, 18);
  std::vector<void *> whole = state->mutable_whole_params();
  ASSERT_EQ(whole.size(), 2u);
  std::iota(static_cast<float *>(whole[0]), static_cast<float *>(whole[0]) + 18, 0.0f);
  std::iota(static_cast<float *>(whole[1]), static_cast<float *>(whole[1]) + 3, 100.0f);
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<float> w(9), b(3);
    state->Scatter(rank, {w.data(), b.data()}, {});
    for (int k = 0; k < 9; ++k)
      EXPECT_EQ(w[k], rank * 9 + k);
    EXPECT_EQ(b, (std::vector<float>{100, 101, 102})); // whole on every rank
  }
}

TEST(ShardedParametersTest, GatherNeedsTheStepsWorldSize) {
  ShardedFakeStep s;
  std::unique_ptr<ShardedTrainingState> state = ShardedTrainingState::ForStep(s.d());
  std::vector<float> w(9), b(3);
  absl::Status status = state->Gather(nullptr, {w.data(), b.data()}, {});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("over 1 ranks for a step sharded over 2"), std::string::npos)
      << status;
}

} // namespace
} // namespace tcc::trun
