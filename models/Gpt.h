// A GPT (decoder-only transformer) written as a tcc model file, with its
// whole training recipe: AdamW, weight-decay groups, gradient clipping,
// micro-batches and a warmup + cosine learning-rate schedule.
#ifndef TCC_MODELS_GPT_H
#define TCC_MODELS_GPT_H

#include <cstdint>
#include <string>

#include "tcc_model.pb.h" // generated from frontend/proto/tcc_model.proto

namespace tcc::models {

struct GptOptions {
  // Architecture.
  int64_t vocab = 256;   // V: token ids are in [0, V)
  int64_t context = 128; // T: tokens per sequence (fixed at compile time)
  int64_t layers = 4;
  int64_t width = 128; // C: the residual stream width
  int64_t heads = 4;   // C must divide by heads
  enum class Norm { Layer, Rms } norm = Norm::Layer;
  double normEps = 0.0; // 0: 1e-5 for layer_norm, 1e-6 for rms_norm
  enum class Mlp { Gelu, SwiGlu } mlp = Mlp::Gelu;
  int64_t mlpHidden = 0; // 0: 4C for gelu, 8C/3 rounded up to 8 for swiglu
  enum class Positions { Learned, Rope } positions = Positions::Learned;
  double ropeTheta = 10000.0;
  bool tiedEmbeddings = true; // logits = x wte^T, no separate lm_head
  bool bias = true;           // biases in linears and layer norms
  double dropout = 0.0;       // after embeddings, attention probs, residuals

  // Data.
  int64_t batch = 32;       // B: sequences per micro-batch
  int64_t microBatches = 1; // K: a step sees K * B sequences

  // Optimizer (AdamW, PyTorch semantics) and schedule.
  double learningRate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double eps = 1e-8;
  double weightDecay = 0.1;
  // Parameter groups that get no weight decay.
  bool noDecayBiases = true;
  bool noDecayNorms = true;
  bool noDecayEmbeddings = false;
  double gradClip = 1.0; // max global gradient norm; 0 = off
  // Warmup + cosine when decaySteps > 0, else constant.
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0;
  double minLearningRate = 0.0;
};

// The hidden width of the MLP after applying the defaults above.
int64_t gptMlpHidden(const GptOptions &options);

// Checks the options (positive sizes, heads divide the width, an even head
// size for rope, rates in range, ...); returns "" or a message.
std::string validateGptOptions(const GptOptions &options);

// The model (nanoGPT / GPT-2 layout, linear weights stored (in, out)):
//   x = wte[tokens] (+ wpe)                         // (B, T, C)
//   per layer:  x += attn(norm(x));  x += mlp(norm(x))
//   logits = norm_f(x) wte^T (tied) or norm_f(x) lm_head   // (B, T, V)
//   loss = cross_entropy(logits, targets)           // mean over B*T
// Inputs `tokens`, `targets` (B, T) I32; eval output `logits`.
// Init like nanoGPT: normal(0.02), residual projections normal(0.02 /
// sqrt(2 layers)), biases zeros, norm weights ones. Seeds count up from 1 in
// creation order. Call validateGptOptions first.
model::Model buildGpt(const GptOptions &options);

} // namespace tcc::models

#endif
