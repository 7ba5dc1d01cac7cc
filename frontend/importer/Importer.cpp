#include "frontend/importer/Importer.h"

#include "dialects/tg/TgDialect.h"
#include "dialects/tg/TgModelAttrs.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "tcc_model.pb.h" // generated from frontend/proto/tcc_model.proto

using namespace mlir;

namespace tcc {
namespace {


class ModelImporter {
public:
  ModelImporter(const model::Model &model, MLIRContext &ctx)
      : model_(model), ctx_(ctx), b_(&ctx) {}

  OwningOpRef<ModuleOp> run();

private:
  // Errors inside a node are located at the node (NameLoc, as its ops
  // are); others (parameters, inputs, training) name what they are about.
  InFlightDiagnostic error(StringRef where) {
    if (where == currentNode_)
      return emitError(NameLoc::get(b_.getStringAttr(where)));
    InFlightDiagnostic d = emitError(UnknownLoc::get(&ctx_));
    d << where << ": ";
    return d;
  }
  FailureOr<Type> elementType(model::DType dtype, StringRef where);
  FailureOr<RankedTensorType> tensorType(model::DType dtype,
                                         const model::Shape &shape,
                                         StringRef where);
  LogicalResult declare(StringRef name, Value v, StringRef where);
  LogicalResult importNode(const model::Node &node, int index);
  FailureOr<Value> buildOp(const model::Node &node, Location loc,
                           ArrayRef<Value> operands, StringRef where);

  // Attribute readers; each reports a missing or mistyped attribute.
  FailureOr<bool> boolAttr(const model::Node &n, StringRef key, bool dflt,
                           StringRef where);
  FailureOr<SmallVector<int64_t>> intsAttr(const model::Node &n,
                                           StringRef key, StringRef where);
  LogicalResult checkAttrKeys(const model::Node &n,
                              ArrayRef<StringRef> allowed, StringRef where);

