// Named arrays (StepBinding kNamedArrays): binding, the files behind them,
// dtype conversion, errors, and the batches they make (same rows from every
// array, shuffling, resume position).
#include "runtime/trun/data/ArrayFiles.h"
#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/NamedArrays.h"
#include "runtime/trun/data/StepBinding.h"

#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <optional>
#include <set>

namespace tcc::trun {
namespace {

using testing::TempDir;

int64_t SizeOf(tcc_dtype dtype) {
  switch (dtype) {
  case TCC_DTYPE_F64:
  case TCC_DTYPE_I64: return 8;
  case TCC_DTYPE_U8: return 1;
  case TCC_DTYPE_BF16:
  case TCC_DTYPE_F16: return 2;
  default: return 4;
  }
}

// An in-memory step with the inputs a test adds, and optionally "logits".
struct ArraysStep {
  ArraysStep &Input(const char *name, tcc_dtype dtype,
                    std::vector<int64_t> shape) {
    shapes.push_back(std::move(shape));
    tcc_tensor_desc t{};
    t.name = name;
    t.dtype = dtype;
    t.rank = static_cast<int32_t>(shapes.back().size());
    t.shape = shapes.back().data();
    t.num_elements = 1;
    for (int64_t d : shapes.back())
      t.num_elements *= d;
    t.size_bytes = t.num_elements * SizeOf(dtype);
    inputs.push_back(t);
    return Sync();
  }
  ArraysStep &Logits(std::vector<int64_t> shape) {
    shapes.push_back(std::move(shape));
    tcc_tensor_desc t{};
    t.name = "logits";
    t.dtype = TCC_DTYPE_F32;
    t.rank = static_cast<int32_t>(shapes.back().size());
    t.shape = shapes.back().data();
    t.num_elements = shapes.back()[0] * shapes.back()[1];
    t.size_bytes = t.num_elements * 4;
    outputs.push_back(t);
    return Sync();
  }
  ArraysStep &Sync() {
    d.model_name = "reg";
    d.num_inputs = static_cast<int32_t>(inputs.size());
    d.inputs = inputs.data();
    d.num_outputs = static_cast<int32_t>(outputs.size());
    d.outputs = outputs.data();
    return *this;
  }
  StepBinding Bind(bool named = false) {
    absl::StatusOr<StepBinding> b = BindStep(d, named);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : StepBinding{};
  }

