// tcc-models: writes model files from the builders in models/.
//
//   tcc-models mlp [--batch B] [--hidden W1,W2,...] [--inputs N]
//                  [--classes C] [--lr X] -o model.pb|model.pbtxt
#include <cstdio>
#include <cstdlib>
#include <string>

#include "frontend/io/ModelFile.h"
#include "models/ModelBuilder.h"

namespace {

const char *kHelp = R"(tcc-models — writes a model file from a builder

Usage:
  tcc-models mlp [options] -o OUTPUT     a multi-layer perceptron classifier

MLP options:
  --batch B           batch size, fixed at compile time (default 64)
  --hidden W1,W2,...  hidden layer widths; 'none' for a linear model (default 256)
  --inputs N          features per sample (default 784 = 28x28)
  --classes C         number of classes (default 10)
  --lr X              default SGD learning rate (default 0.1)
  -o, --output PATH   .pb writes binary, .pbtxt writes text
  -h, --help          this text
)";

int usage(const std::string &msg) {
  std::fprintf(stderr, "tcc-models: error: %s\n(see 'tcc-models --help')\n", msg.c_str());
  return 2;
}

bool parseInt(const std::string &s, int64_t &out) {
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v <= 0)
    return false;
  out = v;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return usage("no model kind given");
  std::string kind = argv[1];
  if (kind == "-h" || kind == "--help") {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (kind != "mlp")
    return usage("unknown model kind '" + kind + "' (known: mlp)");
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
      char *end = nullptr;
      opts.learningRate = std::strtod(v.c_str(), &end);
      if (*end != '\0' || !(opts.learningRate > 0))
        return usage("--lr needs a positive number, got '" + v + "'");
    } else {
      return usage("unknown option '" + a + "'");
    }
  }
  if (output.empty())
    return usage("no output given (-o PATH)");
  absl::Status s = tcc::WriteModelFile(tcc::models::buildMlp(opts), output);
  if (!s.ok()) {
    std::fprintf(stderr, "tcc-models: error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
