// How the ranks of a data-parallel run start and meet, without a GPU:
//  - trun --nproc's launcher for cuda steps (SpawnLocalRanks), run with a
//    shell as the rank: torchrun's variables per rank, the exit status of a
//    clean run, and a rank that fails or is killed ending the others at
//    once, the first failure's status returned;
//  - the TCP bootstrap NCCL's id travels over (ranks as threads): every
//    rank gets rank 0's bytes; an unreachable master, an unresolvable one, a
//    rank that never comes and a rank of another job are errors within the
//    deadline, naming what is wrong;
//  - NCCL missing is an error at start.
#include "runtime/trun/dist/LocalLaunch.h"
#include "runtime/trun/dist/RankGroup.h"
#include "runtime/trun/dist/TcpBootstrap.h"
#include "tests/runtime/TestData.h"

#include "absl/strings/str_cat.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace tcc::trun {
namespace {

using Clock = std::chrono::steady_clock;
using testing::TempDir;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string Slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SpawnLocalRanks, EachRankGetsTorchrunsVariables) {
  TempDir tmp;
  std::string script = "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $MASTER_ADDR\" > " + tmp.path() +
                       "/rank$RANK; test -n \"$MASTER_PORT\"";
  absl::StatusOr<int> code = SpawnLocalRanks("/bin/sh", {"-c", script}, 3);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(Slurp(tmp.File("rank" + std::to_string(r))),
              std::to_string(r) + " 3 " + std::to_string(r) + " 127.0.0.1\n");
}

TEST(SpawnLocalRanks, AFailedRankEndsTheOthersAtOnce) {
  // Rank 1 fails at once; ranks 0 and 2 would wait 60 s (as ranks blocked
  // in a collective would wait forever) but are ended.
  Clock::time_point start = Clock::now();
  absl::StatusOr<int> code =
      SpawnLocalRanks("/bin/sh", {"-c", "if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 60"}, 3);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 3);
  EXPECT_LT(SecondsSince(start), 15.0);
}

TEST(SpawnLocalRanks, AKilledRankGivesItsSignal) {
  Clock::time_point start = Clock::now();
  absl::StatusOr<int> code =
      SpawnLocalRanks("/bin/sh", {"-c", "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; exec sleep 60"}, 2);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + 9);
  EXPECT_LT(SecondsSince(start), 15.0);
}

TEST(SpawnLocalRanks, ARankThatIgnoresSigtermIsKilledAfterTheGrace) {
  // Rank 1 fails only once rank 0 ignores SIGTERM (a file says so): on a
  // busy machine rank 0's shell could otherwise be ended before its trap.
  TempDir tmp;
  std::string ready = tmp.File("ready");
  std::string script = "trap '' TERM; if [ \"$RANK\" = 1 ]; then while [ ! -e " + ready +
                       " ]; do sleep 0.05; done; exit 4; fi; touch " + ready +
                       "; exec sleep 60";
  Clock::time_point start = Clock::now();
  absl::StatusOr<int> code = SpawnLocalRanks("/bin/sh", {"-c", script}, 2);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 4);
  double took = SecondsSince(start);
  EXPECT_GT(took, 9.0);  // the 10 s grace
  EXPECT_LT(took, 30.0); // then SIGKILL, not the 60 s sleep
}

TEST(SpawnLocalRanks, NprocFlagIsRemovedForTheRanks) {
  EXPECT_EQ(WithoutNproc({"s.so", "--nproc", "2", "--steps", "5"}),
            (std::vector<std::string>{"s.so", "--steps", "5"}));
  EXPECT_EQ(WithoutNproc({"--nproc=4", "s.so"}), (std::vector<std::string>{"s.so"}));
}

// A port on 127.0.0.1 nobody listens on (bound and closed just before).
int UnusedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

RankInfo Rank(int rank, int world, int port, const std::string &master = "127.0.0.1") {
  RankInfo info;
  info.launcher = Launcher::kTorchrun;
  info.rank = rank;
  info.world_size = world;
  info.master_addr = master;
  info.master_port = port;
  return info;
}

BootstrapOptions Options(int port, double timeout, const std::string &master = "127.0.0.1") {
  BootstrapOptions o;
  o.master_addr = master;
  o.master_port = port;
  o.timeout_seconds = timeout;
  return o;
}

TEST(TcpBootstrap, EveryRankGetsRankZerosBytes) {
  int port = UnusedPort();
  constexpr int kWorld = 4;
  std::vector<std::string> got(kWorld, std::string(128, '\0'));
  got[0] = std::string(128, 'x');
  for (int i = 0; i < 128; ++i)
    got[0][i] = static_cast<char>(i * 7 + 1);
  std::vector<absl::Status> results(kWorld);
  std::vector<std::thread> ranks;
  // The others start first: they retry until rank 0 listens.
  for (int r = kWorld - 1; r >= 0; --r)
    ranks.emplace_back([&, r] {
      results[r] = ShareBootstrapBytes(Rank(r, kWorld, port), Options(port, 20), got[r].data(), 128);
    });
  for (std::thread &t : ranks)
    t.join();
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
    EXPECT_EQ(got[r], got[0]) << "rank " << r;
  }
}

