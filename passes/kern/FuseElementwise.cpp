//===- FuseElementwise.cpp - merge producer/consumer elementwise kernels ---===//
//
// A kern.elementwise P whose output X is read only by one later
// kern.elementwise C, at C's own shape (no broadcast of X), is merged into
// C: the fused kernel reads P's inputs and C's other inputs and computes X
// in a register, so X is never written to memory. Chains (gelu, the AdamW
// update) become one loop.
//
// Legal when, between P and C, nothing writes a buffer P reads (P's reads
// move to C's position) and nothing touches P's outputs; P's outputs that
// are also read after C stay outputs of the fused kernel. A fused kernel
// may write a buffer it reads only at the position it writes it (same
// shape), as kern.elementwise requires.
//
// Recompute rather than store: a kernel P whose one output X is read by
// several later kernels (at their own shape), and which reads no more
// full-size bytes per element than X has (a widening cast, (x - mean) *
// rstd from such a cast), is first copied in front of each reader, so
// each copy fuses into its reader and X is never written. Without it, a
// batch norm's f32 view of its bf16 input was stored by the forward kernel
// (4 bytes per element, kept until the backward) for the backward kernel
// to read, instead of both reading the 2-byte input.
//
// Siblings: two kernels of one shape that read a buffer in common, the
// later one right after the first (only kern.allocs and views between),
// neither reading nor writing what the other writes, become one kernel
// with both outputs at the later one's position: the common inputs are
// read once, and an expression both bodies compute is computed once (the
// code generators print equal expressions once). Autodiff writes SwiGLU's
// backward as two such kernels (d_up = g * silu(a), d_gate = g * b *
// silu'(a), both reading g and a): 5 tensors read and written instead of
// 7. The fused kernel says so in `kern.fused_siblings`; a later kernel
// that shares an input with the one before but cannot join it says why
// in the same attribute.
//
// Runs before kern-plan-memory: temporaries are still distinct kern.allocs,
// so buffers alias only through kern.reshape views of one root.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "passes/common/DecisionReport.h"
#include "passes/common/NodeNames.h"
#include "passes/kern/ElementwiseShapes.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {
#define GEN_PASS_DEF_KERNFUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

constexpr llvm::StringLiteral kShapeDecisionsAttr = "kern.elementwise_shape_decisions";

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<MemRefType>(v.getType()).getShape();
}

// The elementwise kernel that is the only writer of the temporary `x`, or
// null. `x` must not be viewed (kern.reshape) by anyone.
kern::ElementwiseOp soleProducer(Value x) {
  if (!x.getDefiningOp<kern::AllocOp>())
    return {};
  kern::ElementwiseOp producer;
  for (Operation *user : x.getUsers()) {
    if (isa<kern::ReshapeOp>(user))
      return {};
    if (kern::writesBuffer(user, x)) {
      if (producer)
        return {};
      producer = dyn_cast<kern::ElementwiseOp>(user);
      if (!producer)
        return {};
    }
  }
  return producer;
}

// Whether nothing between `producer` and `until` writes a buffer the
// producer reads: its reads may move to `until`'s position.
bool inputsUnchangedUntil(kern::ElementwiseOp producer, Operation *until) {
  llvm::SmallPtrSet<Value, 8> readRoots;
  for (Value in : producer.getInputs())
    readRoots.insert(kern::rootBuffer(in));
  for (Operation *op = producer->getNextNode(); op != until; op = op->getNextNode())
    for (Value v : op->getOperands())
      if (readRoots.contains(kern::rootBuffer(v)) && kern::writesBuffer(op, v))
        return false;
  return true;
}

// Whether a kernel of `shape` writing `writes` reads one of them (through
// `reads`) at another position than it writes it: a read of another shape.
bool readElsewhere(ValueRange writes, ValueRange reads, ArrayRef<int64_t> shape) {
  for (Value w : writes)
    for (Value in : reads)
      if (kern::rootBuffer(in) == kern::rootBuffer(w) && shapeOf(in) != shape)
        return true;
  return false;
}