  std::deque<std::vector<int64_t>> shapes; // never moves
  std::vector<tcc_tensor_desc> inputs, outputs;
  tcc_step_descriptor d{};
};

// A stored array of `values` converted to T.
template <typename T>
StoredArray Stored(const std::string &name, ArrayType type,
                   std::vector<int64_t> shape, const std::vector<double> &values) {
  StoredArray a;
  a.name = name;
  a.source = name + ".npy";
  a.type = type;
  a.shape = std::move(shape);
  a.bytes.resize(values.size() * sizeof(T));
  for (size_t i = 0; i < values.size(); ++i) {
    T v = static_cast<T>(values[i]);
    std::memcpy(a.bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
  return a;
}

std::vector<double> Iota(int64_t n, double scale = 1) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = i * scale;
  return v;
}

std::string BindError(ArraysStep &step, std::vector<StoredArray> arrays,
                      bool named = false) {
  StepBinding binding = step.Bind(named);
  absl::StatusOr<NamedArrays> bound =
      NamedArrays::Bind(std::move(arrays), "--data", step.d, binding);
  EXPECT_FALSE(bound.ok());
  return bound.ok() ? "" : std::string(bound.status().message());
}

// A .npy file of `values` converted to T (testing::WriteNpy).
template <typename T>
void WriteNpy(const std::string &path, const std::string &descr,
              const std::vector<int64_t> &shape, const std::vector<double> &values) {
  std::vector<T> stored(values.begin(), values.end());
  testing::WriteNpy(path, descr, shape, stored);
}

// A safetensors file of float32 tensors, written by hand.
void WriteF32Safetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, std::vector<int64_t>>> &tensors,
    const std::vector<std::vector<double>> &values) {
  std::string header = "{";
  std::vector<uint8_t> data;
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string shape;
    for (int64_t d : tensors[i].second)
      shape += (shape.empty() ? "" : ",") + std::to_string(d);
    size_t begin = data.size();
    for (double value : values[i]) {
      float v = static_cast<float>(value);
      const uint8_t *p = reinterpret_cast<const uint8_t *>(&v);
      data.insert(data.end(), p, p + 4);
    }
    header += (i ? "," : "") + std::string("\"") + tensors[i].first +
              "\":{\"dtype\":\"F32\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(begin) + "," +
              std::to_string(data.size()) + "]}";
  }
  header += "}";
  while (header.size() % 8)
    header += ' ';
  std::vector<uint8_t> bytes(8);
  uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  testing::WriteFile(path, bytes);
}

TEST(NamedArraysBindingTest, StepsThatAreNoImageClassifierBindNamedArrays) {
  ArraysStep regression;
  regression.Input("x", TCC_DTYPE_F32, {4, 3}).Input("y", TCC_DTYPE_F32, {4, 1});
  StepBinding b = regression.Bind();
  EXPECT_TRUE(b.is_named_arrays());
  EXPECT_EQ(b.batch_size, 4);
  EXPECT_EQ(b.array_batch_bytes, (std::vector<int64_t>{48, 16}));
  EXPECT_EQ(b.logits_output, -1);
  EXPECT_EQ(b.target_input, -1);

  ArraysStep one; // an autoencoder: one input only
  one.Input("x", TCC_DTYPE_F32, {8, 2, 2});
  EXPECT_TRUE(one.Bind().is_named_arrays());

  // i64 labels are no image classifier's; with logits they give accuracy.
  ArraysStep classifier;
  classifier.Input("image", TCC_DTYPE_F32, {8, 5})
      .Input("label", TCC_DTYPE_I64, {8})
      .Logits({8, 3});
  b = classifier.Bind();
  EXPECT_TRUE(b.is_named_arrays());
  EXPECT_EQ(b.target_input, 1);
  EXPECT_EQ(b.logits_output, 0);
  EXPECT_EQ(b.num_classes, 3);

  // Two integer inputs: which is the label is unknown, so loss only.
  ArraysStep two_ints;
  two_ints.Input("a", TCC_DTYPE_I32, {8}).Input("b", TCC_DTYPE_I32, {8})
      .Logits({8, 3});
  EXPECT_EQ(two_ints.Bind().logits_output, -1);
}

// The labels are the input the step's loss reads as class labels (the
// descriptor's label_input), not an integer input [batch] that happens to
// be the only one: a categorical feature feeding an embedding.
TEST(NamedArraysBindingTest, LabelsAreTheInputTheLossReads) {
  ArraysStep regression; // x, a category, y; output 'logits' [8, 1]
  regression.Input("x", TCC_DTYPE_F32, {8, 3})
      .Input("cat", TCC_DTYPE_I32, {8})
      .Input("y", TCC_DTYPE_F32, {8, 1})
      .Logits({8, 1});
  // A step built before label_input: the only integer input [8] was taken.
  EXPECT_EQ(regression.Bind().target_input, 1);
  regression.d.struct_size = sizeof(tcc_step_descriptor);
  regression.d.label_input = nullptr; // an MSE loss reads no labels
  StepBinding b = regression.Bind();
  EXPECT_EQ(b.target_input, -1);
  EXPECT_EQ(b.logits_output, -1);
  // 'cat' holds 5 with 'logits' of width 1: fed as it is, no label check.
  absl::StatusOr<NamedArrays> arrays = NamedArrays::Bind(
      {Stored<float>("x", ArrayType::kF32, {8, 3}, Iota(24)),
       Stored<int32_t>("cat", ArrayType::kI32, {8}, {5, 1, 2, 3, 4, 5, 6, 7}),
       Stored<float>("y", ArrayType::kF32, {8}, Iota(8))},
      "--data", regression.d, b);
  EXPECT_TRUE(arrays.ok()) << arrays.status();

  ArraysStep classifier; // the category and the labels: two integer inputs
  classifier.Input("cat", TCC_DTYPE_I32, {8})
      .Input("x", TCC_DTYPE_F32, {8, 3})
      .Input("label", TCC_DTYPE_I64, {8})
      .Logits({8, 4});
  EXPECT_EQ(classifier.Bind().target_input, -1); // before label_input: unknown
  classifier.d.struct_size = sizeof(tcc_step_descriptor);
  classifier.d.label_input = "label";
  b = classifier.Bind();
  EXPECT_EQ(b.target_input, 2);
  EXPECT_EQ(b.num_classes, 4);
  // The labels are checked against 'logits', the category is not.
  arrays = NamedArrays::Bind(
      {Stored<int32_t>("cat", ArrayType::kI32, {2}, {9, 9}),
       Stored<float>("x", ArrayType::kF32, {2, 3}, Iota(6)),
       Stored<int64_t>("label", ArrayType::kI64, {2}, {3, 4})},
      "--data", classifier.d, b);
  ASSERT_FALSE(arrays.ok());
  EXPECT_EQ(arrays.status().message(),
            "label.npy: label 4 of sample 1 in array 'label' is out of range "
            "for 'logits' width 4");

  // Labels that are no integer input [batch] (token targets [batch, T]
  // are not per sample): no accuracy. An index that is no input: the
  // descriptor is wrong.
  classifier.d.label_input = "x";
  EXPECT_EQ(classifier.Bind().target_input, -1);
  classifier.d.label_input = "labels";
  absl::StatusOr<StepBinding> wrong = BindStep(classifier.d, true);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(),
            "step 'reg' declares its labels input 'labels', which is not one of its inputs");
}