TEST(TcpBootstrap, AnUnreachableMasterIsAnErrorAtTheDeadline) {
  int port = UnusedPort();
  char bytes[16];
  Clock::time_point start = Clock::now();
  absl::Status s = ShareBootstrapBytes(Rank(1, 2, port), Options(port, 1.0), bytes, sizeof bytes);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("cannot reach the master 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << s;
  EXPECT_LT(SecondsSince(start), 10.0);
}

TEST(TcpBootstrap, AnUnresolvableMasterIsAnError) {
  char bytes[16];
  absl::Status s = ShareBootstrapBytes(Rank(1, 2, 29500, "no-such-host.invalid"),
                                       Options(29500, 1.0, "no-such-host.invalid"), bytes,
                                       sizeof bytes);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot resolve the master address no-such-host.invalid"),
            std::string::npos)
      << s;
}

TEST(TcpBootstrap, RankZeroNamesTheRanksThatNeverCame) {
  int port = UnusedPort();
  std::string zero(16, 'z'), one(16, '\0');
  absl::Status s0, s1;
  std::thread rank0([&] { s0 = ShareBootstrapBytes(Rank(0, 3, port), Options(port, 2.0), zero.data(), 16); });
  std::thread rank1([&] { s1 = ShareBootstrapBytes(Rank(1, 3, port), Options(port, 2.0), one.data(), 16); });
  rank0.join();
  rank1.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s0)) << s0;
  EXPECT_NE(s0.message().find("for ranks that never connected: 2"), std::string::npos) << s0;
  EXPECT_FALSE(s1.ok()); // rank 0 never answered it
}

TEST(TcpBootstrap, ARankOfAnotherWorldSizeIsRefused) {
  int port = UnusedPort();
  std::string zero(16, 'z'), other(16, '\0');
  absl::Status s0, s1;
  std::thread rank0([&] { s0 = ShareBootstrapBytes(Rank(0, 2, port), Options(port, 5.0), zero.data(), 16); });
  std::thread stranger(
      [&] { s1 = ShareBootstrapBytes(Rank(1, 3, port), Options(port, 5.0), other.data(), 16); });
  rank0.join();
  stranger.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(s0)) << s0;
  EXPECT_NE(s0.message().find("rank 1 was started with a world size of 3, rank 0 with 2"),
            std::string::npos)
      << s0;
}

TEST(TcpBootstrap, EnvironmentErrorsNameTheVariable) {
  RankInfo mpi;
  mpi.launcher = Launcher::kOpenMpi;
  mpi.rank = 1;
  mpi.world_size = 2;
  ::unsetenv("MASTER_ADDR");
  absl::StatusOr<BootstrapOptions> o = BootstrapFromEnvironment(mpi);
  EXPECT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("MASTER_ADDR"), std::string::npos) << o.status();
  ::setenv("TCC_DIST_TIMEOUT", "soon", 1);
  o = BootstrapFromEnvironment(Rank(0, 2, 29500));
  ::unsetenv("TCC_DIST_TIMEOUT");
  EXPECT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("TCC_DIST_TIMEOUT is 'soon'"), std::string::npos)
      << o.status();
}

// torchrun's agent listens at MASTER_PORT itself (its c10d store; seen on
// an H200 machine on 2026-11-30: "rank 0 cannot listen on port 42713"), so
// under it the ranks meet one port above; TCC_BOOTSTRAP_PORT overrides.
TEST(TcpBootstrap, UnderTorchrunTheRanksMeetAbovePytorchsStore) {
  ::unsetenv("TCC_BOOTSTRAP_PORT");
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  absl::StatusOr<BootstrapOptions> o = BootstrapFromEnvironment(Rank(0, 2, 29500));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->master_port, 29501);
  o = BootstrapFromEnvironment(Rank(0, 2, 65535));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->master_port, 1) << "wraps";
  ::setenv("TCC_BOOTSTRAP_PORT", "31000", 1);
  o = BootstrapFromEnvironment(Rank(0, 2, 29500));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->master_port, 31000);
  ::setenv("TCC_BOOTSTRAP_PORT", "70000", 1);
  o = BootstrapFromEnvironment(Rank(0, 2, 29500));
  EXPECT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("TCC_BOOTSTRAP_PORT is '70000'"), std::string::npos)
      << o.status();
  ::unsetenv("TCC_BOOTSTRAP_PORT");
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  o = BootstrapFromEnvironment(Rank(0, 2, 29500));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->master_port, 29500) << "trun --nproc and other launchers: MASTER_PORT itself";
}

