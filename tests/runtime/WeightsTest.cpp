// trun --save-weights / --init-from (Weights.h): PyTorch names, layouts and
// aliases both ways, tcc-layout files written by older truns, dtype
// conversion and every error; the descriptor's param_torch checks and how
// --info shows it.
#include "runtime/trun/io/Weights.h"

#include "runtime/trun/io/Safetensors.h"
#include "runtime/trun/step/StepDescriptor.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <sstream>

namespace tcc::trun {
namespace {

using testing::FakeStep;
using testing::MakeTensor;
using testing::TempDir;

// A step whose parameters PyTorch holds differently:
//   fc1.w [3, 2]     torch fc1.weight [2, 3] (perm [1, 0], nn.Linear)
//   emb [4, 2]       torch wte.weight, alias lm_head.weight (tied)
//   b [2]            no torch entry: its own name and layout
//   k [2, 3, 4]      torch k [4, 2, 3] (perm [2, 0, 1])
struct TorchStep {
  TorchStep() {
    params = {MakeTensor("fc1.w", TCC_DTYPE_F32, fc1_shape),
              MakeTensor("emb", TCC_DTYPE_F32, emb_shape),
              MakeTensor("b", TCC_DTYPE_F32, b_shape),
              MakeTensor("k", TCC_DTYPE_F32, k_shape)};
    params[0].shape = fc1_shape.data();
    params[1].shape = emb_shape.data();
    params[2].shape = b_shape.data();
    params[3].shape = k_shape.data();
    for (tcc_tensor_desc &p : params)
      p.trainable = 1;
    torch[0] = {"fc1.weight", fc1_perm, 0, nullptr};
    torch[1] = {"wte.weight", nullptr, 1, emb_aliases};
    torch[2] = {"b", nullptr, 0, nullptr};
    torch[3] = {"k", k_perm, 0, nullptr};
    d = base.descriptor;
    d.num_params = static_cast<int32_t>(params.size());
    d.params = params.data();
    d.param_torch = torch;
    for (size_t i = 0; i < params.size(); ++i) {
      values.emplace_back(params[i].num_elements);
      for (size_t j = 0; j < values[i].size(); ++j)
        values[i][j] = static_cast<float>(100 * i + j) * 0.25f - 3;
    }
  }
  std::vector<const void *> Sources() const {
    return {values[0].data(), values[1].data(), values[2].data(), values[3].data()};
  }

  FakeStep base{2, 3, 4};
  std::vector<int64_t> fc1_shape{3, 2}, emb_shape{4, 2}, b_shape{2}, k_shape{2, 3, 4};
  int32_t fc1_perm[2] = {1, 0}, k_perm[3] = {2, 0, 1};
  const char *emb_aliases[1] = {"lm_head.weight"};
  std::vector<tcc_tensor_desc> params;
  tcc_torch_tensor torch[4];
  tcc_step_descriptor d{};
  std::vector<std::vector<float>> values;
};

// Element [i0][i1][i2] of `v` (row-major `shape`).
float At(const std::vector<float> &v, const std::vector<int64_t> &shape,
         std::vector<int64_t> index) {
  int64_t offset = 0;
  for (size_t k = 0; k < shape.size(); ++k)
    offset = offset * shape[k] + index[k];
  return v[offset];
}

std::vector<float> Floats(const SafetensorsFile::Tensor &t) {
  std::vector<float> out(t.size_bytes / sizeof(float));
  std::memcpy(out.data(), t.data, t.size_bytes);
  return out;
}

class WeightsTest : public ::testing::Test {
protected:
  // Loads path_ into fresh buffers (zeros).
  absl::Status Load(const LoadWeightsOptions &options = {}) {
    loaded_.assign(step_.params.size(), {});
    std::vector<void *> into;
    for (size_t i = 0; i < step_.params.size(); ++i) {
      loaded_[i].assign(step_.params[i].num_elements, 0.0f);
      into.push_back(loaded_[i].data());
    }
    return LoadWeights(path_, step_.d, into, options, &report_);
  }
  std::string LoadError() {
    absl::Status status = Load();
    EXPECT_FALSE(status.ok());
    return std::string(status.message());
  }
  // The tensors of a PyTorch state_dict of this step, in PyTorch's layout
  // (from a file SaveWeights wrote), to edit and write by hand.
  std::map<std::string, std::vector<float>> StateDict() {
    EXPECT_TRUE(SaveWeights(path_, step_.d, step_.Sources()).ok());
    absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path_);
    EXPECT_TRUE(file.ok()) << file.status();
    std::map<std::string, std::vector<float>> out;
    for (const auto &[name, t] : file->tensors()) {
      out[name] = Floats(t);
      shapes_[name] = t.shape;
    }
    return out;
  }
  void Write(const std::map<std::string, std::vector<float>> &tensors,
             const std::map<std::string, std::string> &metadata = {{"format", "pt"}}) {
    std::vector<TensorToWrite> list;
    for (const auto &[name, v] : tensors)
      list.push_back({name, TCC_DTYPE_F32, shapes_.at(name), v.data(),
                      static_cast<int64_t>(v.size() * sizeof(float))});
    ASSERT_TRUE(WriteSafetensors(path_, list, metadata).ok());
  }

