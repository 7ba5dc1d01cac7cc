#include "compiler/codegen/common/CTypes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "dialects/kern/KernDialect.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen {

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

std::string kernelLabel(Operation *op) {
  std::string node = locName(op->getLoc());
  std::string label =
      (node.empty() ? std::string("?") : node) + ": " + op->getName().getStringRef().str();
  if (auto conv = dyn_cast<kern::Conv2dOp>(op)) {
    StringRef product = conv.getProduct();
    label += product == "input_grad"    ? " input gradient"
             : product == "weight_grad" ? " weight gradient"
             : product == "forward"     ? " forward"
                                        : (" " + product).str();
  } else if (auto pool = dyn_cast<kern::Pool2dOp>(op)) {
    StringRef mode = pool.getMode();
    label += mode.consume_back("_grad") ? (" " + mode + " gradient").str() : (" " + mode).str();
  }
  return label;
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

// The namespace of a target's prelude helpers.
std::string preludeNamespace(CodeTarget target) {
  return target == CodeTarget::Cuda ? "tcc_cuda::" : "tcc_cpu::";
}

// A stored element of type `et` as its compute type, and back: halves
// convert through float with the prelude's helpers.
std::string loadElement(Type et, const std::string &e, CodeTarget target) {
  if (et.isBF16()) return preludeNamespace(target) + "bf16_to_float(" + e + ")";
  if (et.isF16()) return preludeNamespace(target) + "f16_to_float(" + e + ")";
  return e;
}
std::string storeElement(Type et, const std::string &e, CodeTarget target) {
  if (et.isBF16()) return preludeNamespace(target) + "float_to_bf16(" + e + ")";
  if (et.isF16()) return preludeNamespace(target) + "float_to_f16(" + e + ")";
  return e;
}

std::string familyElementType(Type et, CodeTarget target) {
  if (et.isBF16()) return preludeNamespace(target) + "bf16";
  if (et.isF16()) return preludeNamespace(target) + "f16";
  return storageType(et);
}

std::string familyPointer(Type et, const std::string &p, bool written, CodeTarget target) {
  if (!et.isBF16() && !et.isF16())
    return p;
  return "reinterpret_cast<" + std::string(written ? "" : "const ") +
         familyElementType(et, target) + " *>(" + p + ")";
}

// The stored value kern.fill writes: `v` as an element of type `et`.
std::string fillValue(Type et, double v, CodeTarget target) {
  if (isa<FloatType>(et))
    return storeElement(et, floatLiteral(v, et), target);
  if (et.isInteger(1))
    return v != 0 ? "true" : "false";
  return llvm::formatv("static_cast<{0}>({1})", storageType(et), static_cast<int64_t>(v)).str();
}

// The elements of a dense constant as a C array initializer body, eight a
// line ("\n    1.0f, 2.0f, ..."): exact float literals, half types as
// their bits, integers through intLiteral.
std::string denseInitializer(DenseElementsAttr dense, Type et) {
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
  return values;
}
} // namespace tcc::codegen