  const model::Model &model_;
  MLIRContext &ctx_;
  OpBuilder b_;
  llvm::StringMap<Value> values_;
  std::string currentNode_;
};

FailureOr<Type> ModelImporter::elementType(model::DType dtype,
                                           StringRef where) {
  switch (dtype) {
  case model::F32: return Type(b_.getF32Type());
  case model::F64: return Type(b_.getF64Type());
  case model::I32: return Type(b_.getI32Type());
  case model::I64: return Type(b_.getI64Type());
  default:
    error(where) << "dtype is missing or not supported (use F32, F64, I32, I64)";
    return failure();
  }
}

FailureOr<RankedTensorType>
ModelImporter::tensorType(model::DType dtype, const model::Shape &shape,
                          StringRef where) {
  FailureOr<Type> elt = elementType(dtype, where);
  if (failed(elt))
    return failure();
  SmallVector<int64_t> dims(shape.dims().begin(), shape.dims().end());
  for (int64_t d : dims)
    if (d <= 0) {
      error(where) << "shape " << tg::formatShape(dims)
                   << " has a non-positive dimension";
      return failure();
    }
  return RankedTensorType::get(dims, *elt);
}

LogicalResult ModelImporter::declare(StringRef name, Value v, StringRef where) {
  if (name.empty())
    return error(where) << "has an empty name";
  if (!values_.try_emplace(name, v).second)
    return error(where) << "redefines '" << name
                        << "' (names of parameters, inputs and node outputs "
                           "must be unique)";
  return success();
}

LogicalResult ModelImporter::checkAttrKeys(const model::Node &n,
                                           ArrayRef<StringRef> allowed,
                                           StringRef where) {
  for (const auto &kv : n.attrs())
    if (!llvm::is_contained(allowed, StringRef(kv.first))) {
      std::string list;
      for (StringRef a : allowed)
        list += (list.empty() ? "" : ", ") + a.str();
      return error(where) << "unknown attribute '" << kv.first << "' (op "
                          << n.op() << " takes: "
                          << (list.empty() ? "none" : list) << ")";
    }
  return success();
}

FailureOr<bool> ModelImporter::boolAttr(const model::Node &n, StringRef key,
                                        bool dflt, StringRef where) {
  auto it = n.attrs().find(key.str());
  if (it == n.attrs().end())
    return dflt;
  if (it->second.value_case() != model::Attribute::kB) {
    error(where) << "attribute '" << key << "' must be a bool (b: true)";
    return failure();
  }
  return it->second.b();
}

FailureOr<SmallVector<int64_t>>
ModelImporter::intsAttr(const model::Node &n, StringRef key, StringRef where) {
  auto it = n.attrs().find(key.str());
  if (it == n.attrs().end())
    return SmallVector<int64_t>();
  if (it->second.value_case() != model::Attribute::kInts) {
    error(where) << "attribute '" << key
                 << "' must be a list of integers (ints { values: ... })";
    return failure();
  }
  const auto &v = it->second.ints().values();
  return SmallVector<int64_t>(v.begin(), v.end());
}

// Builds the tg op of one node. Result types are inferred here; shape errors
// are reported in the same words as the op verifiers.
FailureOr<Value> ModelImporter::buildOp(const model::Node &node, Location loc,
                                        ArrayRef<Value> operands,
                                        StringRef where) {
  StringRef op = node.op();
  auto type = [&](int i) { return cast<RankedTensorType>(operands[i].getType()); };
  auto arity = [&](size_t n) -> LogicalResult {
    if (operands.size() != n)
      return error(where) << "op " << op << " takes " << n << " input"
                          << (n == 1 ? "" : "s") << ", got " << operands.size();
    if (node.outputs_size() != 1)
      return error(where) << "op " << op << " has 1 output, got "
                          << node.outputs_size();
    return success();
  };
  auto requireFloat = [&](int i) -> LogicalResult {
    if (!isa<FloatType>(type(i).getElementType()))
      return error(where) << "input '" << node.inputs(i)
                          << "' must be a float tensor, got " << type(i);
    return success();
  };

  if (op == "matmul") {
    if (failed(arity(2)) || failed(checkAttrKeys(node, {"transpose_a", "transpose_b"}, where)) ||
        failed(requireFloat(0)) || failed(requireFloat(1)))
      return failure();
    FailureOr<bool> ta = boolAttr(node, "transpose_a", false, where);
    FailureOr<bool> tb = boolAttr(node, "transpose_b", false, where);
    if (failed(ta) || failed(tb))
      return failure();
    auto l = type(0), r = type(1);
    if (l.getRank() != 2 || r.getRank() != 2)
      return error(where) << "matmul expects 2-D inputs, got "
                          << tg::formatShape(l.getShape()) << " x "
                          << tg::formatShape(r.getShape());
    int64_t m = l.getDimSize(*ta ? 1 : 0), kl = l.getDimSize(*ta ? 0 : 1);
    int64_t kr = r.getDimSize(*tb ? 1 : 0), n = r.getDimSize(*tb ? 0 : 1);
    if (kl != kr)
      return error(where) << "shape mismatch: " << tg::formatShape(l.getShape())
                          << " x " << tg::formatShape(r.getShape())
                          << " contracts K = " << kl << " with K = " << kr;
    auto out = RankedTensorType::get({m, n}, l.getElementType());
    return Value(tg::MatmulOp::create(b_, loc, out, operands[0], operands[1],
                                      b_.getBoolAttr(*ta), b_.getBoolAttr(*tb)));
  }
  if (op == "add" || op == "mul") {
    if (failed(arity(2)) || failed(checkAttrKeys(node, {}, where)) ||
        failed(requireFloat(0)) || failed(requireFloat(1)))
      return failure();
    if (type(0).getElementType() != type(1).getElementType())
      return error(where) << "inputs have different dtypes: " << type(0)
                          << " and " << type(1);
    auto shape = tg::broadcastShapes(type(0).getShape(), type(1).getShape());
    if (!shape)
      return error(where) << "shape mismatch: " << tg::formatShape(type(0).getShape())
                          << " and " << tg::formatShape(type(1).getShape())
                          << " do not broadcast";
    auto out = RankedTensorType::get(*shape, type(0).getElementType());
    if (op == "add")
      return Value(tg::AddOp::create(b_, loc, out, operands[0], operands[1]));
    return Value(tg::MulOp::create(b_, loc, out, operands[0], operands[1]));
  }
  if (op == "relu") {
    if (failed(arity(1)) || failed(checkAttrKeys(node, {}, where)) ||
        failed(requireFloat(0)))
      return failure();
    return Value(tg::ReluOp::create(b_, loc, type(0), operands[0]));
  }
  if (op == "softmax_cross_entropy") {
    if (failed(arity(2)) || failed(checkAttrKeys(node, {}, where)) ||
        failed(requireFloat(0)))
      return failure();
    auto logits = type(0), labels = type(1);
    if (!isa<IntegerType>(labels.getElementType()))
      return error(where) << "labels '" << node.inputs(1)
                          << "' must be I32 or I64, got " << labels;
    if (logits.getRank() != 2 || labels.getRank() != 1 ||
        labels.getDimSize(0) != logits.getDimSize(0))
      return error(where) << "shape mismatch: logits must be (N, C) and "
                             "labels (N), got "
                          << tg::formatShape(logits.getShape()) << " and "
                          << tg::formatShape(labels.getShape());
    auto out = RankedTensorType::get({logits.getDimSize(0)},
                                     logits.getElementType());
    return Value(tg::SoftmaxCrossEntropyOp::create(b_, loc, out, operands[0],
                                                   operands[1]));
  }
  if (op == "mean" || op == "sum") {
    if (failed(arity(1)) || failed(checkAttrKeys(node, {"axes", "keep_dims"}, where)) ||
        failed(requireFloat(0)))
      return failure();
    auto in = type(0);
    FailureOr<SmallVector<int64_t>> axes = intsAttr(node, "axes", where);
    FailureOr<bool> keep = boolAttr(node, "keep_dims", false, where);
    if (failed(axes) || failed(keep))
      return failure();
    if (axes->empty()) // default: all axes
      for (int64_t i = 0; i < in.getRank(); ++i)
        axes->push_back(i);
    for (int64_t &a : *axes) {
      if (a < -in.getRank() || a >= in.getRank())
        return error(where) << "axis " << a << " out of range for "
                            << tg::formatShape(in.getShape());
      if (a < 0)
        a += in.getRank();
    }
    llvm::sort(*axes);
    if (std::adjacent_find(axes->begin(), axes->end()) != axes->end())
      return error(where) << "axes repeat an axis";
    if (axes->empty())
      return error(where) << "cannot reduce a scalar";
    auto out = RankedTensorType::get(
        tg::reducedShape(in.getShape(), *axes, *keep), in.getElementType());
    auto axesAttr = b_.getDenseI64ArrayAttr(*axes);
    if (op == "mean")
      return Value(tg::ReduceMeanOp::create(b_, loc, out, operands[0], axesAttr,
                                            b_.getBoolAttr(*keep)));
    return Value(tg::ReduceSumOp::create(b_, loc, out, operands[0], axesAttr,
                                         b_.getBoolAttr(*keep)));
  }
  if (op == "reshape") {
    if (failed(arity(1)) || failed(checkAttrKeys(node, {"shape"}, where)))
      return failure();
    FailureOr<SmallVector<int64_t>> shape = intsAttr(node, "shape", where);
    if (failed(shape))
      return failure();
    auto in = type(0);
    int64_t count = 1;
    for (int64_t d : *shape) {
      if (d <= 0)
        return error(where) << "reshape target " << tg::formatShape(*shape)
                            << " has a non-positive dimension";
      count *= d;
    }
    if (count != in.getNumElements())
      return error(where) << "cannot reshape " << tg::formatShape(in.getShape())
                          << " to " << tg::formatShape(*shape);
    auto out = RankedTensorType::get(*shape, in.getElementType());
    return Value(tg::ReshapeOp::create(b_, loc, out, operands[0]));
  }
  return error(where) << "unknown op '" << op
                      << "' (known: matmul, add, mul, relu, "
                         "softmax_cross_entropy, mean, sum, reshape)";
}

LogicalResult ModelImporter::importNode(const model::Node &node, int index) {
  std::string where = node.name().empty() ? "node #" + std::to_string(index)
                                          : node.name();
  Location loc = NameLoc::get(b_.getStringAttr(where));
  currentNode_ = where;
  SmallVector<Value> operands;
  for (const std::string &in : node.inputs()) {
    auto it = values_.find(in);
    if (it == values_.end())
      return error(where) << "input '" << in
                          << "' is not a parameter, a data input, or an "
                             "output of an earlier node";
    operands.push_back(it->second);
  }
  FailureOr<Value> result = buildOp(node, loc, operands, where);
  if (failed(result))
    return failure();
  return declare(node.outputs(0), *result, where);
}

OwningOpRef<ModuleOp> ModelImporter::run() {
  std::string modelName = model_.name().empty() ? "model" : model_.name();
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(NameLoc::get(b_.getStringAttr(modelName)));
  module->getOperation()->setAttr(tg::kModelNameAttr,
                                  b_.getStringAttr(modelName));

  // Signature: parameters, then data inputs.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  for (const model::Parameter &p : model_.params()) {
    std::string where = "parameter '" + p.name() + "'";
    FailureOr<RankedTensorType> t = tensorType(p.dtype(), p.shape(), where);
    if (failed(t))
      return nullptr;
    if (!isa<FloatType>(t->getElementType())) {
      error(where) << "parameters must be F32 or F64";
      return nullptr;
    }
    tg::ParamInfo info;
    info.name = p.name();
    info.init = model::Initializer::Kind_Name(p.init().kind());
    std::transform(info.init.begin(), info.init.end(), info.init.begin(),
                   ::tolower);
    info.scale = p.init().scale();
    info.seed = p.init().seed();
    info.trainable = !p.frozen();
    if ((p.init().kind() == model::Initializer::NORMAL ||
         p.init().kind() == model::Initializer::UNIFORM) &&
        !(info.scale > 0)) {
      error(where) << "initializer " << info.init << " needs a scale > 0";
      return nullptr;
    }
    argTypes.push_back(*t);
    argAttrs.push_back(b_.getDictionaryAttr(
        b_.getNamedAttr(tg::kParamAttr, info.toAttr(b_))));
  }
  for (const model::Input &in : model_.inputs()) {
    std::string where = "input '" + in.name() + "'";
    FailureOr<RankedTensorType> t = tensorType(in.dtype(), in.shape(), where);
    if (failed(t))
      return nullptr;
    argTypes.push_back(*t);
    argAttrs.push_back(b_.getDictionaryAttr(
        b_.getNamedAttr(tg::kInputAttr, b_.getStringAttr(in.name()))));
  }