  TempDir dir_;
  std::string path_ = dir_.File("w.safetensors");
  TorchStep step_;
  std::vector<std::vector<float>> loaded_;
  LoadedWeights report_;
  std::map<std::string, std::vector<int64_t>> shapes_;
};

TEST_F(WeightsTest, SavesPyTorchNamesLayoutsAndAliases) {
  ASSERT_TRUE(ValidateDescriptor(step_.d, "step.so").ok());
  ASSERT_TRUE(SaveWeights(path_, step_.d, step_.Sources()).ok());
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  std::map<std::string, std::string> metadata = file->metadata();
  EXPECT_EQ(metadata.erase("tcc_data_crc32"), 1u); // checked when read back
  EXPECT_EQ(metadata, (std::map<std::string, std::string>{
                          {"format", "pt"},
                          {"layout", "torch"},
                          {"model", "fake"},
                          {"producer", "trun"}}));
  const auto &t = file->tensors();
  ASSERT_EQ(t.size(), 5u);
  // nn.Linear: torch [o][i] = tcc [i][o].
  ASSERT_EQ(t.at("fc1.weight").shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> fc1 = Floats(t.at("fc1.weight"));
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(At(fc1, {2, 3}, {o, i}), At(step_.values[0], {3, 2}, {i, o}));
  // perm [2, 0, 1]: torch [a][b][c] = tcc [b][c][a].
  ASSERT_EQ(t.at("k").shape, (std::vector<int64_t>{4, 2, 3}));
  std::vector<float> k = Floats(t.at("k"));
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(At(k, {4, 2, 3}, {a, b, c}), At(step_.values[3], {2, 3, 4}, {b, c, a}));
  EXPECT_EQ(Floats(t.at("wte.weight")), step_.values[1]);
  EXPECT_EQ(Floats(t.at("lm_head.weight")), step_.values[1]);
  EXPECT_EQ(Floats(t.at("b")), step_.values[2]);
}

TEST_F(WeightsTest, LoadsWhatItSavesBackIntoTccLayouts) {
  ASSERT_TRUE(SaveWeights(path_, step_.d, step_.Sources()).ok());
  ASSERT_TRUE(Load().ok());
  for (size_t i = 0; i < step_.values.size(); ++i)
    EXPECT_EQ(loaded_[i], step_.values[i]) << step_.params[i].name;
  EXPECT_TRUE(report_.torch_layout);
  EXPECT_EQ(report_.permuted, 2);
  EXPECT_EQ(report_.from_alias, 0);
  EXPECT_EQ(report_.converted, 0);
}

TEST_F(WeightsTest, ReadsAStateDictWithoutMetadataAndATiedWeightUnderItsAlias) {
  std::map<std::string, std::vector<float>> sd = StateDict();
  sd.erase("wte.weight"); // PyTorch's save_model keeps one of tied tensors
  Write(sd, {});
  ASSERT_TRUE(Load().ok());
  for (size_t i = 0; i < step_.values.size(); ++i)
    EXPECT_EQ(loaded_[i], step_.values[i]) << step_.params[i].name;
  EXPECT_EQ(report_.from_alias, 1);
}

TEST_F(WeightsTest, ConvertsOtherFloatDtypes) {
  // Values exact in every dtype: F64, F16 (1 + 10 bits) and BF16 (1 + 7 bits).
  std::vector<double> f64 = {0.5, -1.25};
  uint16_t bf16[8] = {0x3f80, 0xc040, 0, 0x8000, 0x4100, 0x3e00, 0xbf00, 0x4000};
  std::vector<float> bf16_values = {1, -3, 0, -0.0f, 8, 0.125f, -0.5f, 2};
  std::vector<float> k(24, -2.0f);
  uint16_t small_half[6] = {0x0001, 0x8400, 0x7bff, 0x3c00, 0, 0xc000};
  std::vector<TensorToWrite> list = {
      {"fc1.weight", TCC_DTYPE_F16, {2, 3}, small_half, sizeof(small_half)},
      {"wte.weight", TCC_DTYPE_BF16, {4, 2}, bf16, sizeof(bf16)},
      {"b", TCC_DTYPE_F64, {2}, f64.data(), 16},
      {"k", TCC_DTYPE_F32, {4, 2, 3}, k.data(), 96}};
  ASSERT_TRUE(WriteSafetensors(path_, list, {}).ok());
  ASSERT_TRUE(Load().ok());
  EXPECT_EQ(loaded_[1], bf16_values);
  EXPECT_EQ(loaded_[2], (std::vector<float>{0.5f, -1.25f}));
  // f16 [2, 3] transposed into tcc's [3, 2]: the smallest subnormal, -2^-14,
  // the largest finite half, 1, 0, -2.
  std::vector<float> half_values = {0x1p-24f, -0x1p-14f, 65504.0f, 1.0f, 0.0f, -2.0f};
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(At(loaded_[0], {3, 2}, {i, o}), half_values[o * 3 + i]);
  EXPECT_EQ(report_.converted, 3);
}

TEST_F(WeightsTest, ReadsFilesInTccLayoutFromOlderTruns) {
  // Checkpoints and --save-weights before PyTorch layouts: tcc's names and
  // layouts, producer "trun", no "layout".
  std::vector<TensorToWrite> list;
  for (size_t i = 0; i < step_.params.size(); ++i)
    list.push_back(TensorToWriteOf(step_.params[i], step_.values[i].data()));
  ASSERT_TRUE(WriteSafetensors(path_, list, {{"model", "fake"}, {"producer", "trun"}}).ok());
  ASSERT_TRUE(Load().ok());
  for (size_t i = 0; i < step_.values.size(); ++i)
    EXPECT_EQ(loaded_[i], step_.values[i]) << step_.params[i].name;
  EXPECT_FALSE(report_.torch_layout);
  EXPECT_EQ(report_.permuted, 0);
  // The same file marked "layout": "tcc" reads the same way.
  ASSERT_TRUE(WriteSafetensors(path_, list, {{"layout", "tcc"}}).ok());
  EXPECT_TRUE(Load().ok());
}

TEST_F(WeightsTest, NamesAMissingTensorWithItsPyTorchShape) {
  std::map<std::string, std::vector<float>> sd = StateDict();
  sd.erase("fc1.weight");
  Write(sd);
  EXPECT_EQ(LoadError(), path_ + ": missing tensor 'fc1.weight' (parameter 'fc1.w' of step "
                                 "'fake': f32 [2, 3], PyTorch's layout of tcc's [3, 2])");
  sd = StateDict();
  sd.erase("wte.weight");
  sd.erase("lm_head.weight");
  Write(sd);
  EXPECT_EQ(LoadError(), path_ + ": missing tensor 'wte.weight' (parameter 'emb' of step "
                                 "'fake': f32 [4, 2], nor its alias 'lm_head.weight')");
  // trun's own file without "layout" has tcc's names: a PyTorch-named one
  // under that metadata is refused, saying so.
  sd = StateDict();
  Write(sd, {{"producer", "trun"}});
  EXPECT_EQ(LoadError(),
            path_ + ": missing tensor 'fc1.w' (parameter 'fc1.w' of step 'fake': f32 [3, 2]); "
                    "the file has tcc's names and layout (written by trun without \"layout\")");
}

TEST_F(WeightsTest, NamesAMisshapedTensorWithBothShapes) {
  std::map<std::string, std::vector<float>> sd = StateDict();
  shapes_["fc1.weight"] = {3, 2}; // tcc's layout where PyTorch's is wanted
  Write(sd);
  EXPECT_EQ(LoadError(), path_ + ": tensor 'fc1.weight' has shape [3, 2] but parameter 'fc1.w' "
                                 "of step 'fake' needs f32 [2, 3], PyTorch's layout of tcc's "
                                 "[3, 2]");
  sd = StateDict();
  sd["b"].push_back(1);
  shapes_["b"] = {3};
  Write(sd);
  EXPECT_EQ(LoadError(), path_ + ": tensor 'b' has shape [3] but parameter 'b' of step 'fake' "
                                 "needs f32 [2]");
}

TEST_F(WeightsTest, RefusesDtypesItCannotConvert) {
  std::vector<float> fc1(6), emb(8), k(24);
  int64_t b[2] = {1, 2};
  std::vector<TensorToWrite> list = {
      {"fc1.weight", TCC_DTYPE_F32, {2, 3}, fc1.data(), 24},
      {"wte.weight", TCC_DTYPE_F32, {4, 2}, emb.data(), 32},
      {"b", TCC_DTYPE_I64, {2}, b, 16},
      {"k", TCC_DTYPE_F32, {4, 2, 3}, k.data(), 96}};
  ASSERT_TRUE(WriteSafetensors(path_, list, {}).ok());
  EXPECT_EQ(LoadError(), path_ + ": tensor 'b' is I64 but parameter 'b' of step 'fake' is f32 "
                                 "(trun reads F32, F64, F16 or BF16 into it)");
}

TEST_F(WeightsTest, RefusesExtraTensorsUnlessAskedToIgnoreThem) {
  std::map<std::string, std::vector<float>> sd = StateDict();
  sd["bn.running_mean"] = {1, 2};
  shapes_["bn.running_mean"] = {2};
  Write(sd);
  EXPECT_EQ(LoadError(), path_ + ": tensor 'bn.running_mean' is not a parameter of step 'fake' "
                                 "(nor a PyTorch name or alias of one); remove it, or pass "
                                 "--init-from-ignore-extra to skip tensors the step does not "
                                 "have");
  // Refused after every parameter matched: nothing was written.
  for (const std::vector<float> &v : loaded_)
    for (float x : v)
      EXPECT_EQ(x, 0.0f);
  ASSERT_TRUE(Load({/*ignore_extra=*/true}).ok());
  EXPECT_EQ(report_.ignored, std::vector<std::string>{"bn.running_mean"});
  EXPECT_EQ(loaded_[2], step_.values[2]);
}

// Issue 36: a NaN or an infinity in a weight is refused (named arrays
// refuse them too), naming the tensor and the element.
TEST_F(WeightsTest, RefusesNonFiniteWeights) {
  std::map<std::string, std::vector<float>> sd = StateDict();
  sd["b"][1] = std::nanf("");
  Write(sd);
  EXPECT_NE(LoadError().find("tensor 'b' holds NaN at element 1"), std::string::npos);
  sd["b"][1] = 0.0f;
  sd["k"][5] = -INFINITY;
  Write(sd);
  EXPECT_NE(LoadError().find("tensor 'k' holds an infinity at element 5"), std::string::npos);
}

// Files trun writes carry their data's CRC-32 (tcc_data_crc32): changed
// bytes are an error on reading, not weights to train from.
TEST_F(WeightsTest, ChangedBytesInATrunFileAreAnError) {
  ASSERT_TRUE(SaveWeights(path_, step_.d, step_.Sources()).ok());
  std::vector<uint8_t> bytes = testing::ReadFileBytes(path_);
  bytes[bytes.size() - 3] ^= 0x10; // inside the last tensor's data
  testing::WriteFile(path_, bytes);
  std::string error = LoadError();
  EXPECT_NE(error.find("the tensor data does not match its checksum (tcc_data_crc32"),
            std::string::npos)
      << error;
}

TEST_F(WeightsTest, TiedTensorsMustBeEqual) {
  std::map<std::string, std::vector<float>> sd = StateDict();
  sd["lm_head.weight"][5] += 1;
  Write(sd);
  EXPECT_EQ(LoadError(), path_ + ": tensors 'wte.weight' and 'lm_head.weight' differ, but both "
                                 "hold parameter 'emb' of step 'fake' (tied weights must be "
                                 "equal)");
}

TEST_F(WeightsTest, RefusesAnUnknownLayout) {
  Write({}, {{"layout", "jax"}});
  EXPECT_EQ(LoadError(), path_ + ": metadata \"layout\" is 'jax'; trun reads \"torch\" "
                                 "(PyTorch's names and layouts) or \"tcc\"");
}

TEST_F(WeightsTest, StepsWithoutATableUseTheirOwnNamesAndLayouts) {
  step_.d.param_torch = nullptr;
  ASSERT_TRUE(SaveWeights(path_, step_.d, step_.Sources()).ok());
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path_);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->tensors().size(), 4u);
  EXPECT_EQ(file->tensors().at("fc1.w").shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Floats(file->tensors().at("fc1.w")), step_.values[0]);
  // A step built before param_torch: its struct ends before the field.
  step_.d.param_torch = step_.torch;
  step_.d.struct_size = offsetof(tcc_step_descriptor, param_torch);
  EXPECT_EQ(TorchTensorOf(step_.d, 0).name, "fc1.w");
  EXPECT_TRUE(TorchTensorOf(step_.d, 0).perm.empty());
  ASSERT_TRUE(Load().ok());
  EXPECT_EQ(loaded_[0], step_.values[0]);
}

