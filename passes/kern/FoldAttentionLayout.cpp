// kern-fold-attention-layout: the copies around kern.attention /
// kern.attention_grad become strides of the attention kernels.
//
// Models split a packed projection and move heads forward: q = transpose(
// reshape(slice(qkv))) (B, T, 3C) -> (B, H, T, D), out -> (B, T, H, D) ->
// (B, T, C), and the backward concatenates dq, dk, dv back into (B, T, 3C).
// Each of those kern.slice / kern.transpose / kern.concat is a full copy.
// Here every attention tensor is traced through them to the buffer the copy
// chain starts (inputs) or ends (outputs) in, its logical (b, h, i, d)
// indexing becomes an offset and strides into that buffer (the op's
// `sizes` / `layout`, dialects/kern/AttentionLayout.h), and copies left
// without readers are erased. The tg graph is untouched (the interpreter's
// checks still see the model's ops); only kernels and buffers change.
//
// Safety (each refusal is recorded with its reason):
// - a traced buffer is written by exactly one op, the copy (or, for the
//   chain's first buffer, by ops that all come before the chain's first
//   copy), so reading the start buffer later reads the same values;
// - an intermediate buffer of an input chain is read only by the next copy,
//   the traced buffer itself only by attention ops (all redirected);
// - an output's buffer is read by the copy and attention ops only; the
//   destination is written only by that copy and read only after it; a
//   kern.concat folds only when every one of its inputs does;
// - innermost stride 1, offset and strides multiples of 16 bytes (the
//   CUDA kernels' cp.async rows).
// kern.rope takes part the same way (its input and output strided,
// dialects/kern/RopeLayout.h): a rotation of q or k reads them from the
// packed projection, and its transposed form (the backward) writes dq / dk
// into the packed gradient, so with the attention's dv the concat folds too.
// Decisions: attribute kern.fold_layout (one line per tensor) on each
// attention and rope op; writeAttentionLayoutReport prints them (--dump-dir
// NN-kern-fold-attention-layout-report.txt).
#include "passes/Passes.h"
#include "passes/common/NodeNames.h"

#include "dialects/kern/AttentionLayout.h"
#include "dialects/kern/RopeLayout.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <optional>

