#include "dialects/kern/KernDialect.h"

#include "dialects/common/ShapeHelpers.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace tcc::kern;

#include "dialects/kern/KernOpsDialect.cpp.inc"
#include "dialects/kern/KernOpsEnums.cpp.inc"

void KernDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/kern/KernOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/kern/KernOps.cpp.inc"

static MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

namespace tcc::kern {

Value rootBuffer(Value v) {
  while (auto view = v.getDefiningOp<ReshapeOp>())
    v = view.getInput();
  return v;
}

bool writesBuffer(Operation *op, Value buffer) {
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return false;
  SmallVector<MemoryEffects::EffectInstance> list;
  effects.getEffects(list);
  return llvm::any_of(list, [&](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Write>(e.getEffect()) && e.getValue() == buffer;
  });
}

int64_t elementBytes(Type elementType) {
  if (auto shaped = dyn_cast<ShapedType>(elementType))
    elementType = shaped.getElementType();
  return std::max<int64_t>(1, (elementType.getIntOrFloatBitWidth() + 7) / 8);
}

FailureOr<ElementwiseOp> buildElementwise(OpBuilder &b, Location loc,
                                          ValueRange inputs, ValueRange outputs,
                                          ElementwiseBodyBuilder body,
                                          ArrayRef<Location> inputLocs) {
  auto op = ElementwiseOp::create(b, loc, inputs, outputs);
  Block *block = new Block();
  op.getBody().push_back(block);
  for (auto [k, in] : llvm::enumerate(inputs))
    block->addArgument(mrt(in).getElementType(),
                       inputLocs.empty() ? loc : inputLocs[k]);
  block->addArgument(b.getI64Type(), loc);
  OpBuilder inner = OpBuilder::atBlockBegin(block);
  SmallVector<Value> yielded;
  if (failed(body(inner, block->getArguments().drop_back(),
                  block->getArguments().back(), yielded))) {
    op.erase();
    return failure();
  }
  YieldOp::create(inner, loc, yielded);
  return op;
}

} // namespace tcc::kern

// A ZeRO op's buffers: `whole` of n elements, `shard` of n / ranks, one
// element type, ranks >= 1 dividing n.
static LogicalResult verifyShard(Operation *op, int64_t ranks, Value whole, Value shard) {
  auto w = cast<MemRefType>(whole.getType()), s = cast<MemRefType>(shard.getType());
  if (ranks < 1 || w.getNumElements() % ranks != 0)
    return op->emitOpError("ranks ") << ranks << " must be >= 1 and divide the "
                                     << w.getNumElements() << " elements of " << w;
  if (w.getElementType() != s.getElementType() ||
      s.getNumElements() != w.getNumElements() / ranks)
    return op->emitOpError("shard ") << s << " must have " << w.getNumElements() / ranks
                                     << " elements of " << w.getElementType();
  return success();
}

LogicalResult AllReduceBucketOp::verify() {
  if (getReduction() != "sum" && getReduction() != "mean")
    return emitOpError("reduction must be sum or mean, got '") << getReduction() << "'";
  if (getBuffers().empty())
    return emitOpError("needs at least one buffer");
  Type element = cast<MemRefType>(getBuffers().front().getType()).getElementType();
  for (Value b : getBuffers())
    if (cast<MemRefType>(b.getType()).getElementType() != element)
      return emitOpError("buffers of one element type only, got ")
             << element << " and " << cast<MemRefType>(b.getType()).getElementType();
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (getReduction() != "sum" && getReduction() != "mean")
    return emitOpError("reduction must be sum or mean, got '") << getReduction() << "'";
  return verifyShard(*this, getRanks(), getInput(), getOut());
}

LogicalResult RankShardOp::verify() {
  return verifyShard(*this, getRanks(), getInput(), getOut());
}

LogicalResult AllGatherOp::verify() {
  return verifyShard(*this, getRanks(), getOut(), getInput());
}

