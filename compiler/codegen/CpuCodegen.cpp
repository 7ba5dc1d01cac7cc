// CPU code generator: walks the kern functions @train_step and @forward and
// prints C++. Shape-specialized loops are generated inline (constant trip
// counts let the host compiler vectorize), with `#pragma omp parallel for`
// on loops with enough work; kern.elementwise bodies become C expressions;
// fixed kernels come from cpu_prelude.h; matrix products call BLAS.
#include "compiler/codegen/CpuCodegen.h"

#include <cmath>

#include "compiler/codegen/EmbeddedSources.h"
#include "dialects/kern/KernDialect.h"
#include "dialects/tg/TgModelAttrs.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace tcc {
namespace {

// Work (elements x operations) above which a loop gets an OpenMP pragma;
// below it, waking the second thread costs more than it saves.
constexpr double kParallelWork = 1 << 17;

// The C type a buffer element is stored as.
std::string storageType(Type t) {
  if (t.isF32()) return "float";
  if (t.isF64()) return "double";
  if (t.isBF16() || t.isF16()) return "uint16_t";
  if (t.isInteger(1)) return "bool";
  if (t.isInteger(8)) return "int8_t";
  if (t.isInteger(16)) return "int16_t";
  if (t.isInteger(32)) return "int32_t";
  if (t.isInteger(64)) return "int64_t";
  return "";
}

// The C type a scalar of type `t` is computed in (half types in float).
std::string scalarType(Type t) {
  if (t.isBF16() || t.isF16())
    return "float";
  return storageType(t);
}

// The unsigned type of the same width, for wrapping integer arithmetic.
std::string unsignedType(Type t) {
  if (t.isInteger(1)) return "bool";
  return "uint" + std::to_string(t.getIntOrFloatBitWidth()) + "_t";
}

const char *abiDType(Type t) {
  if (t.isF32()) return "TCC_DTYPE_F32";
  if (t.isF64()) return "TCC_DTYPE_F64";
  if (t.isInteger(32)) return "TCC_DTYPE_I32";
  if (t.isInteger(64)) return "TCC_DTYPE_I64";
  if (t.isInteger(1) || t.isInteger(8)) return "TCC_DTYPE_U8";
  if (t.isBF16()) return "TCC_DTYPE_BF16";
  if (t.isF16()) return "TCC_DTYPE_F16";
  return "TCC_DTYPE_INVALID";
}

MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

int64_t bufferBytes(MemRefType t) {
  return t.getNumElements() * kern::elementBytes(t.getElementType());
}

std::string shapeComment(MemRefType t) {
  std::string s = "(";
  for (auto [i, d] : llvm::enumerate(t.getShape()))
    s += (i ? "," : "") + std::to_string(d);
  return s + ")";
}

// The model node(s) an op comes from: "fc1", or "ln1+gelu" for fused ops.
std::string locName(Location loc) {
  if (auto n = dyn_cast<NameLoc>(loc)) {
    std::string name = n.getName().str();
    std::replace(name.begin(), name.end(), '\n', ' ');
    return name;
  }
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    std::string s;
    for (Location l : fused.getLocations()) {
      std::string part = locName(l);
      if (!part.empty() && s.find(part) == std::string::npos)
        s += (s.empty() ? "" : "+") + part;
    }
    return s;
  }
  return "";
}

// A C literal of `v` in the compute type of float type `t`, exact.
std::string floatLiteral(double v, Type t) {
  std::string ct = scalarType(t);
  if (std::isnan(v))
    return "std::numeric_limits<" + ct + ">::quiet_NaN()";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + ct +
           ">::infinity()";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", v);
  return std::string(buf) + (ct == "float" ? "f" : "");
}

std::string intLiteral(const APInt &v, Type t) {
  if (t.isInteger(1))
    return v.isZero() ? "false" : "true";
  return llvm::formatv("static_cast<{0}>({1:x}ull)", storageType(t),
                       v.getZExtValue())
      .str();
}

// Row-major strides of `shape`.
SmallVector<int64_t> contiguousStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

// Strides of `in` seen through a numpy broadcast to `outShape` (0 on
// broadcast dimensions).
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> in,
                                      ArrayRef<int64_t> outShape) {
  SmallVector<int64_t> strides(outShape.size(), 0);
  int64_t stride = 1;
  int64_t lead = outShape.size() - in.size();
  for (int64_t i = in.size() - 1; i >= 0; --i) {
    if (in[i] != 1)
      strides[i + lead] = stride;
    stride *= in[i];
  }
  return strides;
}

// A loop nest over `sizes` and, for each operand, its strides over the
// loops. Built from an iteration shape by dropping size-1 dimensions and
// merging neighbours that every operand walks contiguously, so the common
// cases (same shapes, a bias row, a scalar) become one or two loops.
struct LoopNest {
  SmallVector<int64_t> sizes;
  SmallVector<SmallVector<int64_t>> strides; // [operand][loop]

  static LoopNest build(ArrayRef<int64_t> shape,
                        ArrayRef<SmallVector<int64_t>> operandStrides) {
    LoopNest nest;
    nest.strides.resize(operandStrides.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1)
        continue;
      bool merge = !nest.sizes.empty();
      for (size_t k = 0; merge && k < operandStrides.size(); ++k)
        merge = nest.strides[k].back() == operandStrides[k][d] * shape[d];
      if (merge) {
        nest.sizes.back() *= shape[d];
        for (size_t k = 0; k < operandStrides.size(); ++k)
          nest.strides[k].back() = operandStrides[k][d];
        continue;
      }
      nest.sizes.push_back(shape[d]);
      for (size_t k = 0; k < operandStrides.size(); ++k)
        nest.strides[k].push_back(operandStrides[k][d]);
    }
    return nest;
  }

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    return n;
  }

  // "i0 * 256 + i1" for operand k (0 when it does not move).
  std::string index(size_t k, int64_t base = 0) const {
    std::string s;
    for (auto [d, st] : llvm::enumerate(strides[k])) {
      if (!st)
        continue;
      s += s.empty() ? "" : " + ";
      s += st == 1 ? llvm::formatv("i{0}", d).str()
                   : llvm::formatv("i{0} * {1}", d, st).str();
    }
    if (base)
      s += (s.empty() ? "" : " + ") + std::to_string(base);
    return s.empty() ? std::string("0") : s;
  }

  // The loops around `body` (lines at two spaces), with an OpenMP pragma
  // on the outer loops when `work` is large enough.
  void emit(llvm::raw_ostream &os, StringRef body, double work) const {
    std::string indent = "  ";
    if (sizes.empty()) { // a single element
      os << indent << "{\n";
      for (StringRef line : llvm::split(body, '\n'))
        if (!line.empty())
          os << indent << "  " << line << "\n";
      os << indent << "}\n";
      return;
    }
    if (work >= kParallelWork && numElements() >= 2) {
      size_t outer = sizes.size() > 1 ? sizes.size() - 1 : 1;
      os << indent << "#pragma omp parallel for schedule(static)";
      if (outer > 1)
        os << " collapse(" << outer << ")";
      os << "\n";
    }
    for (auto [d, size] : llvm::enumerate(sizes)) {
      os << indent
         << llvm::formatv("for (int64_t i{0} = 0; i{0} < {1}; ++i{0}) {{\n", d, size);
      indent += "  ";
    }
    for (StringRef line : llvm::split(body, '\n'))
      if (!line.empty())
        os << indent << line << "\n";
    for (size_t d = 0; d < sizes.size(); ++d) {
      indent.resize(indent.size() - 2);
      os << indent << "}\n";
    }
  }
};