TEST(NamedArraysBindingTest, ImageClassifiersAndTokenModelsBindAsBeforeUnlessAsked) {
  ArraysStep image;
  image.Input("label", TCC_DTYPE_I32, {8}).Input("image", TCC_DTYPE_F32, {8, 784})
      .Logits({8, 10});
  StepBinding b = image.Bind();
  EXPECT_EQ(b.kind, StepKind::kImageClassifier);
  EXPECT_EQ(b.data_input, 1);
  EXPECT_EQ(b.target_input, 0);
  b = image.Bind(/*named=*/true);
  EXPECT_TRUE(b.is_named_arrays());
  EXPECT_EQ(b.target_input, 0); // i32 labels with logits: accuracy

  ArraysStep tokens;
  tokens.Input("tokens", TCC_DTYPE_I32, {4, 16}).Input("targets", TCC_DTYPE_I32, {4, 16});
  EXPECT_TRUE(tokens.Bind().is_token_model());
  EXPECT_TRUE(tokens.Bind(/*named=*/true).is_named_arrays());
}

TEST(NamedArraysBindingTest, RefusesInputsWithoutOneBatchDimension) {
  ArraysStep scalar;
  scalar.Input("x", TCC_DTYPE_F32, {4, 3}).Input("s", TCC_DTYPE_F32, {});
  absl::StatusOr<StepBinding> b = BindStep(scalar.d);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "step input 's' has shape []; named arrays feed inputs [batch, "
            "...], one row per sample");
  ArraysStep differ;
  differ.Input("x", TCC_DTYPE_F32, {8, 784}).Input("label", TCC_DTYPE_I32, {4});
  b = BindStep(differ.d);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "step inputs 'x' [8, 784] and 'label' [4] differ in their first "
            "dimension; named arrays feed every input [batch, ...] from the "
            "same batch of samples");
}

