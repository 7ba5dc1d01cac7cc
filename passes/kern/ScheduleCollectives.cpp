//===- ScheduleCollectives.cpp - exchanges as soon as their input is final -===//
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
// Then consecutive all-reduces become buckets (kern.all_reduce_bucket, up
// to bucket-bytes, 25 MiB like DDP's), issued where the last member was.
//
// ZeRO-1's kern.reduce_scatter moves the same way (its fresh output buffer
// with it), and each kern.all_gather to right after its parameter's shard
// is updated, overlapping the other parameters' updates.
//
// ZeRO-3's gathers (tg-shard-parameters: a parameter's shard gathered into a
// fresh buffer right before the op that reads it) are prefetched: gather i
// moves to right after the reader of the earliest gather j < i such that
// the whole-parameter bytes of gathers j+1..i stay within
// gather-ahead-bytes. After the reader, not before it: the step waits for
// the whole communication stream before a kernel that reads a gathered
// buffer, so a gather queued before that wait would be waited for at once.
// Gathers moved behind one reader are adjacent: the NCCL back end issues
// them as one group.
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
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <functional>

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

bool touches(Operation *op, ArrayRef<Value> roots) {
  for (Value operand : op->getOperands())
    if (isa<MemRefType>(operand.getType()) && llvm::is_contained(roots, rootBuffer(operand)))
      return true;
  return false;
}

bool isCollective(Operation *op) {
  return isa<tcc::kern::AllReduceOp, tcc::kern::ReduceScatterOp, tcc::kern::AllGatherOp,
             tcc::kern::AllReduceBucketOp>(op);
}

// Ops that launch nothing: they do not count as overlapped work.
bool launchesNothing(Operation *op) {
  return isa<tcc::kern::AllocOp, tcc::kern::ReshapeOp, tcc::kern::ConstantOp>(op) ||
         isCollective(op);
}

std::string describe(Operation *op) {
  std::string node = tcc::nodeName(op->getLoc());
  return node.empty() ? op->getName().getStringRef().str() : node;
}

// The kern.alloc behind a collective's output buffer when nothing before the
// collective uses it: it moves along with the collective (allocs are pure).
tcc::kern::AllocOp freshOutput(Operation *r) {
  Value out;
  if (auto rs = dyn_cast<tcc::kern::ReduceScatterOp>(r))
    out = rs.getOut();
  else if (auto ag = dyn_cast<tcc::kern::AllGatherOp>(r))
    out = ag.getOut();
  auto alloc = out ? rootBuffer(out).getDefiningOp<tcc::kern::AllocOp>() : nullptr;
  if (!alloc)
    return nullptr;
  std::function<bool(Value)> usedBefore = [&](Value v) {
    for (Operation *user : v.getUsers()) {
      if (auto reshape = dyn_cast<tcc::kern::ReshapeOp>(user)) {
        if (usedBefore(reshape.getResult()))
          return true;
      } else if (user != r && user->isBeforeInBlock(r)) {
        return true;
      }
    }
    return false;
  };
  return usedBefore(alloc.getResult()) ? nullptr : alloc;
}