// Prints the scalar ops of a kern.elementwise body as C++ statements.
class ScalarPrinter {
public:
  explicit ScalarPrinter(llvm::DenseMap<Value, std::string> &names)
      : names_(names) {}

  // Emits `const T sN = expr;` for `op`'s result.
  LogicalResult print(Operation *op, std::string &out) {
    if (op->getNumResults() != 1)
      return op->emitError("cpu codegen: scalar op with ")
             << op->getNumResults() << " results";
    Type t = op->getResult(0).getType();
    FailureOr<std::string> expr = expression(op, t);
    if (failed(expr))
      return failure();
    std::string name = "s" + std::to_string(names_.size());
    std::string value = *expr;
    // Half types: every operation rounds to the type's precision.
    if (isa<arith::ConstantOp>(op)) {
    } else if (t.isBF16()) {
      value = "tcc_cpu::round_bf16(" + value + ")";
    } else if (t.isF16()) {
      value = "tcc_cpu::round_f16(" + value + ")";
    }
    out += "const " + scalarType(t) + " " + name + " = " + value + ";\n";
    names_[op->getResult(0)] = name;
    return success();
  }

private:
  std::string n(Value v) { return names_.lookup(v); }

  FailureOr<std::string> expression(Operation *op, Type t) {
    auto a = [&](unsigned i) { return n(op->getOperand(i)); };
    auto bin = [&](StringRef sym) {
      return "(" + a(0) + " " + sym.str() + " " + a(1) + ")";
    };
    auto call = [&](StringRef fn) {
      std::string s = fn.str() + "(";
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        s += (i ? ", " : "") + a(i);
      return s + ")";
    };
    // Integer arithmetic wraps (MLIR semantics): compute in unsigned.
    auto wrapping = [&](StringRef sym) {
      if (t.isInteger(1))
        return "static_cast<bool>(" + a(0) + " " + sym.str() + " " + a(1) + ")";
      std::string u = unsignedType(t);
      return "static_cast<" + storageType(t) + ">(static_cast<" + u + ">(" +
             a(0) + ") " + sym.str() + " static_cast<" + u + ">(" + a(1) + "))";
    };
    auto asUnsigned = [&](unsigned i) {
      return "static_cast<" + unsignedType(op->getOperand(i).getType()) + ">(" +
             a(i) + ")";
    };
    auto cast = [&](const std::string &e) {
      return "static_cast<" + scalarType(t) + ">(" + e + ")";
    };
    std::string ct = scalarType(t);
    return llvm::TypeSwitch<Operation *, FailureOr<std::string>>(op)
        .Case([&](arith::ConstantOp c) -> FailureOr<std::string> {
          if (auto f = dyn_cast<FloatAttr>(c.getValue()))
            return floatLiteral(f.getValueAsDouble(), t);
          if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
            return intLiteral(i.getValue(), t);
          return c.emitError("cpu codegen: unsupported constant ") << c.getValue();
        })
        .Case([&](arith::AddFOp) { return bin("+"); })
        .Case([&](arith::SubFOp) { return bin("-"); })
        .Case([&](arith::MulFOp) { return bin("*"); })
        .Case([&](arith::DivFOp) { return bin("/"); })
        .Case([&](arith::RemFOp) { return call("std::fmod"); })
        .Case([&](arith::NegFOp) { return "(-" + a(0) + ")"; })
        .Case([&](arith::MaximumFOp) { return call("tcc_cpu::maximumf"); })
        .Case([&](arith::MinimumFOp) { return call("tcc_cpu::minimumf"); })
        .Case([&](arith::MaxNumFOp) { return call("std::fmax"); })
        .Case([&](arith::MinNumFOp) { return call("std::fmin"); })
        .Case([&](arith::CmpFOp c) -> FailureOr<std::string> {
          std::string x = a(0), y = a(1);
          using P = arith::CmpFPredicate;
          switch (c.getPredicate()) {
          case P::AlwaysFalse: return std::string("false");
          case P::AlwaysTrue: return std::string("true");
          case P::OEQ: return "(" + x + " == " + y + ")";
          case P::OGT: return "(" + x + " > " + y + ")";
          case P::OGE: return "(" + x + " >= " + y + ")";
          case P::OLT: return "(" + x + " < " + y + ")";
          case P::OLE: return "(" + x + " <= " + y + ")";
          case P::ONE: return "(" + x + " < " + y + " || " + x + " > " + y + ")";
          case P::ORD: return "(" + x + " == " + x + " && " + y + " == " + y + ")";
          case P::UEQ: return "!(" + x + " < " + y + " || " + x + " > " + y + ")";
          case P::UGT: return "!(" + x + " <= " + y + ")";
          case P::UGE: return "!(" + x + " < " + y + ")";
          case P::ULT: return "!(" + x + " >= " + y + ")";
          case P::ULE: return "!(" + x + " > " + y + ")";
          case P::UNE: return "(" + x + " != " + y + ")";
          case P::UNO: return "(" + x + " != " + x + " || " + y + " != " + y + ")";
          }
          return c.emitError("cpu codegen: unknown cmpf predicate");
        })
        .Case([&](arith::CmpIOp c) -> FailureOr<std::string> {
          std::string x = a(0), y = a(1), ux = asUnsigned(0), uy = asUnsigned(1);
          using P = arith::CmpIPredicate;
          switch (c.getPredicate()) {
          case P::eq: return "(" + x + " == " + y + ")";
          case P::ne: return "(" + x + " != " + y + ")";
          case P::slt: return "(" + x + " < " + y + ")";
          case P::sle: return "(" + x + " <= " + y + ")";
          case P::sgt: return "(" + x + " > " + y + ")";
          case P::sge: return "(" + x + " >= " + y + ")";
          case P::ult: return "(" + ux + " < " + uy + ")";
          case P::ule: return "(" + ux + " <= " + uy + ")";
          case P::ugt: return "(" + ux + " > " + uy + ")";
          case P::uge: return "(" + ux + " >= " + uy + ")";
          }
          return c.emitError("cpu codegen: unknown cmpi predicate");
        })
        .Case([&](arith::SelectOp) {
          return "(" + a(0) + " ? " + a(1) + " : " + a(2) + ")";
        })
        .Case<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp, arith::FPToSIOp,
              arith::ExtSIOp>([&](Operation *) { return cast(a(0)); })
        .Case<arith::UIToFPOp, arith::ExtUIOp>(
            [&](Operation *) { return cast(asUnsigned(0)); })
        .Case([&](arith::FPToUIOp) {
          return cast("static_cast<" + unsignedType(t) + ">(" + a(0) + ")");
        })
        .Case([&](arith::TruncIOp) -> std::string {
          if (t.isInteger(1))
            return "static_cast<bool>(" + a(0) + " & 1)";
          return cast("static_cast<" + unsignedType(t) + ">(" + a(0) + ")");
        })
        .Case([&](arith::BitcastOp) -> std::string {
          return "tcc_cpu::bit_cast<" + ct + ">(" + a(0) + ")";
        })
        .Case([&](arith::AddIOp) { return wrapping(t.isInteger(1) ? "^" : "+"); })
        .Case([&](arith::SubIOp) { return wrapping(t.isInteger(1) ? "^" : "-"); })
        .Case([&](arith::MulIOp) { return wrapping(t.isInteger(1) ? "&" : "*"); })
        .Case([&](arith::AndIOp) { return wrapping("&"); })
        .Case([&](arith::OrIOp) { return wrapping("|"); })
        .Case([&](arith::XOrIOp) { return wrapping("^"); })
        .Case([&](arith::ShLIOp) { return wrapping("<<"); })
        .Case([&](arith::ShRUIOp) { return wrapping(">>"); })
        .Case([&](arith::ShRSIOp) { return cast(bin(">>")); })
        .Case([&](arith::DivSIOp) { return cast(bin("/")); })
        .Case([&](arith::RemSIOp) { return cast(bin("%")); })
        .Case([&](arith::DivUIOp) {
          return cast("(" + asUnsigned(0) + " / " + asUnsigned(1) + ")");
        })
        .Case([&](arith::RemUIOp) {
          return cast("(" + asUnsigned(0) + " % " + asUnsigned(1) + ")");
        })
        .Case([&](arith::MaxSIOp) { return "(" + a(0) + " > " + a(1) + " ? " + a(0) + " : " + a(1) + ")"; })
        .Case([&](arith::MinSIOp) { return "(" + a(0) + " < " + a(1) + " ? " + a(0) + " : " + a(1) + ")"; })
        .Case([&](arith::MaxUIOp) { return "(" + asUnsigned(0) + " > " + asUnsigned(1) + " ? " + a(0) + " : " + a(1) + ")"; })
        .Case([&](arith::MinUIOp) { return "(" + asUnsigned(0) + " < " + asUnsigned(1) + " ? " + a(0) + " : " + a(1) + ")"; })
        // math: float functions; exp and tanh have vectorizable versions.
        .Case([&](math::ExpOp) { return call("tcc_cpu::exp"); })
        .Case([&](math::TanhOp) { return call("tcc_cpu::tanh"); })
        .Case([&](math::Exp2Op) { return call("std::exp2"); })
        .Case([&](math::ExpM1Op) { return call("std::expm1"); })
        .Case([&](math::LogOp) { return call("std::log"); })
        .Case([&](math::Log2Op) { return call("std::log2"); })
        .Case([&](math::Log10Op) { return call("std::log10"); })
        .Case([&](math::Log1pOp) { return call("std::log1p"); })
        .Case([&](math::SqrtOp) { return call("std::sqrt"); })
        .Case([&](math::RsqrtOp) {
          return "(" + ct + "(1) / std::sqrt(" + a(0) + "))";
        })
        .Case([&](math::CbrtOp) { return call("std::cbrt"); })
        .Case([&](math::ErfOp) { return call("std::erf"); })
        .Case([&](math::ErfcOp) { return call("std::erfc"); })
        .Case([&](math::SinOp) { return call("std::sin"); })
        .Case([&](math::CosOp) { return call("std::cos"); })
        .Case([&](math::TanOp) { return call("std::tan"); })
        .Case([&](math::AsinOp) { return call("std::asin"); })
        .Case([&](math::AcosOp) { return call("std::acos"); })
        .Case([&](math::AtanOp) { return call("std::atan"); })
        .Case([&](math::Atan2Op) { return call("std::atan2"); })
        .Case([&](math::SinhOp) { return call("std::sinh"); })
        .Case([&](math::CoshOp) { return call("std::cosh"); })
        .Case([&](math::PowFOp) { return call("std::pow"); })
        .Case([&](math::FPowIOp) {
          return "std::pow(" + a(0) + ", static_cast<" + ct + ">(" + a(1) + "))";
        })
        .Case([&](math::AbsFOp) { return call("std::fabs"); })
        .Case([&](math::AbsIOp) { return cast("(" + a(0) + " < 0 ? -" + a(0) + " : " + a(0) + ")"); })
        .Case([&](math::FloorOp) { return call("std::floor"); })
        .Case([&](math::CeilOp) { return call("std::ceil"); })
        .Case([&](math::RoundOp) { return call("std::round"); })
        .Case([&](math::RoundEvenOp) { return call("std::nearbyint"); })
        .Case([&](math::TruncOp) { return call("std::trunc"); })
        .Case([&](math::CopySignOp) { return call("std::copysign"); })
        .Case([&](math::FmaOp) { return call("std::fma"); })
        .Case([&](math::IsNaNOp) { return "(" + a(0) + " != " + a(0) + ")"; })
        .Case([&](math::IsInfOp) { return call("std::isinf"); })
        .Case([&](math::IsFiniteOp) { return call("std::isfinite"); })
        .Default([&](Operation *other) -> FailureOr<std::string> {
          return other->emitError("cpu codegen: no C translation for ")
                 << other->getName() << " in an elementwise body";
        });
  }

