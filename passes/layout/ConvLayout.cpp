// tg-conv-layout: the memory layout of each chain of convolutions, pooling
// and batch norm ops in @forward, NCHW or channels-last (NHWC), why, and
// the rewrite to channels-last where it pays. On cuda, patch convolutions
// (kernel == stride: ViT's patch embedding) first become matrix products
// (PatchConvolutions.cpp).
//
// A chain is a connected group of conv2d / conv2d_input_grad (a model's
// conv_transpose2d) / max_pool2d / avg_pool2d ops and rank-4 batch norms: two are linked when one's result reaches the other's
// input through layout-neutral rank-4 ops (activations, bias adds, residual
// adds). Every op of a chain shares one layout, so a conversion costs one
// transpose at each of the chain's edges.
//
// Channels-last pays on a GPU where it unlocks tensor-core convolutions:
// cuDNN's implicit-GEMM engines in bf16 / f16 read NHWC with channels a
// multiple of 8 directly, while on NCHW operands they first copy them to
// NHWC (ResNet-50 in PyTorch on an H200: 9.7 ms of convolutions and
// layout copies a step in NCHW, 5.5 ms in channels-last). So a chain goes
// NHWC on the cuda target when its convolutions are 16-bit, at least one
// of them has channels per group multiples of 8, and the compile uses
// cuDNN (channels-last option). It stays NCHW, with the reason recorded:
//   - the CPU target: its kernels (cpu/cpu_conv.h) are NCHW loops;
//   - f32 / f64 convolutions: no tensor-core path for a layout to unlock;
//   - no convolution with channels per group multiples of 8;
//   - pooling / batch norm alone: bandwidth-bound and layout-neutral;
//   - cuDNN off (--no-cudnn, no frontend headers, --no-channels-last).
//
// The rewrite: each op of an NHWC chain gets its channels-last form
// (layout = "NHWC"; a convolution's weight transposed to (O, KH, KW, C/g);
// batch norm on the (N * H * W, C) view, which its kernels read column-
// wise) between a transpose to NHWC of its input and one back to NCHW of
// its result. Then the transposes back are moved past every elementwise
// op whose full-size operands are all such transposes (small broadcast
// operands, per-channel (1, C, 1, 1), are transposed instead), past
// reductions that keep the remaining axes in order (a global average pool)
// and concatenations, and a transpose to NHWC of a transpose back cancels:
// only the chain's edges keep a transpose (the images, say). Autodiff then
// derives an NHWC backward. The decisions are recorded on each op (tg.layout
// = "<layout>: <why>") and per chain on the function (tg.layout_decisions),
// listed by --dump-dir as NN-tg-conv-layout-report.txt with the transposes
// left. It runs after tg-amp (the precision decides) and only for models
// with vision ops (the pipeline's other dumps keep their numbers).
#include "passes/Passes.h"
#include "passes/common/DecisionReport.h"
#include "passes/common/NodeNames.h"
#include "passes/layout/PatchConvolutions.h"

#include <array>
#include <map>

#include "dialects/tg/TgDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {
#define GEN_PASS_DEF_TGCONVLAYOUT
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

constexpr llvm::StringLiteral kLayoutAttr = "tg.layout";
constexpr llvm::StringLiteral kDecisionsAttr = "tg.layout_decisions";
// Ops searched backwards from a chain op's input for another chain op.
constexpr int kMaxHops = 8;
// NCHW -> NHWC and back (result dimension i = input dimension perm[i]).
constexpr std::array<int64_t, 4> kToNhwc = {0, 2, 3, 1}, kToNchw = {0, 3, 1, 2};

bool rank4(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() == 4;
}

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

// A convolution of a chain: tg.conv2d, or tg.conv2d_input_grad as a
// model's forward op (conv_transpose2d; cuDNN's dgrad reads NHWC too).
// Both take (activation, weight (O, C/g, KH, KW)) and a layout.
bool isConvolution(Operation *op) { return isa<tg::Conv2dOp, tg::Conv2dInputGradOp>(op); }

int64_t convolutionGroups(Operation *op) {
  if (auto c = dyn_cast<tg::Conv2dOp>(op))
    return c.getGroups();
  return cast<tg::Conv2dInputGradOp>(op).getGroups();
}