// Whether `producer` can be merged into `consumer`; fills, for each output
// of the producer, whether the fused kernel must still write it.
bool canFuse(kern::ElementwiseOp producer, kern::ElementwiseOp consumer,
             SmallVectorImpl<bool> &keepOutput) {
  // Equal shapes: the consumer reads the producer's outputs at its own
  // position, never broadcast.
  if (producer->getBlock() != consumer->getBlock() ||
      !producer->isBeforeInBlock(consumer) ||
      producer.getShape() != consumer.getShape())
    return false;
  keepOutput.clear();
  for (Value out : producer.getOutputs()) {
    if (!out.getDefiningOp<kern::AllocOp>())
      return false; // an argument or view: written where it is, not moved
    bool readByConsumer = false, readAfter = false;
    for (Operation *user : out.getUsers()) {
      if (user == producer.getOperation())
        continue;
      if (user == consumer.getOperation()) {
        readByConsumer = true;
        continue;
      }
      if (isa<kern::ReshapeOp>(user) || !consumer->isBeforeInBlock(user))
        return false; // touched between producer and consumer, or viewed
      readAfter = true;
    }
    keepOutput.push_back(readAfter || !readByConsumer);
  }
  // The producer's reads move to the consumer's position.
  if (!inputsUnchangedUntil(producer, consumer))
    return false;
  // A buffer the fused kernel writes may be read only at the same position.
  SmallVector<Value> writes(consumer.getOutputs());
  for (auto [out, keep] : llvm::zip(producer.getOutputs(), keepOutput))
    if (keep)
      writes.push_back(out);
  SmallVector<Value> reads(producer.getInputs());
  llvm::append_range(reads, consumer.getInputs());
  return !readElsewhere(writes, reads, consumer.getShape());
}

// Full-size bytes per element `p` reads from memory once the kernels that
// feed it alone are fused into it: an input whose sole producer is an
// elementwise kernel of p's shape that p alone reads counts as that
// kernel's reads (a bf16 cast of (x - mean) * rstd of an f32 cast of a
// bf16 x reads 2 bytes, not the 4 of the f32 value before the cast).
// `ops` accumulates the bodies' sizes.
int64_t chainReadBytes(kern::ElementwiseOp p, int64_t &ops, int depth = 0) {
  ops += static_cast<int64_t>(p.getBodyBlock().getOperations().size());
  int64_t bytes = 0;
  for (Value in : p.getInputs()) {
    if (shapeOf(in) != p.getShape())
      continue; // broadcast vectors are free
    kern::ElementwiseOp q = depth < 8 ? soleProducer(in) : kern::ElementwiseOp();
    bool onlyP = q && q.getOutputs().size() == 1 && q.getShape() == p.getShape() &&
                 llvm::all_of(in.getUsers(), [&](Operation *u) {
                   return u == q.getOperation() || u == p.getOperation();
                 });
    bytes += onlyP ? chainReadBytes(q, ops, depth + 1) : kern::elementBytes(in.getType());
  }
  return bytes;
}

// Whether re-running `p` in front of a reader costs no more memory traffic
// than reading its output back: one output; full-size inputs (through the
// kernels only p reads, chainReadBytes) of at most the output's bytes per
// element; short bodies.
bool cheapToRecompute(kern::ElementwiseOp p) {
  if (p.getOutputs().size() != 1 || p.getBodyBlock().getOperations().size() > 9)
    return false;
  int64_t ops = 0;
  int64_t inBytes = chainReadBytes(p, ops);
  return ops <= 24 && inBytes <= kern::elementBytes(p.getOutputs()[0].getType());
}

// The later elementwise readers of `p`'s output (at p's shape), when it
// has two or more and nothing else touches it; empty otherwise.
SmallVector<kern::ElementwiseOp> readersToRecomputeFor(kern::ElementwiseOp p) {
  Value x = p.getOutputs()[0];
  if (!x.getDefiningOp<kern::AllocOp>() || !cheapToRecompute(p))
    return {};
  SmallVector<kern::ElementwiseOp> readers;
  for (Operation *user : x.getUsers()) {
    if (user == p.getOperation())
      continue;
    auto reader = dyn_cast<kern::ElementwiseOp>(user);
    if (!reader || reader->getBlock() != p->getBlock() || !p->isBeforeInBlock(reader) ||
        reader.getShape() != p.getShape() || kern::writesBuffer(reader, x))
      return {};
    if (!llvm::is_contained(readers, reader)) // (a reader may read x twice)
      readers.push_back(reader);
  }
  if (readers.size() < 2)
    return {};
  // Each copy must fuse (canFuse's last rule): a reader may not write a
  // buffer p reads at another shape.
  for (kern::ElementwiseOp r : readers)
    if (readElsewhere(r.getOutputs(), p.getInputs(), r.getShape()))
      return {};
  // p's inputs must hold the same values at every reader.
  Operation *last = readers.front();
  for (kern::ElementwiseOp r : readers)
    if (last->isBeforeInBlock(r))
      last = r;
  if (!inputsUnchangedUntil(p, last))
    return {};
  return readers;
}