namespace tcc {
#define GEN_PASS_DEF_KERNFOLDATTENTIONLAYOUT
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

constexpr const char *kFoldAttr = "kern.fold_layout";
const char *const kTensorNames[] = {"q", "k", "v", "out", "grad", "dq", "dk", "dv"};
const char *const kRopeTensorNames[] = {"x", "out"};

MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

SmallVector<int64_t> contiguousStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

// A buffer value's logical indexing inside `root`: element (i0, i1, ...) at
// offset + sum i_d * strides[d].
struct View {
  Value root;
  int64_t offset = 0;
  SmallVector<int64_t> strides;
};

// Strides of `toShape` viewing the same elements as (fromShape, fromStrides)
// in row-major order, if expressible (each group of dims whose products
// match must be contiguous among themselves).
std::optional<SmallVector<int64_t>> reshapeStrides(ArrayRef<int64_t> fromShape,
                                                   ArrayRef<int64_t> fromStrides,
                                                   ArrayRef<int64_t> toShape) {
  SmallVector<int64_t> out(toShape.size(), 0);
  size_t i = 0, j = 0;
  while (i < fromShape.size() || j < toShape.size()) {
    size_t i1 = i, j1 = j;
    int64_t pi = 1, pj = 1;
    if (i1 < fromShape.size())
      pi = fromShape[i1++];
    if (j1 < toShape.size())
      pj = toShape[j1++];
    while (pi != pj) {
      if (pi < pj && i1 < fromShape.size())
        pi *= fromShape[i1++];
      else if (pj < pi && j1 < toShape.size())
        pj *= toShape[j1++];
      else
        return std::nullopt;
    }
    // from dims [i, i1) must be contiguous among themselves.
    for (size_t k = i; k + 1 < i1; ++k)
      if (fromShape[k] != 1 && fromStrides[k] != fromStrides[k + 1] * fromShape[k + 1])
        return std::nullopt;
    int64_t inner = i1 > i ? fromStrides[i1 - 1] : 1;
    for (size_t k = j1; k-- > j;) {
      out[k] = inner;
      inner *= toShape[k];
    }
    i = i1;
    j = j1;
  }
  return out;
}

std::string describeOp(Operation *op) {
  return llvm::formatv("{0} '{1}'", op->getName().getStringRef(), nodeName(op->getLoc())).str();
}

// Uses of a buffer and of its kern.reshape views (not the reshapes
// themselves): (user, the value it uses).
void aliasUses(Value buffer, SmallVectorImpl<std::pair<Operation *, Value>> &uses) {
  for (Operation *user : buffer.getUsers()) {
    if (auto r = dyn_cast<kern::ReshapeOp>(user)) {
      aliasUses(r.getResult(), uses);
      continue;
    }
    uses.push_back({user, buffer});
  }
}

bool isAttention(Operation *op) { return isa<kern::AttentionOp, kern::AttentionGradOp>(op); }

// The ops whose tensors this pass strides: attention (forward, backward) and
// 4-D rope (only a (B, H, T, D) rotation has the four strides a view needs;
// any other rope reads and writes its buffers as they are).
bool isStrided(Operation *op) {
  if (auto r = dyn_cast<kern::RopeOp>(op)) // strided already: its operands are the roots
    return r.getLayoutAttr() || mrt(r.getInput()).getRank() == 4;
  return isAttention(op);
}

// The strided tensors of an op: attentionTensors, or a rope's input and out.
SmallVector<Value> stridedTensors(Operation *op) {
  if (auto r = dyn_cast<kern::RopeOp>(op))
    return {r.getInput(), r.getOut()};
  return kern::attentionTensors(op);
}

const char *tensorName(Operation *op, unsigned index) {
  return isa<kern::RopeOp>(op) ? kRopeTensorNames[index] : kTensorNames[index];
}

// The root buffer under kern.reshape views.
Value rootOf(Value v) { return kern::rootBuffer(v); }

struct Writers {
  SmallVector<Operation *> writers, readers;
};
Writers writersAndReaders(Value root) {
  SmallVector<std::pair<Operation *, Value>> uses;
  aliasUses(root, uses);
  Writers w;
  for (auto [op, v] : uses) {
    if (kern::writesBuffer(op, v))
      w.writers.push_back(op);
    else
      w.readers.push_back(op);
  }
  return w;
}

bool before(Operation *a, Operation *b) {
  return a->getBlock() == b->getBlock() && a->isBeforeInBlock(b);
}

class Folder {
public:
  explicit Folder(func::FuncOp f) : f_(f) {}

  void run();

private:
  // Input tracing: the view of `x` in the buffer its copy chain starts from,
  // appending the copies to `chain`; `allowedReader` is the only op that
  // may read x besides (for the traced tensor itself) attention ops.
  FailureOr<View> traceSource(Value x, Operation *allowedReader,
                              SmallVectorImpl<Operation *> &chain, std::string &why);
  // Output tracing: the view of `x` in the buffer its copy chain ends in;
  // a kern.concat on the way is returned with the input the chain fills.
  FailureOr<View> traceSink(Value x, Operation *writer, bool top,
                            SmallVectorImpl<Operation *> &chain, kern::ConcatOp &concat,
                            Value &concatInput, std::string &why);
  std::optional<std::string> checkStrides(const View &v, int64_t elemBytes);
  void eraseDeadCopies();