bool isChainOp(Operation *op) {
  if (isConvolution(op) || isa<tg::MaxPool2dOp, tg::AvgPool2dOp>(op))
    return true;
  auto bn = dyn_cast<tg::BatchNormOp>(op);
  return bn && rank4(bn.getInput());
}

// The chain ops that feed `op`'s input through at most kMaxHops
// layout-neutral rank-4 ops.
void producers(Operation *op, SmallVectorImpl<Operation *> &out) {
  SmallVector<std::pair<Value, int>> work = {{op->getOperand(0), 0}};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    auto [v, hops] = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || !seen.insert(def).second || !rank4(v))
      continue;
    if (isChainOp(def)) {
      out.push_back(def);
      continue;
    }
    if (hops >= kMaxHops || def->getNumRegions() != 0)
      continue;
    for (Value operand : def->getOperands())
      if (rank4(operand))
        work.push_back({operand, hops + 1});
  }
}

// A full activation of batch `n` (not a per-channel (1, C, 1, 1) operand).
bool isActivation(Value v, int64_t n) {
  if (!rank4(v))
    return false;
  RankedTensorType t = tensorOf(v);
  return t.getDimSize(0) == n && t.getDimSize(2) * t.getDimSize(3) > 1;
}

// The activations that cross a chain's boundary, each a transpose (and its
// gradient's) in channels-last: values reached backwards from a chain op's
// input through layout-neutral rank-4 ops without meeting a chain op (a
// block argument, or the result of a reshape from another rank such as a
// group norm's), and chain results that reach an op that is not
// layout-neutral (a reshape to another rank, the function's return; a
// reduction is not a crossing: the transpose moves past it).
int64_t boundaryActivations(ArrayRef<Operation *> chain) {
  llvm::SmallPtrSet<Operation *, 16> inChain(chain.begin(), chain.end());
  llvm::DenseSet<Value> edges;
  for (Operation *op : chain) {
    int64_t n = tensorOf(op->getOperand(0)).getDimSize(0);
    SmallVector<std::pair<Value, int>> work = {{op->getOperand(0), 0}};
    llvm::DenseSet<Value> seen;
    while (!work.empty()) {
      auto [v, hops] = work.pop_back_val();
      if (!seen.insert(v).second)
        continue;
      Operation *def = v.getDefiningOp();
      if (def && isChainOp(def))
        continue;
      SmallVector<Value> through;
      if (def && def->getNumRegions() == 0 && hops < kMaxHops)
        for (Value operand : def->getOperands())
          if (isActivation(operand, n))
            through.push_back(operand);
      if (through.empty()) {
        edges.insert(v);
        continue;
      }
      for (Value operand : through)
        work.push_back({operand, hops + 1});
    }
    SmallVector<std::pair<Value, int>> down = {{op->getResult(0), 0}};
    seen.clear();
    while (!down.empty()) {
      auto [v, hops] = down.pop_back_val();
      if (!seen.insert(v).second)
        continue;
      for (Operation *user : v.getUsers()) {
        // Reductions take the transpose back past them (sinkReduce).
        if (inChain.count(user) || isChainOp(user) ||
            isa<tg::ReduceSumOp, tg::ReduceMeanOp, tg::ReduceMaxOp>(user))
          continue;
        bool neutral = user->getNumRegions() == 0 && user->getNumResults() > 0 &&
                       hops < kMaxHops &&
                       llvm::all_of(user->getResults(),
                                    [&](Value r) { return isActivation(r, n); });
        if (!neutral) {
          edges.insert(v);
          continue;
        }
        for (Value r : user->getResults())
          down.push_back({r, hops + 1});
      }
    }
  }
  return static_cast<int64_t>(edges.size());
}

std::string label(Operation *op) {
  std::string node = nodeName(op->getLoc());
  return (op->getName().stripDialect() + " '" + node + "'").str();
}

struct Decision {
  bool nhwc = false;
  std::string why;
};