  llvm::DenseMap<Value, std::string> &names_;
};

class FunctionEmitter {
public:
  FunctionEmitter(func::FuncOp f, llvm::raw_ostream &os, int firstProfileId)
      : f_(f), os_(os), profileId_(firstProfileId) {}

  // Emits `static int32_t <cName>(const tcc_step_args *args)`.
  LogicalResult emit(StringRef cName, int64_t outputScratchBase,
                     double &flops) {
    os_ << "static int32_t " << cName << "(const tcc_step_args *args) {\n";
    os_ << "  tcc_cpu::init_threads();\n";
    os_ << "  char *ws = static_cast<char *>(args->workspace);\n";
    os_ << "  (void)ws;\n";
    if (failed(emitArguments(outputScratchBase)))
      return failure();
    for (Operation &op : f_.getBody().front().without_terminator())
      if (failed(emitOp(&op, flops)))
        return failure();
    if (!lossName_.empty())
      os_ << "  *args->loss = static_cast<float>(" << lossName_ << "[0]);\n";
    os_ << "  return TCC_STATUS_OK;\n}\n\n";
    return success();
  }

  int64_t outputScratchBytes() const { return outputScratchBytes_; }

private:
  std::string fresh(Value v) {
    std::string n = "v" + std::to_string(names_.size());
    names_[v] = n;
    return n;
  }
  std::string name(Value v) { return names_.lookup(v); }