TEST(ArrayFilesTest, ParsesEveryForm) {
  TempDir dir;
  WriteNpy<float>(dir.File("a.npy"), "<f4", {2}, {1, 2});
  WriteNpy<float>(dir.File("b.npy"), "<f4", {2}, {1, 2});
  testing::WriteFile(dir.File("notes.txt"), {'x'});
  absl::StatusOr<std::vector<ArraySpec>> specs = ParseArraySpecs(
      "x=p/x.npy,y=t.safetensors,z=t.safetensors:zz,whole.safetensors,q/w.npy," +
          dir.path(),
      "--data");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 7u);
  auto is = [](const ArraySpec &s, const std::string &name,
               const std::string &path, const std::string &tensor) {
    return s.name == name && s.path == path && s.tensor == tensor;
  };
  EXPECT_TRUE(is((*specs)[0], "x", "p/x.npy", ""));
  EXPECT_TRUE(is((*specs)[1], "y", "t.safetensors", "y"));
  EXPECT_TRUE(is((*specs)[2], "z", "t.safetensors", "zz"));
  EXPECT_TRUE(is((*specs)[3], "", "whole.safetensors", ""));
  EXPECT_TRUE(is((*specs)[4], "w", "q/w.npy", ""));
  EXPECT_TRUE(is((*specs)[5], "a", dir.File("a.npy"), ""));
  EXPECT_TRUE(is((*specs)[6], "b", dir.File("b.npy"), ""));

  auto error = [](const std::string &value) {
    absl::StatusOr<std::vector<ArraySpec>> s = ParseArraySpecs(value, "--test");
    EXPECT_FALSE(s.ok()) << value;
    return std::string(s.status().message());
  };
  EXPECT_EQ(error("x=a.npy,,y=b.npy"), "--test: empty item in 'x=a.npy,,y=b.npy'");
  EXPECT_EQ(error("=a.npy"),
            "--test: '=a.npy' is not NAME=FILE.npy or NAME=FILE.safetensors[:TENSOR]");
  EXPECT_EQ(error("x=a.csv"),
            "--test: 'x=a.csv': 'a.csv' is neither a .npy nor a .safetensors file");
  EXPECT_EQ(error("x=t.safetensors:"), "--test: 'x=t.safetensors:' names no tensor after ':'");
  EXPECT_EQ(error(dir.File("nope")), "--test: '" + dir.File("nope") + "' not found");
  TempDir empty;
  EXPECT_EQ(error(empty.path()),
            "--test: directory '" + empty.path() + "' holds no .npy files");
}

TEST(ArrayFilesTest, TellsNamedArraysFromImageAndTokenData) {
  TempDir npy, idx;
  WriteNpy<float>(npy.File("x.npy"), "<f4", {2}, {1, 2});
  testing::WriteFile(idx.File("train-images-idx3-ubyte"), {0});
  testing::WriteFile(idx.File("x.npy"), {0});
  EXPECT_TRUE(IsNamedArraysValue("x=a.npy"));
  EXPECT_TRUE(IsNamedArraysValue("a.npy,y=b.npy"));
  EXPECT_TRUE(IsNamedArraysValue("train.safetensors"));
  EXPECT_TRUE(IsNamedArraysValue("a.npy")); // images need two files
  EXPECT_TRUE(IsNamedArraysValue(npy.path()));
  EXPECT_FALSE(IsNamedArraysValue(idx.path())); // Fashion-MNIST wins
  EXPECT_FALSE(IsNamedArraysValue("images.npy,labels.npy"));
  EXPECT_FALSE(IsNamedArraysValue("train-images.gz,train-labels.gz"));
  EXPECT_FALSE(IsNamedArraysValue("data/train_*.bin"));
}

