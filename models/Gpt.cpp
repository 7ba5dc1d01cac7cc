#include "models/Gpt.h"

#include <cmath>
#include <map>
#include <vector>

#include "models/ModelBuilder.h"

namespace tcc::models {
namespace {

using Attrs = std::map<std::string, model::Attribute>;

model::Attribute intAttr(int64_t v) {
  model::Attribute a;
  a.set_i(v);
  return a;
}
model::Attribute floatAttr(double v) {
  model::Attribute a;
  a.set_f(v);
  return a;
}
model::Attribute stringAttr(const std::string &v) {
  model::Attribute a;
  a.set_s(v);
  return a;
}
model::Attribute intsAttr(const std::vector<int64_t> &v) {
  model::Attribute a;
  model::IntList *list = a.mutable_ints();
  for (int64_t x : v)
    list->add_values(x);
  return a;
}

// Writes the GPT graph into a ModelBuilder; one method per block so the
// code reads like the diagram in Gpt.h.
class GptWriter {
public:
  explicit GptWriter(const GptOptions &o)
      : o_(o), b_("gpt"), headSize_(o.width / o.heads),
        hidden_(gptMlpHidden(o)) {}

  model::Model build();

private:
  using Value = std::string;

  // Parameters, remembering which ones skip weight decay.
  Value weight(const std::string &name, std::vector<int64_t> shape,
               double stddev) {
    return b_.param(name, std::move(shape), model::Initializer::NORMAL, stddev);
  }
  Value bias(const std::string &name, int64_t n) {
    if (o_.noDecayBiases)
      noDecay_.push_back(name);
    return b_.param(name, {n}, model::Initializer::ZEROS);
  }
  Value scalar(const std::string &name, double value) {
    return b_.node("constant", name, {},
                   {{"value", floatAttr(value)},
                    {"shape", intsAttr({})},
                    {"dtype", stringAttr("f32")}});
  }

  // y = x w (+ b); x is (..., in), w is (in, out).
  Value linear(const std::string &name, const Value &x, int64_t in,
               int64_t out, double stddev) {
    Value w = weight(name + ".weight", {in, out}, stddev);
    Value y = b_.node("matmul", name, {x, w});
    if (!o_.bias)
      return y;
    return b_.node("add", name + ".biased", {y, bias(name + ".bias", out)});
  }
  Value norm(const std::string &name, const Value &x);
  Value dropout(const std::string &name, const Value &x) {
    if (o_.dropout <= 0)
      return x;
    return b_.node("dropout", name, {x}, {{"rate", floatAttr(o_.dropout)}});
  }
  void ropeTables();
  Value rope(const std::string &name, const Value &x);
  Value attention(const std::string &name, const Value &x);
  Value mlp(const std::string &name, const Value &x);