Decision decide(ArrayRef<Operation *> chain, StringRef target, bool channelsLast) {
  if (target != "cuda")
    return {false, "the CPU kernels (cpu_conv.h) are NCHW loops; channels-last would only add "
                   "transposes"};
  SmallVector<Operation *> convs;
  for (Operation *op : chain)
    if (isConvolution(op))
      convs.push_back(op);
  if (convs.empty())
    return {false, "pooling and batch norm alone are bandwidth-bound and layout-neutral"};
  for (Operation *c : convs) {
    Type et = tensorOf(c->getOperand(0)).getElementType();
    if (!et.isBF16() && !et.isF16()) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << label(c) << " computes in " << et
         << ": no tensor-core convolution for channels-last to unlock (bf16 / f16 only)";
      return {false, s};
    }
  }
  int aligned = 0;
  for (Operation *c : convs) {
    int64_t in = tensorOf(c->getOperand(0)).getDimSize(1);
    int64_t out = tensorOf(c->getResult(0)).getDimSize(1);
    int64_t groups = convolutionGroups(c);
    aligned += (in / groups) % 8 == 0 && (out / groups) % 8 == 0;
  }
  if (aligned == 0)
    return {false, "no convolution has channels per group multiples of 8, which tensor-core "
                   "convolutions in NHWC need"};
  if (!channelsLast)
    return {false, "channels-last would pay here (16-bit, channels multiples of 8), but this "
                   "compile does not use cuDNN (--no-cudnn, no cuDNN frontend headers, or "
                   "--no-channels-last), whose tensor-core engines are what it unlocks"};
  // Each activation crossing the chain's boundary costs a transpose and its
  // gradient's; each NCHW convolution costs cuDNN's own copies of its
  // operands. A chain with more crossings than convolutions (one or two
  // convolutions between group norms, whose reshapes are not
  // layout-neutral) loses: unet_gn on an H200 ran 10.7 ms NHWC, 8.8 ms NCHW.
  int64_t crossings = boundaryActivations(chain);
  if (crossings > static_cast<int64_t>(convs.size()))
    return {false, llvm::formatv("{0} activations cross the chain's boundary (each a transpose "
                                 "and its gradient's in channels-last) for {1} convolution{2}: "
                                 "more than tensor-core NHWC saves",
                                 crossings, convs.size(), convs.size() == 1 ? "" : "s")
                       .str()};
  return {true, llvm::formatv("{0} of {1} convolutions are 16-bit with channels per group "
                              "multiples of 8: cuDNN's tensor-core engines read NHWC "
                              "directly (on NCHW they copy the operands to NHWC first)",
                              aligned, convs.size())
                    .str()};
}

//===----------------------------------------------------------------------===//
// The rewrite to channels-last
//===----------------------------------------------------------------------===//

SmallVector<int64_t> permuted(ArrayRef<int64_t> shape, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> out;
  for (int64_t d : perm)
    out.push_back(shape[d]);
  return out;
}

RankedTensorType withShape(RankedTensorType t, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, t.getElementType());
}

// A transpose by `perm`, or a reshape when it moves only size-1 dimensions
// (the elements keep their order: a free view after lowering).
Value permute(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm) {
  RankedTensorType t = tensorOf(v);
  RankedTensorType to = withShape(t, permuted(t.getShape(), perm));
  int64_t last = -1;
  bool inOrder = true;
  for (int64_t d : perm) {
    if (t.getDimSize(d) == 1)
      continue;
    inOrder &= d > last;
    last = d;
  }
  if (inOrder)
    return tg::ReshapeOp::create(b, loc, to, v);
  return tg::TransposeOp::create(b, loc, to, v, b.getDenseI64ArrayAttr(perm));
}

// `v` when it is a tg.transpose by `perm`'s input, else null.
Value transposedFrom(Value v, ArrayRef<int64_t> perm) {
  auto t = v.getDefiningOp<tg::TransposeOp>();
  if (!t || t.getPerm() != perm)
    return Value();
  return t.getInput();
}

class ChannelsLastRewriter {
public:
  explicit ChannelsLastRewriter(func::FuncOp f) : f_(f), b_(f.getContext()) {}

