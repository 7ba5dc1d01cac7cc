// tcc-models: writes model files from the builders in models/.
//
//   tcc-models mlp [--batch B] [--hidden W1,W2,...] [--inputs N]
//                  [--classes C] [--lr X] -o model.pb|model.pbtxt
//   tcc-models gpt [--vocab V] [--context T] [--layers L] ... -o model.pbtxt
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>

#include "frontend/io/ModelFile.h"
#include "models/Gpt.h"
#include "models/ModelBuilder.h"
#include <csignal>

namespace {

const char *kHelp = R"(tcc-models — writes a model file from a builder

Usage:
  tcc-models mlp [options] -o OUTPUT     a multi-layer perceptron classifier
  tcc-models gpt [options] -o OUTPUT     a GPT language model with AdamW

Common options:
  -o, --output PATH   .pb writes binary, .pbtxt writes text
  -h, --help          this text

MLP options:
  --batch B           batch size, fixed at compile time (default 64)
  --hidden W1,W2,...  hidden layer widths; 'none' for a linear model (default 256)
  --inputs N          features per sample (default 784 = 28x28)
  --classes C         number of classes (default 10)
  --lr X              default SGD learning rate (default 0.1)

GPT options (inputs tokens, targets: (B, T) int32; eval output logits (B, T, V)):
  --vocab V           vocabulary size (default 256)
  --context T         tokens per sequence (default 128)
  --layers L          transformer blocks (default 4)
  --width C           residual width (default 128)
  --heads H           attention heads; must divide C (default 4)
  --norm layer|rms    layer_norm (eps 1e-5) or rms_norm (eps 1e-6) (default layer)
  --norm-eps X        override the norm epsilon
  --mlp gelu|swiglu   GELU (tanh approximation, GPT-2) or SwiGLU (default gelu)
  --mlp-hidden N      MLP hidden width (default 4C; swiglu: 8C/3 rounded up to 8)
  --positions learned|rope
                      learned position embedding or rotary (default learned)
  --rope-theta X      rotary base (default 10000)
  --untied            a separate output embedding lm_head (default: tied to wte)
  --no-bias           no biases in linears and layer norms
  --dropout P         dropout rate after embeddings, attention, residuals (default 0)
  --batch B           sequences per micro-batch (default 32)
  --micro-batches K   micro-batches per step, gradients averaged (default 1)
  --lr X              AdamW peak learning rate (default 1e-3)
  --beta1 X           (default 0.9)
  --beta2 X           (default 0.99)
  --eps X             (default 1e-8)
  --weight-decay X    decoupled weight decay (default 0.1)
  --no-decay LIST     parameter groups without weight decay: a comma list of
                      bias, norm, embedding, or 'none' (default bias,norm)
  --grad-clip X       max global gradient norm; 0: off (default 1.0)
  --warmup N          linear warmup steps (default 0)
  --decay-steps N     cosine decay from the peak to --min-lr ends at step N;
                      0: constant learning rate (default 0)
  --min-lr X          learning-rate floor of the cosine (default lr / 10)
)";

int usage(const std::string &msg) {
  std::fprintf(stderr, "tcc-models: error: %s\n(see 'tcc-models --help')\n", msg.c_str());
  return 2;
}

bool parseInt(const std::string &s, int64_t &out, bool allowZero = false) {
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < 0 || (v == 0 && !allowZero))
    return false;
  out = v;
  return true;
}

bool parseDouble(const std::string &s, double &out) {
  char *end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v))
    return false;
  out = v;
  return true;
}

