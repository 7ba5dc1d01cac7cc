#include "frontend/importer/Importer.h"

#include "frontend/importer/ImportTraining.h"
#include "frontend/importer/NodeImporter.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgDialect.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "tcc_model.pb.h" // generated from frontend/proto/tcc_model.proto

#include <algorithm>
#include <cmath>
#include <cstring>

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
  LogicalResult checkSize(RankedTensorType type, StringRef where);
  LogicalResult importNode(const model::Node &node, int index);
  LogicalResult importTorch(const model::Parameter &p, RankedTensorType type,
                            model::ParamInfo &info);
  LogicalResult checkTorchKeys(ArrayRef<model::ParamInfo> params);
  LogicalResult importConstants();

  const model::Model &model_;
  MLIRContext &ctx_;
  OpBuilder b_;
  llvm::StringMap<Value> values_;
  std::string currentNode_;
  // Buffer updates the nodes made (batch norm), in node order.
  SmallVector<std::pair<BlockArgument, Value>> bufferUpdates_;
};

FailureOr<Type> ModelImporter::elementType(model::DType dtype,
                                           StringRef where) {
  switch (dtype) {
  case model::F32: return Type(b_.getF32Type());
  case model::F64: return Type(b_.getF64Type());
  case model::I32: return Type(b_.getI32Type());
  case model::I64: return Type(b_.getI64Type());
  case model::BOOL: return Type(b_.getI1Type());
  default:
    error(where) << "dtype is missing or not supported (use F32, F64, I32, I64, BOOL)";
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
      error(where) << "shape " << tcc::formatShape(dims)
                   << " has a non-positive dimension";
      return failure();
    }
  RankedTensorType type = RankedTensorType::get(dims, *elt);
  if (failed(checkSize(type, where)))
    return failure();
  return type;
}

