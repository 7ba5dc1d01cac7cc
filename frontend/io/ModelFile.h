// Reading and writing model files (.pb binary, .pbtxt text) with schema checks.
//
// Errors come back as absl::Status with one readable line: the path, what is
// wrong, and (for text files) the line and column the parser stopped at.
#ifndef TCC_FRONTEND_IO_MODELFILE_H
#define TCC_FRONTEND_IO_MODELFILE_H

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tcc_model.pb.h" // generated from frontend/proto/tcc_model.proto

namespace tcc {

inline constexpr unsigned kModelSchemaVersion = 1;

// Reads `path`. Files ending in .pbtxt (or .txtpb/.textproto) are parsed as
// protobuf text format, all others as binary. Refuses unknown fields (a
// corrupt file or a newer schema) and any schema_version other than 1.
absl::StatusOr<model::Model> LoadModelFile(const std::string &path);

// Parses bytes already in memory; `what` names them in error messages.
absl::StatusOr<model::Model> ParseModelBinary(const std::string &bytes,
                                              const std::string &what);
absl::StatusOr<model::Model> ParseModelText(const std::string &text,
                                            const std::string &what);

// Writes binary (deterministic: maps in key order) or text depending on the
// extension of `path`, atomically (temporary file, then rename).
absl::Status WriteModelFile(const model::Model &m, const std::string &path);

bool IsTextModelPath(const std::string &path);

} // namespace tcc

#endif
