#include "tests/runtime/TestData.h"

#include "runtime/trun/data/TokenShards.h"
#include "runtime/trun/data/Vocab.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <sys/wait.h>

namespace tcc::trun::testing {

bool WriteAbcTokenShards(const std::string &train, const std::string &val,
                         const std::string &vocab) {
  absl::StatusOr<Vocab> chars =
      Vocab::Chars({"\n", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"});
  EXPECT_TRUE(chars.ok()) << chars.status();
  if (!chars.ok())
    return false;
  std::string text;
  for (int i = 0; i < 400; ++i)
    text += "abcdefghij\n";
  absl::StatusOr<std::vector<int64_t>> ids = chars->Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  if (!ids.ok())
    return false;
  std::vector<uint16_t> tokens(ids->begin(), ids->end());
  size_t split = tokens.size() * 9 / 10;
  for (auto [path, first, last] :
       {std::tuple(&train, size_t{0}, split), std::tuple(&val, split, tokens.size())}) {
    absl::Status s = WriteTokenShard(
        *path, std::vector<uint16_t>(tokens.begin() + first, tokens.begin() + last));
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok())
      return false;
  }
  if (!vocab.empty())
    std::ofstream(vocab) << chars->ToJson();
  return true;
}

TempDir::TempDir() {
  const char *base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base && *base ? base : "/tmp") + "/trun-test-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (!mkdtemp(buffer.data()))
    ADD_FAILURE() << "mkdtemp failed for " << pattern;
  path_ = buffer.data();
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::vector<uint8_t> IdxBytes(uint32_t magic, const std::vector<uint32_t> &dims,
                              const std::vector<uint8_t> &values) {
  std::vector<uint8_t> bytes;
  auto put32 = [&bytes](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<uint8_t>(v >> shift));
  };
  put32(magic);
  for (uint32_t d : dims)
    put32(d);
  bytes.insert(bytes.end(), values.begin(), values.end());
  return bytes;
}

void WriteFile(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

void WriteGzipFile(const std::string &path, const std::vector<uint8_t> &bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << "cannot write " << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(file), Z_OK);
}

std::vector<uint8_t> ReadFileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

SyntheticSplit MakeSyntheticSplit(int64_t count, uint32_t rows, uint32_t cols,
                                  uint64_t salt) {
  SyntheticSplit split;
  split.count = count;
  split.rows = rows;
  split.cols = cols;
  split.pixels.resize(count * rows * cols);
  split.labels.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    uint64_t mixed = (i + salt) * 0x9E3779B97F4A7C15ull;
    int label = static_cast<int>((mixed >> 32) % 10);
    split.labels[i] = static_cast<uint8_t>(label);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c) {
        int value = static_cast<int>((i * 37 + r * 11 + c * 5 + salt) % 40);
        if (r == (2u * label + 4) % rows || r == (2u * label + 5) % rows)
          value += 180;
        split.pixels[(i * rows + r) * cols + c] = static_cast<uint8_t>(value);
      }
  }
  return split;
}

std::string WriteSplit(const std::string &dir, const std::string &prefix,
                       const SyntheticSplit &split, bool gzip) {
  std::string suffix = gzip ? ".gz" : "";
  std::string images = dir + "/" + prefix + "-images-idx3-ubyte" + suffix;
  std::string labels = dir + "/" + prefix + "-labels-idx1-ubyte" + suffix;
  uint32_t n = static_cast<uint32_t>(split.count);
  std::vector<uint8_t> image_bytes =
      IdxBytes(0x803, {n, split.rows, split.cols}, split.pixels);
  std::vector<uint8_t> label_bytes = IdxBytes(0x801, {n}, split.labels);
  if (gzip) {
    WriteGzipFile(images, image_bytes);
    WriteGzipFile(labels, label_bytes);
  } else {
    WriteFile(images, image_bytes);
    WriteFile(labels, label_bytes);
  }
  return images;
}

tcc_tensor_desc MakeTensor(const char *name, tcc_dtype dtype,
                           const std::vector<int64_t> &shape) {
  tcc_tensor_desc t{};
  t.name = name;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(shape.size());
  t.num_elements = 1;
  for (int64_t d : shape)
    t.num_elements *= d;
  t.size_bytes = t.num_elements *
                 (dtype == TCC_DTYPE_F64 || dtype == TCC_DTYPE_I64 ? 8 : 4);
  return t;
}

namespace {
int32_t ReturnOk(const tcc_step_args *args) {
  *args->loss = 0.0f;
  return TCC_STATUS_OK;
}
} // namespace

FakeStep::FakeStep(int64_t batch, int64_t values, int64_t classes)
    : w_shape{values, classes}, b_shape{classes}, image_shape{batch, values},
      label_shape{batch}, logits_shape{batch, classes} {
  params = {MakeTensor("w", TCC_DTYPE_F32, w_shape),
            MakeTensor("b", TCC_DTYPE_F32, b_shape)};
  params[0].init_kind = TCC_INIT_NORMAL;
  params[0].init_scale = 0.5;
  params[0].init_seed = 3;
  params[0].trainable = 1;
  params[1].trainable = 1;
  inputs = {MakeTensor("image", TCC_DTYPE_F32, image_shape),
            MakeTensor("label", TCC_DTYPE_I32, label_shape)};
  outputs = {MakeTensor("logits", TCC_DTYPE_F32, logits_shape)};
  descriptor.abi_version = TCC_STEP_ABI_VERSION;
  descriptor.struct_size = sizeof(tcc_step_descriptor);
  descriptor.model_name = "fake";
  descriptor.target = "cpu";
  descriptor.arch = "x86_64";
  descriptor.precision = "f32";
  descriptor.optimizer = "sgd";
  descriptor.loss_name = "loss";
  descriptor.default_learning_rate = 0.05;
  descriptor.lr_schedule = {TCC_LR_CONSTANT, 0.05, 0, 0, 0.0};
  descriptor.micro_batches = 1;
  descriptor.label_input = "label"; // the loss's class labels
  descriptor.workspace_bytes = 100;
  descriptor.train = ReturnOk;
  descriptor.eval = ReturnOk;
  Sync();
}

void FakeStep::Sync() {
  params[0].shape = w_shape.data();
  params[1].shape = b_shape.data();
  inputs[0].shape = image_shape.data();
  inputs[1].shape = label_shape.data();
  outputs[0].shape = logits_shape.data();
  descriptor.num_params = static_cast<int32_t>(params.size());
  descriptor.params = params.data();
  descriptor.num_inputs = static_cast<int32_t>(inputs.size());
  descriptor.inputs = inputs.data();
  descriptor.num_outputs = static_cast<int32_t>(outputs.size());
  descriptor.outputs = outputs.data();
}

std::string Slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

CliResult RunCommand(const std::string &binary, const std::string &args) {
  TempDir io;
  std::string command = binary + " " + args + " >" + io.File("out") + " 2>" +
                        io.File("err");
  int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(io.File("out")),
          Slurp(io.File("err"))};
}

} // namespace tcc::trun::testing