TEST(NamedArraysTest, ReadsNpyAndSafetensorsAndConverts) {
  TempDir dir;
  ArraysStep step;
  step.Input("x", TCC_DTYPE_F32, {2, 3})
      .Input("y", TCC_DTYPE_F32, {2, 1})
      .Input("k", TCC_DTYPE_I32, {2})
      .Input("w", TCC_DTYPE_F64, {2, 2});
  StepBinding binding = step.Bind();
  // x: float64 (rounded to float32), y: (N,) for [B, 1], k: int64, w: a
  // safetensors float32 tensor under another name.
  std::vector<double> x = {0.1, 0.2, 0.3, 1e-3, 2.5, -7, 1.0 / 3, 4, 5};
  WriteNpy<double>(dir.File("x.npy"), "<f8", {3, 3}, x);
  WriteNpy<double>(dir.File("y.npy"), "<f8", {3}, {10, 20, 30});
  WriteNpy<int64_t>(dir.File("k.npy"), "<i8", {3}, {-5, 0, 2147483647});
  WriteF32Safetensors(dir.File("t.safetensors"), {{"ww", {3, 2}}},
                      {{1, 2, 3, 4, 5, 6.5}});
  absl::StatusOr<NamedArrays> arrays = NamedArrays::Load(
      dir.File("x.npy") + "," + dir.File("y.npy") + ",k=" + dir.File("k.npy") +
          ",w=" + dir.File("t.safetensors") + ":ww",
      "--data", step.d, binding);
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  ASSERT_EQ(arrays->count(), 3);
  ASSERT_EQ(arrays->arrays().size(), 4u);
  const NamedArrays::Array &ax = arrays->arrays()[0];
  EXPECT_TRUE(ax.converted);
  EXPECT_EQ(ax.sample_bytes, 12);
  for (size_t i = 0; i < x.size(); ++i) {
    float v;
    std::memcpy(&v, ax.data.data() + 4 * i, 4);
    EXPECT_EQ(v, static_cast<float>(x[i])) << i; // nearest float32
  }
  int32_t k[3];
  std::memcpy(k, arrays->arrays()[2].data.data(), 12);
  EXPECT_EQ(k[0], -5);
  EXPECT_EQ(k[2], 2147483647);
  double w[6];
  std::memcpy(w, arrays->arrays()[3].data.data(), 48);
  EXPECT_EQ(w[5], 6.5);
  EXPECT_EQ(arrays->BindingLines(step.d, binding),
            "input 'x' f32 [2, 3] <- " + dir.File("x.npy") +
                " (float64 (3, 3), converted to f32), 3 samples\n"
                "input 'y' f32 [2, 1] <- " + dir.File("y.npy") +
                " (float64 (3,), converted to f32), 3 samples\n"
                "input 'k' i32 [2] <- " + dir.File("k.npy") +
                " (int64 (3,), converted to i32), 3 samples\n"
                "input 'w' f64 [2, 2] <- " + dir.File("t.safetensors") +
                ":ww (float32 (3, 2), converted to f64), 3 samples\n");

  // A whole safetensors file: tensor names are input names.
  ArraysStep xy;
  xy.Input("x", TCC_DTYPE_F32, {1, 2}).Input("y", TCC_DTYPE_F32, {1});
  WriteF32Safetensors(dir.File("xy.safetensors"), {{"x", {2, 2}}, {"y", {2, 1}}},
                      {{1, 2, 3, 4}, {5, 6}});
  arrays = NamedArrays::Load(dir.File("xy.safetensors"), "--data", xy.d, xy.Bind());
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  EXPECT_FALSE(arrays->arrays()[0].converted);
  EXPECT_EQ(arrays->count(), 2);
}

