// tg-conv-layout: the memory layout of each chain of convolutions and
// pooling ops in @forward, NCHW or channels-last (NHWC), and why.
//
// A chain is a connected group of conv2d / max_pool2d / avg_pool2d ops:
// two are linked when one's result reaches the other's input through
// layout-neutral rank-4 ops (activations, bias adds, residual adds). Every
// op of a chain shares one layout, so a conversion would cost exactly one
// transpose at each of the chain's boundaries.
//
// Channels-last pays on a GPU only where it unlocks tensor-core
// convolutions: cuDNN's implicit-GEMM kernels in bf16 / f16 want NHWC with
// channels a multiple of 8 (16-byte channel vectors). Everything else
// stays NCHW:
//   - the CPU target: its kernels (cpu/cpu_conv.h) are NCHW loops;
//   - f32 / f64 convolutions: no tensor-core path for a layout to unlock;
//   - a chain with a convolution whose channels are not a multiple of 8
//     (the RGB input layer, say);
//   - pooling alone: bandwidth-bound and layout-neutral;
//   - and today every cuda chain: kern.conv2d has no channels-last form
//     yet, so cuDNN (compiler/codegen/cuda/cudnn/) runs its NCHW engines and
//     tcc's fallback kernels (prelude/conv_kernels.cuh) read NCHW; the
//     decision says where channels-last would pay.
// The pass therefore converts nothing; it records the decision and its
// reason on each op (tg.layout = "NCHW: <why>") and per chain on the
// function (tg.layout_decisions), listed by --dump-dir as
// NN-tg-conv-layout-report.txt. It runs after tg-amp (the precision decides)
// and only for models with vision ops (the pipeline's other dumps keep
// their numbers otherwise).
#include "passes/Passes.h"
#include "passes/common/DecisionReport.h"
#include "passes/common/NodeNames.h"

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
// Ops searched backwards from a vision op's input for another vision op.
constexpr int kMaxHops = 8;

bool isVision(Operation *op) {
  return isa<tg::Conv2dOp, tg::MaxPool2dOp, tg::AvgPool2dOp>(op);
}

bool rank4(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() == 4;
}

// The vision ops that feed `op`'s input through at most kMaxHops
// layout-neutral rank-4 ops.
void producers(Operation *op, SmallVectorImpl<Operation *> &out) {
  SmallVector<std::pair<Value, int>> work = {{op->getOperand(0), 0}};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    auto [v, hops] = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || !seen.insert(def).second || !rank4(v))
      continue;
    if (isVision(def)) {
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

std::string label(Operation *op) {
  std::string node = nodeName(op->getLoc());
  return (op->getName().stripDialect() + " '" + node + "'").str();
}

// Why the chain stays NCHW.
std::string decide(ArrayRef<Operation *> chain, StringRef target) {
  if (target != "cuda")
    return "the CPU kernels (cpu_conv.h) are NCHW loops; channels-last would only add "
           "transposes";
  SmallVector<tg::Conv2dOp> convs;
  for (Operation *op : chain)
    if (auto c = dyn_cast<tg::Conv2dOp>(op))
      convs.push_back(c);
  if (convs.empty())
    return "pooling alone is bandwidth-bound and layout-neutral";
  for (tg::Conv2dOp c : convs) {
    Type et = cast<RankedTensorType>(c.getInput().getType()).getElementType();
    if (!et.isBF16() && !et.isF16()) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << label(c) << " computes in " << et
         << ": no tensor-core convolution for channels-last to unlock (bf16 / f16 only)";
      return s;
    }
  }
  for (tg::Conv2dOp c : convs) {
    int64_t in = cast<RankedTensorType>(c.getInput().getType()).getDimSize(1);
    int64_t out = cast<RankedTensorType>(c.getType()).getDimSize(1);
    int64_t groups = c.getGroups();
    if ((in / groups) % 8 != 0 || (out / groups) % 8 != 0)
      return llvm::formatv("{0} has {1} input and {2} output channels per group: not "
                           "multiples of 8, which tensor-core convolutions in NHWC need",
                           label(c), in / groups, out / groups)
          .str();
  }
  return "NHWC would pay here (16-bit, channels multiples of 8: cuDNN's tensor-core "
         "convolutions prefer it), but kern.conv2d has no channels-last form yet: cuDNN runs "
         "its NCHW engines, tcc's fallback kernels read NCHW";
}

struct TgConvLayout : public tcc::impl::TgConvLayoutBase<TgConvLayout> {
  using TgConvLayoutBase::TgConvLayoutBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(module.getContext());
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.getName() != "forward")
        continue;
      SmallVector<Operation *> ops;
      llvm::DenseMap<Operation *, Operation *> parent; // union-find
      auto find = [&](Operation *op) {
        for (Operation *up = parent.lookup(op); up != op; up = parent.lookup(op))
          op = up;
        return op;
      };
      f.walk([&](Operation *op) {
        if (!isVision(op))
          return;
        ops.push_back(op);
        parent[op] = op;
        SmallVector<Operation *> from;
        producers(op, from);
        for (Operation *p : from) // (producers come first: already in parent)
          parent[find(op)] = find(p);
      });
      if (ops.empty())
        continue;
      // Chains in program order of their first op.
      std::map<Operation *, SmallVector<Operation *>> members;
      SmallVector<Operation *> leaders;
      for (Operation *op : ops) {
        Operation *leader = find(op);
        if (!members.count(leader))
          leaders.push_back(leader);
        members[leader].push_back(op);
      }
      SmallVector<Attribute> decisions;
      for (auto [i, leader] : llvm::enumerate(leaders)) {
        ArrayRef<Operation *> chain = members[leader];
        std::string why = decide(chain, target);
        std::string names;
        for (Operation *op : chain) {
          names += (names.empty() ? "" : ", ") + label(op);
          op->setAttr(kLayoutAttr, b.getStringAttr("NCHW: " + why));
        }
        decisions.push_back(b.getStringAttr(
            llvm::formatv("chain {0} ({1}): NCHW: {2}", i + 1, names, why).str()));
      }
      f->setAttr(kDecisionsAttr, b.getArrayAttr(decisions));
    }
  }
};

} // namespace

void tcc::writeConvLayoutReport(ModuleOp module, llvm::raw_ostream &os) {
  writeFunctionDecisions(module, kDecisionsAttr,
                         "# tg-conv-layout: the layout of each chain of convolutions and "
                         "pooling ops, and why\n",
                         os);
}