  const GptOptions &o_;
  ModelBuilder b_;
  int64_t headSize_;
  int64_t hidden_;
  Value ropeCos_, ropeSin_; // (T, D)
  std::vector<std::string> noDecay_;
};

GptWriter::Value GptWriter::norm(const std::string &name, const Value &x) {
  bool layer = o_.norm == GptOptions::Norm::Layer;
  double eps = o_.normEps > 0 ? o_.normEps : layer ? 1e-5 : 1e-6;
  std::vector<Value> inputs{x, b_.param(name + ".weight", {o_.width},
                                        model::Initializer::ONES)};
  if (o_.noDecayNorms)
    noDecay_.push_back(inputs.back());
  if (layer && o_.bias) {
    inputs.push_back(b_.param(name + ".bias", {o_.width},
                              model::Initializer::ZEROS));
    if (o_.noDecayNorms)
      noDecay_.push_back(inputs.back());
  }
  return b_.node(layer ? "layer_norm" : "rms_norm", name, inputs,
                 {{"eps", floatAttr(eps)}});
}

// Rotary tables, shared by all layers, from iota so a pass can fold them:
//   angle[t, i] = t * theta^(-2i / D),  cos/sin repeated twice along D.
void GptWriter::ropeTables() {
  int64_t half = headSize_ / 2;
  std::vector<int64_t> shape{o_.context, half};
  Value pos = b_.node("iota", "rope.pos", {},
                      {{"shape", intsAttr(shape)}, {"axis", intAttr(0)},
                       {"dtype", stringAttr("f32")}});
  Value idx = b_.node("iota", "rope.idx", {},
                      {{"shape", intsAttr(shape)}, {"axis", intAttr(1)},
                       {"dtype", stringAttr("f32")}});
  Value k = scalar("rope.log_freq_step",
                   -2.0 * std::log(o_.ropeTheta) / static_cast<double>(headSize_));
  Value invFreq = b_.node("exp", "rope.inv_freq",
                          {b_.node("mul", "rope.log_freq", {idx, k})});
  Value angle = b_.node("mul", "rope.angle", {pos, invFreq}); // (T, D/2)
  Value c = b_.node("cos", "rope.cos_half", {angle});
  Value s = b_.node("sin", "rope.sin_half", {angle});
  ropeCos_ = b_.node("concat", "rope.cos", {c, c}, {{"axis", intAttr(1)}});
  ropeSin_ = b_.node("concat", "rope.sin", {s, s}, {{"axis", intAttr(1)}});
}

// x is (B, H, T, D): x cos + rotate_half(x) sin, rotate_half(x) = [-x2, x1].
GptWriter::Value GptWriter::rope(const std::string &name, const Value &x) {
  int64_t half = headSize_ / 2;
  Value x1 = b_.node("slice", name + ".x1", {x},
                     {{"starts", intsAttr({0})}, {"ends", intsAttr({half})},
                      {"axes", intsAttr({3})}});
  Value x2 = b_.node("slice", name + ".x2", {x},
                     {{"starts", intsAttr({half})},
                      {"ends", intsAttr({headSize_})},
                      {"axes", intsAttr({3})}});
  Value rotated = b_.node("concat", name + ".rotated",
                          {b_.node("neg", name + ".neg_x2", {x2}), x1},
                          {{"axis", intAttr(3)}});
  return b_.node("add", name,
                 {b_.node("mul", name + ".cos", {x, ropeCos_}),
                  b_.node("mul", name + ".sin", {rotated, ropeSin_})});
}

// Causal multi-head self-attention; x is (B, T, C).
GptWriter::Value GptWriter::attention(const std::string &name, const Value &x) {
  int64_t B = o_.batch, T = o_.context, C = o_.width, H = o_.heads,
          D = headSize_;
  double projStd = 0.02 / std::sqrt(2.0 * static_cast<double>(o_.layers));
  Value qkv = linear(name + ".c_attn", x, C, 3 * C, 0.02); // (B, T, 3C)
  std::vector<Value> parts = b_.nodeOutputs(
      "split", name + ".split", {qkv},
      {name + ".q", name + ".k", name + ".v"},
      {{"axis", intAttr(2)}, {"sizes", intsAttr({C, C, C})}});
  auto heads = [&](const Value &v) { // (B, T, C) -> (B, H, T, D)
    Value r = b_.node("reshape", v + ".heads", {v},
                      {{"shape", intsAttr({B, T, H, D})}});
    return b_.node("transpose", v + ".bhtd", {r},
                   {{"perm", intsAttr({0, 2, 1, 3})}});
  };
  Value q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
  if (o_.positions == GptOptions::Positions::Rope) {
    q = rope(name + ".q.rope", q);
    k = rope(name + ".k.rope", k);
  }
  Value scores = b_.node("matmul", name + ".scores", {q, k},
                         {{"transpose_b", ModelBuilder::boolAttr(true)}});
  scores = b_.node("mul", name + ".scaled",
                   {scores, scalar(name + ".scale",
                                   1.0 / std::sqrt(static_cast<double>(D)))});
  Value masked = b_.node("causal_mask", name + ".masked", {scores}); // (B, H, T, T)
  Value probs = b_.node("softmax", name + ".probs", {masked},
                        {{"axis", intAttr(-1)}});
  probs = dropout(name + ".attn_dropout", probs);
  Value y = b_.node("matmul", name + ".context", {probs, v}); // (B, H, T, D)
  y = b_.node("transpose", name + ".context.bthd", {y},
              {{"perm", intsAttr({0, 2, 1, 3})}});
  y = b_.node("reshape", name + ".context.btc", {y},
              {{"shape", intsAttr({B, T, C})}});
  y = linear(name + ".c_proj", y, C, C, projStd);
  return dropout(name + ".resid_dropout", y);
}

// x is (B, T, C).
GptWriter::Value GptWriter::mlp(const std::string &name, const Value &x) {
  int64_t C = o_.width;
  double projStd = 0.02 / std::sqrt(2.0 * static_cast<double>(o_.layers));
  Value h;
  if (o_.mlp == GptOptions::Mlp::Gelu) {
    h = linear(name + ".c_fc", x, C, hidden_, 0.02);
    h = b_.node("gelu", name + ".gelu", {h},
                {{"approximate", stringAttr("tanh")}});
  } else { // SwiGLU (LLaMA): silu(x w_gate) * (x w_up)
    Value gate = linear(name + ".w_gate", x, C, hidden_, 0.02);
    Value up = linear(name + ".w_up", x, C, hidden_, 0.02);
    h = b_.node("mul", name + ".swiglu",
                {b_.node("silu", name + ".silu", {gate}), up});
  }
  Value y = linear(name + ".c_proj", h, hidden_, C, projStd);
  return dropout(name + ".dropout", y);
}

model::Model GptWriter::build() {
  int64_t B = o_.batch, T = o_.context, C = o_.width, V = o_.vocab;
  Value tokens = b_.input("tokens", model::I32, {B, T});
  Value targets = b_.input("targets", model::I32, {B, T});

  Value wte = weight("wte", {V, C}, 0.02);
  if (o_.noDecayEmbeddings)
    noDecay_.push_back(wte);
  Value x = b_.node("embedding", "tok_emb", {wte, tokens}); // (B, T, C)
  if (o_.positions == GptOptions::Positions::Learned) {
    Value wpe = weight("wpe", {T, C}, 0.02);
    if (o_.noDecayEmbeddings)
      noDecay_.push_back(wpe);
    x = b_.node("add", "emb", {x, wpe}); // (T, C) broadcasts over B
  } else {
    ropeTables();
  }
  x = dropout("emb_dropout", x);

  for (int64_t l = 0; l < o_.layers; ++l) {
    std::string p = "h." + std::to_string(l);
    x = b_.node("add", p + ".attn_residual",
                {x, attention(p + ".attn", norm(p + ".ln_1", x))});
    x = b_.node("add", p + ".mlp_residual",
                {x, mlp(p + ".mlp", norm(p + ".ln_2", x))});
  }
  x = norm("ln_f", x);

  Value logits;
  if (o_.tiedEmbeddings) {
    logits = b_.node("matmul", "logits", {x, wte},
                     {{"transpose_b", ModelBuilder::boolAttr(true)}});
  } else {
    Value head = weight("lm_head.weight", {C, V}, 0.02);
    logits = b_.node("matmul", "logits", {x, head});
  }                                                         // (B, T, V)
  Value loss = b_.node("cross_entropy", "loss", {logits, targets}); // ()
  b_.output("logits", logits);

  b_.adamw(loss, {o_.learningRate, o_.beta1, o_.beta2, o_.eps, o_.weightDecay});
  b_.gradClip(o_.gradClip);
  b_.microBatches(static_cast<int32_t>(o_.microBatches));
  if (o_.decaySteps > 0)
    b_.warmupCosine(o_.warmupSteps, o_.decaySteps, o_.minLearningRate);
  for (const std::string &name : noDecay_)
    b_.noWeightDecay(name);
  model::Model m = b_.model();
  if (o_.decaySteps <= 0) // an explicit constant schedule (no builder setter)
    m.mutable_training()->mutable_lr_schedule()->mutable_constant();
  return m;
}

} // namespace

int64_t gptMlpHidden(const GptOptions &o) {
  if (o.mlpHidden > 0)
    return o.mlpHidden;
  if (o.mlp == GptOptions::Mlp::Gelu)
    return 4 * o.width;
  int64_t h = (8 * o.width + 2) / 3; // ceil(8C / 3)
  return (h + 7) / 8 * 8;
}

std::string validateGptOptions(const GptOptions &o) {
  auto positive = [](int64_t v) { return v > 0; };
  if (!positive(o.vocab) || !positive(o.context) || !positive(o.layers) ||
      !positive(o.width) || !positive(o.heads) || !positive(o.batch) ||
      !positive(o.microBatches))
    return "vocab, context, layers, width, heads, batch and micro-batches "
           "must be positive";
  if (o.vocab > 65536)
    return "vocab " + std::to_string(o.vocab) +
           " is larger than token shards can hold (65536)";
  if (o.width % o.heads != 0)
    return "width " + std::to_string(o.width) + " does not divide into " +
           std::to_string(o.heads) + " heads";
  if (o.positions == GptOptions::Positions::Rope && (o.width / o.heads) % 2)
    return "rope needs an even head size, got " +
           std::to_string(o.width / o.heads);
  if (!(o.ropeTheta > 1))
    return "rope theta must be > 1";
  if (!(o.dropout >= 0 && o.dropout < 1))
    return "dropout must be in [0, 1)";
  if (!(o.normEps >= 0))
    return "norm eps must be >= 0";
  if (!(o.learningRate > 0))
    return "learning rate must be > 0";
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
    return "AdamW betas must be in [0, 1)";
  if (!(o.eps > 0))
    return "AdamW eps must be > 0";
  if (!(o.weightDecay >= 0))
    return "weight decay must be >= 0";
  if (!(o.gradClip >= 0))
    return "grad clip must be >= 0 (0 = off)";
  if (o.warmupSteps < 0 || o.decaySteps < 0)
    return "warmup and decay steps must be >= 0";
  if (o.decaySteps > 0 && o.decaySteps < o.warmupSteps)
    return "decay steps (" + std::to_string(o.decaySteps) +
           ") must be at least the warmup steps (" +
           std::to_string(o.warmupSteps) + ")";
  if (o.decaySteps == 0 && o.warmupSteps > 0)
    return "warmup needs a cosine schedule (decay steps > 0)";
  if (!(o.minLearningRate >= 0 && o.minLearningRate <= o.learningRate))
    return "min learning rate must be in [0, learning rate]";
  return "";
}

model::Model buildGpt(const GptOptions &options) {
  return GptWriter(options).build();
}

} // namespace tcc::models