  // A result buffer the caller may leave NULL: then it goes to scratch
  // after the planned workspace.
  std::string optionalBuffer(StringRef array, int index, MemRefType t) {
    std::string st = storageType(t.getElementType());
    std::string s = llvm::formatv(
        "args->{0} && args->{0}[{1}] ? static_cast<{2} *>(args->{0}[{1}]) : "
        "reinterpret_cast<{2} *>(ws + {3})",
        array, index, st, scratchBase_ + outputScratchBytes_);
    outputScratchBytes_ += (bufferBytes(t) + 63) / 64 * 64;
    return s;
  }

  LogicalResult emitArguments(int64_t outputScratchBase) {
    scratchBase_ = outputScratchBase;
    int param = 0, input = 0, output = 0, state = 0, trainOutput = 0;
    for (BlockArgument a : f_.getArguments()) {
      MemRefType t = mrt(a);
      std::string st = storageType(t.getElementType());
      unsigned i = a.getArgNumber();
      std::string n = fresh(a);
      if (auto info = tg::ParamInfo::fromAttr(f_.getArgAttr(i, tg::kParamAttr))) {
        os_ << llvm::formatv("  {0} *{1} = static_cast<{0} *>(args->params[{2}]); "
                             "// param {3} {4}\n",
                             st, n, param++, info->name, shapeComment(t));
      } else if (auto in = f_.getArgAttrOfType<StringAttr>(i, tg::kInputAttr)) {
        os_ << llvm::formatv("  {0} *{1} = static_cast<{0} *>(const_cast<void *>("
                             "args->inputs[{2}])); // input {3} {4}\n",
                             st, n, input++, in.getValue(), shapeComment(t));
      } else if (f_.getArgAttr(i, tg::kOptStateAttr)) {
        os_ << llvm::formatv("  {0} *{1} = static_cast<{0} *>(args->optimizer_state[{2}]); "
                             "// optimizer state {3}\n",
                             st, n, state++, shapeComment(t));
      } else if (auto h = f_.getArgAttrOfType<StringAttr>(i, tg::kHyperAttr)) {
        std::string value;
        if (h.getValue() == tg::kLearningRateHyper)
          value = "args->learning_rate";
        else if (h.getValue() == tg::kStepHyper)
          value = "args->step";
        else if (h.getValue() == tg::kRngSeedHyper)
          value = "args->rng_seed";
        else
          return f_.emitError("cpu codegen: unknown hyper-parameter ") << h;
        if (t.getNumElements() != 1)
          return f_.emitError("cpu codegen: hyper-parameter ") << h << " must be a scalar";
        os_ << llvm::formatv("  {0} {1}[1] = {{static_cast<{0}>({2})}; // {3}\n",
                             st, n, value, h.getValue());
      } else if (f_.getArgAttr(i, tg::kLossAttr)) {
        os_ << llvm::formatv("  {0} {1}[1]; // loss\n", st, n);
        lossName_ = n;
      } else if (auto o = f_.getArgAttrOfType<StringAttr>(i, tg::kOutputAttr)) {
        os_ << llvm::formatv("  {0} *{1} = {2}; // output {3} {4}\n", st, n,
                             optionalBuffer("outputs", output++, t), o.getValue(),
                             shapeComment(t));
      } else if (auto o = f_.getArgAttrOfType<StringAttr>(i, tg::kTrainOutputAttr)) {
        os_ << llvm::formatv("  {0} *{1} = {2}; // train output {3} {4}\n", st, n,
                             optionalBuffer("train_outputs", trainOutput++, t),
                             o.getValue(), shapeComment(t));
      } else if (f_.getArgAttr(i, tg::kGradOfAttr)) {
        return f_.emitError("cpu codegen: @") << f_.getName()
               << " returns gradients; run an optimizer pass (tg-sgd-update) first";
      } else {
        return f_.emitError("cpu codegen: argument ") << i << " has no role";
      }
    }
    return success();
  }

  LogicalResult emitOp(Operation *op, double &flops) {
    std::string where = locName(op->getLoc());
    // Buffer definitions stay in the function's scope; kernels get a block
    // of their own (timed when built with -DTCC_PROFILE).
    bool kernel = !isa<kern::WorkspaceViewOp, kern::ReshapeOp, kern::ConstantOp>(op);
    if (!kernel)
      return emitKernel(op, flops);
    std::string label = (where.empty() ? std::string("?") : where) + ": " +
                        op->getName().getStringRef().str();
    os_ << "  // " << label << "\n";
    std::string literal;
    llvm::raw_string_ostream escaped(literal);
    llvm::printEscapedString(f_.getName().str() + " " + label, escaped);
    os_ << "  { TCC_PROFILE_SCOPE(" << profileId_++ << ", \"" << literal << "\");\n";
    LogicalResult result = emitKernel(op, flops);
    os_ << "  }\n";
    return result;
  }