// Sizes come from the file: the element count and bytes of every tensor
// are computed with overflow checks and bounded, so no later size
// arithmetic (memory plans, offsets) wraps.
LogicalResult ModelImporter::checkSize(RankedTensorType type, StringRef where) {
  constexpr int64_t kMaxBytes = int64_t(1) << 50; // 1 PiB: past any device
  int64_t width = type.getElementType().isInteger(1)
                      ? 1
                      : std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  int64_t bytes = width;
  for (int64_t d : type.getShape())
    if (d > 0 && __builtin_mul_overflow(bytes, d, &bytes))
      bytes = kMaxBytes + 1;
  if (bytes > kMaxBytes)
    return error(where) << "shape " << tcc::formatShape(type.getShape()) << " of "
                        << type.getElementType()
                        << " is more than 1 PiB (2^50 bytes): no device holds it";
  return success();
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

// The step carries its constants in its generated code (static data), so
// their total is capped; an import that finds more asks for parameters.
constexpr int64_t kMaxConstantBytes = int64_t(256) << 20;

// Model.constants: one tg.constant each, at the top of the forward,
// declared under its name. The data must be exactly the shape's elements.
LogicalResult ModelImporter::importConstants() {
  int64_t total = 0;
  for (const model::Constant &c : model_.constants()) {
    std::string where = "constant '" + c.name() + "'";
    FailureOr<RankedTensorType> t = tensorType(c.dtype(), c.shape(), where);
    if (failed(t))
      return failure();
    Type elt = t->getElementType();
    int64_t width = elt.isInteger(1) ? 1 : elt.getIntOrFloatBitWidth() / 8;
    // tensorType bounded the tensor at 1 PiB: the count does not overflow.
    int64_t count = t->getNumElements();
    if (count * width > kMaxConstantBytes - total)
      return error(where) << "constants total more than "
                          << (kMaxConstantBytes >> 20)
                          << " MiB (the step carries them in its code): make large tables "
                             "parameters (frozen) instead";
    int64_t bytes = count * width;
    if (static_cast<int64_t>(c.data().size()) != bytes)
      return error(where) << "has " << c.data().size() << " bytes of data; its shape "
                          << tcc::formatShape(t->getShape()) << " of "
                          << model::DType_Name(c.dtype()) << " needs "
                          << bytes << " bytes";
    total += bytes;
    const char *raw = c.data().data();
    DenseElementsAttr value;
    if (elt.isInteger(1)) {
      SmallVector<bool> bits(count);
      for (int64_t i = 0; i < count; ++i) {
        unsigned char byte = static_cast<unsigned char>(raw[i]);
        if (byte > 1)
          return error(where) << "a BOOL element is " << int(byte) << " at index " << i
                              << " (BOOL data is one byte, 0 or 1, per element)";
        bits[i] = byte == 1;
      }
      value = DenseElementsAttr::get(*t, ArrayRef<bool>(bits));
    } else {
      if (isa<FloatType>(elt))
        for (int64_t i = 0; i < count; ++i) {
          double x;
          if (elt.isF32()) {
            float f;
            std::memcpy(&f, raw + i * 4, 4);
            x = f;
          } else {
            std::memcpy(&x, raw + i * 8, 8);
          }
          if (std::isnan(x))
            return error(where) << "holds NaN at element " << i;
        }
      value = DenseElementsAttr::getFromRawBuffer(*t, ArrayRef<char>(raw, bytes));
    }
    Location loc = NameLoc::get(b_.getStringAttr(c.name()));
    Value v = tg::ConstantOp::create(b_, loc, *t, value).getResult();
    if (failed(declare(c.name(), v, where)))
      return failure();
  }
  return success();
}

// Parameter.torch: the perm must permute the parameter's dimensions.
LogicalResult ModelImporter::importTorch(const model::Parameter &p,
                                         RankedTensorType type,
                                         model::ParamInfo &info) {
  const model::TorchTensor &torch = p.torch();
  info.torchName = torch.name() == p.name() ? "" : torch.name();
  info.torchPerm.assign(torch.perm().begin(), torch.perm().end());
  info.torchAliases.assign(torch.aliases().begin(), torch.aliases().end());
  if (info.torchPerm.empty())
    return success();
  SmallVector<bool> seen(type.getRank(), false);
  bool ok = static_cast<int64_t>(info.torchPerm.size()) == type.getRank();
  for (int64_t d : info.torchPerm) {
    ok = ok && d >= 0 && d < type.getRank() && !seen[d];
    if (ok)
      seen[d] = true;
  }
  if (!ok)
    return error("parameter '" + p.name() + "'")
           << "torch.perm " << tcc::formatShape(info.torchPerm)
           << " is not a permutation of its " << type.getRank()
           << " dimensions (shape " << tcc::formatShape(type.getShape())
           << "; torch = tcc.permute(perm), empty: the same layout)";
  return success();
}

// Every state_dict key (a torch name, the parameter's own name when it has
// none, and each alias) must be non-empty and belong to one parameter, so
// that trun writes and reads a state_dict without guessing. Checked after
// the parameters are declared (a duplicate parameter name is that error).
LogicalResult ModelImporter::checkTorchKeys(ArrayRef<model::ParamInfo> params) {
  llvm::StringMap<std::string> owners; // key -> parameter
  for (const model::ParamInfo &info : params) {
    std::string where = "parameter '" + info.name + "'";
    auto claim = [&](const std::string &key, StringRef what) -> LogicalResult {
      if (key.empty())
        return error(where) << "torch " << what << " is empty";
      if (key == "__metadata__")
        return error(where) << "torch " << what
                            << " '__metadata__' is reserved by safetensors";
      auto [it, added] = owners.try_emplace(key, info.name);
      if (!added)
        return error(where) << "torch " << what << " '" << key
                            << "' is already a state_dict key of "
                            << (it->second == info.name
                                    ? std::string("this parameter")
                                    : "parameter '" + it->second + "'")
                            << " (torch names and aliases must be unique)";
      return success();
    };
    if (failed(claim(info.torchKey(),
                     info.torchName.empty() ? "name (the parameter's own)" : "name")))
      return failure();
    for (auto [i, alias] : llvm::enumerate(info.torchAliases))
      if (failed(claim(alias, "alias #" + std::to_string(i))))
        return failure();
  }
  return success();
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
  NodeContext ctx(node, loc, operands, b_);
  ctx.bufferUpdates = &bufferUpdates_;
  ctx.lookupValue = [this](StringRef name) { return values_.lookup(name); };
  std::optional<NodeResults> results = importElementwiseNode(ctx);
  if (!results)
    results = importStructuralNode(ctx);
  if (!results)
    results = importVisionNode(ctx);
  if (!results)
    return error(where) << "unknown op '" << node.op()
                        << "' (known: " << knownOpNames() << ")";
  if (failed(*results))
    return failure();
  if ((*results)->size() != static_cast<size_t>(node.outputs_size()))
    return error(where) << "op " << node.op() << " defines "
                        << (*results)->size() << " values but the node names "
                        << node.outputs_size() << " outputs";
  for (auto [name, value] : llvm::zip(node.outputs(), **results)) {
    if (auto type = dyn_cast<RankedTensorType>(value.getType()))
      if (failed(checkSize(type, where)))
        return failure();
    if (failed(declare(name, value, where)))
      return failure();
  }
  return success();
}

OwningOpRef<ModuleOp> ModelImporter::run() {
  std::string modelName = model_.name().empty() ? "model" : model_.name();
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(NameLoc::get(b_.getStringAttr(modelName)));
  module->getOperation()->setAttr(model::kModelNameAttr,
                                  b_.getStringAttr(modelName));

  // Signature: parameters, then data inputs.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<model::ParamInfo> paramInfos;
  for (const model::Parameter &p : model_.params()) {
    std::string where = "parameter '" + p.name() + "'";
    FailureOr<RankedTensorType> t = tensorType(p.dtype(), p.shape(), where);
    if (failed(t))
      return nullptr;
    if (!isa<FloatType>(t->getElementType())) {
      error(where) << "parameters must be F32 or F64";
      return nullptr;
    }
    model::ParamInfo info;
    info.name = p.name();
    info.init = model::Initializer::Kind_Name(p.init().kind());
    std::transform(info.init.begin(), info.init.end(), info.init.begin(),
                   ::tolower);
    info.scale = p.init().scale();
    info.seed = p.init().seed();
    info.trainable = !p.frozen();
    info.noWeightDecay = p.no_weight_decay();
    if (failed(importTorch(p, *t, info)))
      return nullptr;
    if ((p.init().kind() == model::Initializer::NORMAL ||
         p.init().kind() == model::Initializer::UNIFORM) &&
        !(info.scale > 0)) {
      error(where) << "initializer " << info.init << " needs a scale > 0";
      return nullptr;
    }
    argTypes.push_back(*t);
    argAttrs.push_back(b_.getDictionaryAttr(
        b_.getNamedAttr(model::kParamAttr, info.toAttr(b_))));
    paramInfos.push_back(std::move(info));
  }
  for (const model::Input &in : model_.inputs()) {
    std::string where = "input '" + in.name() + "'";
    FailureOr<RankedTensorType> t = tensorType(in.dtype(), in.shape(), where);
    if (failed(t))
      return nullptr;
    argTypes.push_back(*t);
    argAttrs.push_back(b_.getDictionaryAttr(
        b_.getNamedAttr(model::kInputAttr, b_.getStringAttr(in.name()))));
  }
  // Buffers (batch norm's running statistics): after the inputs.
  for (const model::Buffer &buf : model_.buffers()) {
    std::string where = "buffer '" + buf.name() + "'";
    FailureOr<RankedTensorType> t = tensorType(buf.dtype(), buf.shape(), where);
    if (failed(t))
      return nullptr;
    Type elt = t->getElementType();
    if (!elt.isF32() && !elt.isF64() && !elt.isInteger(64)) {
      error(where) << "buffers must be F32, F64 or I64";
      return nullptr;
    }
    if (buf.init().kind() != model::Initializer::ZEROS &&
        buf.init().kind() != model::Initializer::ONES) {
      error(where) << "buffers start at ZEROS or ONES, got "
                   << model::Initializer::Kind_Name(buf.init().kind());
      return nullptr;
    }
    model::ParamInfo info;
    info.name = buf.name();
    info.init = buf.init().kind() == model::Initializer::ONES ? "ones" : "zeros";
    info.trainable = false;
    model::Parameter asParam; // importTorch reads a Parameter's name and torch
    asParam.set_name(buf.name());
    *asParam.mutable_torch() = buf.torch();
    if (failed(importTorch(asParam, *t, info)))
      return nullptr;
    if (!info.torchPerm.empty()) {
      error(where) << "torch.perm is for parameters; a buffer keeps tcc's layout";
      return nullptr;
    }
    argTypes.push_back(*t);
    argAttrs.push_back(b_.getDictionaryAttr(
        b_.getNamedAttr(model::kBufferAttr, info.toAttr(b_))));
    paramInfos.push_back(std::move(info)); // their state_dict keys are unique too
  }

  auto func = func::FuncOp::create(
      module->getLoc(), model::kForwardFunc, b_.getFunctionType(argTypes, {}));
  module->push_back(func);
  Block *body = func.addEntryBlock();
  b_.setInsertionPointToStart(body);
  // Now, not only at the end: batch_norm asks whether an operand is a
  // buffer (tg.buffer).
  for (auto [i, attrs] : llvm::enumerate(argAttrs))
    func.setArgAttrs(i, attrs);

  int argIndex = 0;
  for (const model::Parameter &p : model_.params())
    if (failed(declare(p.name(), body->getArgument(argIndex++),
                       "parameter '" + p.name() + "'")))
      return nullptr;
  for (const model::Input &in : model_.inputs())
    if (failed(declare(in.name(), body->getArgument(argIndex++),
                       "input '" + in.name() + "'")))
      return nullptr;
  int firstBuffer = argIndex;
  for (const model::Buffer &buf : model_.buffers())
    if (failed(declare(buf.name(), body->getArgument(argIndex++),
                       "buffer '" + buf.name() + "'")))
      return nullptr;
  if (failed(checkTorchKeys(paramInfos)))
    return nullptr;
  if (failed(importConstants()))
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
      b_.getNamedAttr(model::kLossAttr, b_.getStringAttr(training.loss())))};
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
        b_.getNamedAttr(model::kOutputAttr, b_.getStringAttr(out.name()))));
  }
  // Then the buffer updates (tg-autodiff keeps them in @train_step,
  // tg-strip-train-only-ops drops them from the eval function).
  SmallVector<bool> updated(model_.buffers_size(), false);
  for (auto [arg, value] : bufferUpdates_) {
    int index = static_cast<int>(arg.getArgNumber()) - firstBuffer;
    if (updated[index]) {
      error("buffer '" + model_.buffers(index).name() + "'")
          << "updated by two nodes (each running statistic belongs to one batch_norm)";
      return nullptr;
    }
    updated[index] = true;
    results.push_back(value);
    resultAttrs.push_back(b_.getDictionaryAttr(
        b_.getNamedAttr(model::kUpdatesBufferAttr, b_.getI64IntegerAttr(index))));
  }
  func::ReturnOp::create(b_, func.getLoc(), results);
  // Node importers may have appended arguments (dropout's rng_seed, step).
  func.setType(b_.getFunctionType(body->getArgumentTypes(),
                                  ValueRange(results).getTypes()));
  for (auto [i, attrs] : llvm::enumerate(argAttrs))
    func.setArgAttrs(i, attrs);
  func.setAllResultAttrs(resultAttrs);

  // Optimizer, schedule, clipping, micro-batches (ImportTraining.cpp).
  if (failed(importTrainingRecipe(model_, *module)))
    return nullptr;

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
