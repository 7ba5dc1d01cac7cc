// Model nodes -> tg elementwise ops (dialects/tg/TgElementwiseOps.td).
#include <cmath>
#include <cstdio>

#include "dialects/common/FuncArguments.h"
#include "dialects/common/ModelAttrs.h"
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgDialect.h"
#include "frontend/importer/NodeImporter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"
#include "tcc/counter_rng.h"

using namespace mlir;

namespace tcc {

const char *elementwiseOpNames() {
  return "neg, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, silu, gelu, sin, "
         "cos, pow, add, sub, mul, div, max, min, equal, not_equal, less, "
         "less_equal, greater, greater_equal, select (or where), cast, "
         "constant, iota, dropout";
}

namespace {

using UnaryBuilder = Value (*)(OpBuilder &, Location, Value);
using BinaryBuilder = Value (*)(OpBuilder &, Location, RankedTensorType, Value,
                                Value);

template <typename OpTy> Value unary(OpBuilder &b, Location loc, Value x) {
  return OpTy::create(b, loc, x.getType(), x);
}

template <typename OpTy>
Value binary(OpBuilder &b, Location loc, RankedTensorType type, Value l,
             Value r) {
  return OpTy::create(b, loc, type, l, r);
}

UnaryBuilder unaryBuilder(StringRef op) {
  return llvm::StringSwitch<UnaryBuilder>(op)
      .Case("neg", unary<tg::NegOp>)
      .Case("exp", unary<tg::ExpOp>)
      .Case("log", unary<tg::LogOp>)
      .Case("sqrt", unary<tg::SqrtOp>)
      .Case("rsqrt", unary<tg::RsqrtOp>)
      .Case("tanh", unary<tg::TanhOp>)
      .Case("sigmoid", unary<tg::SigmoidOp>)
      .Case("relu", unary<tg::ReluOp>)
      .Case("silu", unary<tg::SiluOp>)
      .Case("sin", unary<tg::SinOp>)
      .Case("cos", unary<tg::CosOp>)
      .Default(nullptr);
}

BinaryBuilder floatBinaryBuilder(StringRef op) {
  return llvm::StringSwitch<BinaryBuilder>(op)
      .Case("add", binary<tg::AddOp>)
      .Case("sub", binary<tg::SubOp>)
      .Case("mul", binary<tg::MulOp>)
      .Case("div", binary<tg::DivOp>)
      .Case("max", binary<tg::MaxOp>)
      .Case("min", binary<tg::MinOp>)
      .Default(nullptr);
}

BinaryBuilder compareBuilder(StringRef op) {
  return llvm::StringSwitch<BinaryBuilder>(op)
      .Case("equal", binary<tg::EqualOp>)
      .Case("not_equal", binary<tg::NotEqualOp>)
      .Case("less", binary<tg::LessOp>)
      .Case("less_equal", binary<tg::LessEqualOp>)
      .Case("greater", binary<tg::GreaterOp>)
      .Case("greater_equal", binary<tg::GreaterEqualOp>)
      .Default(nullptr);
}

NodeResults single(Value v) { return SmallVector<Value, 1>{v}; }

// "0.5", "-3", "1e+10": numbers in messages as a model author writes them.
std::string typeText(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

// The element type a `dtype` string names ("f32", ..., "bool").
FailureOr<Type> dtypeAttr(NodeContext &n, StringRef key, StringRef dflt) {
  FailureOr<std::string> name = n.stringAttr(key, dflt);
  if (failed(name))
    return failure();
  OpBuilder &b = n.b;
  Type t = llvm::StringSwitch<Type>(*name)
               .Case("f32", b.getF32Type())
               .Case("f64", b.getF64Type())
               .Case("bf16", b.getBF16Type())
               .Case("f16", b.getF16Type())
               .Case("i32", b.getI32Type())
               .Case("i64", b.getI64Type())
               .Case("bool", b.getI1Type())
               .Default(Type());
  if (!t) {
    n.error() << "attribute '" << key << "' must be one of f32, f64, bf16, "
              << "f16, i32, i64, bool; got \"" << *name << "\"";
    return failure();
  }
  return t;
}

// A `shape` attribute: every dimension > 0 (empty = scalar).
FailureOr<SmallVector<int64_t>> shapeAttr(NodeContext &n) {
  FailureOr<SmallVector<int64_t>> shape = n.intsAttr("shape");
  if (failed(shape))
    return failure();
  for (int64_t d : *shape)
    if (d <= 0) {
      n.error() << "shape " << tcc::formatShape(*shape)
                << " has a non-positive dimension";
      return failure();
    }
  return shape;
}

// The numpy broadcast of the shapes of all operands, or an error naming them.
FailureOr<SmallVector<int64_t>> broadcastOperands(NodeContext &n) {
  SmallVector<int64_t> shape;
  for (size_t i = 0; i < n.operands.size(); ++i) {
    auto merged = tcc::broadcastShapes(shape, n.type(i).getShape());
    if (!merged) {
      InFlightDiagnostic d = n.error() << "shape mismatch: ";
      for (size_t j = 0; j < n.operands.size(); ++j)
        d << (j ? " and " : "") << tcc::formatShape(n.type(j).getShape());
      d << " do not broadcast";
      return failure();
    }
    shape = *merged;
  }
  return shape;
}

LogicalResult sameDtype(NodeContext &n, int i, int j) {
  if (n.type(i).getElementType() != n.type(j).getElementType())
    return n.error() << "inputs '" << n.node.inputs(i) << "' and '"
                     << n.node.inputs(j) << "' have different dtypes: "
                     << n.type(i) << " and " << n.type(j);
  return success();
}

NodeResults importUnary(NodeContext &n, UnaryBuilder build) {
  if (failed(n.arity(1)) || failed(n.attrs({})) || failed(n.requireFloat(0)))
    return failure();
  return single(build(n.b, n.loc, n.operands[0]));
}

NodeResults importGelu(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"approximate"})) ||
      failed(n.requireFloat(0)))
    return failure();
  FailureOr<std::string> approximate = n.stringAttr("approximate", "none");
  if (failed(approximate))
    return failure();
  if (*approximate != "none" && *approximate != "tanh")
    return n.error() << "attribute 'approximate' must be \"none\" or \"tanh\", "
                     << "got \"" << *approximate << "\"";
  return single(tg::GeluOp::create(n.b, n.loc, n.type(0), n.operands[0],
                                   n.b.getStringAttr(*approximate)));
}