  // The chain op `op` in channels-last form between transposes.
  void rewriteOp(Operation *op) {
    b_.setInsertionPoint(op);
    Location loc = op->getLoc();
    Value x = toNhwc(op->getOperand(0), loc);
    if (auto bn = dyn_cast<tg::BatchNormOp>(op)) {
      // (N, H, W, C) as (N * H * W, C): per-channel statistics over rows.
      ArrayRef<int64_t> s = tensorOf(x).getShape();
      RankedTensorType rows = withShape(tensorOf(x), {s[0] * s[1] * s[2], s[3]});
      Value in = tg::ReshapeOp::create(b_, loc, rows, x);
      Operation *n = b_.clone(*op);
      n->setOperand(0, in);
      n->getResult(0).setType(rows);
      Value back = tg::ReshapeOp::create(b_, loc, tensorOf(x), n->getResult(0));
      op->getResult(0).replaceAllUsesWith(toNchw(back, loc));
      for (unsigned i = 1; i < op->getNumResults(); ++i)
        op->getResult(i).replaceAllUsesWith(n->getResult(i));
      op->erase();
      return;
    }
    Value weight; // a convolution's (O, C/g, KH, KW) -> (O, KH, KW, C/g)
    if (isConvolution(op))
      weight = permute(b_, loc, op->getOperand(1), kToNhwc);
    Operation *n = b_.clone(*op);
    n->setOperand(0, x);
    if (weight)
      n->setOperand(1, weight);
    n->setAttr("layout", b_.getStringAttr("NHWC"));
    RankedTensorType t = tensorOf(op->getResult(0));
    n->getResult(0).setType(withShape(t, permuted(t.getShape(), kToNhwc)));
    op->getResult(0).replaceAllUsesWith(toNchw(n->getResult(0), loc));
    op->erase();
  }

  // Moves the transposes back to NCHW past the ops that can take NHWC
  // operands, in program order, until nothing moves; then drops the dead.
  void sink() {
    for (bool changed = true; changed;) {
      changed = false;
      SmallVector<Operation *> ops;
      f_.walk([&](Operation *op) { ops.push_back(op); });
      for (Operation *op : ops)
        changed |= sinkInto(op);
    }
    // Dead transposes / reshapes left behind, users first.
    SmallVector<Operation *> ops;
    f_.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : llvm::reverse(ops))
      if (isa<tg::TransposeOp, tg::ReshapeOp>(op) && op->use_empty())
        op->erase();
  }

