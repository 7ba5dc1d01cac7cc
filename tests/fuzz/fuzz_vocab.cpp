// vocab.json (runtime/trun/data/Vocab.h): --vocab, the tokenizer file of
// tcc-data. A vocabulary that reads must round-trip: every id decodes, the
// text of all ids encodes back to the same ids, and ToJson works.
#include "FuzzInput.h"

#include "runtime/trun/data/Vocab.h"

#include <vector>

using namespace tcc::trun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = tcc_fuzz::WriteInput("vocab.json", data, size);
  absl::StatusOr<Vocab> vocab = Vocab::Read(path);
  tcc_fuzz::Note("Vocab::Read", vocab);
  if (!vocab.ok())
    return 0;
  (void)vocab->ToJson();
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < vocab->size(); ++i)
    ids.push_back(i);
  std::string text = vocab->Decode(ids);
  if (vocab->level() == Vocab::Level::kChar) {
    absl::StatusOr<std::vector<int64_t>> back = vocab->Encode(text);
    if (!back.ok() || *back != ids)
      __builtin_trap(); // a vocabulary that does not round-trip
  }
  return 0;
}