// Copies each qualifying producer in front of its readers (above), until
// none is left; each copy writes a temporary of its own.
void recomputeForEachReader(func::FuncOp f) {
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<kern::ElementwiseOp> kernels(f.getOps<kern::ElementwiseOp>());
    for (kern::ElementwiseOp p : kernels) {
      SmallVector<kern::ElementwiseOp> readers = readersToRecomputeFor(p);
      if (readers.empty())
        continue;
      Value x = p.getOutputs()[0];
      for (kern::ElementwiseOp reader : readers) {
        OpBuilder b(reader);
        Value copy = kern::AllocOp::create(b, x.getLoc(), cast<MemRefType>(x.getType()));
        IRMapping map;
        map.map(x, copy);
        b.clone(*p.getOperation(), map);
        reader->replaceUsesOfWith(x, copy);
      }
      p.erase();
      if (x.use_empty())
        x.getDefiningOp()->erase();
      changed = true;
    }
  }
}

// Replaces `consumer` by one kernel computing both; returns it.
kern::ElementwiseOp fuse(kern::ElementwiseOp producer,
                         kern::ElementwiseOp consumer,
                         ArrayRef<bool> keepOutput) {
  llvm::SmallPtrSet<Value, 4> internal; // producer outputs only the consumer reads
  for (auto [out, keep] : llvm::zip(producer.getOutputs(), keepOutput))
    if (!keep)
      internal.insert(out);
  llvm::SetVector<Value> inputs;
  for (Value in : consumer.getInputs())
    if (!llvm::is_contained(producer.getOutputs(), in))
      inputs.insert(in);
  for (Value in : producer.getInputs())
    inputs.insert(in);
  SmallVector<Value> outputs(consumer.getOutputs());
  for (auto [out, keep] : llvm::zip(producer.getOutputs(), keepOutput))
    if (keep)
      outputs.push_back(out);

  OpBuilder b(consumer);
  Location loc = b.getFusedLoc({producer.getLoc(), consumer.getLoc()});
  // Block arguments of the inputs keep their buffers' locations.
  SmallVector<Location> inputLocs;
  for (Value in : inputs)
    inputLocs.push_back(in.getLoc());
  FailureOr<kern::ElementwiseOp> fused = kern::buildElementwise(
      b, loc, inputs.getArrayRef(), outputs,
      [&](OpBuilder &inner, ValueRange scalars, Value index,
          SmallVectorImpl<Value> &yielded) {
        llvm::DenseMap<Value, Value> argOf; // input buffer -> its scalar
        for (auto [in, arg] : llvm::zip(inputs, scalars))
          argOf[in] = arg;
        IRMapping map;
        // The producer's body first: its yielded scalars stand for its
        // outputs.
        for (auto [in, arg] : llvm::zip(producer.getInputs(),
                                        producer.getBodyBlock().getArguments()))
          map.map(arg, argOf.lookup(in));
        map.map(producer.getFlatIndex(), index);
        for (Operation &op : producer.getBodyBlock().without_terminator())
          inner.clone(op, map);
        auto producerYield =
            cast<kern::YieldOp>(producer.getBodyBlock().getTerminator());
        llvm::DenseMap<Value, Value> scalarOf; // producer output -> its scalar
        for (auto [out, v] :
             llvm::zip(producer.getOutputs(), producerYield.getValues()))
          scalarOf[out] = map.lookupOrDefault(v);
        // Then the consumer's body, reading the producer's scalars.
        IRMapping cmap;
        for (auto [in, arg] : llvm::zip(consumer.getInputs(),
                                        consumer.getBodyBlock().getArguments()))
          cmap.map(arg,
                   scalarOf.count(in) ? scalarOf.lookup(in) : argOf.lookup(in));
        cmap.map(consumer.getFlatIndex(), index);
        for (Operation &op : consumer.getBodyBlock().without_terminator())
          inner.clone(op, cmap);
        for (Value v :
             cast<kern::YieldOp>(consumer.getBodyBlock().getTerminator())
                 .getValues())
          yielded.push_back(cmap.lookupOrDefault(v));
        for (auto [out, keep] : llvm::zip(producer.getOutputs(), keepOutput))
          if (keep)
            yielded.push_back(scalarOf.lookup(out));
        return success();
      },
      inputLocs);

  consumer.erase();
  producer.erase();
  for (Value out : internal)
    if (out.use_empty())
      out.getDefiningOp()->erase();
  return *fused; // the body above cannot fail
}

// The kernel before `k` when only kern.allocs and kern.reshape views lie
// between them (nothing that reads or writes memory), else null.
kern::ElementwiseOp previousKernel(kern::ElementwiseOp k) {
  for (Operation *op = k->getPrevNode(); op; op = op->getPrevNode()) {
    if (auto e = dyn_cast<kern::ElementwiseOp>(op))
      return e;
    if (!isa<kern::AllocOp, kern::ReshapeOp>(op))
      return {};
  }
  return {};
}