  LogicalResult emitKernel(Operation *op, double &flops) {
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](kern::WorkspaceViewOp v) {
          std::string st = storageType(v.getType().getElementType());
          os_ << llvm::formatv("  {0} *{1} = reinterpret_cast<{0} *>(ws + {2}); // {3}\n",
                               st, fresh(v.getResult()), v.getOffset(),
                               shapeComment(v.getType()));
          return success();
        })
        .Case([&](kern::ReshapeOp r) {
          os_ << llvm::formatv("  auto *{0} = {1}; // viewed as {2}\n",
                               fresh(r.getResult()), name(r.getInput()),
                               shapeComment(mrt(r.getResult())));
          return success();
        })
        .Case([&](kern::ConstantOp c) { return emitConstant(c); })
        .Case([&](kern::GemmOp g) { return emitGemm(g, flops); })
        .Case([&](kern::ElementwiseOp e) { return emitElementwise(e, flops); })
        .Case([&](kern::ReduceOp r) { return emitReduce(r, flops); })
        .Case([&](kern::FillOp fill) {
          MemRefType t = mrt(fill.getOut());
          Type et = t.getElementType();
          double v = fill.getValue().convertToDouble();
          std::string value;
          if (isa<FloatType>(et))
            value = store(et, floatLiteral(v, et));
          else if (et.isInteger(1))
            value = v != 0 ? "true" : "false";
          else
            value = llvm::formatv("static_cast<{0}>({1})", storageType(et),
                                  static_cast<int64_t>(v)).str();
          LoopNest nest = LoopNest::build({t.getNumElements()}, {{1}});
          nest.emit(os_, name(fill.getOut()) + "[" + nest.index(0) + "] = " + value + ";",
                    t.getNumElements());
          return success();
        })
        .Case([&](kern::TransposeOp t) { return emitTranspose(t); })
        .Case([&](kern::SliceOp s) { return emitSlice(s); })
        .Case([&](kern::ConcatOp c) { return emitConcat(c); })
        .Case([&](kern::GatherOp g) {
          MemRefType table = mrt(g.getTable());
          int64_t v = table.getDimSize(0), row = table.getNumElements() / std::max<int64_t>(v, 1);
          os_ << llvm::formatv("  if (!tcc_cpu::gather_rows({0}, {1}, {2}, {3}, {4}, {5})) "
                               "return TCC_STATUS_BAD_ARGS; // id out of range\n",
                               mrt(g.getIds()).getNumElements(), row, v,
                               name(g.getTable()), name(g.getIds()), name(g.getOut()));
          return success();
        })
        .Case([&](kern::ScatterAddOp s) {
          MemRefType out = mrt(s.getOut());
          int64_t v = out.getDimSize(0), row = out.getNumElements() / std::max<int64_t>(v, 1);
          int64_t n = mrt(s.getIds()).getNumElements();
          os_ << llvm::formatv("  if (!tcc_cpu::scatter_add_rows({0}, {1}, {2}, {3}, {4}, {5})) "
                               "return TCC_STATUS_BAD_ARGS; // id out of range\n",
                               n, row, v, name(s.getUpdates()), name(s.getIds()),
                               name(s.getOut()));
          flops += static_cast<double>(n) * row;
          return success();
        })
        .Case([&](kern::SoftmaxCrossEntropyOp x) {
          MemRefType l = mrt(x.getLogits());
          os_ << llvm::formatv("  if (!tcc_cpu::softmax_cross_entropy({0}, {1}, {2}, {3}, {4})) "
                               "return TCC_STATUS_BAD_ARGS; // label out of range\n",
                               l.getDimSize(0), l.getDimSize(1), name(x.getLogits()),
                               name(x.getLabels()), name(x.getLoss()));
          flops += 4.0 * l.getNumElements();
          return success();
        })
        .Case([&](kern::SoftmaxCrossEntropyGradOp x) {
          MemRefType l = mrt(x.getLogits());
          os_ << llvm::formatv("  if (!tcc_cpu::softmax_cross_entropy_grad({0}, {1}, {2}, {3}, {4}, {5})) "
                               "return TCC_STATUS_BAD_ARGS; // label out of range\n",
                               l.getDimSize(0), l.getDimSize(1), name(x.getLogits()),
                               name(x.getLabels()), name(x.getGrad()), name(x.getOut()));
          flops += 5.0 * l.getNumElements();
          return success();
        })
        .Default([&](Operation *other) {
          return other->emitError("cpu codegen: cannot generate code for ")
                 << other->getName()
                 << (isa<kern::AllocOp>(other) ? " (run kern-plan-memory first)" : "");
        });
  }

  // Loading a stored element as its compute type, and back.
  static std::string load(Type et, const std::string &e) {
    if (et.isBF16()) return "tcc_cpu::bf16_to_float(" + e + ")";
    if (et.isF16()) return "tcc_cpu::f16_to_float(" + e + ")";
    return e;
  }
  static std::string store(Type et, const std::string &e) {
    if (et.isBF16()) return "tcc_cpu::float_to_bf16(" + e + ")";
    if (et.isF16()) return "tcc_cpu::float_to_f16(" + e + ")";
    return e;
  }

  LogicalResult emitConstant(kern::ConstantOp c) {
    MemRefType t = c.getType();
    Type et = t.getElementType();
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!dense)
      return c.emitError("cpu codegen: only dense constants are supported");
    std::string st = storageType(et), n = fresh(c.getResult());
    std::string values;
    int64_t count = 0;
    auto sep = [&] { values += (count++ % 8 == 0) ? "\n    " : " "; };
    if (isa<FloatType>(et)) {
      for (APFloat v : dense.getValues<APFloat>()) {
        sep();
        if (et.isBF16() || et.isF16())
          values += llvm::formatv("{0:x},", v.bitcastToAPInt().getZExtValue()).str();
        else
          values += floatLiteral(v.convertToDouble(), et) + ",";
      }
    } else {
      for (APInt v : dense.getValues<APInt>()) {
        sep();
        values += intLiteral(v, et) + ",";
      }
    }
    os_ << llvm::formatv("  static const {0} {1}_data[] = {{{2}\n  };\n", st, n, values);
    os_ << llvm::formatv("  {0} *{1} = const_cast<{0} *>({1}_data); // {2}\n", st, n,
                         shapeComment(t));
    return success();
  }

  // out (batch..., M, N) = op(a) x op(b) per batch, batch dims broadcast.
  LogicalResult emitGemm(kern::GemmOp g, double &flops) {
    MemRefType a = mrt(g.getA()), b = mrt(g.getB()), c = mrt(g.getOut());
    bool ta = g.getTransposeA(), tb = g.getTransposeB();
    ArrayRef<int64_t> as = a.getShape(), bs = b.getShape(), cs = c.getShape();
    int64_t m = cs[cs.size() - 2], n = cs[cs.size() - 1];
    int64_t k = as[as.size() - (ta ? 2 : 1)];
    ArrayRef<int64_t> batch = cs.drop_back(2);
    int64_t batchCount = 1, aBatch = 1, bBatch = 1;
    for (int64_t d : batch) batchCount *= d;
    for (int64_t d : as.drop_back(2)) aBatch *= d;
    for (int64_t d : bs.drop_back(2)) bBatch *= d;
    flops += 2.0 * batchCount * m * n * k;
    std::string alpha = floatLiteral(g.getAlpha().convertToDouble(), c.getElementType());
    std::string beta = floatLiteral(g.getBeta().convertToDouble(), c.getElementType());
    const char *tA = ta ? "true" : "false", *tB = tb ? "true" : "false";
    // One matrix for b and a full batch of contiguous a rows: one gemm with
    // M' = batch * M.
    if (bBatch == 1 && aBatch == batchCount && (!ta || batchCount == 1)) {
      os_ << llvm::formatv("  tcc_cpu::gemm({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9});\n",
                           tA, tB, batchCount * m, n, k, alpha, name(g.getA()),
                           name(g.getB()), beta, name(g.getOut()));
      return success();
    }
    // A loop over the batch; offsets through broadcast strides.
    SmallVector<int64_t> aStrides = broadcastStrides(as.drop_back(2), batch);
    SmallVector<int64_t> bStrides = broadcastStrides(bs.drop_back(2), batch);
    for (int64_t &s : aStrides) s *= as[as.size() - 1] * as[as.size() - 2];
    for (int64_t &s : bStrides) s *= bs[bs.size() - 1] * bs[bs.size() - 2];
    LoopNest nest = LoopNest::build(
        batch, {aStrides, bStrides, contiguousStrides(batch)});
    for (int64_t &s : nest.strides[2]) s *= m * n;
    // Many products at once: spread the batch over threads, one
    // single-threaded product each; otherwise each product splits itself.
    double work = 2.0 * batchCount * m * n * k;
    bool parallelBatch = batchCount >= 2 && work >= kParallelWork * 8;
    std::string a0 = name(g.getA()) + " + " + nest.index(0);
    std::string b0 = name(g.getB()) + " + " + nest.index(1);
    std::string c0 = name(g.getOut()) + " + " + nest.index(2);
    std::string call =
        parallelBatch
            ? llvm::formatv("tcc_cpu::gemm_serial({0}, {1}, {2}, {3}, {4}, {5}, "
                            "{6}, {7}, {8}, {9}, {10}, {11}, {12});",
                            tA, tB, m, n, k, alpha, a0, ta ? m : k, b0,
                            tb ? k : n, beta, c0, n)
                  .str()
            : llvm::formatv("tcc_cpu::gemm({0}, {1}, {2}, {3}, {4}, {5}, {6}, "
                            "{7}, {8}, {9});",
                            tA, tB, m, n, k, alpha, a0, b0, beta, c0)
                  .str();
    nest.emit(os_, call, parallelBatch ? work : 0);
    return success();
  }

  // outputs[i] = body(inputs broadcast to the shape [i], i).
  LogicalResult emitElementwise(kern::ElementwiseOp e, double &flops) {
    ArrayRef<int64_t> shape = e.getShape();
    Block &body = e.getBodyBlock();
    SmallVector<SmallVector<int64_t>> strides;
    for (Value in : e.getInputs())
      strides.push_back(broadcastStrides(mrt(in).getShape(), shape));
    strides.push_back(contiguousStrides(shape)); // outputs and the flat index
    LoopNest nest = LoopNest::build(shape, strides);
    size_t outSlot = e.getInputs().size();

    // Scalars that do not change along the loop (single-element inputs,
    // constants and what only depends on them) are computed once, before
    // it: e.g. the learning rate and bias corrections of an optimizer
    // update, or the per-step key of a dropout mask.
    llvm::DenseMap<Value, std::string> scalars;
    llvm::DenseSet<Value> invariant;
    std::string preamble, text;
    for (auto [k, in] : llvm::enumerate(e.getInputs())) {
      BlockArgument arg = body.getArgument(k);
      if (arg.use_empty())
        continue;
      std::string sn = "a" + std::to_string(k);
      Type et = mrt(in).getElementType();
      bool scalar = mrt(in).getNumElements() == 1;
      (scalar ? preamble : text) +=
          "const " + scalarType(et) + " " + sn + " = " +
          load(et, name(in) + "[" + (scalar ? std::string("0") : nest.index(k)) +
                       "]") +
          ";\n";
      scalars[arg] = sn;
      if (scalar)
        invariant.insert(arg);
    }
    if (!e.getFlatIndex().use_empty()) {
      text += "const int64_t flat = " + nest.index(outSlot) + ";\n";
      scalars[e.getFlatIndex()] = "flat";
    }
    ScalarPrinter printer(scalars);
    int64_t ops = 0;
    for (Operation &op : body.without_terminator()) {
      bool hoist = llvm::all_of(op.getOperands(), [&](Value v) {
        return invariant.contains(v);
      });
      if (failed(printer.print(&op, hoist ? preamble : text)))
        return failure();
      if (hoist)
        invariant.insert(op.getResult(0));
      else if (!isa<arith::ConstantOp>(op))
        ++ops;
    }
    auto yield = cast<kern::YieldOp>(body.getTerminator());
    for (auto [out, v] : llvm::zip(e.getOutputs(), yield.getValues()))
      text += name(out) + "[" + nest.index(outSlot) + "] = " +
              store(mrt(out).getElementType(), scalars.lookup(v)) + ";\n";
    double n = static_cast<double>(mrt(e.getOutputs()[0]).getNumElements());
    // (In the kernel's own block: see emitOp.)
    for (StringRef line : llvm::split(preamble, '\n'))
      if (!line.empty())
        os_ << "  " << line << "\n";
    nest.emit(os_, text, n * std::max<int64_t>(ops, 1));
    flops += n * ops;
    return success();
  }

  // out = sum / mean / max of input over axes. Innermost axes reduced: one
  // accumulator (double for sums) per output element, outputs spread over
  // threads. Otherwise (e.g. a column sum): accumulate into out in input
  // order, which keeps the inner loop contiguous.
  LogicalResult emitReduce(kern::ReduceOp r, double &flops) {
    MemRefType in = mrt(r.getInput()), out = mrt(r.getOut());
    ArrayRef<int64_t> shape = in.getShape();
    Type et = out.getElementType();
    std::string ct = scalarType(et);
    std::string o = name(r.getOut()), x = name(r.getInput());
    bool isMax = r.getKind() == kern::ReduceKind::max;
    bool isMean = r.getKind() == kern::ReduceKind::mean;
    SmallVector<int64_t> keptShape, reducedShape, keptIn, reducedIn;
    SmallVector<int64_t> inStrides = contiguousStrides(shape);
    int64_t count = 1;
    int64_t lastKept = -1, firstReduced = shape.size();
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (shape[d] == 1)
        continue;
      if (llvm::is_contained(r.getAxes(), d)) {
        count *= shape[d];
        reducedShape.push_back(shape[d]);
        reducedIn.push_back(inStrides[d]);
        firstReduced = std::min(firstReduced, d);
      } else {
        keptShape.push_back(shape[d]);
        keptIn.push_back(inStrides[d]);
        lastKept = d;
      }
    }
    flops += in.getNumElements();
    std::string init = isMax ? "-std::numeric_limits<" + ct + ">::infinity()"
                             : ct + "(0)";
    std::string scale = isMean ? llvm::formatv(" * ({0}(1) / {0}({1}))", ct, count).str() : "";
    if (lastKept < firstReduced) {
      // out[o] = reduce(in[o * count + j]) over the contiguous tail.
      std::string acc = isMax ? ct : std::string("double");
      LoopNest outer = LoopNest::build(keptShape, {keptIn, contiguousStrides(keptShape)});
      std::string body = llvm::formatv(
          "{0} acc = {1};\nconst {2} *row = {3} + {4};\n"
          "#pragma omp simd reduction({5}:acc)\n"
          "for (int64_t j = 0; j < {6}; ++j) {7}\n"
          "{8}[{9}] = {10};\n",
          acc, isMax ? init : "0.0", storageType(et), x, outer.index(0),
          isMax ? "max" : "+", count,
          isMax ? "acc = " + load(et, "row[j]") + " > acc ? " + load(et, "row[j]") + " : acc;"
                : "acc += " + load(et, "row[j]") + ";",
          o, outer.index(1),
          store(et, "static_cast<" + ct + ">(acc" + scale + ")"))
          .str();
      outer.emit(os_, body, static_cast<double>(in.getNumElements()));
      return success();
    }
    // General order: initialize, then fold every input element into its
    // output element.
    LoopNest fill = LoopNest::build({out.getNumElements()}, {{1}});
    fill.emit(os_, o + "[" + fill.index(0) + "] = " + store(et, init) + ";", 0);
    SmallVector<int64_t> outStrides(shape.size(), 0);
    int64_t stride = 1;
    for (int64_t d = shape.size() - 1; d >= 0; --d) {
      if (llvm::is_contained(r.getAxes(), d))
        continue;
      outStrides[d] = stride;
      stride *= shape[d];
    }
    LoopNest nest = LoopNest::build(shape, {inStrides, outStrides});
    std::string target = o + "[" + nest.index(1) + "]";
    std::string value = load(et, x + "[" + nest.index(0) + "]");
    std::string cur = load(et, target);
    std::string body = isMax ? "{ const " + ct + " v = " + value + ", c = " + cur +
                                   "; " + target + " = " + store(et, "v > c ? v : c") + "; }"
                             : target + " = " + store(et, cur + " + " + value) + ";";
    nest.emit(os_, body, 0);
    if (isMean) {
      std::string at = o + "[" + fill.index(0) + "]";
      fill.emit(os_, at + " = " + store(et, load(et, at) + scale) + ";", 0);
    }
    return success();
  }

  // Copies (transpose, slice, concat) move stored elements unchanged.
  LogicalResult emitTranspose(kern::TransposeOp t) {
    MemRefType in = mrt(t.getInput()), out = mrt(t.getOut());
    SmallVector<int64_t> inStrides = contiguousStrides(in.getShape()), permuted;
    for (int64_t p : t.getPerm())
      permuted.push_back(inStrides[p]);
    LoopNest nest = LoopNest::build(out.getShape(),
                                    {permuted, contiguousStrides(out.getShape())});
    nest.emit(os_, name(t.getOut()) + "[" + nest.index(1) + "] = " +
                       name(t.getInput()) + "[" + nest.index(0) + "];",
              static_cast<double>(out.getNumElements()));
    return success();
  }

  LogicalResult emitSlice(kern::SliceOp s) {
    MemRefType in = mrt(s.getInput()), out = mrt(s.getOut());
    SmallVector<int64_t> inStrides = contiguousStrides(in.getShape());
    int64_t base = 0;
    for (auto [d, start] : llvm::enumerate(s.getStarts()))
      base += start * inStrides[d];
    LoopNest nest = LoopNest::build(out.getShape(),
                                    {inStrides, contiguousStrides(out.getShape())});
    nest.emit(os_, name(s.getOut()) + "[" + nest.index(1) + "] = " +
                       name(s.getInput()) + "[" + nest.index(0, base) + "];",
              static_cast<double>(out.getNumElements()));
    return success();
  }

  LogicalResult emitConcat(kern::ConcatOp c) {
    MemRefType out = mrt(c.getOut());
    SmallVector<int64_t> outStrides = contiguousStrides(out.getShape());
    int64_t axis = c.getAxis(), offset = 0;
    for (Value v : c.getInputs()) {
      MemRefType in = mrt(v);
      LoopNest nest = LoopNest::build(in.getShape(),
                                      {contiguousStrides(in.getShape()), outStrides});
      nest.emit(os_, name(c.getOut()) + "[" + nest.index(1, offset * outStrides[axis]) +
                         "] = " + name(v) + "[" + nest.index(0) + "];",
                static_cast<double>(in.getNumElements()));
      offset += in.getDimSize(axis);
    }
    return success();
  }

  func::FuncOp f_;
  llvm::raw_ostream &os_;
  llvm::DenseMap<Value, std::string> names_;
  std::string lossName_;
  int profileId_;
  int64_t scratchBase_ = 0;
  int64_t outputScratchBytes_ = 0;
};