private:
  Value toNhwc(Value v, Location loc) {
    if (Value a = transposedFrom(v, kToNchw))
      return a;
    return permute(b_, loc, v, kToNhwc);
  }
  Value toNchw(Value v, Location loc) {
    return tg::TransposeOp::create(b_, loc, withShape(tensorOf(v), permuted(
                                                          tensorOf(v).getShape(), kToNchw)),
                                   v, b_.getDenseI64ArrayAttr(kToNchw));
  }

  static bool elementwise(Operation *op) {
    if (isa<tg::TrainSelectOp>(op))
      return true;
    // Dropout's mask depends on the element's position: it keeps NCHW.
    return isa<tg::ScalarOpInterface>(op) && !isa<tg::DropoutOp>(op) &&
           op->getNumRegions() == 0 && op->getNumResults() == 1;
  }

  bool sinkInto(Operation *op) {
    if (op->getNumResults() != 1)
      return false;
    Location loc = op->getLoc();
    // transpose to NHWC of a transpose back: the value itself.
    if (auto t = dyn_cast<tg::TransposeOp>(op)) {
      Value a = t.getPerm() == ArrayRef<int64_t>(kToNhwc) ? transposedFrom(t.getInput(), kToNchw)
                                                          : Value();
      if (!a)
        return false;
      t.getResult().replaceAllUsesWith(a);
      t->erase();
      return true;
    }
    if (elementwise(op) && rank4(op->getResult(0)))
      return sinkElementwise(op, loc);
    if (isa<tg::ReduceSumOp, tg::ReduceMeanOp, tg::ReduceMaxOp>(op))
      return sinkReduce(op);
    if (auto c = dyn_cast<tg::ConcatOp>(op))
      return sinkConcat(c, loc);
    return false;
  }

  // op(T(a), T(b), small) -> T(op(a, b, small')): every full-size operand
  // a transpose back, the others rank 0 or smaller (broadcast) ones.
  bool sinkElementwise(Operation *op, Location loc) {
    RankedTensorType rt = tensorOf(op->getResult(0));
    bool any = false;
    for (Value v : op->getOperands()) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t)
        return false;
      if (Value a = transposedFrom(v, kToNchw); a && t.getShape() == rt.getShape()) {
        any = true;
        continue;
      }
      if (t.getRank() > 4 || t.getNumElements() >= rt.getNumElements())
        return false;
    }
    if (!any)
      return false;
    b_.setInsertionPoint(op);
    SmallVector<Value> operands;
    for (Value v : op->getOperands()) {
      auto t = tensorOf(v);
      if (Value a = transposedFrom(v, kToNchw); a && t.getShape() == rt.getShape()) {
        operands.push_back(a);
      } else if (t.getRank() == 0) {
        operands.push_back(v);
      } else { // broadcast operand: rank 4 (leading 1s), then to NHWC
        SmallVector<int64_t> s(4 - t.getRank(), 1);
        llvm::append_range(s, t.getShape());
        Value r = t.getRank() == 4 ? v : tg::ReshapeOp::create(b_, loc, withShape(t, s), v);
        operands.push_back(permute(b_, loc, r, kToNhwc));
      }
    }
    Operation *n = b_.clone(*op);
    n->setOperands(operands);
    n->getResult(0).setType(withShape(rt, permuted(rt.getShape(), kToNhwc)));
    op->getResult(0).replaceAllUsesWith(toNchw(n->getResult(0), loc));
    op->erase();
    return true;
  }

  // reduce(T(a), axes) without keep_dims -> reduce(a, axes'), when the
  // axes kept appear in a in the same order (a global average pool).
  bool sinkReduce(Operation *op) {
    Value a = transposedFrom(op->getOperand(0), kToNchw);
    auto keep = op->getAttrOfType<BoolAttr>("keep_dims");
    auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
    if (!a || (keep && keep.getValue()) || !axes)
      return false;
    SmallVector<int64_t> mapped;
    SmallVector<bool> reduced(4, false);
    for (int64_t d : axes.asArrayRef())
      reduced[d] = true;
    int64_t last = -1;
    for (int64_t d = 0; d < 4; ++d) {
      if (reduced[d]) {
        mapped.push_back(kToNchw[d]);
        continue;
      }
      if (kToNchw[d] < last)
        return false;
      last = kToNchw[d];
    }
    llvm::sort(mapped);
    b_.setInsertionPoint(op);
    Operation *n = b_.clone(*op);
    n->setOperand(0, a);
    n->setAttr("axes", b_.getDenseI64ArrayAttr(mapped));
    op->getResult(0).replaceAllUsesWith(n->getResult(0));
    op->erase();
    return true;
  }

  // concat(T(a), T(b), axis) -> T(concat(a, b, axis')).
  bool sinkConcat(tg::ConcatOp c, Location loc) {
    if (!rank4(c.getResult()))
      return false;
    SmallVector<Value> inputs;
    for (Value v : c.getInputs()) {
      Value a = transposedFrom(v, kToNchw);
      if (!a)
        return false;
      inputs.push_back(a);
    }
    int64_t axis = llvm::find(kToNhwc, c.getAxis()) - kToNhwc.begin();
    b_.setInsertionPoint(c);
    Operation *n = b_.clone(*c);
    n->setOperands(inputs);
    n->setAttr("axis", b_.getI64IntegerAttr(axis));
    RankedTensorType rt = tensorOf(c.getResult());
    n->getResult(0).setType(withShape(rt, permuted(rt.getShape(), kToNhwc)));
    c.getResult().replaceAllUsesWith(toNchw(n->getResult(0), loc));
    c->erase();
    return true;
  }

  func::FuncOp f_;
  OpBuilder b_;
};