TEST(NamedArraysTest, NamesEveryMismatch) {
  ArraysStep step;
  step.Input("x", TCC_DTYPE_F32, {4, 3}).Input("y", TCC_DTYPE_F32, {4, 1});
  using F64 = double;
  auto x = [](int64_t n, int64_t f = 3) {
    return Stored<F64>("x", ArrayType::kF64, {n, f}, Iota(n * f));
  };
  auto y = [](int64_t n) { return Stored<F64>("y", ArrayType::kF64, {n}, Iota(n)); };
  EXPECT_EQ(BindError(step, {x(10)}),
            "step input 'y' f32 [4, 1] has no array in --data (add y=FILE.npy)");
  StoredArray z = y(10);
  z.name = "z";
  z.source = "z.npy";
  EXPECT_EQ(BindError(step, {x(10), y(10), z}),
            "--data: array 'z' (z.npy) is not an input of step 'reg' (inputs: "
            "x, y); name it INPUT=FILE");
  StoredArray x2 = x(10);
  x2.source = "other.npy";
  EXPECT_EQ(BindError(step, {x(10), y(10), x2}),
            "--data: two arrays for step input 'x': x.npy and other.npy");
  EXPECT_EQ(BindError(step, {x(10, 4), y(10)}),
            "x.npy: array 'x' float64 (10, 4) has samples shaped (4,); step "
            "input 'x' f32 [4, 3] takes (3,) per sample");
  EXPECT_EQ(BindError(step, {x(10), y(9)}),
            "--data: sample counts differ: 'x' (x.npy) has 10, 'y' (y.npy) has 9");
  EXPECT_EQ(BindError(step, {x(0), y(0)}), "x.npy: array 'x' has no samples");
  EXPECT_EQ(BindError(step, {Stored<F64>("x", ArrayType::kF64, {}, {1}), y(1)}),
            "x.npy: array 'x' is a scalar; arrays hold one row per sample "
            "(samples, ...)");
  std::vector<double> bad = Iota(30);
  bad[7] = NAN;
  EXPECT_EQ(BindError(step, {Stored<F64>("x", ArrayType::kF64, {10, 3}, bad), y(10)}),
            "x.npy: value nan at index 7 (sample 2) of array 'x' is nan; float "
            "values must be finite (step input 'x' is f32)");
  bad[7] = 1e39;
  EXPECT_EQ(BindError(step, {Stored<F64>("x", ArrayType::kF64, {10, 3}, bad), y(10)}),
            "x.npy: value 1e+39 at index 7 (sample 2) of array 'x' is beyond "
            "float32's range (step input 'x' is f32)");
  // Integers into f32: exact ones only.
  std::vector<double> ints = Iota(30);
  ints[4] = 16777217; // 2^24 + 1
  EXPECT_EQ(BindError(step, {Stored<int64_t>("x", ArrayType::kI64, {10, 3}, ints), y(10)}),
            "x.npy: value 16777217 at index 4 (sample 1) of array 'x' is not "
            "exact in float32 (step input 'x' is f32)");
}

TEST(NamedArraysTest, IntegerAndHalfInputsTakeExactValuesOnly) {
  ArraysStep step;
  step.Input("label", TCC_DTYPE_I32, {2}).Input("u", TCC_DTYPE_U8, {2})
      .Input("h", TCC_DTYPE_BF16, {2});
  auto arrays = [](std::vector<double> labels, std::vector<double> u, ArrayType h) {
    return std::vector<StoredArray>{
        Stored<double>("label", ArrayType::kF64, {3}, labels),
        Stored<int64_t>("u", ArrayType::kI64, {3}, u),
        Stored<uint16_t>("h", h, {3}, {0x3f80, 0x4000, 0})};
  };
  StepBinding binding = step.Bind();
  absl::StatusOr<NamedArrays> ok = NamedArrays::Bind(
      arrays({0, 1, 2}, {0, 255, 7}, ArrayType::kBF16), "--data", step.d, binding);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_FALSE(ok->arrays()[2].converted); // bf16 as stored
  EXPECT_EQ(ok->arrays()[1].data, (std::vector<uint8_t>{0, 255, 7}));
  EXPECT_EQ(BindError(step, arrays({0, 1.5, 2}, {0, 1, 2}, ArrayType::kBF16)),
            "label.npy: value 1.5 at index 1 (sample 1) of array 'label' is "
            "not a whole number (step input 'label' is i32)");
  EXPECT_EQ(BindError(step, arrays({0, 1, 2}, {0, 256, 2}, ArrayType::kBF16)),
            "u.npy: value 256 at index 1 (sample 1) of array 'u' is out of "
            "u8's range (step input 'u' is u8)");
  EXPECT_EQ(BindError(step, arrays({0, 1, 3e9}, {0, 1, 2}, ArrayType::kBF16)),
            "label.npy: value 3000000000 at index 2 (sample 2) of array 'label' "
            "is out of i32's range (step input 'label' is i32)");
  EXPECT_EQ(BindError(step, arrays({0, 1, 2}, {0, 1, 2}, ArrayType::kF16)),
            "h.npy: float16 array 'h' cannot feed step input 'h' bf16 [2] (a "
            "bf16 input takes bfloat16 arrays only)");
}

