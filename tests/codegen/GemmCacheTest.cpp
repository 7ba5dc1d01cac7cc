// The cuBLASLt algorithm cache file of the CUDA host support
// (compiler/codegen/cuda/host_support/gemm_cache.h): its text format
// round-trips, a foreign or corrupt file is refused with a reason (the step
// then ignores it with a warning), the path follows TCC_GEMM_CACHE and the
// cache root of tcc's nvcc object cache, and writes are atomic.
//
// The piece is pasted inside namespace tcc_cuda_host after errors.h's
// #includes, so this test does the same.
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace tcc_cuda_host {
#include "compiler/codegen/cuda/host_support/gemm_cache.h"
} // namespace tcc_cuda_host

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>

namespace {

using tcc_cuda_host::GemmCache;
using tcc_cuda_host::GemmCacheEntry;

GemmCache SampleCache() {
  GemmCache cache;
  cache.gpu = "NVIDIA H200";
  cache.version = "120804";
  GemmCacheEntry a;
  for (int w = 0; w < tcc_cuda_host::kGemmAlgoWords; ++w)
    a.algo[w] = 0x0123456789abcdefull * (w + 1);
  a.best_ms = 0.412;
  a.heuristic_ms = 0.455;
  a.description = "algo 66 tile 128x256 stages#13 splitK 1";
  cache.entries["bf16->bf16 16384x2304x768 NN bias beta0 align256 ws33554432 32F"] = a;
  GemmCacheEntry b;
  b.algo[7] = ~0ull;
  b.description = "algo 21 tile 256x128";
  cache.entries["f32->f32 8x4x2 x3 strides 8,8,32 TN none beta1 align16 ws0 32F_TF32"] = b;
  return cache;
}

TEST(GemmCacheTest, FormatThenParseGivesTheSameEntries) {
  GemmCache cache = SampleCache();
  std::string text = tcc_cuda_host::format_gemm_cache(cache);
  EXPECT_EQ(text.rfind("tcc-gemm-cache 1\ngpu NVIDIA H200\ncublaslt 120804\n", 0), 0u) << text;
  GemmCache parsed;
  std::string why;
  ASSERT_TRUE(tcc_cuda_host::parse_gemm_cache(text, "NVIDIA H200", "120804", parsed, why))
      << why;
  ASSERT_EQ(parsed.entries.size(), cache.entries.size());
  for (const auto &[key, want] : cache.entries) {
    auto it = parsed.entries.find(key);
    ASSERT_NE(it, parsed.entries.end()) << key;
    for (int w = 0; w < tcc_cuda_host::kGemmAlgoWords; ++w)
      EXPECT_EQ(it->second.algo[w], want.algo[w]) << key << " word " << w;
    EXPECT_DOUBLE_EQ(it->second.best_ms, want.best_ms);
    EXPECT_DOUBLE_EQ(it->second.heuristic_ms, want.heuristic_ms);
    EXPECT_EQ(it->second.description, want.description);
  }
  // An empty cache is a valid file too.
  GemmCache empty;
  empty.gpu = "G";
  empty.version = "1";
  EXPECT_TRUE(tcc_cuda_host::parse_gemm_cache(tcc_cuda_host::format_gemm_cache(empty), "G", "1",
                                              parsed, why))
      << why;
  EXPECT_TRUE(parsed.entries.empty());
}

TEST(GemmCacheTest, TabsAndLineBreaksInFieldsDoNotBreakTheFormat) {
  GemmCache cache;
  cache.gpu = "odd\tgpu";
  cache.version = "1";
  cache.entries["key"].description = "two\nlines\tand a tab";
  std::string text = tcc_cuda_host::format_gemm_cache(cache);
  GemmCache parsed;
  std::string why;
  ASSERT_TRUE(tcc_cuda_host::parse_gemm_cache(text, "odd\tgpu", "1", parsed, why)) << why;
  EXPECT_EQ(parsed.entries.at("key").description, "two lines and a tab");
}

// Each way a file can be wrong, with the reason the warning gives.
TEST(GemmCacheTest, ForeignOrCorruptFilesAreRefusedWithAReason) {
  std::string good = tcc_cuda_host::format_gemm_cache(SampleCache());
  std::string line = good.substr(good.find("bf16->bf16"));
  line = line.substr(0, line.find('\n') + 1);
  std::string header = "tcc-gemm-cache 1\ngpu NVIDIA H200\ncublaslt 120804\n";
  auto withLine = [&](const std::string &l) { return header + l; };
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string l = line;
    l.replace(l.find(from), from.size(), to);
    return withLine(l);
  };
  const std::pair<std::string, std::string> cases[] = {
      {"", "not a tcc GEMM cache"},
      {"garbage\n", "not a tcc GEMM cache"},
      {"tcc-gemm-cache 2\ngpu NVIDIA H200\ncublaslt 120804\n", "not a tcc GEMM cache"},
      {"tcc-gemm-cache 1\ngpu NVIDIA A100\ncublaslt 120804\n", "written for another GPU"},
      {"tcc-gemm-cache 1\ngpu NVIDIA H200\ncublaslt 110000\n", "written for another cuBLASLt"},
      {good.substr(0, good.size() - 1), "the last line is cut off"},
      {good.substr(0, good.size() - 40) + "\n", "line 5: "},
      {withLine("only\tthree\tfields\n"), "line 4: expected 5 tab-separated fields"},
      {withLine("\t" + line.substr(line.find('\t') + 1)), "line 4: expected 5"},
      {replaced("0123456789abcdef", "0123456789ABCDEF"), "lower-case hex digits"},
      {replaced("0123456789abcdef", "0123456789abcde"), "lower-case hex digits"},
      {replaced("0.412000", "-1"), "the times are not non-negative numbers"},
      {replaced("0.412000", "0.4ms"), "the times are not non-negative numbers"},
      {replaced("0.455000", ""), "the times are not non-negative numbers"},
      {withLine(line + line), "line 5: a second entry for"},
  };
  for (const auto &[text, reason] : cases) {
    GemmCache parsed;
    std::string why;
    EXPECT_FALSE(tcc_cuda_host::parse_gemm_cache(text, "NVIDIA H200", "120804", parsed, why))
        << text;
    EXPECT_NE(why.find(reason), std::string::npos) << "reason '" << why << "' for:\n" << text;
  }
}

