// Shared helpers for trun tests: temp dirs, IDX files, synthetic data and
// in-memory fake step descriptors.
#ifndef TCC_TESTS_RUNTIME_TESTDATA_H
#define TCC_TESTS_RUNTIME_TESTDATA_H

#include "tcc/step_abi.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tcc::trun::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::string &path() const { return path_; }
  std::string File(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

// Char-level token shards of "abcdefghij\n" repeated 400 times (the first 90%
// in `train`, the rest in `val`), which a bigram model learns exactly; with
// `vocab`, also the vocabulary JSON. False (with a gtest failure) on error.
bool WriteAbcTokenShards(const std::string &train, const std::string &val,
                         const std::string &vocab = "");

// The whole contents of a file ("" if it cannot be read).
std::string Slurp(const std::string &path);

// What a command-line tool did: exit code (-1: killed), stdout, stderr.
struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs `binary args` through the shell (tests only use paths without
// spaces) and captures both output streams.
CliResult RunCommand(const std::string &binary, const std::string &args);

// The bytes of an IDX file: big-endian magic and dims, then the values.
std::vector<uint8_t> IdxBytes(uint32_t magic, const std::vector<uint32_t> &dims,
                              const std::vector<uint8_t> &values);
void WriteFile(const std::string &path, const std::vector<uint8_t> &bytes);

// A version 1.0 .npy file as np.save writes it: `values` row-major, stored as
// T; `descr` is numpy's dtype string for T ("<f4", "<i8", "|u1", ...).
template <typename T>
void WriteNpy(const std::string &path, const std::string &descr,
              const std::vector<int64_t> &shape, const std::vector<T> &values) {
  std::string dims;
  for (int64_t d : shape)
    dims += std::to_string(d) + ", ";
  if (shape.size() > 1)
    dims.resize(dims.size() - 2);
  std::string header = "{'descr': '" + descr +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  bytes.push_back(static_cast<uint8_t>(header.size())); // little-endian
  bytes.push_back(static_cast<uint8_t>(header.size() >> 8));
  bytes.insert(bytes.end(), header.begin(), header.end());
  const uint8_t *data = reinterpret_cast<const uint8_t *>(values.data());
  bytes.insert(bytes.end(), data, data + values.size() * sizeof(T));
  WriteFile(path, bytes);
}
void WriteGzipFile(const std::string &path, const std::vector<uint8_t> &bytes);
std::vector<uint8_t> ReadFileBytes(const std::string &path);

// Linearly separable images: label c = a pseudo-random class in [0, 10);
// class c has a bright band at rows 2c+4 and 2c+5 (mod rows) over low noise.
struct SyntheticSplit {
  int64_t count = 0;
  uint32_t rows = 0, cols = 0;
  std::vector<uint8_t> pixels; // (count, rows, cols)
  std::vector<uint8_t> labels; // (count)
};
SyntheticSplit MakeSyntheticSplit(int64_t count, uint32_t rows, uint32_t cols,
                                  uint64_t salt);

// Writes DIR/PREFIX-images-idx3-ubyte and DIR/PREFIX-labels-idx1-ubyte,
// with a .gz suffix and gzip content when `gzip`. Returns the images path.
std::string WriteSplit(const std::string &dir, const std::string &prefix,
                       const SyntheticSplit &split, bool gzip);

// An in-memory step descriptor: params "w" (f32 [values, classes], normal)
// and "b" (zeros), inputs "image" f32 [batch, values] and "label" i32 [batch],
// output "logits" f32 [batch, classes]. Entry points default to steps that
// return OK with loss 0. Not copyable: the descriptor points into it.
struct FakeStep {
  FakeStep(int64_t batch, int64_t values, int64_t classes);
  FakeStep(const FakeStep &) = delete;
  FakeStep &operator=(const FakeStep &) = delete;

  std::vector<int64_t> w_shape, b_shape, image_shape, label_shape, logits_shape;
  std::vector<tcc_tensor_desc> params, inputs, outputs;
  tcc_step_descriptor descriptor{};

  // Re-points the descriptor at the vectors after a test edits them.
  void Sync();
};

// Fills a tensor desc with consistent num_elements and size_bytes.
tcc_tensor_desc MakeTensor(const char *name, tcc_dtype dtype,
                           const std::vector<int64_t> &shape);

} // namespace tcc::trun::testing

#endif // TCC_TESTS_RUNTIME_TESTDATA_H