int write(const tcc::model::Model &model, const std::string &output) {
  absl::Status s = tcc::WriteModelFile(model, output);
  if (!s.ok()) {
    std::fprintf(stderr, "tcc-models: error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

int runMlp(int argc, char **argv) {
  tcc::models::MlpOptions opts;
  std::string output;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (i + 1 >= argc)
      return usage(a.rfind("-", 0) == 0 ? a + " needs a value" : "unexpected '" + a + "'");
    std::string v = argv[++i];
    if (a == "-o" || a == "--output") {
      output = v;
    } else if (a == "--batch" || a == "--inputs" || a == "--classes") {
      int64_t n;
      if (!parseInt(v, n))
        return usage(a + " needs a positive integer, got '" + v + "'");
      (a == "--batch" ? opts.batch : a == "--inputs" ? opts.inputs : opts.classes) = n;
    } else if (a == "--hidden") {
      opts.hidden.clear();
      if (v != "none") {
        size_t start = 0;
        while (start <= v.size()) {
          size_t comma = v.find(',', start);
          std::string part = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
          int64_t w;
          if (!parseInt(part, w))
            return usage("--hidden needs positive widths like 256,128, got '" + v + "'");
          opts.hidden.push_back(w);
          if (comma == std::string::npos)
            break;
          start = comma + 1;
        }
      }
    } else if (a == "--lr") {
      if (!parseDouble(v, opts.learningRate) || !(opts.learningRate > 0))
        return usage("--lr needs a positive number, got '" + v + "'");
    } else {
      return usage("unknown option '" + a + "'");
    }
  }
  if (output.empty())
    return usage("no output given (-o PATH)");
  return write(tcc::models::buildMlp(opts), output);
}

int runGpt(int argc, char **argv) {
  using tcc::models::GptOptions;
  GptOptions o;
  std::string output;
  double minLr = -1; // default: lr / 10

  // Flags without a value.
  std::map<std::string, std::function<void()>> switches = {
      {"--untied", [&] { o.tiedEmbeddings = false; }},
      {"--no-bias", [&] { o.bias = false; }},
  };
  // Flags with a value; each returns an error message or "".
  auto positiveInt = [](int64_t &field) {
    return [&field](const std::string &f, const std::string &v) -> std::string {
      return parseInt(v, field) ? "" : f + " needs a positive integer, got '" + v + "'";
    };
  };
  auto countInt = [](int64_t &field) {
    return [&field](const std::string &f, const std::string &v) -> std::string {
      return parseInt(v, field, /*allowZero=*/true)
                 ? ""
                 : f + " needs a non-negative integer, got '" + v + "'";
    };
  };
  auto number = [](double &field) {
    return [&field](const std::string &f, const std::string &v) -> std::string {
      return parseDouble(v, field) ? "" : f + " needs a number, got '" + v + "'";
    };
  };
  using Setter = std::function<std::string(const std::string &, const std::string &)>;
  std::map<std::string, Setter> flags = {
      {"--vocab", positiveInt(o.vocab)},
      {"--context", positiveInt(o.context)},
      {"--layers", positiveInt(o.layers)},
      {"--width", positiveInt(o.width)},
      {"--heads", positiveInt(o.heads)},
      {"--mlp-hidden", positiveInt(o.mlpHidden)},
      {"--batch", positiveInt(o.batch)},
      {"--micro-batches", positiveInt(o.microBatches)},
      {"--warmup", countInt(o.warmupSteps)},
      {"--decay-steps", countInt(o.decaySteps)},
      {"--norm-eps", number(o.normEps)},
      {"--rope-theta", number(o.ropeTheta)},
      {"--dropout", number(o.dropout)},
      {"--lr", number(o.learningRate)},
      {"--beta1", number(o.beta1)},
      {"--beta2", number(o.beta2)},
      {"--eps", number(o.eps)},
      {"--weight-decay", number(o.weightDecay)},
      {"--grad-clip", number(o.gradClip)},
      {"--min-lr", number(minLr)},
      {"--norm",
       [&](const std::string &f, const std::string &v) -> std::string {
         if (v == "layer" || v == "rms") {
           o.norm = v == "layer" ? GptOptions::Norm::Layer : GptOptions::Norm::Rms;
           return "";
         }
         return f + " must be layer or rms, got '" + v + "'";
       }},
      {"--mlp",
       [&](const std::string &f, const std::string &v) -> std::string {
         if (v == "gelu" || v == "swiglu") {
           o.mlp = v == "gelu" ? GptOptions::Mlp::Gelu : GptOptions::Mlp::SwiGlu;
           return "";
         }
         return f + " must be gelu or swiglu, got '" + v + "'";
       }},
      {"--positions",
       [&](const std::string &f, const std::string &v) -> std::string {
         if (v == "learned" || v == "rope") {
           o.positions = v == "learned" ? GptOptions::Positions::Learned
                                        : GptOptions::Positions::Rope;
           return "";
         }
         return f + " must be learned or rope, got '" + v + "'";
       }},
      {"--no-decay",
       [&](const std::string &f, const std::string &v) -> std::string {
         o.noDecayBiases = o.noDecayNorms = o.noDecayEmbeddings = false;
         if (v == "none")
           return "";
         size_t start = 0;
         while (true) {
           size_t comma = v.find(',', start);
           std::string g = v.substr(start, comma == std::string::npos
                                               ? std::string::npos
                                               : comma - start);
           if (g == "bias")
             o.noDecayBiases = true;
           else if (g == "norm")
             o.noDecayNorms = true;
           else if (g == "embedding")
             o.noDecayEmbeddings = true;
           else
             return f + " takes bias, norm, embedding or none, got '" + v + "'";
           if (comma == std::string::npos)
             return "";
           start = comma + 1;
         }
       }},
      {"-o", [&](const std::string &, const std::string &v) -> std::string {
         output = v;
         return "";
       }},
  };
  flags["--output"] = flags["-o"];

  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (auto s = switches.find(a); s != switches.end()) {
      s->second();
      continue;
    }
    auto f = flags.find(a);
    if (f == flags.end())
      return usage(a.rfind("-", 0) == 0 ? "unknown option '" + a + "'"
                                        : "unexpected '" + a + "'");
    if (i + 1 >= argc)
      return usage(a + " needs a value");
    std::string err = f->second(a, argv[++i]);
    if (!err.empty())
      return usage(err);
  }
  if (output.empty())
    return usage("no output given (-o PATH)");
  o.minLearningRate = minLr >= 0 ? minLr : o.learningRate / 10;
  std::string err = tcc::models::validateGptOptions(o);
  if (!err.empty())
    return usage(err);
  return write(tcc::models::buildGpt(o), output);
}

} // namespace

int main(int argc, char **argv) {
  // Past a file-size limit (ulimit -f) a write fails with EFBIG, which the
  // writers report naming the file (and remove their temporaries), instead
  // of SIGXFSZ ending the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc < 2)
    return usage("no model kind given");
  std::string kind = argv[1];
  if (kind == "-h" || kind == "--help") {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (kind == "mlp")
    return runMlp(argc, argv);
  if (kind == "gpt")
    return runGpt(argc, argv);
  return usage("unknown model kind '" + kind + "' (known: mlp, gpt)");
}
