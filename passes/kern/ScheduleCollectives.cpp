//===- ScheduleCollectives.cpp - all-reduces as soon as a gradient is final -===//
//
// tg-all-reduce-gradients leaves every kern.all_reduce after the whole
// backward (where the tg graph's optimizer reads the gradients), so on a
// GPU the reductions would start only when the last gradient is done and
// nothing would be left to overlap them. This pass moves each
// kern.all_reduce up to right after the last op before it that touches its
// buffer (following kern.reshape aliases): the moment the gradient is
// final. The CUDA code queues it on the runtime's communication stream
// there, so it runs while the rest of the backward computes; the step
// stream waits only before the first kernel that touches a reduced buffer
// (the optimizer). On the cpu the reduction is synchronous: the order
// changes, the results do not.
//
// Each moved all-reduce carries kern.schedule_collectives = "<node>: after
// <node of the producer>, ahead of K kernels"; @train_step's attribute of
// the same name lists them all for the report --dump-dir writes. Runs after
// kern-fuse-horizontal, before kern-plan-memory (temporaries are still
// distinct kern.allocs).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "passes/common/DecisionReport.h"
#include "passes/common/NodeNames.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {
#define GEN_PASS_DEF_KERNSCHEDULECOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kDecisionsAttr = "kern.schedule_collectives";

// The buffer a value views (through kern.reshape).
Value rootBuffer(Value v) {
  while (auto reshape = v.getDefiningOp<tcc::kern::ReshapeOp>())
    v = reshape.getInput();
  return v;
}

bool touches(Operation *op, Value root) {
  for (Value operand : op->getOperands())
    if (isa<MemRefType>(operand.getType()) && rootBuffer(operand) == root)
      return true;
  return false;
}

// Ops that launch nothing: they do not count as overlapped work.
bool launchesNothing(Operation *op) {
  return isa<tcc::kern::AllocOp, tcc::kern::ReshapeOp, tcc::kern::ConstantOp,
             tcc::kern::AllReduceOp>(op);
}

std::string describe(Operation *op) {
  std::string node = tcc::nodeName(op->getLoc());
  return node.empty() ? op->getName().getStringRef().str() : node;
}

struct KernScheduleCollectivesPass
    : tcc::impl::KernScheduleCollectivesBase<KernScheduleCollectivesPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) { schedule(f); });
  }

  void schedule(func::FuncOp f) {
    if (f.getBody().empty())
      return;
    SmallVector<tcc::kern::AllReduceOp> reductions(f.getBody().front().getOps<tcc::kern::AllReduceOp>());
    if (reductions.empty())
      return;
    SmallVector<Attribute> decisions;
    Builder b(f.getContext());
    for (tcc::kern::AllReduceOp r : reductions) {
      Value root = rootBuffer(r.getBuffer());
      Operation *producer = nullptr;
      // Views (kern.reshape) touch no memory: the all-reduce's own view
      // of its buffer is not what made the gradient.
      for (Operation *p = r->getPrevNode(); p && !producer; p = p->getPrevNode())
        if ((touches(p, root) && !isa<tcc::kern::ReshapeOp>(p)) || p == root.getDefiningOp())
          producer = p;
      std::string node = describe(r);
      int64_t ahead = 0;
      for (Operation *p = producer ? producer->getNextNode() : nullptr; p && p != r.getOperation();
           p = p->getNextNode())
        if (!launchesNothing(p))
          ++ahead;
      if (!producer || ahead == 0) {
        decisions.push_back(
            b.getStringAttr(node + ": stays (no kernel between its buffer's last writer and it)"));
        continue;
      }
      // The buffer value the all-reduce names may be a view made after the
      // producer: it moves along (views are pure).
      SmallVector<Operation *> views;
      for (Value v = r.getBuffer(); Operation *def = v.getDefiningOp();) {
        if (def->isBeforeInBlock(producer) || def == producer)
          break;
        views.push_back(def);
        auto reshape = dyn_cast<tcc::kern::ReshapeOp>(def);
        if (!reshape)
          break;
        v = reshape.getInput();
      }
      Operation *anchor = producer;
      for (Operation *view : llvm::reverse(views)) {
        view->moveAfter(anchor);
        anchor = view;
      }
      r->moveAfter(anchor);
      std::string decision =
          llvm::formatv("{0}: after {1}, ahead of {2} kernels", node, describe(producer), ahead);
      r->setAttr(kDecisionsAttr, b.getStringAttr(decision));
      decisions.push_back(b.getStringAttr(decision));
    }
    f->setAttr(kDecisionsAttr, b.getArrayAttr(decisions));
  }
};

} // namespace

void tcc::writeScheduleCollectivesReport(ModuleOp module, llvm::raw_ostream &os) {
  writeFunctionDecisions(
      module, kDecisionsAttr,
      "# kern-schedule-collectives: each all-reduce of a data-parallel step moved to right\n"
      "# after its buffer's last writer, and how many kernels it is now issued ahead of\n"
      "# (on cuda they run while it reduces on the communication stream).\n",
      os);
}