NodeResults importPow(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"exponent"})) ||
      failed(n.requireFloat(0)))
    return failure();
  if (!n.hasAttr("exponent"))
    return n.error() << "op pow needs attribute 'exponent' (f: 2)";
  FailureOr<double> exponent = n.floatAttr("exponent", 0.0);
  if (failed(exponent))
    return failure();
  return single(tg::PowOp::create(n.b, n.loc, n.type(0), n.operands[0],
                                  n.b.getF64FloatAttr(*exponent)));
}

// add, sub, mul, div, max, min: two float tensors of one dtype, broadcast.
NodeResults importFloatBinary(NodeContext &n, BinaryBuilder build) {
  if (failed(n.arity(2)) || failed(n.attrs({})) || failed(n.requireFloat(0)) ||
      failed(n.requireFloat(1)) || failed(sameDtype(n, 0, 1)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = broadcastOperands(n);
  if (failed(shape))
    return failure();
  auto out = RankedTensorType::get(*shape, n.type(0).getElementType());
  return single(build(n.b, n.loc, out, n.operands[0], n.operands[1]));
}

// Comparisons: two tensors of one dtype (any), broadcast; the result is bool.
NodeResults importCompare(NodeContext &n, BinaryBuilder build) {
  if (failed(n.arity(2)) || failed(n.attrs({})) || failed(sameDtype(n, 0, 1)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = broadcastOperands(n);
  if (failed(shape))
    return failure();
  auto out = RankedTensorType::get(*shape, n.b.getI1Type());
  return single(build(n.b, n.loc, out, n.operands[0], n.operands[1]));
}

// select / where (condition, a, b): condition is bool; a, b one dtype.
NodeResults importSelect(NodeContext &n) {
  if (failed(n.arity(3)) || failed(n.attrs({})))
    return failure();
  if (!n.type(0).getElementType().isInteger(1))
    return n.error() << "condition '" << n.node.inputs(0)
                     << "' must be a BOOL tensor (e.g. a comparison), got "
                     << n.type(0);
  if (failed(sameDtype(n, 1, 2)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = broadcastOperands(n);
  if (failed(shape))
    return failure();
  auto out = RankedTensorType::get(*shape, n.type(1).getElementType());
  return single(tg::SelectOp::create(n.b, n.loc, out, n.operands[0],
                                     n.operands[1], n.operands[2]));
}

NodeResults importCast(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"dtype"})))
    return failure();
  if (!n.hasAttr("dtype"))
    return n.error() << "op cast needs attribute 'dtype' (s: \"f32\")";
  FailureOr<Type> to = dtypeAttr(n, "dtype", "");
  if (failed(to))
    return failure();
  auto out = RankedTensorType::get(n.type(0).getShape(), *to);
  return single(tg::CastOp::create(n.b, n.loc, out, n.operands[0]));
}

// constant {value, shape = [] (scalar), dtype = "f32"}: a splat.
NodeResults importConstant(NodeContext &n) {
  if (failed(n.arity(0)) || failed(n.attrs({"value", "shape", "dtype"})))
    return failure();
  if (!n.hasAttr("value"))
    return n.error() << "op constant needs attribute 'value' (f: 1.0)";
  FailureOr<double> value = n.floatAttr("value", 0.0);
  FailureOr<SmallVector<int64_t>> shape = shapeAttr(n);
  FailureOr<Type> dtype = dtypeAttr(n, "dtype", "f32");
  if (failed(value) || failed(shape) || failed(dtype))
    return failure();
  auto type = RankedTensorType::get(*shape, *dtype);
  Attribute element;
  if (isa<FloatType>(*dtype)) {
    element = n.b.getFloatAttr(*dtype, *value);
  } else if (dtype->isInteger(1)) {
    if (*value != 0.0 && *value != 1.0)
      return n.error() << "a bool constant's value must be 0 or 1, got "
                       << tcc::formatNumber(*value);
    element = n.b.getIntegerAttr(*dtype, static_cast<int64_t>(*value));
  } else {
    // Integers: exact and in range (2^31 and 2^63 are exact doubles).
    double limit = dtype->isInteger(32) ? 2147483648.0 : 9223372036854775808.0;
    if (*value != std::trunc(*value) || *value < -limit || *value >= limit)
      return n.error() << "value " << tcc::formatNumber(*value)
                       << " is not an integer in the range of "
                       << typeText(*dtype);
    element = n.b.getIntegerAttr(*dtype, static_cast<int64_t>(*value));
  }
  return single(tg::ConstantOp::create(
      n.b, n.loc, type,
      DenseElementsAttr::get(type, ArrayRef<Attribute>{element})));
}

// iota {shape, axis = 0, dtype = "i64"}.
NodeResults importIota(NodeContext &n) {
  if (failed(n.arity(0)) || failed(n.attrs({"shape", "axis", "dtype"})))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = shapeAttr(n);
  FailureOr<int64_t> axis = n.intAttr("axis", 0);
  FailureOr<Type> dtype = dtypeAttr(n, "dtype", "i64");
  if (failed(shape) || failed(axis) || failed(dtype))
    return failure();
  int64_t rank = shape->size();
  if (rank == 0)
    return n.error() << "op iota needs a non-empty 'shape'";
  if (*axis < -rank || *axis >= rank)
    return n.error() << "axis " << *axis << " out of range for "
                     << tcc::formatShape(*shape);
  if (dtype->isInteger(1))
    return n.error() << "iota counts in a number type, not bool";
  return single(tg::IotaOp::create(
      n.b, n.loc, RankedTensorType::get(*shape, *dtype),
      n.b.getI64IntegerAttr(*axis < 0 ? *axis + rank : *axis)));
}

// The @forward argument marked tg.hyper = `name` (an i64 scalar the runtime
// passes every step), appended the first time a node needs it.
FailureOr<Value> hyperArgument(NodeContext &n, StringRef name) {
  auto func = dyn_cast_or_null<func::FuncOp>(
      n.b.getInsertionBlock()->getParentOp());
  if (!func) {
    n.error() << "internal error: nodes must be imported into a function";
    return failure();
  }
  return Value(model::getOrAddHyperArgument(func, name, n.b.getI64Type()));
}

// dropout {rate = 0.5}: the mask is keyed by (rng_seed, step, op id), where
// the op id is the FNV-1a 64 hash of the node name (counter_rng.h).
NodeResults importDropout(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"rate"})) ||
      failed(n.requireFloat(0)))
    return failure();
  FailureOr<double> rate = n.floatAttr("rate", 0.5);
  if (failed(rate))
    return failure();
  if (!(*rate >= 0.0 && *rate < 1.0))
    return n.error() << "dropout rate must be in [0, 1), got "
                     << tcc::formatNumber(*rate);
  FailureOr<Value> seed = hyperArgument(n, model::kRngSeedHyper);
  FailureOr<Value> step = hyperArgument(n, model::kStepHyper);
  if (failed(seed) || failed(step))
    return failure();
  StringRef name = cast<NameLoc>(n.loc).getName().getValue();
  uint64_t opId = tcc_fnv1a64(name.data(), name.size());
  return single(tg::DropoutOp::create(
      n.b, n.loc, n.type(0), n.operands[0], *seed, *step,
      n.b.getF64FloatAttr(*rate),
      n.b.getI64IntegerAttr(static_cast<int64_t>(opId))));
}

} // namespace

std::optional<NodeResults> importElementwiseNode(NodeContext &n) {
  StringRef op = n.op();
  // max with one input is the reduction (ImportStructuralOps.cpp).
  if (op == "max" && n.operands.size() == 1)
    return std::nullopt;
  if (UnaryBuilder build = unaryBuilder(op))
    return importUnary(n, build);
  if (BinaryBuilder build = floatBinaryBuilder(op))
    return importFloatBinary(n, build);
  if (BinaryBuilder build = compareBuilder(op))
    return importCompare(n, build);
  if (op == "gelu")
    return importGelu(n);
  if (op == "pow")
    return importPow(n);
  if (op == "select" || op == "where")
    return importSelect(n);
  if (op == "cast")
    return importCast(n);
  if (op == "constant")
    return importConstant(n);
  if (op == "iota")
    return importIota(n);
  if (op == "dropout")
    return importDropout(n);
  return std::nullopt;
}

} // namespace tcc