// Whether `first` and `later` (siblings: the first right before the later,
// sharing an input) can be one kernel at `later`'s position; `why` says
// why not. Only allocs and views lie between them (previousKernel), and
// neither touches memory, so moving the first's reads and writes down to
// the later one's position reorders nothing but the two kernels.
bool canFuseSiblings(kern::ElementwiseOp first, kern::ElementwiseOp later, std::string &why) {
  if (first.getShape() != later.getShape()) {
    why = "another shape";
    return false;
  }
  llvm::SmallPtrSet<Value, 8> firstWrites, laterWrites;
  for (Value out : first.getOutputs())
    firstWrites.insert(kern::rootBuffer(out));
  for (Value out : later.getOutputs())
    laterWrites.insert(kern::rootBuffer(out));
  for (Value in : later.getInputs())
    if (firstWrites.contains(kern::rootBuffer(in))) {
      why = "it reads what the kernel before writes";
      return false;
    }
  for (Value w : laterWrites)
    if (firstWrites.contains(w)) {
      why = "both write one buffer";
      return false;
    }
  for (Value in : first.getInputs())
    if (laterWrites.contains(kern::rootBuffer(in))) {
      why = "it writes what the kernel before reads";
      return false;
    }
  SmallVector<Value> writes(later.getOutputs());
  llvm::append_range(writes, first.getOutputs());
  SmallVector<Value> reads(first.getInputs());
  llvm::append_range(reads, later.getInputs());
  if (readElsewhere(writes, reads, later.getShape())) {
    why = "a buffer written would be read at another position";
    return false;
  }
  return true;
}

// Merges each kernel into the sibling right before it (above).
void fuseSiblings(func::FuncOp f) {
  Builder b(f.getContext());
  SmallVector<kern::ElementwiseOp> kernels(f.getOps<kern::ElementwiseOp>());
  for (kern::ElementwiseOp later : kernels) {
    kern::ElementwiseOp first = previousKernel(later);
    if (!first)
      continue;
    int shared = 0;
    for (Value in : later.getInputs())
      if (llvm::is_contained(first.getInputs(), in) && shapeOf(in) == later.getShape())
        ++shared;
    if (shared == 0)
      continue; // nothing read twice: two launches cost no more traffic
    auto name = [](Operation *op) { return nodeName(op->getLoc()); };
    std::string why;
    if (!canFuseSiblings(first, later, why)) {
      later->setAttr("kern.fused_siblings",
                     b.getStringAttr("not fused with the kernel before (" + name(first) +
                                     "): " + why));
      continue;
    }
    std::string note = llvm::formatv("siblings fused: {0} + {1}, {2} input(s) read once",
                                     name(first), name(later), shared)
                           .str();
    SmallVector<bool> keep(first.getOutputs().size(), true);
    kern::ElementwiseOp fused = fuse(first, later, keep);
    fused->setAttr("kern.fused_siblings", b.getStringAttr(note));
  }
}

struct KernFuseElementwisePass
    : tcc::impl::KernFuseElementwiseBase<KernFuseElementwisePass> {
  void runOnOperation() override {
    Builder b(&getContext());
    for (func::FuncOp f : getOperation().getOps<func::FuncOp>()) {
      SmallVector<Attribute> decisions;
      for (const std::string &line : unifyElementwiseShapes(f))
        decisions.push_back(b.getStringAttr(line));
      if (!decisions.empty())
        f->setAttr(kShapeDecisionsAttr, b.getArrayAttr(decisions));
      recomputeForEachReader(f);
      SmallVector<kern::ElementwiseOp> kernels(f.getOps<kern::ElementwiseOp>());
      for (kern::ElementwiseOp consumer : kernels) {
        // Fold producers into this consumer until none qualifies.
        bool fused = true;
        while (fused) {
          fused = false;
          for (Value in : consumer.getInputs()) {
            kern::ElementwiseOp producer = soleProducer(in);
            SmallVector<bool> keep;
            if (!producer || !canFuse(producer, consumer, keep))
              continue;
            consumer = fuse(producer, consumer, keep);
            fused = true;
            break;
          }
        }
      }
      fuseSiblings(f);
    }
  }
};

} // namespace

void tcc::writeFuseElementwiseReport(ModuleOp module, llvm::raw_ostream &os) {
  // Only modules with kernels linked through reshapes get the report (the
  // other models' dump numbering stays).
  if (llvm::none_of(module.getOps<func::FuncOp>(), [](func::FuncOp f) {
        return f->hasAttr(kShapeDecisionsAttr);
      }))
    return;
  writeFunctionDecisions(module, kShapeDecisionsAttr,
                         "# kern-fuse-elementwise: kernels linked through reshapes, computed in "
                         "their common shape so they fuse\n",
                         os);
}
