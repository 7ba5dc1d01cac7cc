// .npy files written byte by byte here, read by NpyFile and DataFiles.
#include "runtime/trun/data/NpyFile.h"

#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/DataFiles.h"

#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tcc::trun {
namespace {

using testing::TempDir;

// A whole .npy file: magic, version, little-endian header length (2 bytes
// for version 1, 4 for 2 and 3), `dict` padded with spaces and '\n' to a
// multiple of 64 bytes as np.save does, then `data`.
std::vector<uint8_t> NpyBytes(int version, const std::string &dict,
                              const std::vector<uint8_t> &data) {
  size_t prefix = version == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::vector<uint8_t> bytes = {
      0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(version), 0};
  for (size_t i = 0; i < prefix - 8; ++i)
    bytes.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

// np.save's dict for a C-order array.
std::string Dict(const std::string &descr, const std::string &shape) {
  return "{'descr': '" + descr +
         "', 'fortran_order': False, 'shape': " + shape + ", }";
}

// The little-endian bytes of `values`.
template <typename T> std::vector<uint8_t> Bytes(const std::vector<T> &values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!values.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<uint8_t> Iota(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>(i * 7);
  return v;
}

class NpyFileTest : public ::testing::Test {
protected:
  // Writes `bytes` to a fresh file and returns its path.
  std::string Write(const std::vector<uint8_t> &bytes,
                    const std::string &name = "a.npy") {
    std::string path = dir_.File(name);
    testing::WriteFile(path, bytes);
    return path;
  }
  // The message of ReadNpyFile's error for `bytes`; the path must lead it.
  std::string ErrorOf(const std::vector<uint8_t> &bytes) {
    std::string path = Write(bytes);
    absl::StatusOr<NpyArray> array = ReadNpyFile(path);
    if (array.ok()) {
      ADD_FAILURE() << "read a bad file";
      return "";
    }
    std::string message(array.status().message());
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message.substr(path.size() + 2);
  }
  TempDir dir_;
};

TEST_F(NpyFileTest, ReadsVersionsOneTwoAndThree) {
  for (int version : {1, 2, 3}) {
    std::string path =
        Write(NpyBytes(version, Dict("|u1", "(2, 3, 4)"), Iota(24)));
    absl::StatusOr<NpyArray> array = ReadNpyFile(path);
    ASSERT_TRUE(array.ok()) << array.status();
    EXPECT_EQ(array->version, version);
    EXPECT_EQ(array->descr, "|u1");
    EXPECT_EQ(array->type, NpyType::kUint8);
    EXPECT_EQ(array->item_bytes, 1);
    EXPECT_EQ(array->shape, (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(array->num_elements(), 24);
    EXPECT_EQ(array->data_offset, 128u);
    EXPECT_EQ(std::vector<uint8_t>(array->data(), array->data() + 24),
              Iota(24));
  }
}

// A version 2 header longer than 65535 bytes: its length needs all 4 bytes.
TEST_F(NpyFileTest, ReadsLongVersionTwoHeader) {
  std::string dict = Dict("<f4", "(2,)");
  dict.insert(dict.size() - 1, std::string(70000, ' '));
  std::string path = Write(NpyBytes(2, dict, Bytes<float>({1.5f, -2})));
  absl::StatusOr<NpyArray> array = ReadNpyFile(path);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_GT(array->data_offset, 70000u);
  float second;
  std::memcpy(&second, array->data() + 4, 4);
  EXPECT_EQ(second, -2.0f);
}

TEST_F(NpyFileTest, ToleratesSpacingKeyOrderQuotesAndTrailingCommas) {
  struct Case {
    std::string dict;
    std::vector<int64_t> shape;
  };
  std::vector<Case> cases = {
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (6,), }", {6}},
      {"{'descr':'|u1','fortran_order':False,'shape':(6,)}", {6}},
      {"{ 'shape' : ( 2 , 3 ) , 'fortran_order' : False , 'descr' : '|u1' }",
       {2, 3}},
      {"{\"descr\": \"|u1\", \"fortran_order\": False, \"shape\": (2, 3,)}",
       {2, 3}},
      {"{'descr':\t'|u1',\n 'fortran_order': False,\r\n 'shape': (1, 2, 3)}",
       {1, 2, 3}},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (3L, 2L), }", {3, 2}},
  };
  for (const Case &c : cases) {
    std::string path = Write(NpyBytes(1, c.dict, Iota(6)));
    absl::StatusOr<NpyArray> array = ReadNpyFile(path);
    ASSERT_TRUE(array.ok()) << c.dict << ": " << array.status();
    EXPECT_EQ(array->shape, c.shape) << c.dict;
  }
}

TEST_F(NpyFileTest, ReadsScalarAndEmptyShapes) {
  absl::StatusOr<NpyArray> scalar =
      ReadNpyFile(Write(NpyBytes(1, Dict("<i4", "()"), Bytes<int32_t>({7}))));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->num_elements(), 1);
  absl::StatusOr<NpyArray> empty =
      ReadNpyFile(Write(NpyBytes(1, Dict("<f4", "(0, 5)"), {})));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->shape, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(empty->num_elements(), 0);
}

TEST_F(NpyFileTest, RefusesBadMagic) {
  EXPECT_EQ(ErrorOf({}), "not a .npy file (no \\x93NUMPY magic)");
  EXPECT_EQ(ErrorOf(testing::IdxBytes(0x803, {1, 2, 2}, Iota(4))),
            "not a .npy file (no \\x93NUMPY magic)");
  std::vector<uint8_t> lowercase = NpyBytes(1, Dict("|u1", "(1,)"), {1});
  lowercase[1] = 'n';
  EXPECT_EQ(ErrorOf(lowercase), "not a .npy file (no \\x93NUMPY magic)");
}

TEST_F(NpyFileTest, RefusesUnsupportedVersions) {
  std::vector<uint8_t> v4 = NpyBytes(2, Dict("|u1", "(1,)"), {1});
  v4[6] = 4;
  EXPECT_EQ(ErrorOf(v4), "unsupported .npy version 4.0 (trun reads 1.0, 2.0, "
                         "3.0)");
  std::vector<uint8_t> v11 = NpyBytes(1, Dict("|u1", "(1,)"), {1});
  v11[7] = 1;
  EXPECT_EQ(ErrorOf(v11), "unsupported .npy version 1.1 (trun reads 1.0, 2.0, "
                          "3.0)");
}

TEST_F(NpyFileTest, RefusesTruncatedHeader) {
  std::vector<uint8_t> bytes = NpyBytes(1, Dict("|u1", "(1,)"), {1});
  bytes.resize(9);
  EXPECT_EQ(ErrorOf(bytes), "truncated .npy header (9 bytes, need 10)");
  bytes = NpyBytes(3, Dict("|u1", "(1,)"), {1});
  bytes.resize(40);
  EXPECT_EQ(ErrorOf(bytes), "truncated .npy header (40 bytes, need 128)");
}

TEST_F(NpyFileTest, RefusesBigEndian) {
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict(">f4", "(1,)"), Bytes<float>({1}))),
            "big-endian data ('>f4') is not supported; save with "
            "arr.astype('<f4')");
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict(">i8", "(1,)"), Bytes<int64_t>({1}))),
            "big-endian data ('>i8') is not supported; save with "
            "arr.astype('<i8')");
  // Big-endian and unsupported anyway.
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict(">f8", "(1,)"), Bytes<double>({1}))),
            "big-endian data ('>f8') is not supported");
}

