// CPU code generator: walks the kern functions @train_step and @forward and
// prints C++. Shape-specialized loops are generated inline (constant trip
// counts let the host compiler vectorize); fixed kernels come from
// cpu_prelude.h; matrix products call BLAS.
#include "compiler/codegen/CpuCodegen.h"

#include "compiler/codegen/EmbeddedSources.h"
#include "dialects/kern/KernDialect.h"
#include "dialects/tg/TgModelAttrs.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace tcc {
namespace {

std::string cType(Type t) {
  if (t.isF32()) return "float";
  if (t.isF64()) return "double";
  if (t.isInteger(32)) return "int32_t";
  if (t.isInteger(64)) return "int64_t";
  return "";
}

const char *abiDType(Type t) {
  if (t.isF32()) return "TCC_DTYPE_F32";
  if (t.isF64()) return "TCC_DTYPE_F64";
  if (t.isInteger(32)) return "TCC_DTYPE_I32";
  if (t.isInteger(64)) return "TCC_DTYPE_I64";
  return "TCC_DTYPE_INVALID";
}

MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

std::string shapeComment(MemRefType t) {
  std::string s = "(";
  for (auto [i, d] : llvm::enumerate(t.getShape()))
    s += (i ? "," : "") + std::to_string(d);
  return s + ")";
}

std::string locName(Location loc) {
  if (auto n = dyn_cast<NameLoc>(loc))
    return n.getName().str();
  return "";
}

// Row-major strides of `in` seen through a numpy broadcast to `outShape`:
// 0 on broadcast dimensions.
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

// "i0 * 256 + i1": the flat index for loop counters i0, i1, ... under
// `strides` (0 = the counter does not move this operand).
std::string indexExpr(ArrayRef<int64_t> strides) {
  std::string s;
  for (auto [d, st] : llvm::enumerate(strides)) {
    if (!st)
      continue;
    s += s.empty() ? "" : " + ";
    s += st == 1 ? llvm::formatv("i{0}", d).str()
                 : llvm::formatv("i{0} * {1}", d, st).str();
  }
  return s.empty() ? std::string("0") : s;
}

// One loop per dimension of `shape` (counters i0, i1, ...) around `body`.
// Constant trip counts let the host compiler vectorize the innermost loop.
void emitLoopNest(llvm::raw_ostream &os, ArrayRef<int64_t> shape,
                  StringRef body) {
  std::string indent = "  ";
  for (auto [d, size] : llvm::enumerate(shape)) {
    os << indent
       << llvm::formatv("for (int64_t i{0} = 0; i{0} < {1}; ++i{0}) {{\n", d, size);
    indent += "  ";
  }
  os << indent << body << "\n";
  for (size_t d = 0; d < shape.size(); ++d) {
    indent.resize(indent.size() - 2);
    os << indent << "}\n";
  }
}

class FunctionEmitter {
public:
  FunctionEmitter(func::FuncOp f, llvm::raw_ostream &os) : f_(f), os_(os) {}