struct TableEntry {
  std::string name;
  MemRefType type;
  std::optional<tg::ParamInfo> param; // initializer (parameters only)
};

void emitTensorTable(llvm::raw_ostream &os, StringRef table,
                     ArrayRef<TableEntry> tensors) {
  if (tensors.empty())
    return;
  for (auto [i, t] : llvm::enumerate(tensors)) {
    if (t.type.getRank() == 0)
      continue;
    os << "static const int64_t " << table << "_shape" << i << "[] = {";
    for (auto [j, d] : llvm::enumerate(t.type.getShape()))
      os << (j ? ", " : "") << d;
    os << "};\n";
  }
  os << "static const tcc_tensor_desc " << table << "[] = {\n";
  for (auto [i, t] : llvm::enumerate(tensors)) {
    MemRefType type = t.type;
    std::string kind = "TCC_INIT_ZEROS", scale = "0.0", seed = "0", trainable = "0";
    if (t.param) {
      const tg::ParamInfo &p = *t.param;
      kind = "TCC_INIT_" + StringRef(p.init).upper();
      scale = llvm::formatv("{0:e}", p.scale).str();
      seed = std::to_string(p.seed) + "ull";
      trainable = p.trainable ? "1" : "0";
    }
    std::string shape = type.getRank() == 0
                            ? std::string("nullptr")
                            : (table + "_shape" + std::to_string(i)).str();
    // name, dtype, rank, shape, num_elements, size_bytes, init_kind,
    // trainable, init_scale, init_seed
    os << llvm::formatv("  {{\"{0}\", {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}},\n",
                        t.name, abiDType(type.getElementType()), type.getRank(),
                        shape, type.getNumElements(), bufferBytes(type), kind,
                        trainable, scale, seed);
  }
  os << "};\n";
}