struct KernScheduleCollectivesPass
    : tcc::impl::KernScheduleCollectivesBase<KernScheduleCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) { schedule(f); });
  }

  void schedule(func::FuncOp f) {
    if (f.getBody().empty())
      return;
    SmallVector<Operation *> collectives;
    for (Operation &op : f.getBody().front())
      if (isCollective(&op) && !isa<tcc::kern::AllReduceBucketOp>(&op))
        collectives.push_back(&op);
    if (collectives.empty())
      return;
    SmallVector<Attribute> decisions;
    Builder b(f.getContext());
    SmallVector<Prefetch> prefetches;
    for (Operation *r : collectives) {
      tcc::kern::AllocOp fresh = freshOutput(r);
      if (isa<tcc::kern::AllGatherOp>(r) && fresh) {
        // ZeRO-3: scheduled below, by its reader.
        if (Operation *reader = firstReader(r, fresh))
          prefetches.push_back({cast<tcc::kern::AllGatherOp>(r), fresh, reader});
        else
          decisions.push_back(b.getStringAttr(describe(r) + " (kern.all_gather): stays (nothing reads it)"));
        continue;
      }
      SmallVector<Value> roots;
      for (Value operand : r->getOperands())
        if (isa<MemRefType>(operand.getType()) &&
            (!fresh || rootBuffer(operand) != fresh.getResult()))
          roots.push_back(rootBuffer(operand));
      Operation *producer = nullptr;
      // Views (kern.reshape) touch no memory: the collective's own view of
      // its buffer is not what made the gradient.
      for (Operation *p = r->getPrevNode(); p && !producer; p = p->getPrevNode())
        if ((touches(p, roots) && !isa<tcc::kern::ReshapeOp>(p)) ||
            llvm::any_of(roots, [&](Value root) { return p == root.getDefiningOp(); }))
          producer = p;
      std::string node = describe(r);
      if (!isa<tcc::kern::AllReduceOp>(r))
        node += " (" + r->getName().getStringRef().str() + ")";
      int64_t ahead = 0;
      for (Operation *p = producer ? producer->getNextNode() : nullptr; p && p != r;
           p = p->getNextNode())
        if (!launchesNothing(p))
          ++ahead;
      if (!producer || ahead == 0) {
        decisions.push_back(b.getStringAttr(
            node + ": stays (no kernel between its buffer's last writer and it)"));
        continue;
      }
      // The buffer values the collective names may be views made after the
      // producer, and its output a fresh alloc: they move along (pure ops).
      SetVector<Operation *> defs;
      for (Value operand : r->getOperands())
        for (Value v = operand; Operation *def = v.getDefiningOp();) {
          if (def->isBeforeInBlock(producer) || def == producer)
            break;
          defs.insert(def);
          auto reshape = dyn_cast<tcc::kern::ReshapeOp>(def);
          if (!reshape)
            break;
          v = reshape.getInput();
        }
      SmallVector<Operation *> ordered(defs.begin(), defs.end());
      llvm::sort(ordered, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
      Operation *anchor = producer;
      for (Operation *def : ordered) {
        def->moveAfter(anchor);
        anchor = def;
      }
      r->moveAfter(anchor);
      std::string decision =
          llvm::formatv("{0}: after {1}, ahead of {2} kernels", node, describe(producer), ahead);
      r->setAttr(kDecisionsAttr, b.getStringAttr(decision));
      decisions.push_back(b.getStringAttr(decision));
    }
    prefetch(prefetches, b, decisions);
    makeBuckets(f, decisions);
    f->setAttr(kDecisionsAttr, b.getArrayAttr(decisions));
  }

  // A ZeRO-3 gather, its fresh output and the first op that reads it.
  struct Prefetch {
    tcc::kern::AllGatherOp gather;
    tcc::kern::AllocOp out;
    Operation *reader;
  };

  // A kernel (not a view, alloc or exchange) that touches `root`.
  static bool kernelTouches(Operation *p, Value root) {
    return !isa<tcc::kern::ReshapeOp, tcc::kern::AllocOp>(p) && !isCollective(p) &&
           touches(p, {root});
  }

  static Operation *firstReader(Operation *r, tcc::kern::AllocOp out) {
    for (Operation *p = r->getNextNode(); p; p = p->getNextNode())
      if (kernelTouches(p, out.getResult()))
        return p;
    return nullptr;
  }

  void prefetch(MutableArrayRef<Prefetch> gathers, Builder &b,
                SmallVector<Attribute> &decisions) {
    auto bytesOf = [](Prefetch &g) {
      auto type = cast<MemRefType>(g.out.getType());
      return type.getNumElements() * tcc::kern::elementBytes(type.getElementType());
    };
    size_t j = 0;    // the earliest gather whose reader gather i may follow
    int64_t window = 0; // bytes of gathers j+1 .. i
    // Where the next gather behind gather k's reader goes: after the reader,
    // then after the last gather already moved there.
    SmallVector<Operation *> tail;
    for (const Prefetch &g : gathers)
      tail.push_back(g.reader);
    for (size_t i = 0; i < gathers.size(); ++i) {
      Prefetch &g = gathers[i];
      if (i > 0) // the window holds gathers j+1 .. i
        window += bytesOf(g);
      while (j < i && window > gatherAheadBytes) {
        ++j;
        window -= bytesOf(gathers[j]);
      }
      std::string node = describe(g.gather) + " (kern.all_gather)";
      Operation *anchor = j < i ? tail[j] : nullptr;
      // Not above the last kernel before it that touches its input (the
      // shard, or its cast), nor behind an earlier gather's reader that
      // comes after this gather's place.
      Value input = rootBuffer(g.gather.getInput());
      Operation *writer = nullptr;
      for (Operation *p = g.gather->getPrevNode(); p && !writer; p = p->getPrevNode())
        if (kernelTouches(p, input))
          writer = p;
      if (!writer)
        writer = input.getDefiningOp();
      if (anchor && (!gathers[j].reader->isBeforeInBlock(g.gather) ||
                     (writer && writer->getBlock() == anchor->getBlock() &&
                      anchor->isBeforeInBlock(writer)))) {
        anchor = nullptr;
      }
      if (!anchor) {
        decisions.push_back(b.getStringAttr(node + ": right before its reader " + describe(g.reader)));
        continue;
      }
      int64_t ahead = 0;
      for (Operation *p = anchor->getNextNode(); p && p != g.gather.getOperation(); p = p->getNextNode())
        if (!launchesNothing(p))
          ++ahead;
      // Its views of the shard move along (pure); the output's alloc first.
      SmallVector<Operation *> views;
      for (Value v = g.gather.getInput(); auto reshape = v.getDefiningOp<tcc::kern::ReshapeOp>();
           v = reshape.getInput())
        if (!reshape->isBeforeInBlock(anchor))
          views.push_back(reshape);
      Operation *at = anchor;
      for (Operation *view : llvm::reverse(views)) {
        view->moveAfter(at);
        at = view;
      }
      g.out->moveAfter(at);
      g.gather->moveAfter(g.out);
      tail[j] = g.gather;
      std::string decision =
          llvm::formatv("{0}: prefetched after {1}, ahead of {2} kernels (its reader: {3})", node,
                        describe(gathers[j].reader), ahead, describe(g.reader));
      g.gather->setAttr(kDecisionsAttr, b.getStringAttr(decision));
      decisions.push_back(b.getStringAttr(decision));
    }
  }

  // Consecutive kern.all_reduce ops of one element type and reduction, in
  // program order, become one kern.all_reduce_bucket at the place of the
  // last, until the bucket holds bucketBytes: one NCCL group instead of a
  // call per gradient (at one GPU rank, 148 calls cost GPT-2 ~3%). A bucket
  // closes early before an op that touches one of its buffers (which would
  // otherwise read it before the reduction). Scalars (the loss) stay alone:
  // the loss is read right after the backward.
  void makeBuckets(func::FuncOp f, SmallVector<Attribute> &decisions) {
    Builder b(f.getContext());
    SmallVector<tcc::kern::AllReduceOp> members;
    SmallVector<Value> roots;
    int64_t bytes = 0, buckets = 0;
    auto close = [&](StringRef why) {
      if (members.size() >= 2) {
        OpBuilder at(members.back());
        SmallVector<Value> buffers;
        for (tcc::kern::AllReduceOp m : members)
          buffers.push_back(m.getBuffer());
        std::string decision = llvm::formatv(
            "bucket {0} (kern.all_reduce_bucket): {1} all-reduces, {2} bytes, {3} .. {4}, "
            "issued where {4}'s was; closed: {5}",
            ++buckets, members.size(), bytes, describe(members.front()), describe(members.back()),
            why);
        auto bucket = tcc::kern::AllReduceBucketOp::create(
            at, members.back().getLoc(), buffers, members.front().getReductionAttr());
        bucket->setAttr(kDecisionsAttr, b.getStringAttr(decision));
        decisions.push_back(b.getStringAttr(decision));
        for (tcc::kern::AllReduceOp m : members)
          m.erase();
      }
      members.clear();
      roots.clear();
      bytes = 0;
    };
    for (Operation &op : llvm::make_early_inc_range(f.getBody().front())) {
      auto r = dyn_cast<tcc::kern::AllReduceOp>(&op);
      if (!r) {
        if (!members.empty() && !isa<tcc::kern::ReshapeOp, tcc::kern::AllocOp>(&op) &&
            touches(&op, roots))
          close("then " + describe(&op) + " touches one of its buffers");
        continue;
      }
      auto type = cast<MemRefType>(r.getBuffer().getType());
      if (type.getNumElements() == 1)
        continue; // a scalar (the loss, a norm) stays alone, issued as soon as it is final
      if (!members.empty() &&
          (r.getReduction() != members.front().getReduction() ||
           type.getElementType() !=
               cast<MemRefType>(members.front().getBuffer().getType()).getElementType()))
        close("the next all-reduce has another element type or reduction");
      members.push_back(r);
      roots.push_back(rootBuffer(r.getBuffer()));
      bytes += type.getNumElements() * tcc::kern::elementBytes(type.getElementType());
      if (bytes >= bucketBytes)
        close(llvm::formatv("{0} bytes reached (bucket-bytes {1})", bytes, bucketBytes).str());
    }
    close("the last all-reduce");
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
