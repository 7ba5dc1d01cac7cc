#include "compiler/codegen/common/ScalarPrinter.h"

#include "dialects/kern/KernDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

namespace tcc::codegen {

LogicalResult ScalarPrinter::print(Operation *op, std::string &out) {
  if (op->getNumResults() != 1)
    return op->emitError("codegen: scalar op with ")
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
    value = helper("round_bf16") + "(" + value + ")";
  } else if (t.isF16()) {
    value = helper("round_f16") + "(" + value + ")";
  }
  // Every scalar op is pure and its operands print as names, so equal text
  // of one type is one value: reuse it (a SwiGLU backward's sigmoid, written
  // twice by autodiff, is then computed once; nvcc cannot merge the two
  // since the bf16 rounding is an asm cvt).
  std::string key = scalarType(t) + " " + value;
  if (auto it = printed_.find(key); it != printed_.end()) {
    names_[op->getResult(0)] = it->second;
    return success();
  }
  printed_[key] = name;
  out += "const " + scalarType(t) + " " + name + " = " + value + ";\n";
  declared_.push_back({scalarType(t), name});
  names_[op->getResult(0)] = name;
  return success();
}

FailureOr<std::string> ScalarPrinter::expression(Operation *op, Type t) {
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
        return c.emitError("codegen: unsupported constant ") << c.getValue();
      })
      .Case([&](arith::AddFOp) { return bin("+"); })
      .Case([&](arith::SubFOp) { return bin("-"); })
      .Case([&](arith::MulFOp) { return bin("*"); })
      .Case([&](arith::DivFOp) { return bin("/"); })
      .Case([&](arith::RemFOp) { return call(libm("fmod")); })
      .Case([&](arith::NegFOp) { return "(-" + a(0) + ")"; })
      .Case([&](arith::MaximumFOp) { return call(helper("maximumf")); })
      .Case([&](arith::MinimumFOp) { return call(helper("minimumf")); })
      .Case([&](arith::MaxNumFOp) { return call(libm("fmax")); })
      .Case([&](arith::MinNumFOp) { return call(libm("fmin")); })
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
        return c.emitError("codegen: unknown cmpf predicate");
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
        return c.emitError("codegen: unknown cmpi predicate");
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
        return helper("bit_cast") + "<" + ct + ">(" + a(0) + ")";
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
      .Case([&](math::ExpOp) { return call(helper("exp")); })
      .Case([&](math::TanhOp) { return call(helper("tanh")); })
      .Case([&](math::Exp2Op) { return call(libm("exp2")); })
      .Case([&](math::ExpM1Op) { return call(libm("expm1")); })
      .Case([&](math::LogOp) { return call(libm("log")); })
      .Case([&](math::Log2Op) { return call(libm("log2")); })
      .Case([&](math::Log10Op) { return call(libm("log10")); })
      .Case([&](math::Log1pOp) { return call(libm("log1p")); })
      .Case([&](math::SqrtOp) { return call(libm("sqrt")); })
      .Case([&](math::RsqrtOp) {
        return "(" + ct + "(1) / " + libm("sqrt") + "(" + a(0) + "))";
      })
      .Case([&](math::CbrtOp) { return call(libm("cbrt")); })
      .Case([&](math::ErfOp) { return call(libm("erf")); })
      .Case([&](math::ErfcOp) { return call(libm("erfc")); })
      .Case([&](math::SinOp) { return call(libm("sin")); })
      .Case([&](math::CosOp) { return call(libm("cos")); })
      .Case([&](math::TanOp) { return call(libm("tan")); })
      .Case([&](math::AsinOp) { return call(libm("asin")); })
      .Case([&](math::AcosOp) { return call(libm("acos")); })
      .Case([&](math::AtanOp) { return call(libm("atan")); })
      .Case([&](math::Atan2Op) { return call(libm("atan2")); })
      .Case([&](math::SinhOp) { return call(libm("sinh")); })
      .Case([&](math::CoshOp) { return call(libm("cosh")); })
      .Case([&](math::PowFOp) { return call(libm("pow")); })
      .Case([&](math::FPowIOp) {
        return libm("pow") + "(" + a(0) + ", static_cast<" + ct + ">(" + a(1) + "))";
      })
      .Case([&](math::AbsFOp) { return call(libm("fabs")); })
      .Case([&](math::AbsIOp) { return cast("(" + a(0) + " < 0 ? -" + a(0) + " : " + a(0) + ")"); })
      .Case([&](math::FloorOp) { return call(libm("floor")); })
      .Case([&](math::CeilOp) { return call(libm("ceil")); })
      .Case([&](math::RoundOp) { return call(libm("round")); })
      .Case([&](math::RoundEvenOp) { return call(libm("nearbyint")); })
      .Case([&](math::TruncOp) { return call(libm("trunc")); })
      .Case([&](math::CopySignOp) { return call(libm("copysign")); })
      .Case([&](math::FmaOp) { return call(libm("fma")); })
      .Case([&](math::IsNaNOp) { return "(" + a(0) + " != " + a(0) + ")"; })
      .Case([&](math::IsInfOp) { return call(libm("isinf")); })
      .Case([&](math::IsFiniteOp) { return call(libm("isfinite")); })
      .Default([&](Operation *other) -> FailureOr<std::string> {
        return other->emitError("codegen: no C translation for ")
               << other->getName() << " in an elementwise body";
      });
}

std::string ScalarPrinter::helper(StringRef fn) const {
  return preludeNamespace(target_) + fn.str();
}

std::string ScalarPrinter::libm(StringRef fn) const {
  return (target_ == CodeTarget::Cuda ? "::" : "std::") + fn.str();
}

} // namespace tcc::codegen
