// trun's reading of the launchers' environments (torchrun, Slurm, Open MPI,
// MPICH): each launcher's variables give the rank, world size, local rank
// and master; inconsistent or partial sets are errors naming the variable;
// Slurm node lists expand as scontrol does.
#include "runtime/trun/dist/LaunchEnvironment.h"

#include <gtest/gtest.h>

#include <map>

namespace tcc::trun {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string &name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(LaunchEnvironment, NoLauncherIsOneRank) {
  absl::StatusOr<RankInfo> info = ReadLaunchEnvironment(Env({}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->launcher, Launcher::kNone);
  EXPECT_EQ(info->rank, 0);
  EXPECT_EQ(info->world_size, 1);
  EXPECT_FALSE(info->distributed());
}

TEST(LaunchEnvironment, Torchrun) {
  absl::StatusOr<RankInfo> info = ReadLaunchEnvironment(
      Env({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node7"},
           {"MASTER_PORT", "29511"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->launcher, Launcher::kTorchrun);
  EXPECT_EQ(info->rank, 5);
  EXPECT_EQ(info->world_size, 8);
  EXPECT_EQ(info->local_rank, 1);
  EXPECT_EQ(info->master_addr, "node7");
  EXPECT_EQ(info->master_port, 29511);
  EXPECT_EQ(info->Describe(), "rank 5 of 8 (local 1, torchrun, master node7:29511)");
}

TEST(LaunchEnvironment, TorchrunDefaultsThePort) {
  absl::StatusOr<RankInfo> info = ReadLaunchEnvironment(
      Env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "h"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->master_port, 29500);
}

TEST(LaunchEnvironment, SlurmTakesTheFirstHostOfTheNodeList) {
  absl::StatusOr<RankInfo> info = ReadLaunchEnvironment(
      Env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"},
           {"SLURM_JOB_NODELIST", "gpu[07-08]"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->launcher, Launcher::kSlurm);
  EXPECT_EQ(info->rank, 3);
  EXPECT_EQ(info->world_size, 4);
  EXPECT_EQ(info->local_rank, 1);
  EXPECT_EQ(info->master_addr, "gpu07");
  EXPECT_EQ(info->master_port, 29500);
}

TEST(LaunchEnvironment, SlurmPrefersMasterAddr) {
  absl::StatusOr<RankInfo> info = ReadLaunchEnvironment(
      Env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
           {"SLURM_JOB_NODELIST", "a,b"}, {"MASTER_ADDR", "b"}, {"MASTER_PORT", "1234"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->master_addr, "b");
  EXPECT_EQ(info->master_port, 1234);
}

TEST(LaunchEnvironment, OpenMpiAndMpichNeedNoMaster) {
  absl::StatusOr<RankInfo> ompi = ReadLaunchEnvironment(
      Env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  ASSERT_TRUE(ompi.ok()) << ompi.status();
  EXPECT_EQ(ompi->launcher, Launcher::kOpenMpi);
  EXPECT_EQ(ompi->rank, 1);
  EXPECT_TRUE(ompi->master_addr.empty());
  absl::StatusOr<RankInfo> mpich =
      ReadLaunchEnvironment(Env({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}}));
  ASSERT_TRUE(mpich.ok()) << mpich.status();
  EXPECT_EQ(mpich->launcher, Launcher::kMpich);
  EXPECT_EQ(mpich->rank, 2);
  EXPECT_EQ(mpich->local_rank, 0);
}

TEST(LaunchEnvironment, TorchrunWinsOverTheOthers) {
  // srun + torchrun: torchrun's per-process variables describe this rank.
  absl::StatusOr<RankInfo> info = ReadLaunchEnvironment(
      Env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "h"},
           {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->launcher, Launcher::kTorchrun);
  EXPECT_EQ(info->world_size, 2);
}

struct BadCase {
  std::map<std::string, std::string> env;
  std::string message;
};

TEST(LaunchEnvironment, BadEnvironmentsNameTheVariable) {
  const BadCase cases[] = {
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}},
       "RANK=2 is not below WORLD_SIZE=2"},
      {{{"RANK", "0"}, {"MASTER_ADDR", "h"}},
       "torchrun environment incomplete: WORLD_SIZE is unset while RANK is set"},
      {{{"WORLD_SIZE", "4"}}, "torchrun environment incomplete: RANK is unset while WORLD_SIZE is set"},
      {{{"RANK", "one"}, {"WORLD_SIZE", "2"}}, "RANK='one' is not a number from 0 to"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE='0' is not a number from 1 to"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}},
       "torchrun environment incomplete: MASTER_ADDR is unset"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}},
       "MASTER_PORT='70000' is not a number from 1 to 65535"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}, {"MASTER_ADDR", "h"}},
       "LOCAL_RANK=2 is not below WORLD_SIZE=2"},
      {{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}},
       "slurm environment incomplete: neither MASTER_ADDR nor SLURM_JOB_NODELIST is set"},
      {{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "gpu[3-1]"}},
       "Slurm node list 'gpu[3-1]': bad range '3-1'"},
      {{{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
       "OMPI_COMM_WORLD_RANK=3 is not below OMPI_COMM_WORLD_SIZE=2"},
  };
  for (const BadCase &c : cases) {
    absl::StatusOr<RankInfo> info = ReadLaunchEnvironment(Env(c.env));
    ASSERT_FALSE(info.ok()) << c.message;
    EXPECT_NE(std::string(info.status().message()).find(c.message), std::string::npos)
        << "got: " << info.status().message() << "\nwant: " << c.message;
  }
}

TEST(SlurmNodeList, ExpandsAsScontrolDoes) {
  auto hosts = ExpandSlurmNodeList("gpu[01-03,07],login1,rack[1-2]-n[8-9]");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  std::vector<std::string> want = {"gpu01",     "gpu02",     "gpu03",     "gpu07",    "login1",
                                   "rack1-n8", "rack1-n9", "rack2-n8", "rack2-n9"};
  EXPECT_EQ(*hosts, want);
  auto wide = ExpandSlurmNodeList("n[098-101]");
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(*wide, (std::vector<std::string>{"n098", "n099", "n100", "n101"}));
  for (const char *bad : {"gpu[1-2", "gpu1-2]", "a,,b", "n[]", "n[a-b]", "n[[1]]"})
    EXPECT_FALSE(ExpandSlurmNodeList(bad).ok()) << bad;
}

} // namespace
} // namespace tcc::trun