  func::FuncOp f_;
};

FailureOr<View> Folder::traceSource(Value x, Operation *allowedReader,
                                    SmallVectorImpl<Operation *> &chain, std::string &why) {
  ArrayRef<int64_t> shape = mrt(x).getShape();
  if (auto r = x.getDefiningOp<kern::ReshapeOp>()) {
    FailureOr<View> in = traceSource(r.getInput(), allowedReader, chain, why);
    if (failed(in))
      return failure();
    std::optional<SmallVector<int64_t>> s =
        reshapeStrides(mrt(r.getInput()).getShape(), in->strides, shape);
    if (!s) {
      why = "the kern.reshape to " + std::to_string(shape.size()) +
            " dims is not expressible as strides of the copy's source";
      return failure();
    }
    return View{in->root, in->offset, *s};
  }
  View identity{x, 0, contiguousStrides(shape)};
  Writers w = writersAndReaders(x);
  if (w.writers.size() != 1 || !isa<kern::TransposeOp, kern::SliceOp>(w.writers[0]))
    return identity; // not a copy: the chain starts here
  Operation *copy = w.writers[0];
  if (!x.getDefiningOp<kern::AllocOp>())
    return identity;
  for (Operation *reader : w.readers)
    if (reader != allowedReader && !(allowedReader == nullptr && isStrided(reader))) {
      why = describeOp(copy) + "'s result is also read by " + describeOp(reader);
      return failure();
    }
  Value input = isa<kern::TransposeOp>(copy) ? cast<kern::TransposeOp>(copy).getInput()
                                             : cast<kern::SliceOp>(copy).getInput();
  size_t mark = chain.size();
  FailureOr<View> in = traceSource(input, copy, chain, why);
  if (failed(in))
    return failure();
  if (chain.size() == mark) {
    // The copy reads the chain's start: every write of it must come first.
    for (Operation *writer : writersAndReaders(rootOf(input)).writers)
      if (!before(writer, copy)) {
        why = describeOp(writer) + " writes the source of " + describeOp(copy) +
              " after (or around) the copy";
        return failure();
      }
  }
  chain.push_back(copy);
  View v{in->root, in->offset, {}};
  if (auto t = dyn_cast<kern::TransposeOp>(copy)) {
    // out dim d = input dim perm[d]
    for (int64_t p : t.getPerm())
      v.strides.push_back(in->strides[p]);
  } else {
    auto s = cast<kern::SliceOp>(copy);
    for (auto [d, start] : llvm::enumerate(s.getStarts()))
      v.offset += start * in->strides[d];
    v.strides = in->strides;
  }
  return v;
}

FailureOr<View> Folder::traceSink(Value x, Operation *writer, bool top,
                                  SmallVectorImpl<Operation *> &chain, kern::ConcatOp &concat,
                                  Value &concatInput, std::string &why) {
  View identity{x, 0, contiguousStrides(mrt(x).getShape())};
  if (!x.getDefiningOp<kern::AllocOp>())
    return identity;
  Writers w = writersAndReaders(x);
  if (w.writers.size() != 1 || w.writers[0] != writer) {
    why = "its buffer has another writer";
    return failure();
  }
  // The one copy reading x; every other reader an attention op (top level).
  Operation *copy = nullptr;
  Value used;
  SmallVector<std::pair<Operation *, Value>> uses;
  aliasUses(x, uses);
  for (auto [op, v] : uses) {
    if (op == writer)
      continue;
    if (isa<kern::TransposeOp, kern::ConcatOp>(op) && !copy) {
      copy = op;
      used = v;
      continue;
    }
    if (top && isStrided(op)) {
      if (op->getAttr("layout")) { // its operands are not ours to redirect
        why = describeOp(op) + " (already strided) reads it";
        return failure();
      }
      continue;
    }
    if (!top)
      return identity; // an intermediate read elsewhere: the chain ends at x
    why = describeOp(op) + " reads it";
    return failure();
  }
  if (!copy)
    return identity;
  if (!top && w.readers.size() != 1)
    return identity;
  if (concat && isa<kern::ConcatOp>(copy))
    return identity; // one concat a chain
  Value dest = isa<kern::TransposeOp>(copy) ? cast<kern::TransposeOp>(copy).getOut()
                                            : cast<kern::ConcatOp>(copy).getOut();
  if (!dest.getDefiningOp<kern::AllocOp>()) {
    if (top) {
      why = describeOp(copy) + " writes no kern.alloc";
      return failure();
    }
    return identity;
  }
  Writers dw = writersAndReaders(dest);
  if (dw.writers.size() != 1) {
    why = describeOp(copy) + "'s destination has other writers";
    return failure();
  }
  for (Operation *reader : dw.readers)
    if (!before(copy, reader)) {
      why = describeOp(reader) + " reads " + describeOp(copy) + "'s destination before it";
      return failure();
    }
  if (auto c = dyn_cast<kern::ConcatOp>(copy)) {
    concat = c;
    concatInput = used;
  }
  size_t mark = chain.size();
  FailureOr<View> out = traceSink(dest, copy, /*top=*/false, chain, concat, concatInput, why);
  if (failed(out))
    return failure();
  chain.insert(chain.begin() + mark, copy);
  // The view of `used` (x or a reshape of it) in the destination's root.
  SmallVector<int64_t> usedStrides;
  int64_t offset = out->offset;
  if (auto t = dyn_cast<kern::TransposeOp>(copy)) {
    // out dim d = input dim perm[d]: input stride perm[d] = out stride d
    usedStrides.assign(t.getPerm().size(), 0);
    for (auto [d, p] : llvm::enumerate(t.getPerm()))
      usedStrides[p] = out->strides[d];
  } else {
    auto c = cast<kern::ConcatOp>(copy);
    int64_t axis = c.getAxis(), start = 0;
    for (Value in : c.getInputs()) {
      if (in == used)
        break;
      start += mrt(in).getDimSize(axis);
    }
    offset += start * out->strides[axis];
    usedStrides = out->strides;
  }
  std::optional<SmallVector<int64_t>> s =
      reshapeStrides(mrt(used).getShape(), usedStrides, mrt(x).getShape());
  if (!s) {
    why = "the kern.reshape before " + describeOp(copy) + " is not expressible as strides";
    return failure();
  }
  return View{out->root, offset, *s};
}

std::optional<std::string> Folder::checkStrides(const View &v, int64_t elemBytes) {
  if (v.strides.size() != 4 || v.strides[3] != 1)
    return std::string("head dimension not contiguous");
  int64_t multiple = std::max<int64_t>(1, 16 / elemBytes);
  for (int64_t s : {v.offset, v.strides[0], v.strides[1], v.strides[2]})
    if (s % multiple != 0)
      return llvm::formatv("offset / strides {0}, {1}, {2}, {3} are not multiples of 16 bytes",
                           v.offset, v.strides[0], v.strides[1], v.strides[2])
          .str();
  return std::nullopt;
}

OpOperand &tensorOperand(Operation *op, unsigned index) {
  if (auto r = dyn_cast<kern::RopeOp>(op))
    return index == 0 ? r.getInputMutable() : r.getOutMutable();
  if (auto a = dyn_cast<kern::AttentionOp>(op)) {
    OpOperand *ops[] = {&a.getQMutable(), &a.getKMutable(), &a.getVMutable(),
                        &a.getOutMutable()};
    return *ops[index];
  }
  auto g = cast<kern::AttentionGradOp>(op);
  OpOperand *ops[] = {&g.getQMutable(),    &g.getKMutable(),  &g.getVMutable(),
                      &g.getOutMutable(),  &g.getGradMutable(), &g.getDqMutable(),
                      &g.getDkMutable(),   &g.getDvMutable()};
  return *ops[index];
}

bool isOutput(Operation *op, unsigned index) {
  if (isa<kern::RopeOp>(op))
    return index == 1;
  return isa<kern::AttentionOp>(op) ? index == 3 : index >= 5;
}

std::string chainText(ArrayRef<Operation *> chain) {
  std::string text;
  for (Operation *op : chain)
    text += (text.empty() ? "" : ", ") + describeOp(op);
  return text;
}

void Folder::run() {
  // Ops strided already (an earlier run) keep their layout and report; a
  // rope that is not 4-D only reports why it keeps its copies.
  SmallVector<Operation *> attention; // attention and 4-D rope ops
  SmallVector<Operation *> flatRopes;
  f_.walk([&](Operation *op) {
    if (isStrided(op) && !op->getAttr("layout"))
      attention.push_back(op);
    else if (isa<kern::RopeOp>(op) && !isStrided(op))
      flatRopes.push_back(op);
  });
  // Sink plans first (they decide whether an attention output moves, which
  // the readers of that output follow).
  struct Plan {
    Operation *op;
    unsigned index;
    View view;
    SmallVector<Operation *> chain;
    kern::ConcatOp concat;
    Value concatInput;
  };
  DenseMap<Operation *, SmallVector<std::string>> notes;
  SmallVector<Plan> sinks;
  DenseMap<Operation *, llvm::SmallDenseSet<Value>> concatCovered;
  for (Operation *op : attention) {
    SmallVector<Value> tensors = stridedTensors(op);
    notes[op].resize(tensors.size());
    int64_t eb = kern::elementBytes(mrt(tensors[0]).getElementType());
    for (unsigned i = 0; i < tensors.size(); ++i) {
      if (!isOutput(op, i))
        continue;
      Plan p{op, i, {}, {}, {}, {}};
      std::string why;
      FailureOr<View> v =
          traceSink(tensors[i], op, /*top=*/true, p.chain, p.concat, p.concatInput, why);
      if (failed(v)) {
        notes[op][i] = "kept: " + why;
        continue;
      }
      if (p.chain.empty()) {
        notes[op][i] = "kept: no copy reads it";
        continue;
      }
      if (std::optional<std::string> bad = checkStrides(*v, eb)) {
        notes[op][i] = "kept: " + *bad;
        continue;
      }
      p.view = *v;
      if (p.concat)
        concatCovered[p.concat].insert(p.concatInput);
      sinks.push_back(std::move(p));
    }
  }
  // A concat folds only when every input is an attention or rope output
  // that folds.
  DenseMap<Value, std::pair<View, std::string>> moved; // old buffer -> new view
  llvm::SetVector<Operation *> sinkCopies; // erased once the writes moved
  for (Plan &p : sinks) {
    if (p.concat && concatCovered[p.concat].size() != p.concat.getInputs().size()) {
      notes[p.op][p.index] = llvm::formatv("kept: {0} has inputs that are no foldable attention "
                                           "or rope output ({1} of {2} fold)",
                                           describeOp(p.concat),
                                           concatCovered[p.concat].size(),
                                           p.concat.getInputs().size());
      continue;
    }
    Value old = stridedTensors(p.op)[p.index];
    moved[old] = {p.view, chainText(p.chain)};
    sinkCopies.insert(p.chain.begin(), p.chain.end());
    // The destination must exist before the attention writes it.
    if (Operation *alloc = p.view.root.getDefiningOp())
      if (p.op->isBeforeInBlock(alloc))
        alloc->moveBefore(p.op);
  }
  // Apply: outputs moved, inputs traced; every attention / rope op gets its
  // layout.
  for (Operation *op : attention) {
    SmallVector<Value> tensors = stridedTensors(op);
    auto rope = dyn_cast<kern::RopeOp>(op);
    kern::AttentionSizes sizes;
    kern::RopeSizes ropeSizes;
    SmallVector<kern::AttentionTensorLayout> layouts;
    if (rope) {
      ropeSizes = kern::ropeSizes(rope);
      layouts = llvm::to_vector(kern::ropeLayouts(rope, ropeSizes));
    } else {
      FailureOr<kern::AttentionSizes> s = kern::attentionSizes(op);
      if (failed(s))
        continue;
      sizes = *s;
      layouts = kern::attentionLayouts(op, sizes);
    }
    int64_t eb = kern::elementBytes(mrt(tensors[0]).getElementType());
    bool changed = false;
    for (unsigned i = 0; i < tensors.size(); ++i) {
      Value t = tensors[i];
      std::optional<View> view;
      std::string text;
      if (auto it = moved.find(t); it != moved.end()) {
        view = it->second.first;
        text = it->second.second;
      } else if (!isOutput(op, i)) {
        SmallVector<Operation *> chain;
        std::string why;
        FailureOr<View> v = traceSource(t, nullptr, chain, why);
        if (failed(v)) {
          notes[op][i] = "kept: " + why;
          continue;
        }
        if (chain.empty()) {
          if (notes[op][i].empty())
            notes[op][i] = "kept: no copy produces it";
          continue;
        }
        if (std::optional<std::string> bad = checkStrides(*v, eb)) {
          notes[op][i] = "kept: " + *bad;
          continue;
        }
        view = *v;
        text = chainText(chain);
      }
      if (!view)
        continue;
      tensorOperand(op, i).set(view->root);
      layouts[i] = {view->offset, view->strides[0], view->strides[1], view->strides[2]};
      notes[op][i] = llvm::formatv("folded {0}: offset {1}, strides {2}/{3}/{4}", text,
                                   view->offset, view->strides[0], view->strides[1],
                                   view->strides[2]);
      changed = true;
    }
    if (!changed)
      continue;
    if (rope)
      kern::setRopeLayouts(rope, ropeSizes, layouts);
    else
      kern::setAttentionLayouts(op, sizes, layouts);
  }
  // Record the decisions.
  for (Operation *op : flatRopes) {
    attention.push_back(op);
    notes[op].assign(2, "kept: the rotated tensor is not 4-D (B, H, T, D)");
  }
  for (Operation *op : attention) {
    Builder b(op->getContext());
    SmallVector<Attribute> lines;
    for (auto [i, note] : llvm::enumerate(notes[op]))
      if (!note.empty())
        lines.push_back(b.getStringAttr(std::string(tensorName(op, i)) + ": " + note));
    op->setAttr(kFoldAttr, b.getArrayAttr(lines));
  }
  // The copies behind moved outputs would now copy stale buffers.
  for (Operation *copy : sinkCopies)
    copy->erase();
  eraseDeadCopies();
}

// Copies (and reshapes, allocs) whose results nothing reads any more.
void Folder::eraseDeadCopies() {
  bool erased = true;
  while (erased) {
    erased = false;
    SmallVector<Operation *> dead;
    f_.walk([&](Operation *op) {
      if (auto r = dyn_cast<kern::ReshapeOp>(op)) {
        if (r.getResult().use_empty())
          dead.push_back(op);
        return;
      }
      if (auto a = dyn_cast<kern::AllocOp>(op)) {
        if (a.getResult().use_empty())
          dead.push_back(op);
        return;
      }
      Value out;
      if (auto t = dyn_cast<kern::TransposeOp>(op))
        out = t.getOut();
      else if (auto s = dyn_cast<kern::SliceOp>(op))
        out = s.getOut();
      else if (auto c = dyn_cast<kern::ConcatOp>(op))
        out = c.getOut();
      else
        return;
      Value root = rootOf(out);
      if (!root.getDefiningOp<kern::AllocOp>())
        return;
      Writers w = writersAndReaders(root);
      if (w.readers.empty())
        dead.push_back(op);
    });
    for (Operation *op : dead) {
      op->erase();
      erased = true;
    }
  }
}

struct KernFoldAttentionLayoutPass
    : tcc::impl::KernFoldAttentionLayoutBase<KernFoldAttentionLayoutPass> {
  void runOnOperation() override {
    for (func::FuncOp f : getOperation().getOps<func::FuncOp>())
      Folder(f).run();
  }
};

} // namespace

namespace tcc {

void writeAttentionLayoutReport(ModuleOp module, llvm::raw_ostream &os) {
  os << "# kern-fold-attention-layout report: each attention and rope tensor, its copies "
        "folded into kernel strides or kept and why\n";
  int folded = 0, kept = 0;
  module.walk([&](Operation *op) {
    auto lines = op->getAttrOfType<ArrayAttr>(kFoldAttr);
    if (!lines)
      return;
    auto f = op->getParentOfType<func::FuncOp>();
    os << llvm::formatv("{0} {1} ({2}):\n", op->getName().getStringRef(),
                        nodeName(op->getLoc()), f ? f.getSymName() : "");
    for (Attribute a : lines) {
      StringRef line = cast<StringAttr>(a).getValue();
      (line.contains(": folded") ? folded : kept) += 1;
      os << "  " << line << "\n";
    }
  });
  os << "# summary: " << folded << " tensors folded, " << kept << " kept\n";
}

} // namespace tcc