TEST_F(NpyFileTest, RefusesFortranOrder) {
  EXPECT_EQ(ErrorOf(NpyBytes(1,
                             "{'descr': '|u1', 'fortran_order': True, "
                             "'shape': (2, 3), }",
                             Iota(6))),
            "Fortran-order arrays are not supported; save with "
            "np.ascontiguousarray");
}

TEST_F(NpyFileTest, RefusesUnsupportedDtypesByName) {
  auto message = [](const std::string &descr, const std::string &name) {
    return "unsupported dtype '" + descr + "'" +
           (name.empty() ? "" : " (" + name + ")") +
           "; trun reads uint8 '|u1' or float32 '<f4' images and integer "
           "labels (|u1 |i1 <u2 <i2 <u4 <i4 <u8 <i8)";
  };
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("<f8", "(1,)"), Bytes<double>({1}))),
            message("<f8", "float64"));
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("<f2", "(1,)"), {0, 0})),
            message("<f2", "float16"));
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("|b1", "(1,)"), {1})),
            message("|b1", "bool"));
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("<c8", "(1,)"), Iota(8))),
            message("<c8", "complex64"));
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("|u2", "(1,)"), {0, 0})),
            message("|u2", "uint16"));
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("O", "(1,)"), Iota(8))), message("O", ""));
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("<U3", "(1,)"), Iota(12))),
            message("<U3", "str"));
  EXPECT_EQ(ErrorOf(NpyBytes(1,
                             "{'descr': [('a', '<i4')], 'fortran_order': "
                             "False, 'shape': (1,), }",
                             Iota(4)))
                .rfind("unsupported dtype: structured arrays are not "
                       "supported (header: {'descr': [('a', '<i4')]",
                       0),
            0u);
}

