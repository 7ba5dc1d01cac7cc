// tg.attention through the whole CPU pipeline (autodiff, lowering to
// kern.attention / kern.attention_grad, memory plan, code generation, host
// compiler): a compiled step whose attention is one tg.attention must
// compute the same losses and parameter updates, step after step, as the
// same model with attention written out (matmul, scale, causal_mask,
// softmax, dropout, matmul), with grouped heads, T != S and dropout (the
// fused mask must be tg.dropout's, bit for bit, or the updates differ).
// Also: the planned workspace holds no B*H*T*S buffer.
#include <cmath>
#include <random>

#include "StepCheck.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {
namespace {

struct AttentionModel {
  int64_t batch, heads, kvHeads, queries, keys, dim;
  bool causal;
  double rate;
};

std::string signature(const AttentionModel &m, const std::string &name) {
  return llvm::formatv(
             R"(module attributes {{tg.model_name = "{0}", tg.optimizer = {{kind = "sgd", learning_rate = 1.0e-1 : f64}} {{
  func.func @forward(%q: tensor<{1}x{2}x{3}x{6}xf32> {{tg.param = {{name = "q", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %k: tensor<{1}x{4}x{5}x{6}xf32> {{tg.param = {{name = "k", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                     %v: tensor<{1}x{4}x{5}x{6}xf32> {{tg.param = {{name = "v", init = "normal", scale = 1.0 : f64, seed = 3 : i64, trainable = true}},
                     %w: tensor<{1}x{2}x{3}x{6}xf32> {{tg.input = "w"},
                     %seed: tensor<i64> {{tg.hyper = "rng_seed"}, %step: tensor<i64> {{tg.hyper = "step"})
      -> (tensor<f32> {{tg.loss = "loss"}) {{
)",
             name, m.batch, m.heads, m.queries, m.kvHeads, m.keys, m.dim)
      .str();
}

// loss = sum(attention(q, k, v) * w).
std::string tail(const AttentionModel &m, const std::string &out) {
  return llvm::formatv(R"(    %prod = tg.mul {0}, %w : (tensor<{1}x{2}x{3}x{4}xf32>, tensor<{1}x{2}x{3}x{4}xf32>) -> tensor<{1}x{2}x{3}x{4}xf32>
    %loss = tg.reduce_sum %prod {{axes = array<i64: 0, 1, 2, 3>} : (tensor<{1}x{2}x{3}x{4}xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
)",
                       out, m.batch, m.heads, m.queries, m.dim)
      .str();
}

constexpr int64_t kOpId = 4242;

std::string fusedIR(const AttentionModel &m) {
  std::string attrs = llvm::formatv("scale = {0:e} : f64", 1.0 / std::sqrt(double(m.dim))).str();
  if (m.causal)
    attrs += ", causal";
  std::string dropout;
  if (m.rate > 0) {
    attrs += llvm::formatv(", dropout_rate = {0} : f64, op_id = {1} : i64", m.rate, kOpId).str();
    dropout = " dropout(%seed, %step)";
  }
  std::string operands = llvm::formatv("tensor<{0}x{1}x{2}x{3}xf32>, tensor<{0}x{4}x{5}x{3}xf32>, "
                                       "tensor<{0}x{4}x{5}x{3}xf32>",
                                       m.batch, m.heads, m.queries, m.dim, m.kvHeads, m.keys)
                             .str();
  if (m.rate > 0)
    operands += ", tensor<i64>, tensor<i64>";
  return signature(m, "fused") +
         llvm::formatv("    %o, %lse = tg.attention %q, %k, %v{0} {{{1}} : ({2}) -> "
                       "(tensor<{3}x{4}x{5}x{6}xf32>, tensor<{3}x{4}x{5}xf32>)\n",
                       dropout, attrs, operands, m.batch, m.heads, m.queries, m.dim)
             .str() +
         tail(m, "%o");
}

std::string unfusedIR(const AttentionModel &m) {
  const int64_t B = m.batch, H = m.heads, Hkv = m.kvHeads, T = m.queries, S = m.keys,
                D = m.dim, G = H / Hkv;
  std::string text = signature(m, "unfused");
  // Key/value heads repeated for their query heads.
  auto expand = [&](const char *in, const char *out) {
    if (G == 1)
      return llvm::formatv("    {0} = tg.reshape {1} : (tensor<{2}x{3}x{4}x{5}xf32>) -> "
                           "tensor<{2}x{3}x{4}x{5}xf32>\n",
                           out, in, B, H, S, D)
          .str();
    return llvm::formatv(
               "    {0}_r = tg.reshape {1} : (tensor<{2}x{3}x{5}x{6}xf32>) -> "
               "tensor<{2}x{3}x1x{5}x{6}xf32>\n"
               "    {0}_b = tg.broadcast_to {0}_r : (tensor<{2}x{3}x1x{5}x{6}xf32>) -> "
               "tensor<{2}x{3}x{4}x{5}x{6}xf32>\n"
               "    {0} = tg.reshape {0}_b : (tensor<{2}x{3}x{4}x{5}x{6}xf32>) -> "
               "tensor<{2}x{7}x{5}x{6}xf32>\n",
               out, in, B, Hkv, G, S, D, H)
        .str();
  };
  text += expand("%k", "%kh");
  text += expand("%v", "%vh");
  std::string ts = llvm::formatv("tensor<{0}x{1}x{2}x{3}xf32>", B, H, T, S).str();
  text += llvm::formatv("    %s = tg.matmul %q, %kh {{transpose_rhs = true} : "
                        "(tensor<{0}x{1}x{2}x{3}xf32>, tensor<{0}x{1}x{4}x{3}xf32>) -> {5}\n",
                        B, H, T, D, S, ts)
              .str();
  text += llvm::formatv("    %c = tg.constant dense<{0:e}> : tensor<f32>\n"
                        "    %ss = tg.mul %s, %c : ({1}, tensor<f32>) -> {1}\n",
                        1.0 / std::sqrt(double(D)), ts)
              .str();
  std::string scores = "%ss";
  if (m.causal) {
    text += llvm::formatv("    %sm = tg.causal_mask %ss : {0}\n", ts).str();
    scores = "%sm";
  }
  text += llvm::formatv("    %p = tg.softmax {0} {{axis = 3 : i64} : {1}\n", scores, ts).str();
  std::string probs = "%p";
  if (m.rate > 0) {
    text += llvm::formatv("    %pd = tg.dropout %p, %seed, %step {{rate = {0} : f64, op_id = {1} "
                          ": i64} : {2}\n",
                          m.rate, kOpId, ts)
                .str();
    probs = "%pd";
  }
  text += llvm::formatv("    %o = tg.matmul {0}, %vh : ({1}, tensor<{2}x{3}x{4}x{5}xf32>) -> "
                        "tensor<{2}x{3}x{6}x{5}xf32>\n",
                        probs, ts, B, H, S, D, T)
              .str();
  return text + tail(m, "%o");
}

// Runs `steps` train steps of both compiled models from the same random
// parameters and inputs; losses and parameters must agree closely.
void compareFusedWithUnfused(const AttentionModel &m, const std::string &name, int steps) {
  auto fused = compileIR(fusedIR(m), name + "_fused");
  auto unfused = compileIR(unfusedIR(m), name + "_unfused");
  ASSERT_TRUE(fused->lib && unfused->lib);
  const tcc_step_descriptor &fd = fused->lib->descriptor(), &ud = unfused->lib->descriptor();
  ASSERT_EQ(fd.num_params, ud.num_params);
  // The fused step plans less: no (B, H, T, S) scores, probabilities or
  // their gradients.
  EXPECT_LT(fd.workspace_bytes, ud.workspace_bytes);

  ZeroedStepArgs a(fd, 0.1f), b(ud, 0.1f);
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int i = 0; i < fd.num_params; ++i)
    for (int64_t e = 0; e < fd.params[i].num_elements; ++e)
      a.params[i].as<float>()[e] = b.params[i].as<float>()[e] = normal(rng);
  for (int64_t e = 0; e < fd.inputs[0].num_elements; ++e)
    a.inputs[0].as<float>()[e] = b.inputs[0].as<float>()[e] = normal(rng);
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    a.args.step = b.args.step = step;
    a.args.rng_seed = b.args.rng_seed = 987654321;
    ASSERT_EQ(fd.train(&a.args), TCC_STATUS_OK);
    ASSERT_EQ(ud.train(&b.args), TCC_STATUS_OK);
    EXPECT_NEAR(a.loss, b.loss, 1e-4 * std::max(1.0f, std::abs(b.loss)));
    for (int i = 0; i < fd.num_params; ++i) {
      std::vector<double> got, want;
      for (int64_t e = 0; e < fd.params[i].num_elements; ++e) {
        got.push_back(a.params[i].as<float>()[e]);
        want.push_back(b.params[i].as<float>()[e]);
      }
      EXPECT_LT(relativeError(got, want), 1e-5) << "parameter " << fd.params[i].name;
    }
  }
}

TEST(AttentionStep, GroupedCausalDropoutMatchesWrittenOutAttention) {
  compareFusedWithUnfused({2, 4, 2, 5, 9, 6, true, 0.2}, "attn_gqa", 3);
}

TEST(AttentionStep, MultiHeadCausalMatchesWrittenOutAttention) {
  compareFusedWithUnfused({3, 2, 2, 70, 70, 8, true, 0.0}, "attn_mha", 2);
}

TEST(AttentionStep, MultiQueryWithoutMaskMatchesWrittenOutAttention) {
  compareFusedWithUnfused({1, 3, 1, 33, 17, 5, false, 0.1}, "attn_mqa", 2);
}

} // namespace
} // namespace tcc
