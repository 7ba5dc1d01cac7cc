// CPU code for kern.conv2d / kern.pool2d: one call of the prelude's
// kernels (cpu/cpu_conv.h) each (a conv returns a tcc_status), the shapes passed as a brace-initialized
// Conv2dShape / Pool2dShape.
#include "compiler/codegen/cpu/CpuConv.h"

#include "compiler/codegen/common/CTypes.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen {

LogicalResult emitCpuConv2d(kern::Conv2dOp op, const ValueNames &names, llvm::raw_ostream &os,
                            double &flops) {
  StringRef product = op.getProduct();
  if (op.getLayout() != "NCHW") // tg-conv-layout keeps the CPU target NCHW
    return op.emitOpError("the CPU kernels (cpu_conv.h) are NCHW only; got layout ")
           << op.getLayout();
  // x (N, C, H, W), w (O, C/g, KH, KW), y (N, O, HO, WO) from the operands.
  Value x = product == "forward" ? op.getA() : product == "input_grad" ? op.getOut() : op.getB();
  Value w = product == "weight_grad" ? op.getOut() : op.getB();
  Value y = product == "forward" ? op.getOut() : op.getA();
  ArrayRef<int64_t> xs = mrt(x).getShape(), ws = mrt(w).getShape(), ys = mrt(y).getShape();
  ArrayRef<int64_t> s = op.getStride(), p = op.getPadding(), d = op.getDilation();
  const char *fn = product == "forward"      ? "conv2d_forward"
                   : product == "input_grad" ? "conv2d_input_grad"
                                             : "conv2d_weight_grad";
  if (product != "forward" && product != "input_grad" && product != "weight_grad")
    return op.emitOpError("unknown product '") << product << "'";
  Type et = mrt(op.getOut()).getElementType();
  flops += 2.0 * ys[0] * ys[1] * ys[2] * ys[3] * ws[1] * ws[2] * ws[3];
  // f32 / f64 allocate column buffers (cpu_conv.h): out of memory ends the step.
  os << llvm::formatv("  if (int32_t rc = tcc_cpu::{0}(tcc_cpu::Conv2dShape{{{1}, {2}, {3}, {4}, "
                      "{5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}}, {17}, "
                      "{18}, {19})) return rc; // out of memory\n",
                      fn, xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], ys[2], ys[3], s[0],
                      s[1], p[0], p[1], d[0], d[1], op.getGroups(),
                      familyPointer(et, names(op.getA()), false, CodeTarget::Cpu),
                      familyPointer(et, names(op.getB()), false, CodeTarget::Cpu),
                      familyPointer(et, names(op.getOut()), true, CodeTarget::Cpu));
  return success();
}

LogicalResult emitCpuPool2d(kern::Pool2dOp op, const ValueNames &names, llvm::raw_ostream &os,
                            double &flops) {
  StringRef mode = op.getMode();
  if (op.getLayout() != "NCHW")
    return op.emitOpError("the CPU kernels (cpu_conv.h) are NCHW only; got layout ")
           << op.getLayout();
  bool grad = mode.ends_with("_grad");
  bool avg = mode.starts_with("avg");
  if (mode != "max" && mode != "avg" && mode != "max_grad" && mode != "avg_grad")
    return op.emitOpError("unknown mode '") << mode << "'";
  if (grad != static_cast<bool>(op.getGrad()))
    return op.emitOpError(grad ? "needs a grad operand" : "takes no grad operand");
  ArrayRef<int64_t> xs = mrt(op.getInput()).getShape();
  ArrayRef<int64_t> ys = mrt(grad ? op.getGrad() : op.getOut()).getShape();
  ArrayRef<int64_t> k = op.getKernel(), s = op.getStride(), p = op.getPadding();
  Type et = mrt(op.getOut()).getElementType();
  flops += static_cast<double>(ys[0]) * ys[1] * ys[2] * ys[3] * k[0] * k[1];
  std::string shape = llvm::formatv("tcc_cpu::Pool2dShape{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, "
                                    "{7}, {8}, {9}, {10}}",
                                    xs[0] * xs[1], xs[2], xs[3], ys[2], ys[3], k[0], k[1], s[0],
                                    s[1], p[0], p[1])
                          .str();
  std::string in = familyPointer(et, names(op.getInput()), false, CodeTarget::Cpu);
  std::string out = familyPointer(et, names(op.getOut()), true, CodeTarget::Cpu);
  if (grad)
    os << llvm::formatv("  tcc_cpu::pool2d_backward({0}, {1}, {2}, {3}, {4});\n", shape,
                        avg ? "true" : "false", in,
                        familyPointer(et, names(op.getGrad()), false, CodeTarget::Cpu), out);
  else
    os << llvm::formatv("  tcc_cpu::pool2d_forward({0}, {1}, {2}, {3});\n", shape,
                        avg ? "true" : "false", in, out);
  return success();
}

} // namespace tcc::codegen
