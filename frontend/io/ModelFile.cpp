#include "frontend/io/ModelFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/unknown_field_set.h"

namespace tcc {
namespace {

namespace pb = google::protobuf;

// Collects text-format parse errors so the first one can be reported with
// its position instead of being printed to stderr by protobuf.
class TextErrorCollector : public pb::io::ErrorCollector {
public:
  void AddError(int line, pb::io::ColumnNumber column,
                const std::string &message) override {
    if (first.empty())
      first = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ",
                           message);
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string &) override {}
  std::string first;
};

// Depth-first search for unknown fields anywhere in the message tree.
bool HasUnknownFields(const pb::Message &msg, std::string &where) {
  const pb::Reflection *refl = msg.GetReflection();
  if (!refl->GetUnknownFields(msg).empty()) {
    where = msg.GetDescriptor()->name();
    return true;
  }
  std::vector<const pb::FieldDescriptor *> fields;
  refl->ListFields(msg, &fields);
  for (const pb::FieldDescriptor *f : fields) {
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE)
      continue;
    if (f->is_repeated()) {
      for (int i = 0, e = refl->FieldSize(msg, f); i < e; ++i)
        if (HasUnknownFields(refl->GetRepeatedMessage(msg, f, i), where))
          return true;
    } else if (HasUnknownFields(refl->GetMessage(msg, f), where)) {
      return true;
    }
  }
  return false;
}

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF): what protobuf requires of proto3 string fields.
bool IsUtf8(const std::string &s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (n == 0 || i + n > s.size())
      return false;
    uint32_t code = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80)
        return false;
      code = code << 6 | (d & 0x3F);
    }
    if ((n == 3 && code < 0x800) || (n == 4 && code < 0x10000) ||
        (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF)
      return false;
    i += n;
  }
  return true;
}

// Depth-first search for a string field that is not UTF-8. The binary parser
// refuses those; the text parser takes them (as "\377" escapes), so a text
// model could hold what no binary model.pb can.
bool HasNonUtf8String(const pb::Message &msg, std::string &where) {
  const pb::Reflection *refl = msg.GetReflection();
  std::vector<const pb::FieldDescriptor *> fields;
  refl->ListFields(msg, &fields);
  for (const pb::FieldDescriptor *f : fields) {
    bool repeated = f->is_repeated();
    int count = repeated ? refl->FieldSize(msg, f) : 1;
    for (int i = 0; i < count; ++i) {
      if (f->type() == pb::FieldDescriptor::TYPE_STRING) {
        std::string scratch;
        const std::string &value =
            repeated ? refl->GetRepeatedStringReference(msg, f, i, &scratch)
                     : refl->GetStringReference(msg, f, &scratch);
        if (!IsUtf8(value)) {
          where = f->full_name();
          return true;
        }
      } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE &&
                 HasNonUtf8String(repeated ? refl->GetRepeatedMessage(msg, f, i)
                                           : refl->GetMessage(msg, f),
                                  where)) {
        return true;
      }
    }
  }
  return false;
}

absl::Status CheckVersion(const model::Model &m, const std::string &what) {
  if (m.schema_version() != kModelSchemaVersion)
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": schema_version is ", m.schema_version(), ", expected ",
        kModelSchemaVersion,
        m.schema_version() == 0 ? " (field missing: not a tcc model?)" : ""));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open model file: ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return absl::DataLossError(absl::StrCat(path, ": read error"));
  return ss.str();
}

} // namespace

bool IsTextModelPath(const std::string &path) {
  return absl::EndsWith(path, ".pbtxt") || absl::EndsWith(path, ".txtpb") ||
         absl::EndsWith(path, ".textproto");
}

absl::StatusOr<model::Model> ParseModelBinary(const std::string &bytes,
                                              const std::string &what) {
  model::Model m;
  if (bytes.empty())
    return absl::InvalidArgumentError(absl::StrCat(what, ": file is empty"));
  if (!m.ParseFromString(bytes))
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not a valid binary model.pb (corrupt or truncated; text "
              "models must end in .pbtxt)"));
  std::string where;
  if (HasUnknownFields(m, where))
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": unknown fields in message ", where,
        " (corrupt file, or written by a newer schema)"));
  if (absl::Status s = CheckVersion(m, what); !s.ok())
    return s;
  return m;
}

absl::StatusOr<model::Model> ParseModelText(const std::string &text,
                                            const std::string &what) {
  model::Model m;
  pb::TextFormat::Parser parser;
  TextErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &m))
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": text model parse error at ", errors.first));
  if (std::string where; HasNonUtf8String(m, where))
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": string field ", where, " is not valid UTF-8"));
  if (absl::Status s = CheckVersion(m, what); !s.ok())
    return s;
  return m;
}

absl::StatusOr<model::Model> LoadModelFile(const std::string &path) {
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok())
    return bytes.status();
  return IsTextModelPath(path) ? ParseModelText(*bytes, path)
                               : ParseModelBinary(*bytes, path);
}

absl::Status WriteModelFile(const model::Model &m, const std::string &path) {
  std::string out;
  if (IsTextModelPath(path)) {
    if (!pb::TextFormat::PrintToString(m, &out))
      return absl::InternalError("cannot print model as text");
  } else {
    // Deterministic: attribute maps in key order, so one model is one byte
    // string (the Python front end writes the same bytes).
    pb::io::StringOutputStream stream(&out);
    pb::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!m.SerializeToCodedStream(&coded))
      return absl::InternalError("cannot serialize model");
  }
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f)
      return absl::PermissionDeniedError(
          absl::StrCat(tmp, ": cannot write: ", std::strerror(errno)));
    f << out;
    f.flush();
    if (!f)
      return absl::DataLossError(absl::StrCat(tmp, ": write failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot rename into place: ", std::strerror(errno)));
  return absl::OkStatus();
}

} // namespace tcc
