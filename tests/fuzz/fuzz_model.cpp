// Model files (frontend/io/ModelFile.h): tcc compile's .pb and .pbtxt input.
// Parsing and schema checks only: the MLIR importer that runs next cannot be
// built outside the full (MLIR) build. Each input is parsed as binary and as
// text; a model that parses from text must serialize and parse back as binary.
#include "FuzzInput.h"

#include "frontend/io/ModelFile.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  tcc_fuzz::Note("ParseModelBinary", tcc::ParseModelBinary(bytes, "fuzz.pb"));
  absl::StatusOr<tcc::model::Model> text = tcc::ParseModelText(bytes, "fuzz.pbtxt");
  tcc_fuzz::Note("ParseModelText", text);
  if (text.ok()) {
    std::string binary;
    if (!text->SerializeToString(&binary) ||
        !tcc::ParseModelBinary(binary, "fuzz.pb").ok())
      __builtin_trap(); // a text model that does not round-trip
  }
  return 0;
}
