//===- LowerTgToKern.cpp - tg on tensors -> kern on buffers ---------------===//
//
// Each tg function is rewritten into a function on memrefs:
//   arguments keep their order and attributes (params, inputs, hypers);
//   results become trailing output-buffer arguments carrying the result's
//   attributes (tg.loss, tg.output, tg.grad_of), except updated parameters
//   (tg.updates_param), which are written in place into the parameter.
// Every intermediate tensor gets a kern.alloc placed right before its
// producer; kern-plan-memory later assigns it a workspace offset.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/tg/TgModelAttrs.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace tcc {
#define GEN_PASS_DEF_TGLOWERTOKERN
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

MemRefType bufferType(Type tensorType) {
  auto t = cast<RankedTensorType>(tensorType);
  return MemRefType::get(t.getShape(), t.getElementType());
}

class FunctionLowering {
public:
  FunctionLowering(func::FuncOp oldFunc) : old_(oldFunc), b_(oldFunc) {}

  LogicalResult run() {
    Block &oldBody = old_.getBody().front();
    auto oldRet = cast<func::ReturnOp>(oldBody.getTerminator());

    // Signature: the old arguments, then one buffer per non-in-place result.
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    for (BlockArgument a : oldBody.getArguments()) {
      argTypes.push_back(bufferType(a.getType()));
      argAttrs.push_back(old_.getArgAttrDict(a.getArgNumber()));
    }
    SmallVector<int> outArgOfResult(old_.getNumResults(), -1);
    for (unsigned i = 0; i < old_.getNumResults(); ++i) {
      if (old_.getResultAttr(i, tg::kUpdatesParamAttr))
        continue;
      outArgOfResult[i] = argTypes.size();
      argTypes.push_back(bufferType(old_.getResultTypes()[i]));
      argAttrs.push_back(old_.getResultAttrDict(i));
    }
    auto fn = func::FuncOp::create(old_.getLoc(), old_.getName(),
                                   b_.getFunctionType(argTypes, {}));
    fn.setAllArgAttrs(argAttrs);
    Block *body = fn.addEntryBlock();
    b_.setInsertionPointToStart(body);
    for (BlockArgument a : oldBody.getArguments())
      buffers_[a] = body->getArgument(a.getArgNumber());

    for (Operation &op : oldBody.without_terminator())
      if (failed(lower(&op)))
        return failure();

    for (auto [i, v] : llvm::enumerate(oldRet.getOperands())) {
      if (outArgOfResult[i] >= 0) {
        kern::ElementwiseOp::create(b_, oldRet.getLoc(),
                                    ValueRange{buffers_.lookup(v)},
                                    body->getArgument(outArgOfResult[i]),
                                    kern::ElementwiseKind::copy);
        continue;
      }
      // Updated parameters must already live in their parameter's buffer.
      int64_t p = old_.getResultAttrOfType<IntegerAttr>(i, tg::kUpdatesParamAttr)
                      .getInt();
      Value dest = paramArgument(body, p);
      if (!dest || buffers_.lookup(v) != dest)
        return old_.emitError("tg-lower-to-kern: updated parameter ")
               << p << " is not updated in place";
    }
    func::ReturnOp::create(b_, oldRet.getLoc());
    old_->getBlock()->getOperations().insert(Block::iterator(old_), fn);
    old_.erase();
    return success();
  }

private:
  Value paramArgument(Block *body, int64_t index) {
    int64_t seen = 0;
    for (BlockArgument a : body->getArguments())
      if (old_.getArgAttr(a.getArgNumber(), tg::kParamAttr) && seen++ == index)
        return a;
    return Value();
  }

  Value alloc(Location loc, Value tensor) {
    return kern::AllocOp::create(b_, loc, bufferType(tensor.getType()));
  }

  Value buf(Value tensor) { return buffers_.lookup(tensor); }

  void elementwise(Operation *op, kern::ElementwiseKind kind) {
    SmallVector<Value> ins;
    for (Value v : op->getOperands())
      ins.push_back(buf(v));
    Value out = alloc(op->getLoc(), op->getResult(0));
    kern::ElementwiseOp::create(b_, op->getLoc(), ins, out, kind);
    buffers_[op->getResult(0)] = out;
  }

  template <typename ReduceOp> void reduce(ReduceOp op, bool mean) {
    Value out = alloc(op.getLoc(), op.getResult());
    kern::ReduceOp::create(b_, op.getLoc(), buf(op.getInput()), out,
                           op.getAxesAttr(), b_.getBoolAttr(mean));
    buffers_[op.getResult()] = out;
  }