TEST(NamedArraysTest, LabelsOfTheAccuracyMustFitTheLogits) {
  ArraysStep step;
  step.Input("x", TCC_DTYPE_F32, {2, 2}).Input("label", TCC_DTYPE_I64, {2})
      .Logits({2, 3});
  EXPECT_EQ(BindError(step, {Stored<float>("x", ArrayType::kF32, {3, 2}, Iota(6)),
                             Stored<int64_t>("label", ArrayType::kI64, {3}, {0, 3, 1})}),
            "label.npy: label 3 of sample 1 in array 'label' is out of range "
            "for 'logits' width 3");
}

TEST(NamedArraysTest, FileErrorsNameTheFile) {
  TempDir dir;
  ArraysStep step;
  step.Input("x", TCC_DTYPE_F32, {2, 3});
  auto error = [&](const std::string &value) {
    absl::StatusOr<NamedArrays> a =
        NamedArrays::Load(value, "--data", step.d, step.Bind());
    EXPECT_FALSE(a.ok()) << value;
    return std::string(a.status().message());
  };
  EXPECT_EQ(error("x=" + dir.File("missing.npy")).find("cannot open " + dir.File("missing.npy")),
            0u);
  testing::WriteFile(dir.File("bad.npy"), {'n', 'o', 'p', 'e', '!', '!', '!', '!'});
  EXPECT_EQ(error("x=" + dir.File("bad.npy")),
            dir.File("bad.npy") + ": not a .npy file (no \\x93NUMPY magic)");
  WriteNpy<float>(dir.File("c.npy"), "<c8", {1}, {0, 0});
  EXPECT_EQ(error("x=" + dir.File("c.npy")),
            dir.File("c.npy") + ": unsupported dtype '<c8' (complex64); trun reads "
            "bool, integer (8 to 64 bits) and float16/32/64 arrays");
  WriteF32Safetensors(dir.File("t.safetensors"), {{"a", {1}}, {"b", {1}}}, {{1}, {2}});
  EXPECT_EQ(error("x=" + dir.File("t.safetensors")),
            dir.File("t.safetensors") + ": no tensor 'x' (it holds a, b)");
  testing::WriteFile(dir.File("cut.safetensors"), {1, 2, 3});
  EXPECT_NE(error("x=" + dir.File("cut.safetensors")).find(dir.File("cut.safetensors")),
            std::string::npos);
}

// x row i = {i, i + 0.5}, y row i = 10 i: every row of a batch must pair
// them, batches follow EpochPermutation, and SeekTo lands where a fresh
// source would be.
class NamedArraysBatchesTest : public ::testing::Test {
protected:
  void SetUp() override {
    step_.Input("x", TCC_DTYPE_F32, {4, 2}).Input("y", TCC_DTYPE_I64, {4, 1});
    binding_ = step_.Bind();
    std::vector<double> x;
    for (int64_t i = 0; i < kCount; ++i)
      x.insert(x.end(), {double(i), i + 0.5});
    absl::StatusOr<NamedArrays> a = NamedArrays::Bind(
        {Stored<double>("x", ArrayType::kF64, {kCount, 2}, x),
         Stored<int32_t>("y", ArrayType::kI32, {kCount}, Iota(kCount, 10))},
        "--data", step_.d, binding_);
    ASSERT_TRUE(a.ok()) << a.status();
    arrays_ = std::move(*a);
  }
  // The sample of each row, checking that x and y agree.
  std::vector<int64_t> Rows(const HostBatch &batch, int64_t rows) {
    std::vector<int64_t> samples;
    for (int64_t r = 0; r < rows; ++r) {
      const float *x = batch.arrays[0].as<float>() + 2 * r;
      int64_t y = batch.arrays[1].as<int64_t>()[r];
      EXPECT_EQ(x[1], x[0] + 0.5f);
      EXPECT_EQ(y, 10 * static_cast<int64_t>(x[0])) << "row " << r;
      samples.push_back(static_cast<int64_t>(x[0]));
    }
    return samples;
  }
  static constexpr int64_t kCount = 10;
  ArraysStep step_;
  StepBinding binding_;
  std::optional<NamedArrays> arrays_;
};