// setenv for one test, restored after.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old, had_ = true;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

private:
  const char *name_;
  std::string old_;
  bool had_ = false;
};

TEST(GemmCacheTest, PathFollowsTheObjectCacheRootAndTheOverride) {
  EXPECT_EQ(tcc_cuda_host::gemm_cache_file_name("NVIDIA H200 (MIG 1g)", "120804"),
            "gemm-NVIDIA_H200__MIG_1g_-cublasLt120804.txt");
  ScopedEnv file("TCC_GEMM_CACHE", nullptr), root("TCC_CACHE_DIR", nullptr),
      xdg("XDG_CACHE_HOME", nullptr), home("HOME", "/home/u");
  EXPECT_EQ(tcc_cuda_host::gemm_cache_path("G", "1"), "/home/u/.cache/tcc/gemm/gemm-G-cublasLt1.txt");
  {
    ScopedEnv x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(tcc_cuda_host::gemm_cache_path("G", "1"), "/xdg/tcc/gemm/gemm-G-cublasLt1.txt");
    ScopedEnv r("TCC_CACHE_DIR", "/cache");
    EXPECT_EQ(tcc_cuda_host::gemm_cache_path("G", "1"), "/cache/gemm/gemm-G-cublasLt1.txt");
    ScopedEnv f("TCC_GEMM_CACHE", "/tmp/mine.txt");
    EXPECT_EQ(tcc_cuda_host::gemm_cache_path("G", "1"), "/tmp/mine.txt");
    ScopedEnv off("TCC_GEMM_CACHE", "0");
    EXPECT_EQ(tcc_cuda_host::gemm_cache_path("G", "1"), "");
  }
  ScopedEnv noHome("HOME", nullptr);
  EXPECT_EQ(tcc_cuda_host::gemm_cache_path("G", "1"), "");
}

TEST(GemmCacheTest, WritesAtomicallyIntoNewFoldersAndReadsBack) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("tcc_gemm_cache_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string path = (dir / "a" / "b" / "gemm.txt").string();
  std::string text, why;
  bool missing = false;
  EXPECT_FALSE(tcc_cuda_host::read_gemm_cache_file(path, text, missing, why));
  EXPECT_TRUE(missing) << why;

  std::string first = tcc_cuda_host::format_gemm_cache(SampleCache());
  ASSERT_TRUE(tcc_cuda_host::write_gemm_cache_file(path, first, why)) << why;
  ASSERT_TRUE(tcc_cuda_host::read_gemm_cache_file(path, text, missing, why)) << why;
  EXPECT_EQ(text, first);
  // A rewrite replaces the file and leaves no temporary behind.
  ASSERT_TRUE(tcc_cuda_host::write_gemm_cache_file(path, "tcc-gemm-cache 1\n", why)) << why;
  ASSERT_TRUE(tcc_cuda_host::read_gemm_cache_file(path, text, missing, why)) << why;
  EXPECT_EQ(text, "tcc-gemm-cache 1\n");
  int files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir / "a" / "b")) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "gemm.txt");
  }
  EXPECT_EQ(files, 1);

  // A folder that cannot be made (a file is in the way) is an error with a
  // reason, not a crash.
  std::ofstream(dir / "blocker") << "x";
  EXPECT_FALSE(tcc_cuda_host::write_gemm_cache_file((dir / "blocker" / "gemm.txt").string(),
                                                    first, why));
  EXPECT_NE(why.find("cannot create"), std::string::npos) << why;
  std::filesystem::remove_all(dir);
}

} // namespace