TEST_F(NpyFileTest, RefusesMalformedHeaders) {
  struct Case {
    std::string dict;
    std::string why;
  };
  std::vector<Case> cases = {
      {"", "expected '{' at the end of the header"},
      {"['descr']", "expected '{' at offset 0"},
      {"{'descr': '|u1', 'fortran_order': False}", "no 'shape' key"},
      {"{'shape': (1,), 'fortran_order': False}", "no 'descr' key"},
      {"{'descr': '|u1', 'shape': (1,)}", "no 'fortran_order' key"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (1,), 'x': 1}",
       "unexpected key 'x'"},
      {"{'descr': '|u1', 'descr': '|u1', 'fortran_order': False, "
       "'shape': (1,)}",
       "duplicate key 'descr'"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (1)}",
       "'shape' (N) is not a tuple; a 1-d shape is written (N,)"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': 1}",
       "expected a tuple for 'shape' at offset 50"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (-1,)}",
       "expected a non-negative integer or ')' in 'shape' at offset 51"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (1 2)}",
       "expected ',' or ')' in 'shape' at offset 53"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (1,,)}",
       "expected a non-negative integer or ')' in 'shape' at offset 53"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': "
       "(99999999999999999999,)}",
       "expected a non-negative integer or ')' in 'shape' at offset 51"},
      {"{'descr': '|u1', 'fortran_order': false, 'shape': (1,)}",
       "expected True or False for 'fortran_order' at offset 34"},
      {"{'descr': '|u1', 'fortran_order': Falsey, 'shape': (1,)}",
       "expected True or False for 'fortran_order' at offset 34"},
      {"{'descr': 7, 'fortran_order': False, 'shape': (1,)}",
       "expected a dtype string for 'descr' at offset 10"},
      {"{'descr': '|u1, 'fortran_order': False, 'shape': (1,)}",
       "expected ',' or '}' at offset 17"},
      {"{'descr' '|u1', 'fortran_order': False, 'shape': (1,)}",
       "expected ':' after key 'descr' at offset 9"},
      {"{'descr': '|u1' 'fortran_order': False, 'shape': (1,)}",
       "expected ',' or '}' at offset 16"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (1,)} x",
       "expected only spaces after the dict at offset 56"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (1,)",
       "expected ',' or '}' at the end of the header"},
  };
  for (const Case &c : cases) {
    std::string message = ErrorOf(NpyBytes(1, c.dict, {1}));
    EXPECT_EQ(
        message.rfind("malformed .npy header: " + c.why + " (header: ", 0), 0u)
        << c.dict << "\n"
        << message;
  }
}

