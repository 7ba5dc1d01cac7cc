// The reference evaluator of tg functions. One function per op, each a plain
// loop over its definition; shapes come from the operand tensors and are
// checked against the op's result type after every op, so a slip in here is
// reported rather than silently compared against. Results (and arguments) of
// a float type narrower than f32 are rounded to it here, once per op.
#include "interpreter/TgInterpreter.h"

#include "interpreter/InterpreterSupport.h"

#include <cmath>
#include <string>

#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tcc::interp {

//===----------------------------------------------------------------------===//
// The walk over a function body
//===----------------------------------------------------------------------===//

namespace {

class Interpreter {
public:
  Interpreter(std::optional<uint64_t> randomRoundingSeed, bool randomlyRoundF32,
              int productErrorSide)
      : randomRoundingSeed_(randomRoundingSeed), randomlyRoundF32_(randomlyRoundF32),
        productErrorSide_(productErrorSide) {}
  FailureOr<std::vector<Tensor>> run(func::FuncOp f, ArrayRef<Tensor> args);

private:
  LogicalResult bindArguments(func::FuncOp f, ArrayRef<Tensor> args);
  OpResults evaluate(Operation *op);

  llvm::DenseMap<Value, Tensor> values_;
  std::optional<uint64_t> randomRoundingSeed_;
  bool randomlyRoundF32_;
  int productErrorSide_;
  uint64_t roundedValues_ = 0; // counter of the random rounding stream
};

LogicalResult Interpreter::bindArguments(func::FuncOp f,
                                         ArrayRef<Tensor> args) {
  Block &body = f.getBody().front();
  if (args.size() != body.getNumArguments())
    return f.emitError("interpreter: @")
           << f.getSymName() << " takes " << body.getNumArguments()
           << " arguments, got " << args.size();
  for (auto [i, arg, tensor] : llvm::enumerate(body.getArguments(), args)) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return f.emitError("interpreter: argument #")
             << i << " has type " << arg.getType()
             << "; only ranked tensors are supported";
    if (type.getShape() != ArrayRef<int64_t>(tensor.shape) ||
        static_cast<int64_t>(tensor.data.size()) != type.getNumElements())
      return f.emitError("interpreter: argument #")
             << i << " of @" << f.getSymName() << " must be "
             << tcc::formatShape(type.getShape()) << " (" << type.getNumElements()
             << " elements), got " << tcc::formatShape(tensor.shape) << " with "
             << tensor.data.size() << " elements";
    if (isa<IntegerType>(type.getElementType()))
      for (auto [j, x] : llvm::enumerate(tensor.data))
        if (x != std::floor(x))
          return f.emitError("interpreter: argument #")
                 << i << " is an integer tensor, but element " << j << " is "
                 << numberStr(x);
    // A bf16/f16 argument holds what a buffer of that type can hold.
    Tensor bound = tensor;
    roundToElementType(bound, type.getElementType());
    values_[arg] = std::move(bound);
  }
  return success();
}

OpResults Interpreter::evaluate(Operation *op) {
  SmallVector<const Tensor *> operands;
  for (Value v : op->getOperands())
    operands.push_back(&values_.find(v)->second);
  // Each op group answers for its own ops (std::nullopt: not mine).
  std::optional<OpResults> results = evaluateElementwiseOp(op, operands);
  if (!results)
    results = evaluateStructuralOp(op, operands, productErrorSide_);
  if (!results)
    results = evaluateOptimizerOp(op, operands);
  if (!results)
    results = evaluateAttentionOp(op, operands);
  if (!results)
    results = evaluatePositionOp(op, operands);
  if (!results)
    results = evaluateVisionOp(op, operands, productErrorSide_);
  if (!results)
    return op->emitOpError("is not supported by the tg reference interpreter");
  return std::move(*results);
}

FailureOr<std::vector<Tensor>> Interpreter::run(func::FuncOp f,
                                                ArrayRef<Tensor> args) {
  if (f.isExternal() || !f.getBody().hasOneBlock())
    return f.emitError("interpreter: @")
           << f.getSymName() << " must have a body of one block";
  if (failed(bindArguments(f, args)))
    return failure();
  for (Operation &op : f.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<Tensor> results;
      for (Value v : ret.getOperands())
        results.push_back(values_.find(v)->second);
      return results;
    }
    if (op.getNumRegions() != 0)
      return op.emitOpError("is not supported by the tg reference interpreter");
    OpResults results = evaluate(&op);
    if (failed(results))
      return failure();
    if (results->size() != op.getNumResults())
      return op.emitOpError("interpreter bug: computed ")
             << results->size() << " results for " << op.getNumResults();
    for (auto [value, result] : llvm::zip(op.getResults(), *results)) {
      // Guards the evaluator itself: every op's value must fit its type.
      ArrayRef<int64_t> expected = staticShape(value);
      if (expected != ArrayRef<int64_t>(result.shape) ||
          static_cast<int64_t>(result.data.size()) != product(expected))
        return op.emitOpError("interpreter bug: computed ")
               << tcc::formatShape(result.shape) << " with " << result.data.size()
               << " elements for a result of shape " << tcc::formatShape(expected);
      // bf16/f16 results round once, as a kernel rounds when it stores.
      Type elementType = cast<RankedTensorType>(value.getType()).getElementType();
      if (randomRoundingSeed_)
        roundToElementTypeAtRandom(result, elementType, *randomRoundingSeed_,
                                   roundedValues_, randomlyRoundF32_);
      else
        roundToElementType(result, elementType);
      values_[value] = std::move(result);
    }
  }
  return f.emitError("interpreter: @")
         << f.getSymName() << " does not end in func.return";
}

} // namespace

FailureOr<std::vector<Tensor>> interpret(func::FuncOp f,
                                         ArrayRef<Tensor> args,
                                         std::optional<uint64_t> randomRoundingSeed,
                                         bool randomlyRoundF32, int productErrorSide) {
  if (productErrorSide < -1 || productErrorSide > 1)
    return f.emitError("interpreter: productErrorSide must be -1, 0 or +1, not ")
           << productErrorSide;
  return Interpreter(randomRoundingSeed, randomlyRoundF32, productErrorSide).run(f, args);
}

} // namespace tcc::interp