// The transposes the rewrite left in `f`: activations at a chain's edge (as
// report lines, each a copy per step) and weights (counted).
SmallVector<std::string> edgeTransposes(func::FuncOp f, int64_t &weights) {
  SmallVector<std::string> lines;
  weights = 0;
  f.walk([&](tg::TransposeOp t) {
    if (t.getPerm() != ArrayRef<int64_t>(kToNhwc) && t.getPerm() != ArrayRef<int64_t>(kToNchw))
      return;
    if (llvm::any_of(t->getUsers(), [&](Operation *u) {
          return isConvolution(u) && u->getOperand(1) == t.getResult();
        })) {
      ++weights;
      return;
    }
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "  transpose at '" << nodeName(t.getLoc()) << "' "
       << (t.getPerm() == ArrayRef<int64_t>(kToNhwc) ? "to NHWC" : "to NCHW") << " of "
       << t.getInput().getType();
    lines.push_back(s);
  });
  return lines;
}

struct TgConvLayout : public tcc::impl::TgConvLayoutBase<TgConvLayout> {
  using TgConvLayoutBase::TgConvLayoutBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(module.getContext());
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.getName() != "forward")
        continue;
      // Patch convolutions become matrix products first (cuda: cuDNN's
      // engines are slow on them; PatchConvolutions.cpp).
      SmallVector<Attribute> decisions;
      if (target == "cuda")
        for (const std::string &line : rewritePatchConvolutions(f))
          decisions.push_back(b.getStringAttr(line));
      SmallVector<Operation *> ops;
      llvm::DenseMap<Operation *, Operation *> parent; // union-find
      auto find = [&](Operation *op) {
        for (Operation *up = parent.lookup(op); up != op; up = parent.lookup(op))
          op = up;
        return op;
      };
      f.walk([&](Operation *op) {
        if (!isChainOp(op))
          return;
        ops.push_back(op);
        parent[op] = op;
        SmallVector<Operation *> from;
        producers(op, from);
        for (Operation *p : from) // (producers come first: already in parent)
          parent[find(op)] = find(p);
      });
      if (ops.empty()) {
        if (!decisions.empty())
          f->setAttr(kDecisionsAttr, b.getArrayAttr(decisions));
        continue;
      }
      // Chains in program order of their first op.
      std::map<Operation *, SmallVector<Operation *>> members;
      SmallVector<Operation *> leaders;
      for (Operation *op : ops) {
        Operation *leader = find(op);
        if (!members.count(leader))
          leaders.push_back(leader);
        members[leader].push_back(op);
      }
      SmallVector<Operation *> toRewrite;
      for (auto [i, leader] : llvm::enumerate(leaders)) {
        ArrayRef<Operation *> chain = members[leader];
        Decision d = decide(chain, target, channelsLast);
        StringRef layout = d.nhwc ? "NHWC" : "NCHW";
        std::string names;
        for (Operation *op : chain) {
          names += (names.empty() ? "" : ", ") + label(op);
          op->setAttr(kLayoutAttr, b.getStringAttr(layout + ": " + d.why));
          if (d.nhwc)
            toRewrite.push_back(op);
        }
        decisions.push_back(b.getStringAttr(
            llvm::formatv("chain {0} ({1}): {2}: {3}", i + 1, names, layout, d.why).str()));
      }
      if (!toRewrite.empty()) {
        ChannelsLastRewriter rewriter(f);
        for (Operation *op : toRewrite)
          rewriter.rewriteOp(op);
        rewriter.sink();
        int64_t weights = 0;
        SmallVector<std::string> edges = edgeTransposes(f, weights);
        decisions.push_back(b.getStringAttr(
            llvm::formatv("transposes at the channels-last chains' edges: {0} of activations, "
                          "{1} of weights (to (O, KH, KW, C/g))",
                          edges.size(), weights)
                .str()));
        for (const std::string &e : edges)
          decisions.push_back(b.getStringAttr(e));
      }
      f->setAttr(kDecisionsAttr, b.getArrayAttr(decisions));
    }
  }
};

} // namespace

void tcc::writeConvLayoutReport(ModuleOp module, llvm::raw_ostream &os) {
  writeFunctionDecisions(module, kDecisionsAttr,
                         "# tg-conv-layout: the layout of each chain of convolutions, pooling "
                         "and batch norm ops, why, and the transposes channels-last leaves\n",
                         os);
}