LogicalResult GemmOp::verify() {
  auto a = mrt(getA()), b = mrt(getB()), c = mrt(getOut());
  if (a.getRank() < 2 || b.getRank() < 2 || c.getRank() < 2)
    return emitOpError("expects buffers of rank 2 or more");
  if (a.getElementType() != c.getElementType() ||
      b.getElementType() != c.getElementType())
    return emitOpError("element types differ");
  ArrayRef<int64_t> as = a.getShape(), bs = b.getShape(), cs = c.getShape();
  int64_t m = as[as.size() - (getTransposeA() ? 1 : 2)];
  int64_t ka = as[as.size() - (getTransposeA() ? 2 : 1)];
  int64_t kb = bs[bs.size() - (getTransposeB() ? 1 : 2)];
  int64_t n = bs[bs.size() - (getTransposeB() ? 2 : 1)];
  if (ka != kb || cs[cs.size() - 2] != m || cs[cs.size() - 1] != n)
    return emitOpError("inconsistent gemm shapes");
  auto batch = tcc::broadcastShapes(as.drop_back(2), bs.drop_back(2));
  if (!batch || ArrayRef<int64_t>(*batch) != cs.drop_back(2))
    return emitOpError("batch dimensions ")
           << tcc::formatShape(as.drop_back(2)) << " and "
           << tcc::formatShape(bs.drop_back(2))
           << " do not broadcast to the output's "
           << tcc::formatShape(cs.drop_back(2));
  return success();
}

LogicalResult GemmEpilogueOp::verify() {
  auto a = mrt(getA()), b = mrt(getB()), out = mrt(getOut());
  if (a.getRank() != 2 || b.getRank() != 2 || out.getRank() != 2)
    return emitOpError("expects rank-2 a, b and out (one product)");
  if (a.getElementType() != b.getElementType())
    return emitOpError("a and b must have one element type");
  int64_t m = a.getDimSize(getTransposeA() ? 1 : 0);
  int64_t ka = a.getDimSize(getTransposeA() ? 0 : 1);
  int64_t kb = b.getDimSize(getTransposeB() ? 1 : 0);
  int64_t n = b.getDimSize(getTransposeB() ? 0 : 1);
  if (ka != kb || out.getDimSize(0) != m || out.getDimSize(1) != n)
    return emitOpError("inconsistent gemm shapes");
  Type p = a.getElementType(), o = out.getElementType();
  if (o != p && !((p.isBF16() || p.isF16()) && o.isF32()))
    return emitOpError("out must have a's element type, or f32 with 16-bit a");
  if (o != p && !getResidual() && getActivation() != "none")
    return emitOpError("an out type other than a's needs a residual or no activation");
  if (Value biasValue = getBias()) {
    auto bias = mrt(biasValue);
    if (bias.getRank() != 1 || bias.getDimSize(0) != n || bias.getElementType() != o)
      return emitOpError("bias must be (") << n << ") of out's element type";
  } else if (!getResidual() || getActivation() != "none") {
    return emitOpError("without a bias, needs a residual and no activation");
  }
  if (Value r = getResidual(); r && r.getType() != out)
    return emitOpError("residual must have out's type");
  StringRef act = getActivation();
  if (act != "none" && act != "gelu_tanh" && act != "gelu_erf")
    return emitOpError("activation must be none, gelu_tanh or gelu_erf");
  if (Value aux = getAux()) {
    if (act == "none")
      return emitOpError("aux (the pre-activation) needs an activation");
    if (mrt(aux).getShape() != out.getShape() || mrt(aux).getElementType() != p)
      return emitOpError("aux must be (M, N) of a's element type");
  }
  return success();
}

LogicalResult GemmDgeluOp::verify() {
  auto a = mrt(getA()), b = mrt(getB()), out = mrt(getOut());
  if (a.getRank() != 2 || b.getRank() != 2 || out.getRank() != 2)
    return emitOpError("expects rank-2 a, b and out (one product)");
  if (a.getElementType() != b.getElementType() || out.getElementType() != a.getElementType())
    return emitOpError("a, b and out must have one element type");
  int64_t m = a.getDimSize(getTransposeA() ? 1 : 0);
  int64_t ka = a.getDimSize(getTransposeA() ? 0 : 1);
  int64_t kb = b.getDimSize(getTransposeB() ? 1 : 0);
  int64_t n = b.getDimSize(getTransposeB() ? 0 : 1);
  if (ka != kb || out.getDimSize(0) != m || out.getDimSize(1) != n)
    return emitOpError("inconsistent gemm shapes");
  if (getPre().getType() != out)
    return emitOpError("pre must have out's type");
  if (getApproximate() != "tanh" && getApproximate() != "none")
    return emitOpError("approximate must be tanh or none");
  return success();
}