  LogicalResult lower(Operation *op) {
    Location loc = op->getLoc();
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](tg::ConstantOp c) -> LogicalResult {
          auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
          if (!dense || !dense.isSplat() ||
              !isa<FloatType>(dense.getElementType()))
            return c.emitError("tg-lower-to-kern: only float splat constants "
                               "are supported so far");
          Value out = alloc(loc, c.getResult());
          kern::FillOp::create(
              b_, loc, out,
              b_.getF64FloatAttr(
                  dense.getSplatValue<APFloat>().convertToDouble()));
          buffers_[c.getResult()] = out;
          return success();
        })
        .Case([&](tg::MatmulOp m) {
          Value out = alloc(loc, m.getResult());
          kern::GemmOp::create(b_, loc, buf(m.getLhs()), buf(m.getRhs()), out,
                               m.getTransposeLhsAttr(), m.getTransposeRhsAttr(),
                               b_.getF64FloatAttr(1.0), b_.getF64FloatAttr(0.0));
          buffers_[m.getResult()] = out;
          return success();
        })
        .Case([&](tg::AddOp) {
          elementwise(op, kern::ElementwiseKind::add);
          return success();
        })
        .Case([&](tg::MulOp) {
          elementwise(op, kern::ElementwiseKind::mul);
          return success();
        })
        .Case([&](tg::ReluOp) {
          elementwise(op, kern::ElementwiseKind::relu);
          return success();
        })
        .Case([&](tg::ReluGradOp) {
          elementwise(op, kern::ElementwiseKind::relu_grad);
          return success();
        })
        .Case([&](tg::BroadcastToOp) {
          elementwise(op, kern::ElementwiseKind::copy);
          return success();
        })
        .Case([&](tg::SoftmaxCrossEntropyOp x) {
          Value out = alloc(loc, x.getResult());
          kern::SoftmaxCrossEntropyOp::create(b_, loc, buf(x.getLogits()),
                                              buf(x.getLabels()), out);
          buffers_[x.getResult()] = out;
          return success();
        })
        .Case([&](tg::SoftmaxCrossEntropyGradOp x) {
          Value out = alloc(loc, x.getResult());
          kern::SoftmaxCrossEntropyGradOp::create(
              b_, loc, buf(x.getLogits()), buf(x.getLabels()), buf(x.getGrad()),
              out);
          buffers_[x.getResult()] = out;
          return success();
        })
        .Case([&](tg::ReduceSumOp r) {
          reduce(r, /*mean=*/false);
          return success();
        })
        .Case([&](tg::ReduceMeanOp r) {
          reduce(r, /*mean=*/true);
          return success();
        })
        .Case([&](tg::ReshapeOp r) {
          buffers_[r.getResult()] = kern::ReshapeOp::create(
              b_, loc, bufferType(r.getType()), buf(r.getInput()));
          return success();
        })
        .Case([&](tg::SgdUpdateOp u) -> LogicalResult {
          // In place: legal only if nothing reads the old parameter later.
          auto param = dyn_cast<BlockArgument>(u.getParam());
          if (!param)
            return u.emitError("tg-lower-to-kern: sgd_update of a value that "
                               "is not a parameter argument");
          for (Operation *user : param.getUsers())
            if (user != op && user->getBlock() == op->getBlock() &&
                op->isBeforeInBlock(user) && !isa<func::ReturnOp>(user))
              return u.emitError("tg-lower-to-kern: parameter is read after "
                                 "its update; cannot update in place");
          kern::SgdUpdateOp::create(b_, loc, buf(param), buf(u.getGrad()),
                                    buf(u.getLearningRate()));
          buffers_[u.getResult()] = buf(param);
          return success();
        })
        .Default([&](Operation *other) {
          return other->emitError("tg-lower-to-kern: no lowering for ")
                 << other->getName();
        });
  }

  func::FuncOp old_;
  OpBuilder b_;
  llvm::DenseMap<Value, Value> buffers_;
};

struct TgLowerToKernPass : tcc::impl::TgLowerToKernBase<TgLowerToKernPass> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> funcs(getOperation().getOps<func::FuncOp>());
    for (func::FuncOp f : funcs) {
      bool onTensors = llvm::any_of(f.getArgumentTypes(), [](Type t) {
        return isa<RankedTensorType>(t);
      });
      if (onTensors && failed(FunctionLowering(f).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