TEST(PermuteCopyTest, MatchesTorchPermute) {
  // shape [2, 3, 4, 5] permuted by [3, 1, 0, 2]: out[a][b][c][d] =
  // in[c][b][d][a].
  std::vector<int64_t> shape = {2, 3, 4, 5};
  std::vector<float> in(120), out(120);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<float>(i);
  PermuteCopy(in.data(), shape, {3, 1, 0, 2}, sizeof(float), out.data());
  for (int64_t a = 0; a < 5; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t d = 0; d < 4; ++d)
          ASSERT_EQ(At(out, {5, 3, 2, 4}, {a, b, c, d}), At(in, shape, {c, b, d, a}));
}

std::string ValidationError(const tcc_step_descriptor &d) {
  absl::Status status = ValidateDescriptor(d, "step.so");
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

TEST(TorchTableTest, ValidatesPermsAndKeys) {
  TorchStep step;
  ASSERT_TRUE(ValidateDescriptor(step.d, "step.so").ok());
  step.k_perm[2] = 0;
  EXPECT_EQ(ValidationError(step.d),
            "step.so: param 'k': torch perm [2, 0, 0] is not a permutation of its 3 dimensions");
  step.k_perm[2] = 1;
  step.emb_aliases[0] = "fc1.weight";
  EXPECT_EQ(ValidationError(step.d), "step.so: param 'emb': torch alias #0 'fc1.weight' is "
                                     "also a key of param 'fc1.w'");
  step.emb_aliases[0] = "";
  EXPECT_EQ(ValidationError(step.d), "step.so: param 'emb' has no torch alias #0");
  step.torch[1].aliases = nullptr;
  EXPECT_EQ(ValidationError(step.d),
            "step.so: param 'emb': 1 torch aliases but a null list");
  step.torch[1] = {nullptr, nullptr, 0, nullptr};
  EXPECT_EQ(ValidationError(step.d), "step.so: param 'emb' has no torch name");
}

TEST(TorchTableTest, InfoShowsPyTorchNamesAndLayouts) {
  TorchStep step;
  std::ostringstream out;
  PrintDescriptorInfo(step.d, out);
  std::string info = out.str();
  EXPECT_NE(info.find("  fc1.w  f32 [3, 2]  24 bytes  init zeros  trainable  torch fc1.weight "
                      "[2, 3] (perm [1, 0])\n"),
            std::string::npos)
      << info;
  EXPECT_NE(info.find("  torch wte.weight [4, 2], aliases lm_head.weight\n"), std::string::npos)
      << info;
  EXPECT_NE(info.find("  torch k [4, 2, 3] (perm [2, 0, 1])\n"), std::string::npos) << info;
  // b keeps its name and layout: nothing to say.
  EXPECT_NE(info.find("  b  f32 [2]  8 bytes  init zeros  trainable\n"), std::string::npos)
      << info;
}

} // namespace
} // namespace tcc::trun
