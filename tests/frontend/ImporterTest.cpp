// The importer turns valid models into verified tg IR and reports every
// malformed one through a diagnostic located at the offending node.
#include "frontend/importer/Importer.h"

#include <string>
#include <vector>

#include "dialects/tg/TgDialect.h"
#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "models/ModelBuilder.h"

namespace tcc {
namespace {

struct Imported {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<std::string> errors; // "where|message"
};

// Imports `m`, capturing diagnostics instead of printing them.
Imported import(const model::Model &m, mlir::MLIRContext &ctx) {
  Imported out;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    std::string where;
    if (auto n = llvm::dyn_cast<mlir::NameLoc>(d.getLocation()))
      where = n.getName().str();
    out.errors.push_back(where + "|" + d.str());
    return mlir::success();
  });
  out.module = importModel(m, ctx);
  return out;
}

model::Model mlp() {
  models::MlpOptions o;
  o.batch = 4;
  o.inputs = 6;
  o.hidden = {5};
  o.classes = 3;
  return models::buildMlp(o);
}

model::Node *findNode(model::Model &m, const std::string &name) {
  for (model::Node &n : *m.mutable_nodes())
    if (n.name() == name)
      return &n;
  return nullptr;
}

TEST(Importer, MlpImportsAndVerifies) {
  mlir::MLIRContext ctx;
  Imported r = import(mlp(), ctx);
  ASSERT_TRUE(r.module) << (r.errors.empty() ? "" : r.errors[0]);
  auto fwd = r.module->lookupSymbol<mlir::func::FuncOp>("forward");
  ASSERT_TRUE(fwd);
  EXPECT_EQ(fwd.getNumArguments(), 4u + 2u); // 4 params, 2 inputs
  EXPECT_EQ(fwd.getNumResults(), 2u);        // loss, logits
  int matmuls = 0;
  fwd.walk([&](tg::MatmulOp) { ++matmuls; });
  EXPECT_EQ(matmuls, 2);
}

struct ErrorCase {
  const char *name;
  void (*mutate)(model::Model &);
  const char *where;   // expected node name in the location ("" = none)
  const char *message; // expected substring
};

const ErrorCase kCases[] = {
    {"unknown op", [](model::Model &m) { findNode(m, "fc1")->set_op("conv"); },
     "fc1", "unknown op 'conv'"},
    {"wrong arity",
     [](model::Model &m) { findNode(m, "fc1.relu")->add_inputs("image"); },
     "fc1.relu", "op relu takes 1 input, got 2"},
    {"shape mismatch",
     [](model::Model &m) {
       findNode(m, "fc2")->set_inputs(1, "fc1.weight"); // (6,5) after (4,5)
     },
     "fc2", "shape mismatch: [4, 5] x [6, 5]"},
    {"dangling input",
     [](model::Model &m) { findNode(m, "logits")->set_inputs(1, "fc9.bias"); },
     "logits", "input 'fc9.bias' is not a parameter"},
    {"use before definition",
     [](model::Model &m) { m.mutable_nodes()->SwapElements(0, 1); },
     "fc1.biased", "input 'fc1' is not a parameter"},
    {"labels not integer",
     [](model::Model &m) { m.mutable_inputs(1)->set_dtype(model::F32); },
     "xent", "labels 'label' must be I32 or I64"},
    {"loss not scalar",
     [](model::Model &m) { m.mutable_training()->set_loss("xent"); }, "",
     "training.loss 'xent' must be a float scalar"},
    {"duplicate parameter",
     [](model::Model &m) { m.mutable_params(1)->set_name("fc1.weight"); }, "",
     "redefines 'fc1.weight'"},
    {"missing output value",
     [](model::Model &m) { m.mutable_outputs(0)->set_value("nothing"); }, "",
     "refers to 'nothing'"},
    {"bad reshape",
     [](model::Model &m) {
       model::Node *n = m.add_nodes();
       n->set_name("r");
       n->set_op("reshape");
       n->add_inputs("logits");
       n->add_outputs("r");
       (*n->mutable_attrs())["shape"].mutable_ints()->add_values(7);
     },
     "r", "cannot reshape [4, 3] to [7]"},
    {"axis out of range",
     [](model::Model &m) {
       (*findNode(m, "loss")->mutable_attrs())["axes"].mutable_ints()->add_values(3);
     },
     "loss", "axis 3 out of range for [4]"},
};

class ImporterErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ImporterErrors, ReportsAtTheNode) {
  const ErrorCase &c = GetParam();
  model::Model m = mlp();
  c.mutate(m);
  mlir::MLIRContext ctx;
  Imported r = import(m, ctx);
  EXPECT_FALSE(r.module) << c.name;
  ASSERT_EQ(r.errors.size(), 1u) << c.name;
  std::string where = r.errors[0].substr(0, r.errors[0].find('|'));
  std::string message = r.errors[0].substr(r.errors[0].find('|') + 1);
  EXPECT_EQ(where, c.where) << c.name << ": " << message;
  EXPECT_NE(message.find(c.message), std::string::npos)
      << c.name << ": got '" << message << "'";
}

INSTANTIATE_TEST_SUITE_P(AllCases, ImporterErrors, ::testing::ValuesIn(kCases),
                         [](const auto &info) {
                           std::string n = info.param.name;
                           for (char &ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch)))
                               ch = '_';
                           return n;
                         });

} // namespace
} // namespace tcc