// The descriptor's lr_schedule initializer from the module's tg.lr_schedule.
FailureOr<std::string> lrSchedule(ModuleOp module, double baseLr) {
  std::string base = llvm::formatv("{0:e}", baseLr).str();
  auto dict = module->getAttrOfType<DictionaryAttr>(tg::kLrScheduleAttr);
  auto kind = dict ? dict.getAs<StringAttr>("kind") : StringAttr();
  if (!dict || (kind && kind.getValue() == "constant"))
    return "{TCC_LR_CONSTANT, " + base + ", 0, 0, " + base + "}";
  if (kind && kind.getValue() == "warmup_cosine") {
    auto warmup = dict.getAs<IntegerAttr>("warmup_steps");
    auto decay = dict.getAs<IntegerAttr>("decay_steps");
    auto minLr = dict.getAs<FloatAttr>("min_lr");
    if (warmup && decay && minLr)
      return llvm::formatv("{TCC_LR_WARMUP_COSINE, {0}, {1}, {2}, {3:e}}", base,
                           warmup.getInt(), decay.getInt(),
                           minLr.getValueAsDouble())
          .str();
  }
  return module.emitError("cpu codegen: cannot read ")
         << tg::kLrScheduleAttr << " = " << dict;
}

} // namespace

FailureOr<GeneratedStep> generateCpuStep(ModuleOp module) {
  auto train = module.lookupSymbol<func::FuncOp>(tg::kTrainStepFunc);
  auto eval = module.lookupSymbol<func::FuncOp>(tg::kForwardFunc);
  if (!train || !eval)
    return module.emitError("cpu codegen: needs @train_step and @forward");
  auto wsAttr = module->getAttrOfType<IntegerAttr>("kern.workspace_bytes");
  if (!wsAttr)
    return module.emitError("cpu codegen: run kern-plan-memory first");
  auto modelName = module->getAttrOfType<StringAttr>(tg::kModelNameAttr);
  auto optimizer = module->getAttrOfType<DictionaryAttr>(tg::kOptimizerAttr);
  double defaultLr = 0;
  std::string optimizerKind = "none";
  if (optimizer) {
    if (auto lr = optimizer.getAs<FloatAttr>("learning_rate"))
      defaultLr = lr.getValueAsDouble();
    if (auto k = optimizer.getAs<StringAttr>("kind"))
      optimizerKind = k.str();
  }
  FailureOr<std::string> schedule = lrSchedule(module, defaultLr);
  if (failed(schedule))
    return failure();
  int64_t microBatches = 1;
  if (auto k = module->getAttrOfType<IntegerAttr>(tg::kMicroBatchesAttr))
    microBatches = k.getInt();

  GeneratedStep step;
  std::string body;
  llvm::raw_string_ostream os(body);
  int64_t planned = wsAttr.getInt();
  FunctionEmitter trainEmitter(train, os, /*firstProfileId=*/0);
  if (failed(trainEmitter.emit("tcc_train", planned, step.trainFlops)))
    return failure();
  FunctionEmitter evalEmitter(eval, os, /*firstProfileId=*/1 << 20);
  if (failed(evalEmitter.emit("tcc_eval", planned, step.evalFlops)))
    return failure();
  step.workspaceBytes =
      planned + std::max(trainEmitter.outputScratchBytes(),
                         evalEmitter.outputScratchBytes());

  // Descriptor tables: parameters, inputs and outputs from @forward's
  // signature (same parameter and input order as @train_step); optimizer
  // state and train outputs from @train_step's.
  SmallVector<TableEntry> params, inputs, outputs, states, trainOutputs;
  std::string lossName = "loss", precision = "f32";
  for (BlockArgument a : eval.getArguments()) {
    unsigned i = a.getArgNumber();
    if (auto info = tg::ParamInfo::fromAttr(eval.getArgAttr(i, tg::kParamAttr))) {
      params.push_back({info->name, mrt(a), info});
      if (mrt(a).getElementType().isF64())
        precision = "f64";
    } else if (auto in = eval.getArgAttrOfType<StringAttr>(i, tg::kInputAttr)) {
      inputs.push_back({in.str(), mrt(a), std::nullopt});
    } else if (auto out = eval.getArgAttrOfType<StringAttr>(i, tg::kOutputAttr)) {
      outputs.push_back({out.str(), mrt(a), std::nullopt});
    } else if (auto loss = eval.getArgAttrOfType<StringAttr>(i, tg::kLossAttr)) {
      lossName = loss.str();
    }
  }
  for (BlockArgument a : train.getArguments()) {
    unsigned i = a.getArgNumber();
    if (auto s = train.getArgAttrOfType<DictionaryAttr>(i, tg::kOptStateAttr)) {
      auto param = s.getAs<IntegerAttr>("param");
      auto stateName = s.getAs<StringAttr>("name");
      if (!param || !stateName || param.getInt() < 0 ||
          param.getInt() >= static_cast<int64_t>(params.size()))
        return train.emitError("cpu codegen: malformed ")
               << tg::kOptStateAttr << " " << s;
      states.push_back({params[param.getInt()].name + "." + stateName.str(),
                        mrt(a), std::nullopt});
    } else if (auto o = train.getArgAttrOfType<StringAttr>(i, tg::kTrainOutputAttr)) {
      trainOutputs.push_back({o.str(), mrt(a), std::nullopt});
    }
  }

  std::string src;
  llvm::raw_string_ostream s(src);
  s << "// Generated by tcc from model '" << (modelName ? modelName.getValue() : "")
    << "' for target cpu. Do not edit: regenerate with tcc compile.\n\n";
  s << "// ---- step ABI (runtime/include/tcc/step_abi.h) ----\n"
    << embedded::kStepAbiHeader << "\n";
  s << "// ---- CPU kernels (compiler/codegen/cpu_prelude.h) ----\n"
    << embedded::kCpuPrelude << "\n";
  s << "// ---- the step ----\n";
  s << body;
  emitTensorTable(s, "tcc_params", params);
  emitTensorTable(s, "tcc_optimizer_state", states);
  emitTensorTable(s, "tcc_inputs", inputs);
  emitTensorTable(s, "tcc_outputs", outputs);
  emitTensorTable(s, "tcc_train_outputs", trainOutputs);
  auto table = [](ArrayRef<TableEntry> t, StringRef name) {
    return std::to_string(t.size()) + ", " +
           (t.empty() ? std::string("nullptr") : name.str());
  };
  s << "\nstatic const tcc_step_descriptor tcc_descriptor = {\n"
    << "  TCC_STEP_ABI_VERSION, sizeof(tcc_step_descriptor),\n"
    << "  \"" << (modelName ? modelName.getValue() : "model") << "\", \"cpu\",\n"
    << "#if defined(__x86_64__)\n  \"x86_64\",\n#elif defined(__aarch64__)\n"
    << "  \"aarch64\",\n#else\n  \"unknown\",\n#endif\n"
    << "  \"" << precision << "\", \"" << optimizerKind << "\", \"" << lossName
    << "\", " << llvm::formatv("{0:e}", defaultLr) << ",\n"
    << "  " << *schedule << ", // lr schedule\n"
    << "  " << microBatches << ", // micro-batches per step\n"
    << "  " << table(params, "tcc_params") << ", // params\n"
    << "  " << table(states, "tcc_optimizer_state") << ", // optimizer state\n"
    << "  " << table(inputs, "tcc_inputs") << ",\n"
    << "  " << table(outputs, "tcc_outputs") << ",\n"
    << "  " << table(trainOutputs, "tcc_train_outputs") << ", // train outputs\n"
    << "  " << step.workspaceBytes << ", // workspace bytes\n"
    << "  " << llvm::formatv("{0:e}, {1:e}", step.trainFlops, step.evalFlops)
    << ", // FLOPs per train / eval call\n"
    << "  tcc_train, tcc_eval,\n};\n\n"
    << "extern \"C\" __attribute__((visibility(\"default\"))) const tcc_step_descriptor *\n"
    << "tcc_step_get_descriptor(void) { return &tcc_descriptor; }\n";
  step.source = std::move(src);
  return step;
}

} // namespace tcc