  // Emits `static int32_t <cName>(const tcc_step_args *args)`.
  LogicalResult emit(StringRef cName, int64_t outputScratchBase,
                     double &flops) {
    os_ << "static int32_t " << cName << "(const tcc_step_args *args) {\n";
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

  LogicalResult emitArguments(int64_t outputScratchBase) {
    int param = 0, input = 0, output = 0;
    for (BlockArgument a : f_.getArguments()) {
      MemRefType t = mrt(a);
      std::string ct = cType(t.getElementType());
      unsigned i = a.getArgNumber();
      std::string n = fresh(a);
      if (auto info = tg::ParamInfo::fromAttr(f_.getArgAttr(i, tg::kParamAttr))) {
        os_ << llvm::formatv("  {0} *{1} = static_cast<{0} *>(args->params[{2}]); "
                             "// param {3} {4}\n",
                             ct, n, param++, info->name, shapeComment(t));
      } else if (auto in = f_.getArgAttrOfType<StringAttr>(i, tg::kInputAttr)) {
        os_ << llvm::formatv("  const {0} *{1} = static_cast<const {0} *>("
                             "args->inputs[{2}]); // input {3} {4}\n",
                             ct, n, input++, in.getValue(), shapeComment(t));
      } else if (auto h = f_.getArgAttrOfType<StringAttr>(i, tg::kHyperAttr)) {
        if (h.getValue() != "learning_rate")
          return f_.emitError("cpu codegen: unknown hyper-parameter ") << h;
        os_ << llvm::formatv("  {0} {1}[1] = {{static_cast<{0}>(args->learning_rate)};\n",
                             ct, n);
      } else if (f_.getArgAttr(i, tg::kLossAttr)) {
        os_ << llvm::formatv("  {0} {1}[1]; // loss\n", ct, n);
        lossName_ = n;
      } else if (auto o = f_.getArgAttrOfType<StringAttr>(i, tg::kOutputAttr)) {
        // Outputs go to the caller's buffer, or to scratch after the
        // planned workspace when the caller does not want them.
        int64_t bytes = (t.getNumElements() * t.getElementTypeBitWidth() / 8 + 63) / 64 * 64;
        os_ << llvm::formatv(
            "  {0} *{1} = args->outputs && args->outputs[{2}] ? static_cast<{0} *>("
            "args->outputs[{2}]) : reinterpret_cast<{0} *>(ws + {3}); // output {4} {5}\n",
            ct, n, output++, outputScratchBase + outputScratchBytes_,
            o.getValue(), shapeComment(t));
        outputScratchBytes_ += bytes;
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
    if (!where.empty() && !isa<kern::WorkspaceViewOp, kern::ReshapeOp>(op))
      os_ << "  // " << where << ": " << op->getName().getStringRef() << "\n";
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](kern::WorkspaceViewOp v) {
          std::string ct = cType(v.getType().getElementType());
          os_ << llvm::formatv("  {0} *{1} = reinterpret_cast<{0} *>(ws + {2}); // {3}\n",
                               ct, fresh(v.getResult()), v.getOffset(),
                               shapeComment(v.getType()));
          return success();
        })
        .Case([&](kern::ReshapeOp r) {
          os_ << llvm::formatv("  auto *{0} = {1}; // viewed as {2}\n",
                               fresh(r.getResult()), name(r.getInput()),
                               shapeComment(mrt(r.getResult())));
          return success();
        })
        .Case([&](kern::GemmOp g) {
          MemRefType c = mrt(g.getOut()), a = mrt(g.getA());
          int64_t m = c.getDimSize(0), n = c.getDimSize(1);
          int64_t k = a.getDimSize(g.getTransposeA() ? 0 : 1);
          os_ << llvm::formatv("  tcc_cpu::gemm({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9});\n",
                               g.getTransposeA() ? "true" : "false",
                               g.getTransposeB() ? "true" : "false", m, n, k,
                               g.getAlpha().convertToDouble(), name(g.getA()),
                               name(g.getB()), g.getBeta().convertToDouble(),
                               name(g.getOut()));
          flops += 2.0 * m * n * k;
          return success();
        })
        .Case([&](kern::ElementwiseOp e) { return emitElementwise(e, flops); })
        .Case([&](kern::ReduceOp r) { return emitReduce(r, flops); })
        .Case([&](kern::FillOp fill) {
          MemRefType t = mrt(fill.getOut());
          os_ << llvm::formatv("  for (int64_t i = 0; i < {0}; ++i) {1}[i] = static_cast<{2}>({3});\n",
                               t.getNumElements(), name(fill.getOut()),
                               cType(t.getElementType()),
                               llvm::formatv("{0:e}", fill.getValue().convertToDouble()).str());
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
        .Case([&](kern::SgdUpdateOp u) {
          MemRefType p = mrt(u.getParam());
          os_ << llvm::formatv("  tcc_cpu::sgd_update({0}, {1}, {2}, {3}[0]);\n",
                               p.getNumElements(), name(u.getParam()),
                               name(u.getGrad()), name(u.getLearningRate()));
          flops += 2.0 * p.getNumElements();
          return success();
        })
        .Default([&](Operation *other) {
          return other->emitError("cpu codegen: cannot generate code for ")
                 << other->getName()
                 << (isa<kern::AllocOp>(other) ? " (run kern-plan-memory first)" : "");
        });
  }

  // out[idx] = f(inputs broadcast to out's shape).
  LogicalResult emitElementwise(kern::ElementwiseOp e, double &flops) {
    MemRefType out = mrt(e.getOut());
    std::string ct = cType(out.getElementType());
    // Inputs of out's own shape need no index arithmetic: one flat loop.
    bool flat = llvm::all_of(e.getInputs(), [&](Value v) {
      return mrt(v).getShape() == out.getShape();
    });
    SmallVector<int64_t> loops =
        flat ? SmallVector<int64_t>{out.getNumElements()}
             : SmallVector<int64_t>(out.getShape());
    auto index = [&](Value v) {
      return name(v) + "[" +
             indexExpr(broadcastStrides(flat ? ArrayRef<int64_t>(loops)
                                             : mrt(v).getShape(),
                                        loops)) +
             "]";
    };
    auto in = [&](int k) { return index(e.getInputs()[k]); };
    std::string zero = ct + "(0)", value;
    switch (e.getKind()) {
    case kern::ElementwiseKind::add: value = in(0) + " + " + in(1); break;
    case kern::ElementwiseKind::mul: value = in(0) + " * " + in(1); break;
    case kern::ElementwiseKind::relu:
      value = in(0) + " > " + zero + " ? " + in(0) + " : " + zero;
      break;
    case kern::ElementwiseKind::relu_grad:
      value = in(0) + " > " + zero + " ? " + in(1) + " : " + zero;
      break;
    case kern::ElementwiseKind::copy: value = in(0); break;
    }
    emitLoopNest(os_, loops, index(e.getOut()) + " = " + value + ";");
    flops += out.getNumElements();
    return success();
  }

  // out = sum (or mean) of input over axes; out has input's other dims.
  LogicalResult emitReduce(kern::ReduceOp r, double &flops) {
    MemRefType in = mrt(r.getInput()), out = mrt(r.getOut());
    ArrayRef<int64_t> shape = in.getShape();
    std::string ct = cType(out.getElementType());
    std::string o = name(r.getOut()), x = name(r.getInput());
    os_ << llvm::formatv("  for (int64_t i = 0; i < {0}; ++i) {1}[i] = {2}(0);\n",
                         out.getNumElements(), o, ct);
    // Output strides over the kept dimensions (0 on reduced ones).
    SmallVector<int64_t> outStrides(shape.size(), 0);
    int64_t stride = 1, count = 1;
    for (int64_t d = shape.size() - 1; d >= 0; --d) {
      if (llvm::is_contained(r.getAxes(), d)) {
        count *= shape[d];
        continue;
      }
      outStrides[d] = stride;
      stride *= shape[d];
    }
    emitLoopNest(os_, shape,
                 o + "[" + indexExpr(outStrides) + "] += " + x + "[" +
                     indexExpr(broadcastStrides(shape, shape)) + "];");
    if (r.getMean())
      os_ << llvm::formatv("  for (int64_t i = 0; i < {0}; ++i) {1}[i] *= {2}(1.0 / {3});\n",
                           out.getNumElements(), o, ct, count);
    flops += in.getNumElements();
    return success();
  }

  func::FuncOp f_;
  llvm::raw_ostream &os_;
  llvm::DenseMap<Value, std::string> names_;
  std::string lossName_;
  int64_t outputScratchBytes_ = 0;
};

void emitTensorTable(llvm::raw_ostream &os, StringRef table,
                     ArrayRef<std::pair<std::string, MemRefType>> tensors,
                     ArrayRef<std::optional<tg::ParamInfo>> params) {
  if (tensors.empty())
    return;
  for (auto [i, t] : llvm::enumerate(tensors)) {
    if (t.second.getRank() == 0)
      continue;
    os << "static const int64_t " << table << "_shape" << i << "[] = {";
    for (auto [j, d] : llvm::enumerate(t.second.getShape()))
      os << (j ? ", " : "") << d;
    os << "};\n";
  }
  os << "static const tcc_tensor_desc " << table << "[] = {\n";
  for (auto [i, t] : llvm::enumerate(tensors)) {
    MemRefType type = t.second;
    int64_t bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
    std::string kind = "TCC_INIT_ZEROS", scale = "0.0", seed = "0", trainable = "0";
    if (i < params.size() && params[i]) {
      const tg::ParamInfo &p = *params[i];
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
                        t.first, abiDType(type.getElementType()), type.getRank(),
                        shape, type.getNumElements(), bytes, kind, trainable,
                        scale, seed);
  }
  os << "};\n";
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

  GeneratedStep step;
  std::string body;
  llvm::raw_string_ostream os(body);
  int64_t planned = wsAttr.getInt();
  FunctionEmitter trainEmitter(train, os);
  if (failed(trainEmitter.emit("tcc_train", planned, step.trainFlops)))
    return failure();
  FunctionEmitter evalEmitter(eval, os);
  if (failed(evalEmitter.emit("tcc_eval", planned, step.evalFlops)))
    return failure();
  step.workspaceBytes =
      planned + std::max(trainEmitter.outputScratchBytes(),
                         evalEmitter.outputScratchBytes());

  // Descriptor tables, from @forward's signature (same parameter and input
  // order as @train_step).
  SmallVector<std::pair<std::string, MemRefType>> params, inputs, outputs;
  SmallVector<std::optional<tg::ParamInfo>> paramInfos;
  std::string lossName = "loss", precision = "f32";
  for (BlockArgument a : eval.getArguments()) {
    unsigned i = a.getArgNumber();
    if (auto info = tg::ParamInfo::fromAttr(eval.getArgAttr(i, tg::kParamAttr))) {
      params.push_back({info->name, mrt(a)});
      paramInfos.push_back(info);
      if (mrt(a).getElementType().isF64())
        precision = "f64";
    } else if (auto in = eval.getArgAttrOfType<StringAttr>(i, tg::kInputAttr)) {
      inputs.push_back({in.str(), mrt(a)});
    } else if (auto out = eval.getArgAttrOfType<StringAttr>(i, tg::kOutputAttr)) {
      outputs.push_back({out.str(), mrt(a)});
    } else if (auto loss = eval.getArgAttrOfType<StringAttr>(i, tg::kLossAttr)) {
      lossName = loss.str();
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
  emitTensorTable(s, "tcc_params", params, paramInfos);
  emitTensorTable(s, "tcc_inputs", inputs, {});
  emitTensorTable(s, "tcc_outputs", outputs, {});
  auto tableOrNull = [](bool empty, StringRef name) {
    return empty ? std::string("nullptr") : name.str();
  };
  s << "\nstatic const tcc_step_descriptor tcc_descriptor = {\n"
    << "  TCC_STEP_ABI_VERSION, sizeof(tcc_step_descriptor),\n"
    << "  \"" << (modelName ? modelName.getValue() : "model") << "\", \"cpu\",\n"
    << "#if defined(__x86_64__)\n  \"x86_64\",\n#elif defined(__aarch64__)\n"
    << "  \"aarch64\",\n#else\n  \"unknown\",\n#endif\n"
    << "  \"" << precision << "\", \"" << optimizerKind << "\", \"" << lossName
    << "\", " << llvm::formatv("{0:e}", defaultLr) << ",\n"
    << "  {TCC_LR_CONSTANT, " << llvm::formatv("{0:e}", defaultLr) << ", 0, 0, "
    << llvm::formatv("{0:e}", defaultLr) << "}, // lr schedule\n"
    << "  1, // micro-batches per step\n"
    << "  " << params.size() << ", " << tableOrNull(params.empty(), "tcc_params")
    << ", 0, nullptr, // params, optimizer state\n"
    << "  " << inputs.size() << ", " << tableOrNull(inputs.empty(), "tcc_inputs") << ",\n"
    << "  " << outputs.size() << ", " << tableOrNull(outputs.empty(), "tcc_outputs") << ",\n"
    << "  0, nullptr, // train outputs\n"
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
