// Loading model files: binary and text, round trips, and every way a file
// can be wrong gets an error that names the file and the problem.
#include "frontend/io/ModelFile.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "models/ModelBuilder.h"

namespace tcc {
namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/" + name;
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

model::Model smallMlp() {
  models::MlpOptions o;
  o.batch = 2;
  o.inputs = 3;
  o.hidden = {4};
  o.classes = 2;
  return models::buildMlp(o);
}

TEST(ModelFile, BinaryAndTextRoundTrip) {
  model::Model m = smallMlp();
  for (const char *name : {"rt.pb", "rt.pbtxt"}) {
    std::string path = tempPath(name);
    ASSERT_TRUE(WriteModelFile(m, path).ok());
    absl::StatusOr<model::Model> back = LoadModelFile(path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->SerializeAsString(), m.SerializeAsString()) << name;
  }
}

TEST(ModelFile, MissingFile) {
  absl::StatusOr<model::Model> m = LoadModelFile(tempPath("does-not-exist.pb"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("cannot open model file"), std::string::npos);
  EXPECT_NE(m.status().message().find("does-not-exist.pb"), std::string::npos);
}

TEST(ModelFile, EveryTruncationIsRejectedOrValid) {
  // Cutting a binary model anywhere must never crash; cuts that happen to
  // end on a field boundary parse but then fail the schema or import.
  std::string bytes = smallMlp().SerializeAsString();
  int rejected = 0;
  for (size_t n = 1; n < bytes.size(); ++n) {
    absl::StatusOr<model::Model> m = ParseModelBinary(bytes.substr(0, n), "cut");
    if (!m.ok())
      ++rejected;
  }
  EXPECT_GT(rejected, 0);
}

TEST(ModelFile, GarbageIsRejected) {
  absl::StatusOr<model::Model> m =
      ParseModelBinary(std::string("\xff\xff\xff\xff\x01garbage", 12), "junk.pb");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("junk.pb: not a valid binary model.pb"),
            std::string::npos)
      << m.status();
}

TEST(ModelFile, UnknownFieldIsRejected) {
  // schema_version = 1, then field 99 (varint) which the schema lacks.
  absl::StatusOr<model::Model> m =
      ParseModelBinary(std::string("\x08\x01\xb8\x06\x07", 5), "new.pb");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("unknown fields in message Model"),
            std::string::npos)
      << m.status();
}

TEST(ModelFile, NestedUnknownFieldIsRejected) {
  model::Model m = smallMlp();
  m.mutable_params(0)->GetReflection()->MutableUnknownFields(m.mutable_params(0))
      ->AddVarint(77, 1);
  absl::StatusOr<model::Model> back =
      ParseModelBinary(m.SerializeAsString(), "nested.pb");
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("unknown fields in message Parameter"),
            std::string::npos)
      << back.status();
}

TEST(ModelFile, WrongSchemaVersion) {
  model::Model m = smallMlp();
  m.set_schema_version(7);
  absl::StatusOr<model::Model> back = ParseModelBinary(m.SerializeAsString(), "v7.pb");
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("schema_version is 7, expected 1"),
            std::string::npos);
}

TEST(ModelFile, TextErrorHasPosition) {
  absl::StatusOr<model::Model> m =
      ParseModelText("schema_version: 1\nname: \"x\"\nparams { nme: \"w\" }\n", "t.pbtxt");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("line 3, column"), std::string::npos)
      << m.status();
}

// The binary parser refuses a string field that is not UTF-8; the text
// parser takes "\377" escapes, so it checks them itself (found by fuzzing:
// tests/fuzz/crashes/fuzz_model/text-non-utf8-string.pbtxt).
TEST(ModelFile, TextNonUtf8StringIsRejected) {
  absl::StatusOr<model::Model> m =
      ParseModelText("schema_version: 1\nparams { name: \"\\377\" }\n", "t.pbtxt");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("t.pbtxt: string field tcc.model.Parameter.name "
                                      "is not valid UTF-8"),
            std::string::npos)
      << m.status();
  EXPECT_TRUE(ParseModelText("schema_version: 1\nparams { name: \"w\\303\\251\" }\n",
                             "t.pbtxt")
                  .ok());
}

TEST(ModelFile, UnwritableDestination) {
  absl::Status s = WriteModelFile(smallMlp(), "/proc/no-such-dir/model.pb");
  EXPECT_FALSE(s.ok());
}

} // namespace
} // namespace tcc