LogicalResult GemmBiasGradOp::verify() {
  auto a = mrt(getA()), b = mrt(getB()), out = mrt(getOut()), grad = mrt(getBiasGrad());
  if (a.getRank() != 2 || b.getRank() != 2 || out.getRank() != 2)
    return emitOpError("expects rank-2 a, b and out (one product)");
  Type p = a.getElementType();
  if (b.getElementType() != p || out.getElementType() != p || grad.getElementType() != p)
    return emitOpError("a, b, out and bias_grad must have one element type");
  int64_t m = a.getDimSize(getTransposeA() ? 1 : 0);
  int64_t k = a.getDimSize(getTransposeA() ? 0 : 1);
  if (b.getDimSize(0) != k || out.getDimSize(0) != m || out.getDimSize(1) != b.getDimSize(1))
    return emitOpError("inconsistent gemm shapes");
  if (grad.getRank() != 1 || grad.getDimSize(0) != b.getDimSize(1))
    return emitOpError("bias_grad must be (") << b.getDimSize(1) << "), b's columns";
  return success();
}

LogicalResult ElementwiseOp::verify() {
  if (getOutputs().empty())
    return emitOpError("needs at least one output");
  ArrayRef<int64_t> shape = getShape();
  for (Value out : getOutputs())
    if (mrt(out).getShape() != shape)
      return emitOpError("outputs must have one shape");
  for (Value in : getInputs()) {
    auto b = tcc::broadcastShapes(mrt(in).getShape(), shape);
    if (!b || ArrayRef<int64_t>(*b) != shape)
      return emitOpError("input ")
             << in.getType() << " does not broadcast to the output shape "
             << tcc::formatShape(shape);
  }
  Block &body = getBodyBlock();
  if (body.getNumArguments() != getInputs().size() + 1)
    return emitOpError("body takes one scalar per input and the flat index");
  for (auto [in, arg] : llvm::zip(getInputs(), body.getArguments()))
    if (arg.getType() != mrt(in).getElementType())
      return emitOpError("body argument type ")
             << arg.getType() << " differs from the input element type "
             << mrt(in).getElementType();
  if (!getFlatIndex().getType().isInteger(64))
    return emitOpError("the last body argument (flat index) must be i64");
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().size() != getOutputs().size())
    return emitOpError("body must end in kern.yield of one value per output");
  for (auto [out, v] : llvm::zip(getOutputs(), yield.getValues()))
    if (v.getType() != mrt(out).getElementType())
      return emitOpError("yielded type ")
             << v.getType() << " differs from the output element type "
             << mrt(out).getElementType();
  for (Operation &op : body.without_terminator())
    if (!isa<arith::ArithDialect, math::MathDialect>(op.getDialect()) ||
        op.getNumRegions() != 0)
      return op.emitOpError("is not allowed in a kern.elementwise body "
                            "(arith and math ops only)");
  return success();
}

LogicalResult ReduceOp::verify() {
  auto in = mrt(getInput()), out = mrt(getOut());
  Type it = in.getElementType(), ot = out.getElementType();
  // 16-bit floats may be read into an f32 result (a folded widening cast).
  if (it != ot && !((it.isBF16() || it.isF16()) && ot.isF32()))
    return emitOpError("element types differ (only bf16 / f16 -> f32 may)");
  int64_t count = 1, previous = -1;
  for (int64_t a : getAxes()) {
    if (a < 0 || a >= in.getRank())
      return emitOpError("axis out of range");
    if (a <= previous)
      return emitOpError("axes must be sorted and unique");
    previous = a;
    count *= in.getDimSize(a);
  }
  if (in.getNumElements() != out.getNumElements() * count)
    return emitOpError("output size does not match the reduced input");
  return success();
}