TEST_F(NpyFileTest, RefusesDataOfTheWrongSize) {
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("<f4", "(2, 3)"), Iota(20))),
            "header says shape (2, 3) of '<f4' = 24 bytes of data but the file "
            "has 20 (truncated)");
  EXPECT_EQ(ErrorOf(NpyBytes(3, Dict("|u1", "(5,)"), Iota(6))),
            "header says shape (5,) of '|u1' = 5 bytes of data but the file "
            "has 6 (trailing bytes)");
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("<i8", "()"), {})),
            "header says shape () of '<i8' = 8 bytes of data but the file has "
            "0 (truncated)");
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("<i8", "(4294967296, 4294967296)"), {})),
            "shape (4294967296, 4294967296) overflows");
  // No data with a 0 count, but rows x cols would overflow (found by
  // fuzzing: tests/fuzz/crashes/fuzz_npy/).
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("|u1", "(0, 4294967296, 4294967296)"), {})),
            "shape (0, 4294967296, 4294967296) overflows");
  EXPECT_EQ(ErrorOf(NpyBytes(1, Dict("|u1", "(0, 4294967296, 4294967296, 1)"), {})),
            "shape (0, 4294967296, 4294967296, 1) overflows");
}

TEST_F(NpyFileTest, MissingFileIsNotFound) {
  absl::StatusOr<NpyArray> array = ReadNpyFile(dir_.File("none.npy"));
  EXPECT_EQ(array.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(array.status().message().find(dir_.File("none.npy")),
            std::string::npos);
}

TEST(NpyPathTest, ChoosesNpyByCaseSensitiveSuffix) {
  EXPECT_TRUE(IsNpyPath("x.npy"));
  EXPECT_TRUE(IsNpyPath("/d/train.images.npy"));
  EXPECT_TRUE(IsNpyPath(".npy"));
  EXPECT_FALSE(IsNpyPath("x.NPY"));
  EXPECT_FALSE(IsNpyPath("x.npy.gz"));
  EXPECT_FALSE(IsNpyPath("x.npz"));
  EXPECT_FALSE(IsNpyPath("npy"));
  EXPECT_FALSE(IsNpyPath("train-images-idx3-ubyte"));
}

TEST_F(NpyFileTest, ReadsUint8ImagesLikeIdxPixels) {
  LabeledImages set;
  std::string path = Write(NpyBytes(1, Dict("|u1", "(2, 3, 4)"), Iota(24)));
  ASSERT_TRUE(ReadNpyImages(path, set).ok());
  EXPECT_EQ(set.images_path, path);
  EXPECT_EQ(set.count, 2);
  EXPECT_EQ(set.rows, 3);
  EXPECT_EQ(set.cols, 4);
  EXPECT_EQ(set.pixels, Iota(24));
  EXPECT_TRUE(set.float_pixels.empty());

  // [N, D] is one row of D values; more dims fold into rows.
  ASSERT_TRUE(
      ReadNpyImages(Write(NpyBytes(1, Dict("|u1", "(3, 8)"), Iota(24))), set)
          .ok());
  EXPECT_EQ(set.count, 3);
  EXPECT_EQ(set.rows, 1);
  EXPECT_EQ(set.cols, 8);
  ASSERT_TRUE(
      ReadNpyImages(Write(NpyBytes(2, Dict("|u1", "(1, 2, 3, 4)"), Iota(24))),
                    set)
          .ok());
  EXPECT_EQ(set.count, 1);
  EXPECT_EQ(set.rows, 6);
  EXPECT_EQ(set.cols, 4);
}

TEST_F(NpyFileTest, ReadsFloat32ImagesAsStored) {
  std::vector<float> values = {0.5f, -1.25f, 3e8f, -0.0f, 1e-30f, 7};
  LabeledImages set;
  set.pixels = {1, 2, 3}; // replaced
  ASSERT_TRUE(ReadNpyImages(
                  Write(NpyBytes(3, Dict("<f4", "(3, 2)"), Bytes(values))), set)
                  .ok());
  EXPECT_EQ(set.count, 3);
  EXPECT_EQ(set.rows, 1);
  EXPECT_EQ(set.cols, 2);
  EXPECT_TRUE(set.pixels.empty());
  EXPECT_EQ(set.float_pixels, values);
  // '=' is this machine's order: little-endian.
  ASSERT_TRUE(ReadNpyImages(
                  Write(NpyBytes(1, Dict("=f4", "(3, 2)"), Bytes(values))), set)
                  .ok());
  EXPECT_EQ(set.float_pixels, values);
}

TEST_F(NpyFileTest, RefusesNonFiniteFloatImages) {
  struct Case {
    float bad;
    const char *name;
  };
  for (Case c : {Case{std::nanf(""), "nan"},
                 Case{std::numeric_limits<float>::infinity(), "inf"},
                 Case{-std::numeric_limits<float>::infinity(), "-inf"}}) {
    std::vector<float> values(24, 0.25f);
    values[17] = c.bad;
    values[20] = c.bad; // only the first is named
    std::string path =
        Write(NpyBytes(1, Dict("<f4", "(2, 3, 4)"), Bytes(values)));
    LabeledImages set;
    absl::Status status = ReadNpyImages(path, set);
    EXPECT_EQ(status.message(), path + ": value 17 (sample 1, element 5) is " +
                                    c.name + "; float32 images must be finite");
  }
}

TEST_F(NpyFileTest, RefusesImagesOfOtherTypesAndShapes) {
  LabeledImages set;
  std::string path = Write(NpyBytes(1, Dict("|i1", "(2, 3)"), Iota(6)));
  EXPECT_EQ(ReadNpyImages(path, set).message(),
            path + ": images are '|i1' (int8); trun reads uint8 '|u1' or "
                   "float32 '<f4' images");
  path = Write(NpyBytes(1, Dict("<i8", "(1, 1)"), Iota(8)));
  EXPECT_EQ(ReadNpyImages(path, set).message(),
            path + ": images are '<i8' (int64); trun reads uint8 '|u1' or "
                   "float32 '<f4' images");
  path = Write(NpyBytes(1, Dict("|u1", "(6,)"), Iota(6)));
  EXPECT_EQ(ReadNpyImages(path, set).message(),
            path + ": images have shape (6,); expected (count, values...) "
                   "with at least 2 dimensions");
  path = Write(NpyBytes(1, Dict("|u1", "()"), Iota(1)));
  EXPECT_EQ(ReadNpyImages(path, set).message(),
            path + ": images have shape (); expected (count, values...) "
                   "with at least 2 dimensions");
  path = Write(NpyBytes(1, Dict("<f4", "(4, 0, 28)"), {}));
  EXPECT_EQ(ReadNpyImages(path, set).message(),
            path + ": images have shape (4, 0, 28) (empty)");
  // A file-level error comes through unchanged.
  path = Write(NpyBytes(1, Dict("<f4", "(4, 2)"), Iota(8)));
  EXPECT_EQ(ReadNpyImages(path, set).message(),
            path + ": header says shape (4, 2) of '<f4' = 32 bytes of data "
                   "but the file has 8 (truncated)");
}

// Labels 0, 9, 255 in every integer dtype, each descr spelling np.save uses
// (and '=' / '<' for one-byte types).
TEST_F(NpyFileTest, ReadsLabelsOfEveryIntegerType) {
  const std::vector<uint8_t> expected = {0, 9, 255};
  std::vector<std::pair<std::string, std::vector<uint8_t>>> cases = {
      {"|u1", Bytes<uint8_t>({0, 9, 255})},
      {"<u1", Bytes<uint8_t>({0, 9, 255})},
      {"|i1", Bytes<int8_t>({0, 9, 127})},
      {"=i1", Bytes<int8_t>({0, 9, 127})},
      {">i1", Bytes<int8_t>({0, 9, 127})}, // no byte order in one byte
      {"<u2", Bytes<uint16_t>({0, 9, 255})},
      {"<i2", Bytes<int16_t>({0, 9, 255})},
      {"<u4", Bytes<uint32_t>({0, 9, 255})},
      {"<i4", Bytes<int32_t>({0, 9, 255})},
      {"=i4", Bytes<int32_t>({0, 9, 255})},
      {"<u8", Bytes<uint64_t>({0, 9, 255})},
      {"<i8", Bytes<int64_t>({0, 9, 255})},
      {"=i8", Bytes<int64_t>({0, 9, 255})},
  };
  for (const auto &[descr, data] : cases) {
    std::string path = Write(NpyBytes(1, Dict(descr, "(3,)"), data));
    absl::StatusOr<std::vector<uint8_t>> labels = ReadNpyLabels(path);
    ASSERT_TRUE(labels.ok()) << descr << ": " << labels.status();
    std::vector<uint8_t> want = expected;
    if (descr[1] == 'i' && descr[2] == '1')
      want[2] = 127;
    EXPECT_EQ(*labels, want) << descr;
  }
  absl::StatusOr<std::vector<uint8_t>> none =
      ReadNpyLabels(Write(NpyBytes(1, Dict("<i8", "(0,)"), {})));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_F(NpyFileTest, RefusesLabelsOutOfByteRangeNamingTheIndex) {
  auto error = [&](const std::string &descr, const std::vector<uint8_t> &data) {
    std::string path = Write(NpyBytes(1, Dict(descr, "(4,)"), data));
    absl::StatusOr<std::vector<uint8_t>> labels = ReadNpyLabels(path);
    EXPECT_FALSE(labels.ok()) << descr;
    std::string message(labels.status().message());
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    return message.substr(path.size() + 2);
  };
  auto range = [](const std::string &label, int index) {
    return "label " + label + " at index " + std::to_string(index) +
           " is out of range (labels must be in [0, 256))";
  };
  EXPECT_EQ(error("|i1", Bytes<int8_t>({1, 2, -1, -2})), range("-1", 2));
  EXPECT_EQ(error("<i2", Bytes<int16_t>({1, 256, 3, 4})), range("256", 1));
  EXPECT_EQ(error("<u2", Bytes<uint16_t>({1, 2, 3, 65535})), range("65535", 3));
  EXPECT_EQ(error("<i4", Bytes<int32_t>({-7, 2, 3, 4})), range("-7", 0));
  EXPECT_EQ(error("<u4", Bytes<uint32_t>({1, 2, 4000000000u, 4})),
            range("4000000000", 2));
  EXPECT_EQ(error("<i8", Bytes<int64_t>({1, 2, 3, INT64_MIN})),
            range("-9223372036854775808", 3));
  EXPECT_EQ(error("<u8", Bytes<uint64_t>({1, UINT64_MAX, 3, 4})),
            range("18446744073709551615", 1));
}

TEST_F(NpyFileTest, RefusesLabelsOfOtherTypesAndShapes) {
  auto error = [&](const std::string &descr, const std::string &shape,
                   const std::vector<uint8_t> &data) {
    std::string path = Write(NpyBytes(1, Dict(descr, shape), data));
    absl::StatusOr<std::vector<uint8_t>> labels = ReadNpyLabels(path);
    EXPECT_FALSE(labels.ok()) << descr << shape;
    return std::string(labels.status().message()).substr(path.size() + 2);
  };
  EXPECT_EQ(error("<f4", "(2,)", Bytes<float>({0, 1})),
            "labels are '<f4' (float32); expected an integer type");
  EXPECT_EQ(error("|u1", "(2, 1)", {0, 1}),
            "labels have shape (2, 1); expected (count,)");
  EXPECT_EQ(error("|u1", "()", {0}), "labels have shape (); expected (count,)");
  EXPECT_EQ(error("<f8", "(1,)", Bytes<double>({0}))
                .rfind("unsupported dtype '<f8' (float64)", 0),
            0u);
}

// ReadSplit picks the reader per file by name, so .npy and IDX mix.
class ReadSplitTest : public NpyFileTest {
protected:
  // 3 images of 2x2 and labels {4, 5, 6}, in both formats.
  void SetUp() override {
    testing::WriteFile(dir_.File("images.npy"),
                       NpyBytes(1, Dict("|u1", "(3, 2, 2)"), Iota(12)));
    testing::WriteFile(
        dir_.File("labels.npy"),
        NpyBytes(1, Dict("<i8", "(3,)"), Bytes<int64_t>({4, 5, 6})));
    testing::WriteFile(dir_.File("images.idx"),
                       testing::IdxBytes(0x803, {3, 2, 2}, Iota(12)));
    testing::WriteGzipFile(dir_.File("labels.idx.gz"),
                           testing::IdxBytes(0x801, {3}, {4, 5, 6}));
  }
  void ExpectSplit(const std::string &images, const std::string &labels) {
    absl::StatusOr<LabeledImages> set =
        ReadSplit({dir_.File(images), dir_.File(labels)});
    ASSERT_TRUE(set.ok()) << images << "," << labels << ": " << set.status();
    EXPECT_EQ(set->images_path, dir_.File(images));
    EXPECT_EQ(set->labels_path, dir_.File(labels));
    EXPECT_EQ(set->count, 3);
    EXPECT_EQ(set->rows, 2);
    EXPECT_EQ(set->cols, 2);
    EXPECT_EQ(set->pixels, Iota(12));
    EXPECT_EQ(set->labels, (std::vector<uint8_t>{4, 5, 6}));
  }
};

TEST_F(ReadSplitTest, MixesNpyAndIdxFiles) {
  ExpectSplit("images.npy", "labels.npy");
  ExpectSplit("images.npy", "labels.idx.gz");
  ExpectSplit("images.idx", "labels.npy");
  ExpectSplit("images.idx", "labels.idx.gz");
}

TEST_F(ReadSplitTest, CountsMustMatch) {
  testing::WriteFile(dir_.File("two.npy"),
                     NpyBytes(1, Dict("<u2", "(2,)"), Bytes<uint16_t>({1, 2})));
  absl::StatusOr<LabeledImages> set =
      ReadSplit({dir_.File("images.npy"), dir_.File("two.npy")});
  EXPECT_EQ(set.status().message(), dir_.File("two.npy") + ": 2 labels but " +
                                        dir_.File("images.npy") +
                                        " has 3 images");
  set = ReadSplit({dir_.File("images.idx"), dir_.File("two.npy")});
  EXPECT_EQ(set.status().message(), dir_.File("two.npy") + ": 2 labels but " +
                                        dir_.File("images.idx") +
                                        " has 3 images");
}

TEST_F(ReadSplitTest, TheNameDecidesTheFormat) {
  // An IDX file named .npy is refused as .npy, a .npy file named otherwise
  // (here .NPY) is refused as IDX.
  testing::WriteFile(dir_.File("idx.npy"),
                     testing::IdxBytes(0x803, {3, 2, 2}, Iota(12)));
  absl::StatusOr<LabeledImages> set =
      ReadSplit({dir_.File("idx.npy"), dir_.File("labels.npy")});
  EXPECT_EQ(set.status().message(),
            dir_.File("idx.npy") + ": not a .npy file (no \\x93NUMPY magic)");
  testing::WriteFile(dir_.File("upper.NPY"),
                     NpyBytes(1, Dict("|u1", "(3, 2, 2)"), Iota(12)));
  set = ReadSplit({dir_.File("upper.NPY"), dir_.File("labels.npy")});
  EXPECT_NE(set.status().message().find(dir_.File("upper.NPY") +
                                        ": bad magic 0x934e554d"),
            std::string::npos)
      << set.status();
  // Label errors name the labels file; image errors come first.
  testing::WriteFile(
      dir_.File("bad.npy"),
      NpyBytes(1, Dict("<i4", "(3,)"), Bytes<int32_t>({0, -3, 1})));
  set = ReadSplit({dir_.File("images.idx"), dir_.File("bad.npy")});
  EXPECT_EQ(set.status().message(), dir_.File("bad.npy") +
                                        ": label -3 at index 1 is out of range "
                                        "(labels must be in [0, 256))");
  set = ReadSplit({dir_.File("idx.npy"), dir_.File("bad.npy")});
  EXPECT_NE(set.status().message().find(dir_.File("idx.npy")),
            std::string::npos);
  // An IDX image file with zero-sized images, next to .npy labels.
  testing::WriteFile(dir_.File("flat.idx"),
                     testing::IdxBytes(0x803, {3, 0, 2}, {}));
  set = ReadSplit({dir_.File("flat.idx"), dir_.File("labels.npy")});
  EXPECT_EQ(set.status().message(),
            dir_.File("flat.idx") + ": images are 0x2 (empty)");
}

// A directory --data stays IDX-only: .npy files there are not looked for.
TEST_F(ReadSplitTest, DataDirectoryIgnoresNpyFiles) {
  absl::StatusOr<DataFiles> files = ResolveDataFiles(dir_.path(), std::nullopt);
  EXPECT_EQ(files.status().message(),
            "data directory '" + dir_.path() +
                "' has no train-images-idx3-ubyte[.gz]");
}

// float32 images skip the normalizer, which is the identity for them.
TEST_F(NpyFileTest, FloatImagesAreFedAsStored) {
  std::vector<float> values = {0.5f, -1.25f, 3e8f, -0.0f, 1e-30f, 7};
  LabeledImages set;
  ASSERT_TRUE(ReadNpyImages(
                  Write(NpyBytes(1, Dict("<f4", "(3, 2)"), Bytes(values))), set)
                  .ok());
  set.labels = {0, 1, 2};
  PixelNormalizer normalizer = PixelNormalizer::FromTrainingImages(set);
  EXPECT_EQ(normalizer.mean, 0.0);
  EXPECT_EQ(normalizer.stddev, 1.0);
  EXPECT_FLOAT_EQ(normalizer.table[255], 1.0f);
  EXPECT_FLOAT_EQ(normalizer.table[51], 0.2f);

  SequentialBatches batches(set, normalizer, 2);
  HostBatch batch(2, 2);
  std::vector<float> fed;
  while (batches.Next(batch))
    for (int64_t i = 0; i < batch.real_rows * 2; ++i)
      fed.push_back(batch.data.as<float>()[i]);
  EXPECT_EQ(fed, values);
  ShuffledBatches shuffled(set, normalizer, 3, 1);
  HostBatch all(3, 2);
  ASSERT_TRUE(shuffled.Next(all));
  for (int64_t row = 0; row < 3; ++row) {
    int32_t label = all.targets.as<int32_t>()[row];
    EXPECT_EQ(all.data.as<float>()[2 * row], values[2 * label]);
    EXPECT_EQ(all.data.as<float>()[2 * row + 1], values[2 * label + 1]);
  }
}

// The same pixels as .npy u8 get the same statistics and table as from IDX.
TEST_F(ReadSplitTest, Uint8NpyNormalizesLikeIdx) {
  absl::StatusOr<LabeledImages> npy =
      ReadSplit({dir_.File("images.npy"), dir_.File("labels.npy")});
  absl::StatusOr<LabeledImages> idx =
      ReadSplit({dir_.File("images.idx"), dir_.File("labels.idx.gz")});
  ASSERT_TRUE(npy.ok() && idx.ok());
  PixelNormalizer a = PixelNormalizer::FromTrainingImages(*npy);
  PixelNormalizer b = PixelNormalizer::FromTrainingImages(*idx);
  EXPECT_GT(a.stddev, 0);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.stddev, b.stddev);
  EXPECT_EQ(a.table, b.table);
}

} // namespace
} // namespace tcc::trun
