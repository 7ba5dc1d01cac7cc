// Token shards (runtime/trun/data/TokenShards.h): --data/--val of token
// models. A shard that opens has all its tokens read; the dataset view
// (TokenDataset, a path without glob characters) checks them against 256.
#include "FuzzInput.h"

#include "runtime/trun/data/TokenShards.h"

#include <vector>

using namespace tcc::trun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = tcc_fuzz::WriteInput("input.bin", data, size);
  absl::StatusOr<TokenShard> shard = TokenShard::Open(path);
  tcc_fuzz::Note("TokenShard::Open", shard);
  if (shard.ok()) {
    int64_t n = shard->num_tokens();
    if (n < 0 || kTokenShardHeaderBytes + 2 * n != static_cast<int64_t>(size))
      __builtin_trap(); // accepted a shard of the wrong size
    std::vector<uint16_t> tokens(static_cast<size_t>(n));
    tcc_fuzz::Note("ReadTokens", shard->ReadTokens(0, n, tokens.data()));
  }
  absl::StatusOr<TokenDataset> dataset = TokenDataset::Open(path);
  tcc_fuzz::Note("TokenDataset::Open", dataset);
  if (dataset.ok()) {
    (void)dataset->Describe();
    tcc_fuzz::Note("CheckTokensBelow(256)", dataset->CheckTokensBelow(256, "256"));
  }
  return 0;
}
