// Pieces both code generators (CpuCodegen, CudaCodegen) share: C types of
// MLIR element types, literals, strides and loop nests, the printer of
// kern.elementwise bodies, and the step descriptor's tensor tables.
// Included only by the code generators (it pulls in MLIR headers).
#ifndef TCC_COMPILER_CODEGEN_CODEGENSUPPORT_H
#define TCC_COMPILER_CODEGEN_CODEGENSUPPORT_H

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dialects/common/ModelAttrs.h"
#include "dialects/kern/KernDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc::codegen {

using namespace mlir;

// Which generated language a printer writes.
enum class CodeTarget { Cpu, Cuda };

// Work (elements x operations) above which a loop gets an OpenMP pragma;
// below it, waking the second thread costs more than it saves.
inline constexpr double kParallelWork = 1 << 17;

// The C type a buffer element is stored as.
inline std::string storageType(Type t) {
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
inline std::string scalarType(Type t) {
  if (t.isBF16() || t.isF16())
    return "float";
  return storageType(t);
}

// The unsigned type of the same width, for wrapping integer arithmetic.
inline std::string unsignedType(Type t) {
  if (t.isInteger(1)) return "bool";
  return "uint" + std::to_string(t.getIntOrFloatBitWidth()) + "_t";
}

inline const char *abiDType(Type t) {
  if (t.isF32()) return "TCC_DTYPE_F32";
  if (t.isF64()) return "TCC_DTYPE_F64";
  if (t.isInteger(32)) return "TCC_DTYPE_I32";
  if (t.isInteger(64)) return "TCC_DTYPE_I64";
  if (t.isInteger(1) || t.isInteger(8)) return "TCC_DTYPE_U8";
  if (t.isBF16()) return "TCC_DTYPE_BF16";
  if (t.isF16()) return "TCC_DTYPE_F16";
  return "TCC_DTYPE_INVALID";
}

inline MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

inline int64_t bufferBytes(MemRefType t) {
  return t.getNumElements() * kern::elementBytes(t.getElementType());
}

inline std::string shapeComment(MemRefType t) {
  std::string s = "(";
  for (auto [i, d] : llvm::enumerate(t.getShape()))
    s += (i ? "," : "") + std::to_string(d);
  return s + ")";
}

// The model node(s) an op comes from: "fc1", or "ln1+gelu" for fused ops.
inline std::string locName(Location loc) {
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
inline std::string floatLiteral(double v, Type t) {
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

inline std::string intLiteral(const APInt &v, Type t) {
  if (t.isInteger(1))
    return v.isZero() ? "false" : "true";
  return llvm::formatv("static_cast<{0}>({1:x}ull)", storageType(t),
                       v.getZExtValue())
      .str();
}

// The namespace of a target's prelude helpers.
inline std::string preludeNamespace(CodeTarget target) {
  return target == CodeTarget::Cuda ? "tcc_cuda::" : "tcc_cpu::";
}

// A stored element of type `et` as its compute type, and back: halves
// convert through float with the prelude's helpers.
inline std::string loadElement(Type et, const std::string &e, CodeTarget target) {
  if (et.isBF16()) return preludeNamespace(target) + "bf16_to_float(" + e + ")";
  if (et.isF16()) return preludeNamespace(target) + "f16_to_float(" + e + ")";
  return e;
}
inline std::string storeElement(Type et, const std::string &e, CodeTarget target) {
  if (et.isBF16()) return preludeNamespace(target) + "float_to_bf16(" + e + ")";
  if (et.isF16()) return preludeNamespace(target) + "float_to_f16(" + e + ")";
  return e;
}

// The stored value kern.fill writes: `v` as an element of type `et`.
inline std::string fillValue(Type et, double v, CodeTarget target) {
  if (isa<FloatType>(et))
    return storeElement(et, floatLiteral(v, et), target);
  if (et.isInteger(1))
    return v != 0 ? "true" : "false";
  return llvm::formatv("static_cast<{0}>({1})", storageType(et), static_cast<int64_t>(v)).str();
}

// The elements of a dense constant as a C array initializer body, eight a
// line ("\n    1.0f, 2.0f, ..."): exact float literals, half types as
// their bits, integers through intLiteral.
inline std::string denseInitializer(DenseElementsAttr dense, Type et) {
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

// Row-major strides of `shape`.
inline SmallVector<int64_t> contiguousStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

// Strides of `in` seen through a numpy broadcast to `outShape` (0 on
// broadcast dimensions).
inline SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> in,
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

// The sizes of a kern.gemm, out (batch..., M, N) = op(a) x op(b) per batch
// with a's and b's batch dimensions broadcast, and the three ways both
// generators run it.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batchCount = 1, aBatch = 1, bBatch = 1; // product of each batch shape
  bool ta = false, tb = false;
  SmallVector<int64_t> batch, aBatchShape, bBatchShape;

  static GemmShape of(kern::GemmOp g) {
    GemmShape s;
    ArrayRef<int64_t> as = mrt(g.getA()).getShape(), bs = mrt(g.getB()).getShape(),
                      cs = mrt(g.getOut()).getShape();
    s.ta = g.getTransposeA();
    s.tb = g.getTransposeB();
    s.m = cs[cs.size() - 2];
    s.n = cs[cs.size() - 1];
    s.k = as[as.size() - (s.ta ? 2 : 1)];
    s.batch.assign(cs.begin(), cs.end() - 2);
    s.aBatchShape.assign(as.begin(), as.end() - 2);
    s.bBatchShape.assign(bs.begin(), bs.end() - 2);
    for (int64_t d : s.batch) s.batchCount *= d;
    for (int64_t d : s.aBatchShape) s.aBatch *= d;
    for (int64_t d : s.bBatchShape) s.bBatch *= d;
    return s;
  }

  double flops() const { return 2.0 * batchCount * m * n * k; }

  // One matrix for b and a full batch of contiguous a rows: one product
  // with M' = batch * M.
  bool foldsBatchIntoM() const {
    return bBatch == 1 && aBatch == batchCount && (!ta || batchCount == 1);
  }
  // Both operands fully batched: one strided-batched product.
  bool fullyBatched() const { return aBatch == batchCount && bBatch == batchCount; }

  // Otherwise a loop over the batch: element offsets of a, b and out
  // (operands 0, 1, 2) through the broadcast strides.
  LoopNest batchLoop() const {
    SmallVector<int64_t> aStrides = broadcastStrides(aBatchShape, batch);
    SmallVector<int64_t> bStrides = broadcastStrides(bBatchShape, batch);
    for (int64_t &st : aStrides) st *= m * k;
    for (int64_t &st : bStrides) st *= k * n;
    LoopNest nest = LoopNest::build(batch, {aStrides, bStrides, contiguousStrides(batch)});
    for (int64_t &st : nest.strides[2]) st *= m * n;
    return nest;
  }
};

// Result buffers the caller may leave NULL (eval outputs, train outputs
// on the CPU): each then goes to scratch after the planned workspace,
// `alignment`-aligned; `bytes` is how much scratch the entry needs.
struct OutputScratch {
  int64_t base = 0, bytes = 0, alignment = 64;

  // "args->outputs && args->outputs[i] ? ... : <scratch>" for one buffer.
  std::string buffer(StringRef array, int index, MemRefType t) {
    std::string st = storageType(t.getElementType());
    std::string s = llvm::formatv(
        "args->{0} && args->{0}[{1}] ? static_cast<{2} *>(args->{0}[{1}]) : "
        "reinterpret_cast<{2} *>(ws + {3})",
        array, index, st, base + bytes);
    bytes += (bufferBytes(t) + alignment - 1) / alignment * alignment;
    return s;
  }
};

// C++ names of buffers in generated code: v0, v1, ... in order of
// definition.
class ValueNames {
public:
  std::string fresh(Value v) {
    std::string n = "v" + std::to_string(names_.size());
    names_[v] = n;
    return n;
  }
  std::string operator()(Value v) const { return names_.lookup(v); }

private:
  llvm::DenseMap<Value, std::string> names_;
};

// kern.transpose, slice and concat as element copies: for each piece, the
// iteration shape and, per side, the buffer, its strides over that shape and
// its base offset (one piece per concat input).
struct StridedCopy {
  SmallVector<int64_t> shape;
  Value src, dst;
  SmallVector<int64_t> srcStrides, dstStrides;
  int64_t srcBase = 0, dstBase = 0;
};
inline SmallVector<StridedCopy> stridedCopies(Operation *op) {
  SmallVector<StridedCopy> copies;
  if (auto t = dyn_cast<kern::TransposeOp>(op)) {
    ArrayRef<int64_t> outShape = mrt(t.getOut()).getShape();
    SmallVector<int64_t> inStrides = contiguousStrides(mrt(t.getInput()).getShape()), permuted;
    for (int64_t p : t.getPerm())
      permuted.push_back(inStrides[p]);
    copies.push_back({SmallVector<int64_t>(outShape), t.getInput(), t.getOut(), permuted,
                      contiguousStrides(outShape), 0, 0});
  } else if (auto s = dyn_cast<kern::SliceOp>(op)) {
    ArrayRef<int64_t> outShape = mrt(s.getOut()).getShape();
    SmallVector<int64_t> inStrides = contiguousStrides(mrt(s.getInput()).getShape());
    int64_t base = 0;
    for (auto [d, start] : llvm::enumerate(s.getStarts()))
      base += start * inStrides[d];
    copies.push_back({SmallVector<int64_t>(outShape), s.getInput(), s.getOut(), inStrides,
                      contiguousStrides(outShape), base, 0});
  } else if (auto c = dyn_cast<kern::ConcatOp>(op)) {
    SmallVector<int64_t> outStrides = contiguousStrides(mrt(c.getOut()).getShape());
    int64_t offset = 0;
    for (Value v : c.getInputs()) {
      ArrayRef<int64_t> inShape = mrt(v).getShape();
      copies.push_back({SmallVector<int64_t>(inShape), v, c.getOut(), contiguousStrides(inShape),
                        outStrides, 0, offset * outStrides[c.getAxis()]});
      offset += inShape[c.getAxis()];
    }
  }
  return copies;
}

// A kern.reduce's input dimensions (size-1 ones dropped) split into kept
// and reduced ones, each with its contiguous input stride.
struct ReduceAxes {
  SmallVector<int64_t> keptSizes, keptStrides, reducedSizes, reducedStrides;
  int64_t count = 1; // input elements per output element
  // Every reduced dimension follows every kept one: each output element
  // reduces a contiguous run of `count` inputs.
  bool reducesContiguousTail = true;

  static ReduceAxes of(kern::ReduceOp r) {
    ReduceAxes a;
    ArrayRef<int64_t> shape = mrt(r.getInput()).getShape();
    SmallVector<int64_t> strides = contiguousStrides(shape);
    int64_t lastKept = -1, firstReduced = shape.size();
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (shape[d] == 1)
        continue;
      if (llvm::is_contained(r.getAxes(), d)) {
        a.count *= shape[d];
        a.reducedSizes.push_back(shape[d]);
        a.reducedStrides.push_back(strides[d]);
        firstReduced = std::min(firstReduced, d);
      } else {
        a.keptSizes.push_back(shape[d]);
        a.keptStrides.push_back(strides[d]);
        lastKept = d;
      }
    }
    a.reducesContiguousTail = lastKept < firstReduced;
    return a;
  }
};

// What one argument of a step function is: the generators differ only in
// where each kind lives (host pointers, or the GPU control block).
struct ArgumentRole {
  enum Kind { Param, Input, OptimizerState, Hyper, Loss, Output, TrainOutput };
  Kind kind;
  int index = 0;     // among the arguments of its kind
  std::string label; // param, input or output name; hyper-parameter name
  // Hyper only: the StepArgs expression that holds its value.
  std::string hyperValue;
};

// The roles of f's arguments in order. Unknown or non-scalar
// hyper-parameters, gradients left unapplied and arguments without a role
// are errors on f, prefixed with `generator` ("cpu codegen").
inline FailureOr<SmallVector<ArgumentRole>> classifyArguments(func::FuncOp f,
                                                              StringRef generator) {
  SmallVector<ArgumentRole> roles;
  int counts[ArgumentRole::TrainOutput + 1] = {};
  auto add = [&](ArgumentRole::Kind kind, std::string label) -> ArgumentRole & {
    roles.push_back(ArgumentRole{kind, counts[kind]++, std::move(label), ""});
    return roles.back();
  };
  for (BlockArgument a : f.getArguments()) {
    unsigned i = a.getArgNumber();
    if (auto info = tg::ParamInfo::fromAttr(f.getArgAttr(i, tg::kParamAttr))) {
      add(ArgumentRole::Param, info->name);
    } else if (auto in = f.getArgAttrOfType<StringAttr>(i, tg::kInputAttr)) {
      add(ArgumentRole::Input, in.getValue().str());
    } else if (f.getArgAttr(i, tg::kOptStateAttr)) {
      add(ArgumentRole::OptimizerState, "");
    } else if (auto h = f.getArgAttrOfType<StringAttr>(i, tg::kHyperAttr)) {
      std::string value;
      if (h.getValue() == tg::kLearningRateHyper)
        value = "args->learning_rate";
      else if (h.getValue() == tg::kStepHyper)
        value = "args->step";
      else if (h.getValue() == tg::kRngSeedHyper)
        value = "args->rng_seed";
      else
        return f.emitError(generator) << ": unknown hyper-parameter " << h;
      MemRefType t = mrt(a);
      if (t.getNumElements() != 1 || bufferBytes(t) > 8)
        return f.emitError(generator) << ": hyper-parameter " << h << " must be a scalar";
      add(ArgumentRole::Hyper, h.getValue().str()).hyperValue = value;
    } else if (f.getArgAttr(i, tg::kLossAttr)) {
      add(ArgumentRole::Loss, "loss");
    } else if (auto o = f.getArgAttrOfType<StringAttr>(i, tg::kOutputAttr)) {
      add(ArgumentRole::Output, o.getValue().str());
    } else if (auto o = f.getArgAttrOfType<StringAttr>(i, tg::kTrainOutputAttr)) {
      add(ArgumentRole::TrainOutput, o.getValue().str());
    } else if (f.getArgAttr(i, tg::kGradOfAttr)) {
      return f.emitError(generator)
             << ": @" << f.getName()
             << " returns gradients; run an optimizer pass (tg-sgd-update) first";
    } else {
      return f.emitError(generator) << ": argument " << i << " has no role";
    }
  }
  return roles;
}

// The declaration of a buffer argument that both generators take straight
// from StepArgs (parameters, inputs, optimizer state); "" for other roles.
inline std::string stepArgsBuffer(const ArgumentRole &role, const std::string &name,
                                  MemRefType t) {
  std::string st = storageType(t.getElementType());
  switch (role.kind) {
  case ArgumentRole::Param:
    return llvm::formatv("  {0} *{1} = static_cast<{0} *>(args->params[{2}]); "
                         "// param {3} {4}\n",
                         st, name, role.index, role.label, shapeComment(t));
  case ArgumentRole::Input:
    return llvm::formatv("  {0} *{1} = static_cast<{0} *>(const_cast<void *>("
                         "args->inputs[{2}])); // input {3} {4}\n",
                         st, name, role.index, role.label, shapeComment(t));
  case ArgumentRole::OptimizerState:
    return llvm::formatv("  {0} *{1} = static_cast<{0} *>(args->optimizer_state[{2}]); "
                         "// optimizer state {3}\n",
                         st, name, role.index, shapeComment(t));
  default:
    return "";
  }
}

// Prints the scalar ops of a kern.elementwise body as C++ statements.
class ScalarPrinter {
public:
  // `target` picks the helper namespace (tcc_cpu / tcc_cuda) and how C
  // math functions are named (std:: on the CPU, CUDA's global overloads).
  ScalarPrinter(llvm::DenseMap<Value, std::string> &names,
                CodeTarget target = CodeTarget::Cpu)
      : names_(names), target_(target) {}

  // Declared scalars in order: (C type, name).
  const std::vector<std::pair<std::string, std::string>> &declared() const {
    return declared_;
  }

  // Emits `const T sN = expr;` for `op`'s result.
  LogicalResult print(Operation *op, std::string &out) {
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
    out += "const " + scalarType(t) + " " + name + " = " + value + ";\n";
    declared_.push_back({scalarType(t), name});
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

  std::string helper(StringRef fn) const {
    return preludeNamespace(target_) + fn.str();
  }
  std::string libm(StringRef fn) const {
    return (target_ == CodeTarget::Cuda ? "::" : "std::") + fn.str();
  }

  llvm::DenseMap<Value, std::string> &names_;
  CodeTarget target_;
  std::vector<std::pair<std::string, std::string>> declared_;
};


struct TableEntry {
  std::string name;
  MemRefType type;
  std::optional<tg::ParamInfo> param; // initializer (parameters only)
};

inline void emitTensorTable(llvm::raw_ostream &os, StringRef table,
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
inline FailureOr<std::string> lrSchedule(ModuleOp module, double baseLr, StringRef who) {
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
  return module.emitError(who) << ": cannot read " << tg::kLrScheduleAttr << " = " << dict;
}

// What the descriptor says about a step, read from the planned kern module.
struct StepInterface {
  func::FuncOp train, eval;
  int64_t plannedWorkspace = 0; // kern.workspace_bytes
  std::string modelName = "model", optimizerKind = "none", lossName = "loss",
              precision = "f32", schedule;
  double defaultLr = 0;
  int64_t microBatches = 1;
  SmallVector<TableEntry> params, inputs, outputs, states, trainOutputs;
};

// `who` prefixes errors ("cpu codegen").
inline FailureOr<StepInterface> collectStepInterface(ModuleOp module,
                                                     StringRef who) {
  StepInterface r;
  auto train = module.lookupSymbol<func::FuncOp>(tg::kTrainStepFunc);
  auto eval = module.lookupSymbol<func::FuncOp>(tg::kForwardFunc);
  if (!train || !eval)
    return module.emitError(who.str() + ": needs @train_step and @forward");
  auto wsAttr = module->getAttrOfType<IntegerAttr>("kern.workspace_bytes");
  if (!wsAttr)
    return module.emitError(who.str() + ": run kern-plan-memory first");
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
  FailureOr<std::string> schedule = lrSchedule(module, defaultLr, who);
  if (failed(schedule))
    return failure();
  int64_t microBatches = 1;
  if (auto k = module->getAttrOfType<IntegerAttr>(tg::kMicroBatchesAttr))
    microBatches = k.getInt();

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
        return train.emitError(who.str() + ": malformed ")
               << tg::kOptStateAttr << " " << s;
      states.push_back({params[param.getInt()].name + "." + stateName.str(),
                        mrt(a), std::nullopt});
    } else if (auto o = train.getArgAttrOfType<StringAttr>(i, tg::kTrainOutputAttr)) {
      trainOutputs.push_back({o.str(), mrt(a), std::nullopt});
    }
  }

  r.train = train;
  r.eval = eval;
  r.plannedWorkspace = wsAttr.getInt();
  if (modelName)
    r.modelName = modelName.getValue().str();
  r.optimizerKind = optimizerKind;
  r.defaultLr = defaultLr;
  r.schedule = *schedule;
  r.microBatches = microBatches;
  r.lossName = lossName;
  r.precision = precision;
  r.params = std::move(params);
  r.inputs = std::move(inputs);
  r.outputs = std::move(outputs);
  r.states = std::move(states);
  r.trainOutputs = std::move(trainOutputs);
  return r;
}

// The tensor tables, the descriptor and tcc_step_get_descriptor. `archLines`
// is the arch string initializer line(s); entry points are tcc_train and
// tcc_eval; `deviceApi` the descriptor's device field.
inline void emitDescriptor(llvm::raw_ostream &s, const StepInterface &iface,
                           StringRef target, StringRef archLines,
                           int64_t workspaceBytes, double trainFlops,
                           double evalFlops, StringRef deviceApi) {
  const auto &params = iface.params, &states = iface.states,
             &inputs = iface.inputs, &outputs = iface.outputs,
             &trainOutputs = iface.trainOutputs;
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
    << "  \"" << iface.modelName << "\", \"" << target << "\",\n"
    << archLines
    << "  \"" << iface.precision << "\", \"" << iface.optimizerKind << "\", \"" << iface.lossName
    << "\", " << llvm::formatv("{0:e}", iface.defaultLr) << ",\n"
    << "  " << iface.schedule << ", // lr schedule\n"
    << "  " << iface.microBatches << ", // micro-batches per step\n"
    << "  " << table(params, "tcc_params") << ", // params\n"
    << "  " << table(states, "tcc_optimizer_state") << ", // optimizer state\n"
    << "  " << table(inputs, "tcc_inputs") << ",\n"
    << "  " << table(outputs, "tcc_outputs") << ",\n"
    << "  " << table(trainOutputs, "tcc_train_outputs") << ", // train outputs\n"
    << "  " << workspaceBytes << ", // workspace bytes\n"
    << "  " << llvm::formatv("{0:e}, {1:e}", trainFlops, evalFlops)
    << ", // FLOPs per train / eval call\n"
    << "  tcc_train, tcc_eval,\n"
    << "  " << deviceApi << ", // device API\n};\n\n"
    << "extern \"C\" __attribute__((visibility(\"default\"))) const tcc_step_descriptor *\n"
    << "tcc_step_get_descriptor(void) { return &tcc_descriptor; }\n";
}

} // namespace tcc::codegen

#endif // TCC_COMPILER_CODEGEN_CODEGENSUPPORT_H