TEST_F(NamedArraysBatchesTest, HostBatchHoldsOneBufferPerInput) {
  HostBatch batch(binding_);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch.arrays.size(), 2u);
  EXPECT_EQ(batch.arrays[0].size(), 32u);
  EXPECT_EQ(batch.arrays[1].size(), 32u);
  auto inputs = batch.Inputs(binding_);
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].first, 0);
  EXPECT_EQ(inputs[0].second, batch.arrays[0].data());
  EXPECT_EQ(inputs[1].second, batch.arrays[1].data());
}

TEST_F(NamedArraysBatchesTest, ShuffledBatchesTakeTheSameRowsFromEveryArray) {
  ShuffledBatches batches(arrays_->count(), arrays_->copier(), 4, 7);
  EXPECT_EQ(batches.batches_per_epoch(), 2); // 10 samples: 2 left over
  HostBatch batch(binding_);
  std::vector<int64_t> seen;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> order = EpochPermutation(kCount, 7, epoch);
    std::vector<int64_t> epoch_rows;
    for (int k = 0; k < 2; ++k) {
      ASSERT_TRUE(batches.Next(batch));
      EXPECT_EQ(batch.real_rows, 4);
      std::vector<int64_t> rows = Rows(batch, 4);
      epoch_rows.insert(epoch_rows.end(), rows.begin(), rows.end());
    }
    EXPECT_EQ(epoch_rows, std::vector<int64_t>(order.begin(), order.begin() + 8));
    EXPECT_EQ(std::set<int64_t>(epoch_rows.begin(), epoch_rows.end()).size(), 8u);
  }
  EXPECT_EQ(batches.position(), 6);
}

TEST_F(NamedArraysBatchesTest, SeekToResumesAtTheSameBatch) {
  ShuffledBatches fresh(arrays_->count(), arrays_->copier(), 4, 3);
  HostBatch batch(binding_);
  std::vector<std::vector<int64_t>> all;
  for (int k = 0; k < 7; ++k) {
    ASSERT_TRUE(fresh.Next(batch));
    all.push_back(Rows(batch, 4));
  }
  for (int64_t at : {0, 1, 2, 3, 5}) {
    ShuffledBatches resumed(arrays_->count(), arrays_->copier(), 4, 3);
    resumed.SeekTo(at);
    EXPECT_EQ(resumed.position(), at);
    for (int64_t k = at; k < 7; ++k) {
      ASSERT_TRUE(resumed.Next(batch));
      EXPECT_EQ(Rows(batch, 4), all[k]) << "seek " << at << ", batch " << k;
    }
  }
  // A rank's slice: rows 2..3 of each global batch.
  ShuffledBatches slice(arrays_->count(), arrays_->copier(), 4, 3, RowSlice{2, 2});
  ASSERT_TRUE(slice.Next(batch));
  EXPECT_EQ(Rows(batch, 2), std::vector<int64_t>(all[0].begin() + 2, all[0].end()));
}

TEST_F(NamedArraysBatchesTest, SequentialBatchesCoverEverySampleAndPad) {
  SequentialBatches batches(arrays_->count(), arrays_->copier(), 4);
  EXPECT_EQ(batches.total_batches(), 3);
  HostBatch batch(binding_);
  std::vector<int64_t> samples;
  while (batches.Next(batch)) {
    std::vector<int64_t> rows = Rows(batch, 4);
    samples.insert(samples.end(), rows.begin(), rows.begin() + batch.real_rows);
    if (batch.real_rows < 4)
      EXPECT_EQ(rows[3], rows[batch.real_rows - 1]); // padded with the last
  }
  EXPECT_EQ(samples, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

} // namespace
} // namespace tcc::trun