LogicalResult SoftmaxCrossEntropyWithGradOp::verify() {
  auto logits = mrt(getLogits());
  if (logits.getRank() != 2)
    return emitOpError("logits must be (rows, classes)");
  int64_t rows = logits.getDimSize(0);
  Type t = logits.getElementType();
  if (mrt(getOut()) != logits)
    return emitOpError("out must have the logits' type");
  for (auto [what, v] : {std::pair<const char *, Value>{"labels", getLabels()},
                         {"grad", getGrad()}, {"loss", getLoss()}})
    if (mrt(v).getNumElements() != rows)
      return emitOpError() << what << " must hold one element per row (" << rows << ")";
  for (auto [what, v] : {std::pair<const char *, Value>{"grad", getGrad()},
                         {"loss", getLoss()}}) {
    Type e = mrt(v).getElementType();
    if (e != t && !e.isF32())
      return emitOpError() << what << " must be of the logits' type or f32";
  }
  return success();
}

LogicalResult ConstantOp::verify() {
  auto t = mrt(getBuffer());
  auto v = cast<ShapedType>(getValue().getType());
  if (v.getShape() != t.getShape() || v.getElementType() != t.getElementType())
    return emitOpError("value type ") << v << " does not match " << t;
  return success();
}

LogicalResult TransposeOp::verify() {
  auto in = mrt(getInput()), out = mrt(getOut());
  ArrayRef<int64_t> perm = getPerm();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element types differ");
  if (static_cast<int64_t>(perm.size()) != in.getRank() ||
      in.getRank() != out.getRank())
    return emitOpError("perm must have one entry per dimension");
  SmallVector<bool> seen(perm.size(), false);
  for (auto [d, p] : llvm::enumerate(perm)) {
    if (p < 0 || p >= in.getRank() || seen[p])
      return emitOpError("perm is not a permutation");
    seen[p] = true;
    if (out.getDimSize(d) != in.getDimSize(p))
      return emitOpError("output dimension ") << d << " must be input dimension " << p;
  }
  return success();
}

LogicalResult SliceOp::verify() {
  auto in = mrt(getInput()), out = mrt(getOut());
  ArrayRef<int64_t> starts = getStarts();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element types differ");
  if (in.getRank() != out.getRank() ||
      static_cast<int64_t>(starts.size()) != in.getRank())
    return emitOpError("needs one start per dimension and equal ranks");
  for (auto [d, s] : llvm::enumerate(starts))
    if (s < 0 || s + out.getDimSize(d) > in.getDimSize(d))
      return emitOpError("slice of dimension ") << d << " is out of bounds";
  return success();
}

LogicalResult ConcatOp::verify() {
  auto out = mrt(getOut());
  int64_t axis = getAxis();
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (axis < 0 || axis >= out.getRank())
    return emitOpError("axis out of range");
  int64_t total = 0;
  for (Value v : getInputs()) {
    auto t = mrt(v);
    if (t.getElementType() != out.getElementType() || t.getRank() != out.getRank())
      return emitOpError("inputs must have the output's element type and rank");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != out.getDimSize(d))
        return emitOpError("inputs differ from the output off the axis");
    total += t.getDimSize(axis);
  }
  if (total != out.getDimSize(axis))
    return emitOpError("input sizes along the axis do not add up to the output's");
  return success();
}

// ids.shape + rows.shape[1:] == lookups.shape
static LogicalResult verifyRowLookup(Operation *op, MemRefType rows,
                                     MemRefType ids, MemRefType lookups) {
  if (rows.getRank() < 1)
    return op->emitOpError("the table must have rank 1 or more");
  if (rows.getElementType() != lookups.getElementType())
    return op->emitOpError("element types differ");
  SmallVector<int64_t> expected(ids.getShape());
  llvm::append_range(expected, rows.getShape().drop_front());
  if (ArrayRef<int64_t>(expected) != lookups.getShape())
    return op->emitOpError("expects shape ")
           << tcc::formatShape(expected) << " for the looked-up rows";
  return success();
}

LogicalResult GatherOp::verify() {
  return verifyRowLookup(*this, mrt(getTable()), mrt(getIds()), mrt(getOut()));
}

LogicalResult ScatterAddOp::verify() {
  return verifyRowLookup(*this, mrt(getOut()), mrt(getIds()), mrt(getUpdates()));
}

LogicalResult ReshapeOp::verify() {
  auto in = mrt(getInput()), out = mrt(getResult());
  if (in.getElementType() != out.getElementType() ||
      in.getNumElements() != out.getNumElements())
    return emitOpError("must keep the element type and count");
  return success();
}

