//===- FuseCrossEntropyGrad.cpp - loss and gradient of xent in one pass ---===//
//
// A train step computes the softmax cross-entropy twice over the logits: the
// forward kern.softmax_cross_entropy (the loss per row) and, later, its
// kern.softmax_cross_entropy_grad. For a language model the logits are the
// largest tensor of the step (GPT-2 124M, B=16: 16384 x 50304), and each
// pass reads all of them. When the gradient's upstream `grad` does not
// depend on the loss — a mean or sum loss, whose gradient is a constant —
// the two become one kern.softmax_cross_entropy_with_grad at the gradient's
// position: one logsumexp per row gives both the loss and the gradient.
//
// The forward's position moves down to the gradient's, so the ops between
// them that read the loss (the mean over rows, the train step's loss
// output) move after the fused op with everything that depends on them.
// Legal when:
//   - both ops read the same logits and labels, and nothing between them
//     writes either;
//   - `grad` does not depend on the loss: no op that (transitively) reads
//     the loss writes a buffer the gradient reads;
//   - the ops that move write nothing another op between the two reads or
//     writes (they run later, after the fused op).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace tcc {
#define GEN_PASS_DEF_KERNFUSECROSSENTROPYGRAD
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

bool readsRoot(Operation *op, const llvm::SmallPtrSetImpl<Value> &roots) {
  for (Value v : op->getOperands())
    if (isa<MemRefType>(v.getType()) && roots.contains(kern::rootBuffer(v)) &&
        !kern::writesBuffer(op, v))
      return true;
  return false;
}

bool touchesRoot(Operation *op, const llvm::SmallPtrSetImpl<Value> &roots) {
  for (Value v : op->getOperands())
    if (isa<MemRefType>(v.getType()) && roots.contains(kern::rootBuffer(v)))
      return true;
  return false;
}

// The forward op computing the loss for the same logits and labels as `g`,
// or null.
kern::SoftmaxCrossEntropyOp forwardOf(kern::SoftmaxCrossEntropyGradOp g) {
  Value logits = kern::rootBuffer(g.getLogits());
  Value labels = kern::rootBuffer(g.getLabels());
  for (Operation *op = g->getPrevNode(); op; op = op->getPrevNode()) {
    auto f = dyn_cast<kern::SoftmaxCrossEntropyOp>(op);
    if (f && kern::rootBuffer(f.getLogits()) == logits &&
        kern::rootBuffer(f.getLabels()) == labels &&
        f.getLogits().getType() == g.getLogits().getType())
      return f;
  }
  return {};
}

// Whether f and g can become one op at g's position; fills `moved` with the
// ops between them that depend on the loss (in order).
bool canFuse(kern::SoftmaxCrossEntropyOp f, kern::SoftmaxCrossEntropyGradOp g,
             SmallVectorImpl<Operation *> &moved) {
  llvm::SmallPtrSet<Value, 4> inputs{kern::rootBuffer(f.getLogits()),
                                     kern::rootBuffer(f.getLabels())};
  // Buffers holding values that depend on the loss: the loss and what the
  // moved ops write.
  llvm::SmallPtrSet<Value, 8> dependent{kern::rootBuffer(f.getLoss())};
  SmallVector<Operation *> stay;
  for (Operation *op = f->getNextNode(); op != g.getOperation();
       op = op->getNextNode()) {
    for (Value v : op->getOperands())
      if (isa<MemRefType>(v.getType()) && inputs.contains(kern::rootBuffer(v)) &&
          kern::writesBuffer(op, v))
        return false; // the logits or labels change in between
    if (isa<kern::AllocOp, kern::ReshapeOp>(op))
      continue; // views and allocations: no data, stay where they are
    if (readsRoot(op, dependent)) {
      moved.push_back(op);
      for (Value v : op->getOperands())
        if (isa<MemRefType>(v.getType()) && kern::writesBuffer(op, v))
          dependent.insert(kern::rootBuffer(v));
    } else {
      stay.push_back(op);
    }
  }
  // What stays (and g itself) must not touch what the moved ops write, nor
  // read the loss (it would then read it before it exists).
  for (Operation *op : stay)
    if (touchesRoot(op, dependent))
      return false;
  return !touchesRoot(g, dependent);
}

struct KernFuseCrossEntropyGradPass
    : tcc::impl::KernFuseCrossEntropyGradBase<KernFuseCrossEntropyGradPass> {
  void runOnOperation() override {
    for (func::FuncOp fn : getOperation().getOps<func::FuncOp>()) {
      SmallVector<kern::SoftmaxCrossEntropyGradOp> grads(
          fn.getOps<kern::SoftmaxCrossEntropyGradOp>());
      for (kern::SoftmaxCrossEntropyGradOp g : grads) {
        kern::SoftmaxCrossEntropyOp f = forwardOf(g);
        SmallVector<Operation *> moved;
        if (!f || !canFuse(f, g, moved))
          continue;
        OpBuilder b(g);
        Location loc = b.getFusedLoc({f.getLoc(), g.getLoc()});
        auto fused = kern::SoftmaxCrossEntropyWithGradOp::create(
            b, loc, g.getLogits(), g.getLabels(), g.getGrad(), f.getLoss(),
            g.getOut());
        // The loss buffer's allocation must come before its new writer.
        if (auto alloc = f.getLoss().getDefiningOp<kern::AllocOp>())
          if (fused->isBeforeInBlock(alloc))
            alloc->moveBefore(fused);
        Operation *after = fused;
        for (Operation *op : moved) {
          op->moveAfter(after);
          after = op;
        }
        f.erase();
        g.erase();
      }
    }
  }
};

} // namespace
