// trun's choice of a cpu step's threads (runtime/trun/cli/HostThreads.h):
// the cgroup quota files as the kernel writes them, and the thread count
// they give.
#include "runtime/trun/cli/HostThreads.h"

#include "gtest/gtest.h"

#include <cstdlib>

namespace tcc::trun {
namespace {

TEST(HostThreadsTest, ReadsCgroupV2CpuMax) {
  EXPECT_EQ(ParseCpuMax("200000 100000\n"), 2.0);
  EXPECT_EQ(ParseCpuMax("150000 100000"), 1.5);
  EXPECT_EQ(ParseCpuMax("max 100000\n"), std::nullopt);
  EXPECT_EQ(ParseCpuMax(""), std::nullopt);
  EXPECT_EQ(ParseCpuMax("garbage"), std::nullopt);
  EXPECT_EQ(ParseCpuMax("100000 0"), std::nullopt);
}

TEST(HostThreadsTest, ReadsCgroupV1Quota) {
  EXPECT_EQ(ParseCpuQuota("50000\n", "100000\n"), 0.5);
  EXPECT_EQ(ParseCpuQuota("-1\n", "100000\n"), std::nullopt);
}

TEST(HostThreadsTest, QuotaCapsTheAffinityRoundedUp) {
  EXPECT_EQ(ThreadsForCpus(64, 2.0), 2);
  EXPECT_EQ(ThreadsForCpus(64, 1.5), 2);
  EXPECT_EQ(ThreadsForCpus(64, 0.5), 1);
  EXPECT_EQ(ThreadsForCpus(4, 16.0), 4);
  EXPECT_EQ(ThreadsForCpus(4, std::nullopt), 4);
  EXPECT_EQ(ThreadsForCpus(0, std::nullopt), 1);
}

TEST(HostThreadsTest, FlagWinsAndWaitingDefaultsToPassive) {
  unsetenv("OMP_WAIT_POLICY");
  unsetenv("GOMP_SPINCOUNT");
  setenv("OMP_NUM_THREADS", "7", 1);
  EXPECT_EQ(ConfigureHostThreads(3),
            "threads: 3 (--threads), idle threads sleep (OMP_WAIT_POLICY=passive)");
  EXPECT_STREQ(std::getenv("OMP_NUM_THREADS"), "3");
  EXPECT_STREQ(std::getenv("OMP_WAIT_POLICY"), "passive");
  // The user's own settings are kept and named.
  setenv("OMP_WAIT_POLICY", "active", 1);
  EXPECT_EQ(ConfigureHostThreads(std::nullopt),
            "threads: 3 (OMP_NUM_THREADS), OMP_WAIT_POLICY=active");
  unsetenv("OMP_WAIT_POLICY");
  setenv("GOMP_SPINCOUNT", "1000", 1);
  EXPECT_EQ(ConfigureHostThreads(std::nullopt),
            "threads: 3 (OMP_NUM_THREADS), GOMP_SPINCOUNT=1000");
  // Nothing set: the CPUs this process may use, at least one.
  unsetenv("OMP_NUM_THREADS");
  unsetenv("GOMP_SPINCOUNT");
  std::string line = ConfigureHostThreads(std::nullopt);
  EXPECT_EQ(line.rfind("threads: ", 0), 0u) << line;
  EXPECT_GE(std::atoi(std::getenv("OMP_NUM_THREADS")), 1);
  unsetenv("OMP_NUM_THREADS");
  unsetenv("OMP_WAIT_POLICY");
}

} // namespace
} // namespace tcc::trun