  auto func = func::FuncOp::create(
      module->getLoc(), tg::kForwardFunc, b_.getFunctionType(argTypes, {}));
  module->push_back(func);
  Block *body = func.addEntryBlock();
  b_.setInsertionPointToStart(body);

  int argIndex = 0;
  for (const model::Parameter &p : model_.params())
    if (failed(declare(p.name(), body->getArgument(argIndex++),
                       "parameter '" + p.name() + "'")))
      return nullptr;
  for (const model::Input &in : model_.inputs())
    if (failed(declare(in.name(), body->getArgument(argIndex++),
                       "input '" + in.name() + "'")))
      return nullptr;

  for (auto [i, node] : llvm::enumerate(model_.nodes()))
    if (failed(importNode(node, static_cast<int>(i))))
      return nullptr;
  currentNode_.clear();

  // Results: the loss, then the eval outputs.
  const model::Training &training = model_.training();
  if (training.loss().empty()) {
    error("training") << "training.loss is not set (name the scalar loss value)";
    return nullptr;
  }
  auto loss = values_.find(training.loss());
  if (loss == values_.end()) {
    error("training") << "training.loss '" << training.loss()
                      << "' is not a value of the graph";
    return nullptr;
  }
  auto lossType = cast<RankedTensorType>(loss->second.getType());
  if (lossType.getRank() != 0 || !isa<FloatType>(lossType.getElementType())) {
    error("training") << "training.loss '" << training.loss()
                      << "' must be a float scalar, got " << lossType
                      << " (reduce it with a mean node)";
    return nullptr;
  }
  SmallVector<Value> results{loss->second};
  SmallVector<Attribute> resultAttrs{b_.getDictionaryAttr(
      b_.getNamedAttr(tg::kLossAttr, b_.getStringAttr(training.loss())))};
  llvm::StringSet<> outputNames;
  for (const model::Output &out : model_.outputs()) {
    std::string where = "output '" + out.name() + "'";
    auto it = values_.find(out.value());
    if (it == values_.end()) {
      error(where) << "refers to '" << out.value()
                   << "', which is not a value of the graph";
      return nullptr;
    }
    if (out.name().empty() || !outputNames.insert(out.name()).second) {
      error(where) << "output names must be non-empty and unique";
      return nullptr;
    }
    results.push_back(it->second);
    resultAttrs.push_back(b_.getDictionaryAttr(
        b_.getNamedAttr(tg::kOutputAttr, b_.getStringAttr(out.name()))));
  }
  func::ReturnOp::create(b_, func.getLoc(), results);
  func.setType(b_.getFunctionType(argTypes, ValueRange(results).getTypes()));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);

  // Optimizer.
  if (training.optimizer().kind_case() != model::Optimizer::kSgd) {
    error("training") << "training.optimizer is not set (supported: sgd)";
    return nullptr;
  }
  double lr = training.optimizer().sgd().learning_rate();
  if (!(lr > 0)) {
    error("training") << "sgd learning_rate must be > 0, got " << lr;
    return nullptr;
  }
  module->getOperation()->setAttr(
      tg::kOptimizerAttr,
      b_.getDictionaryAttr({b_.getNamedAttr("kind", b_.getStringAttr("sgd")),
                            b_.getNamedAttr("learning_rate",
                                            b_.getF64FloatAttr(lr))}));

  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace

void loadImporterDialects(MLIRContext &ctx) {
  ctx.loadDialect<tg::TgDialect, func::FuncDialect>();
}

OwningOpRef<ModuleOp> importModel(const model::Model &model, MLIRContext &ctx) {
  loadImporterDialects(ctx);
  return ModelImporter(model, ctx).run();
}

} // namespace tcc
