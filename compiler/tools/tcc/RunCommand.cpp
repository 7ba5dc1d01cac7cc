// `tcc run`: evaluates a model's tg function once with the float64 reference
// interpreter and prints what it computes. For debugging a model (and the
// compiler) without compiling or training: parameters are initialized
// exactly as trun initializes them (same seeds, same values), data inputs
// are random.
#include "compiler/tools/tcc/RunCommand.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "compiler/driver/Compile.h"
#include "interpreter/TgInterpreter.h"
#include "compiler/pipeline/Pipeline.h"
#include "dialects/common/ModelAttrs.h"
#include "dialects/common/ShapeHelpers.h"
#include "frontend/io/ModelFile.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "runtime/initializers/Initializers.h"

namespace tcc {
namespace {

const char *kRunHelp = R"(Usage: tcc run MODEL [options]

Evaluates one function of MODEL with the float64 reference interpreter and
prints every result (shape, mean, min, max, first values). Parameters get the
values trun would give them (same initializers, same --seed); data inputs are
random: floats from N(0, 1), integers uniform in [0, --int-max).

Options:
  --function F      forward     the eval function: loss and outputs (default)
                    gradients   loss and the gradient of every trainable parameter
                    train_step  the whole training step (updated parameters)
  --seed S          seed for parameters and inputs (default 0)
  --int-max N       integer inputs are drawn from [0, N) (default 2)
  --lr X            learning rate for train_step (default: the model's)
  --show N          values printed per result (default 8)
  -h, --help        this text
)";

int usageError(const std::string &msg) {
  std::fprintf(stderr, "tcc: error: %s\n(see 'tcc run --help')\n", msg.c_str());
  return 2;
}

struct RunArgs {
  std::string model, function = "forward";
  uint64_t seed = 0;
  int64_t intMax = 2, show = 8;
  std::optional<double> lr;
};

void printTensor(llvm::StringRef name, const interp::Tensor &t, int64_t show) {
  double sum = 0, lo = INFINITY, hi = -INFINITY;
  for (double x : t.data) {
    sum += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  std::printf("%s %s mean %.6g min %.6g max %.6g:", name.str().c_str(),
              tcc::formatShape(t.shape).c_str(),
              t.data.empty() ? 0.0 : sum / t.data.size(), lo, hi);
  for (int64_t i = 0; i < std::min<int64_t>(show, t.data.size()); ++i)
    std::printf(" %.6g", t.data[i]);
  std::printf(t.numElements() > show ? " ...\n" : "\n");
}

// The interpreter's arguments for `f`, by each argument's role.
mlir::FailureOr<std::vector<interp::Tensor>>
makeArguments(mlir::func::FuncOp f, const RunArgs &args, double defaultLr) {
  std::mt19937_64 rng(args.seed);
  std::normal_distribution<double> normal;
  std::vector<interp::Tensor> out;
  for (mlir::BlockArgument a : f.getArguments()) {
    auto type = llvm::cast<mlir::RankedTensorType>(a.getType());
    interp::Tensor t = interp::Tensor::zeros(type.getShape());
    unsigned i = a.getArgNumber();
    auto p = model::ParamInfo::fromAttr(f.getArgAttr(i, model::kParamAttr));
    if (!p) // a buffer (batch norm's running statistics) starts like trun's
      p = model::ParamInfo::fromAttr(f.getArgAttr(i, model::kBufferAttr));
    if (p) {
      tcc_tensor_desc d{};
      d.name = p->name.c_str();
      d.init_kind = p->init == "ones"      ? TCC_INIT_ONES
                    : p->init == "normal"  ? TCC_INIT_NORMAL
                    : p->init == "uniform" ? TCC_INIT_UNIFORM
                                           : TCC_INIT_ZEROS;
      d.init_scale = p->scale;
      d.init_seed = p->seed;
      for (int64_t k = 0; k < t.numElements(); ++k)
        t.data[k] = trun::InitialValue(d, args.seed, k);
    } else if (auto h = f.getArgAttrOfType<mlir::StringAttr>(i, model::kHyperAttr)) {
      double v = h.getValue() == model::kLearningRateHyper ? args.lr.value_or(defaultLr)
                 : h.getValue() == model::kRngSeedHyper      ? static_cast<double>(args.seed)
                                                             : 0.0; // step 0
      t.data.assign(t.data.size(), v);
    } else if (f.getArgAttr(i, model::kInputAttr)) {
      std::uniform_int_distribution<int64_t> ints(0, args.intMax - 1);
      for (double &x : t.data)
        x = llvm::isa<mlir::FloatType>(type.getElementType())
                ? normal(rng)
                : static_cast<double>(ints(rng));
    } else if (auto state = f.getArgAttrOfType<mlir::DictionaryAttr>(
                   i, model::kOptStateAttr)) {
      // State of the whole step (the loss scale) starts at its init_value.
      if (auto init = state.getAs<mlir::FloatAttr>("init_value"))
        t.data.assign(t.data.size(), init.getValueAsDouble());
    } // other optimizer state and anything else: zeros
    out.push_back(std::move(t));
  }
  return out;
}

std::string resultName(mlir::func::FuncOp f, unsigned i) {
  for (llvm::StringRef key : {model::kLossAttr, model::kOutputAttr, model::kTrainOutputAttr})
    if (auto s = f.getResultAttrOfType<mlir::StringAttr>(i, key))
      return s.str();
  auto params = [&](int64_t index) -> std::string {
    int64_t seen = 0;
    for (mlir::BlockArgument a : f.getArguments())
      if (auto p = model::ParamInfo::fromAttr(f.getArgAttr(a.getArgNumber(), model::kParamAttr)))
        if (seen++ == index)
          return p->name;
    return "?";
  };
  if (auto g = f.getResultAttrOfType<mlir::IntegerAttr>(i, model::kGradOfAttr))
    return "grad(" + params(g.getInt()) + ")";
  if (auto u = f.getResultAttrOfType<mlir::IntegerAttr>(i, model::kUpdatesParamAttr))
    return params(u.getInt()) + " (updated)";
  return "result " + std::to_string(i);
}

int execute(const RunArgs &args) {
  absl::StatusOr<model::Model> model = LoadModelFile(args.model);
  if (!model.ok()) {
    std::fprintf(stderr, "tcc: error: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module = importIntoContext(*model, args.model, ctx);
  if (!module)
    return 1; // the diagnostic printer said why
  mlir::PassManager pm(&ctx);
  if (args.function == "forward")
    pm.addPass(createTgStripTrainOnlyOps()); // eval semantics: no dropout
  else if (args.function == "gradients")
    pm.addPass(createTgAutodiff());
  else if (args.function == "train_step")
    buildPipeline(pm, Phase::Training);
  if (mlir::failed(pm.run(*module)))
    return 1;
  llvm::StringRef fn = args.function == "forward" ? model::kForwardFunc : model::kTrainStepFunc;
  auto f = module->lookupSymbol<mlir::func::FuncOp>(fn);
  double defaultLr = 0;
  if (auto opt = (*module)->getAttrOfType<mlir::DictionaryAttr>(model::kOptimizerAttr))
    if (auto lr = opt.getAs<mlir::FloatAttr>("learning_rate"))
      defaultLr = lr.getValueAsDouble();
  auto inputs = makeArguments(f, args, defaultLr);
  if (mlir::failed(inputs))
    return 1;
  auto results = interp::interpret(f, *inputs);
  if (mlir::failed(results))
    return 1;
  for (auto [i, t] : llvm::enumerate(*results))
    printTensor(resultName(f, i), t, args.show);
  return 0;
}

bool parseInt(const std::string &s, int64_t &out) {
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0')
    return false;
  out = v;
  return true;
}

} // namespace

int runCommandMain(int argc, char **argv) {
  RunArgs args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kRunHelp, stdout);
      return 0;
    }
    bool takesValue = a == "--function" || a == "--seed" || a == "--int-max" ||
                      a == "--lr" || a == "--show";
    if (takesValue && i + 1 >= argc)
      return usageError(a + " needs a value");
    std::string v = takesValue ? argv[++i] : "";
    int64_t n = 0;
    if (a == "--function") {
      if (v != "forward" && v != "gradients" && v != "train_step")
        return usageError("unknown function '" + v + "' (forward, gradients, train_step)");
      args.function = v;
    } else if (a == "--seed") {
      if (!parseInt(v, n) || n < 0)
        return usageError("--seed needs a non-negative integer, got '" + v + "'");
      args.seed = static_cast<uint64_t>(n);
    } else if (a == "--int-max" || a == "--show") {
      if (!parseInt(v, n) || n <= 0)
        return usageError(a + " needs a positive integer, got '" + v + "'");
      (a == "--int-max" ? args.intMax : args.show) = n;
    } else if (a == "--lr") {
      char *end = nullptr;
      double lr = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(lr >= 0))
        return usageError("--lr needs a non-negative number, got '" + v + "'");
      args.lr = lr;
    } else if (!a.empty() && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else if (args.model.empty()) {
      args.model = a;
    } else {
      return usageError("more than one model given");
    }
  }
  if (args.model.empty())
    return usageError("no model file given");
  return execute(args);
}

} // namespace tcc