// Rank 0 cannot listen on a port another process holds: the error names
// the port and where it came from.
TEST(TcpBootstrap, ATakenPortNamesWhereItCameFrom) {
  int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(holder, reinterpret_cast<sockaddr *>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  ::setenv("TCC_BOOTSTRAP_PORT", std::to_string(port).c_str(), 1);
  absl::StatusOr<BootstrapOptions> o = BootstrapFromEnvironment(Rank(0, 2, 29500));
  ::unsetenv("TCC_BOOTSTRAP_PORT");
  ASSERT_TRUE(o.ok()) << o.status();
  o->timeout_seconds = 2;
  char bytes[8] = {};
  absl::Status s = ShareBootstrapBytes(Rank(0, 2, port), *o, bytes, sizeof bytes);
  ::close(holder);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(absl::StrCat("rank 0 cannot listen on port ", port,
                                          " (TCC_BOOTSTRAP_PORT")),
            std::string::npos)
      << s;
}

TEST(NcclRanks, MissingNcclIsAnErrorAtStart) {
  ::setenv("TCC_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  absl::StatusOr<std::unique_ptr<RankGroup>> group = JoinNcclRanks(Rank(0, 2, UnusedPort()), 0);
  ::unsetenv("TCC_NCCL_LIBRARY");
  ASSERT_FALSE(group.ok());
  EXPECT_NE(group.status().message().find("NCCL is missing"), std::string::npos)
      << group.status();
}

} // namespace
} // namespace tcc::trun

namespace tcc::trun {
namespace {

// Ranks as threads of this test over shared memory, with an exchange of at
// most 8 bytes (every rank's part together), as a back end with a small
// exchange buffer (NCCL's) has: RankGroup::AllGather must split a larger
// exchange (a ZeRO-1 checkpoint gathers whole optimizer state tensors).
class TinyExchangeGroup : public RankGroup {
public:
  struct Shared {
    std::mutex mutex;
    std::condition_variable done;
    std::vector<std::string> parts;
    int arrived = 0, copied = 0;
    bool draining = false; // every part is in; the ranks are copying them
    int64_t exchanges = 0;
  };
  TinyExchangeGroup(int rank, int world, Shared &shared)
      : RankGroup(RankInfo{Launcher::kNone, rank, world, rank, "", 0}), shared_(shared) {}
  std::string Describe() const override { return "threads"; }
  absl::Status Finish() override { return absl::OkStatus(); }
  [[noreturn]] void AbortAll(int) override { std::abort(); }

protected:
  size_t MaxExchangeBytes() const override { return 8; }
  absl::Status GatherBytes(const char *mine, size_t bytes, char *all) override {
    if (bytes * world_size() > MaxExchangeBytes())
      return absl::InternalError("more bytes than the exchange holds");
    std::unique_lock<std::mutex> lock(shared_.mutex);
    shared_.done.wait(lock, [&] { return !shared_.draining; }); // the last exchange is over
    shared_.parts[rank()] = std::string(mine, bytes);
    if (++shared_.arrived == world_size()) {
      shared_.arrived = 0;
      shared_.draining = true;
      ++shared_.exchanges;
      shared_.done.notify_all();
    } else {
      shared_.done.wait(lock, [&] { return shared_.draining; });
    }
    for (int r = 0; r < world_size(); ++r)
      std::memcpy(all + r * bytes, shared_.parts[r].data(), bytes);
    if (++shared_.copied == world_size()) {
      shared_.copied = 0;
      shared_.draining = false;
      shared_.done.notify_all();
    }
    return absl::OkStatus();
  }
  absl::Status SumDoubles(double *, size_t) override { return absl::UnimplementedError(""); }

private:
  Shared &shared_;
};

TEST(RankGroupAllGather, SplitsWhatTheExchangeCannotHold) {
  constexpr int kWorld = 2;
  TinyExchangeGroup::Shared shared;
  shared.parts.resize(kWorld);
  std::vector<absl::StatusOr<std::vector<std::string>>> got(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.emplace_back([&, r] {
      TinyExchangeGroup group(r, kWorld, shared);
      std::string mine(25, '\0');
      for (size_t i = 0; i < mine.size(); ++i)
        mine[i] = static_cast<char>('a' + (i + 7 * r) % 26);
      got[r] = group.AllGather(mine);
    });
  for (std::thread &t : ranks)
    t.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(got[r].ok()) << got[r].status();
    ASSERT_EQ(got[r]->size(), static_cast<size_t>(kWorld));
    for (int from = 0; from < kWorld; ++from)
      for (size_t i = 0; i < 25; ++i)
        EXPECT_EQ((*got[r])[from][i], static_cast<char>('a' + (i + 7 * from) % 26))
            << "rank " << r << " got rank " << from << "'s byte " << i;
  }
  EXPECT_EQ(shared.exchanges, 7) << "25 bytes in parts of 4 (8 bytes / 2 ranks)";
}

} // namespace
} // namespace tcc::trun
