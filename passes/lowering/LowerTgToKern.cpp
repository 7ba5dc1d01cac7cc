//===- LowerTgToKern.cpp - tg on tensors -> kern on buffers ---------------===//
//
// Each tg function is rewritten into a function on memrefs:
//   arguments keep their order and attributes (params, inputs, hypers,
//   optimizer state); results become trailing output-buffer arguments
//   carrying the result's attributes (tg.loss, tg.output, tg.train_output,
//   tg.grad_of), except updated parameters and optimizer state
//   (tg.updates_param, tg.updates_opt_state), which are written back into
//   their argument's buffer.
// Every intermediate tensor gets a kern.alloc placed right before its
// producer; kern-plan-memory later assigns it a workspace offset.
//
// Elementwise ops are lowered generically: any op implementing
// tg::ScalarOpInterface becomes one kern.elementwise whose body is the op's
// scalar function. Splat constants feeding such an op are folded into the
// body instead of being materialized as buffers.
//
// Results are written straight into their destination buffer when that is
// safe (the kernel computing them is the last to touch the destination, and
// for an in-place update reads the old value only at the position it
// writes); otherwise a copy at the end of the function moves them there.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"
#include "passes/lowering/LowerAttention.h"
#include "passes/lowering/LowerMatmuls.h"
#include "passes/lowering/LowerNorms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace tcc {
#define GEN_PASS_DEF_TGLOWERTOKERN
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

// The splat value of `v` if it is a splat tg.constant, else null.
TypedAttr splatConstant(Value v) {
  auto c = v.getDefiningOp<tg::ConstantOp>();
  if (!c)
    return {};
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense || !dense.isSplat())
    return {};
  return dyn_cast<TypedAttr>(dense.getSplatValue<Attribute>());
}

// out = in (broadcast to out's shape).
// A conv2d / pooling op's layout ("NCHW" unless set).
StringAttr layoutOf(Operation *op) {
  if (auto layout = op->getAttrOfType<StringAttr>("layout"))
    return layout;
  return StringAttr::get(op->getContext(), "NCHW");
}

void buildCopy(OpBuilder &b, Location loc, Value in, Value out) {
  (void)kern::buildElementwise(
      b, loc, in, out,
      [](OpBuilder &, ValueRange s, Value, SmallVectorImpl<Value> &r) {
        r.push_back(s[0]);
        return success();
      });
}

class FunctionLowering {
public:
  FunctionLowering(func::FuncOp oldFunc) : old_(oldFunc), b_(oldFunc) {
    auto module = oldFunc->getParentOfType<ModuleOp>();
    deterministic_ = module && module->hasAttr(model::kDeterministicAttr);
  }

  LogicalResult run() {
    Block &oldBody = old_.getBody().front();
    auto oldRet = cast<func::ReturnOp>(oldBody.getTerminator());

    // Signature: the old arguments, then one buffer per result that is not
    // written back into an argument.
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    for (BlockArgument a : oldBody.getArguments()) {
      argTypes.push_back(bufferTypeOf(a.getType()));
      argAttrs.push_back(old_.getArgAttrDict(a.getArgNumber()));
    }
    SmallVector<int> outArgOfResult(old_.getNumResults(), -1);
    for (unsigned i = 0; i < old_.getNumResults(); ++i) {
      if (old_.getResultAttr(i, model::kUpdatesParamAttr) ||
          old_.getResultAttr(i, model::kUpdatesOptStateAttr) ||
          old_.getResultAttr(i, model::kUpdatesEntryStateAttr) ||
          old_.getResultAttr(i, model::kUpdatesBufferAttr))
        continue;
      outArgOfResult[i] = argTypes.size();
      argTypes.push_back(bufferTypeOf(old_.getResultTypes()[i]));
      argAttrs.push_back(old_.getResultAttrDict(i));
    }
    auto fn = func::FuncOp::create(old_.getLoc(), old_.getName(),
                                   b_.getFunctionType(argTypes, {}));
    fn.setAllArgAttrs(argAttrs);
    if (DictionaryAttr attrs = old_->getDiscardableAttrDictionary())
      fn->setDiscardableAttrs(attrs);
    body_ = fn.addEntryBlock();
    b_.setInsertionPointToStart(body_);
    for (BlockArgument a : oldBody.getArguments())
      buffers_[a] = body_->getArgument(a.getArgNumber());

    for (Operation &op : oldBody.without_terminator())
      if (failed(lower(&op))) {
        fn.erase();
        return failure();
      }

    // Results: first those going to output buffers, then the in-place
    // updates, so an update never overwrites a value an output still needs.
    for (auto [i, v] : llvm::enumerate(oldRet.getOperands()))
      if (outArgOfResult[i] >= 0)
        writeResult(oldRet.getLoc(), buf(v), body_->getArgument(outArgOfResult[i]),
                    /*inPlace=*/false);
    for (auto [i, v] : llvm::enumerate(oldRet.getOperands())) {
      if (outArgOfResult[i] >= 0)
        continue;
      Value dest = updatedArgument(i);
      if (!dest) {
        fn.erase();
        return old_.emitError("tg-lower-to-kern: result ")
               << i << " updates an argument that does not exist";
      }
      Value src = buf(v);
      Value srcRoot = kern::rootBuffer(src);
      if (srcRoot != dest && llvm::is_contained(inPlaceDests_, srcRoot)) {
        fn.erase();
        return old_.emitError("tg-lower-to-kern: result ")
               << i << " is the value of another updated argument";
      }
      inPlaceDests_.push_back(dest);
      if (src != dest)
        writeResult(oldRet.getLoc(), src, dest, /*inPlace=*/true);
    }
    func::ReturnOp::create(b_, oldRet.getLoc());
    old_->getBlock()->getOperations().insert(Block::iterator(old_), fn);
    old_.erase();
    return success();
  }

private:
  // The argument result `i` writes back into: the tg.updates_param-th
  // parameter or the tg.updates_opt_state-th optimizer state argument.
  Value updatedArgument(unsigned i) {
    StringRef role = model::kParamAttr;
    auto index = old_.getResultAttrOfType<IntegerAttr>(i, model::kUpdatesParamAttr);
    if (!index) {
      role = model::kOptStateAttr;
      index = old_.getResultAttrOfType<IntegerAttr>(i, model::kUpdatesOptStateAttr);
    }
    if (!index) { // an entry's state (a KV cache), kept by the runtime
      role = model::kEntryStateAttr;
      index = old_.getResultAttrOfType<IntegerAttr>(i, model::kUpdatesEntryStateAttr);
    }
    if (!index) { // a model buffer (batch norm's running statistics)
      role = model::kBufferAttr;
      index = old_.getResultAttrOfType<IntegerAttr>(i, model::kUpdatesBufferAttr);
    }
    if (!index)
      return Value();
    int64_t seen = 0;
    for (unsigned a = 0; a < old_.getNumArguments(); ++a)
      if (old_.getArgAttr(a, role) && seen++ == index.getInt())
        return body_->getArgument(a);
    return Value();
  }

  // Makes `dest` hold `src` at the end of the function: by letting the
  // kernel that computes `src` write `dest` directly when that is safe,
  // else by a copy appended to the body.
  void writeResult(Location loc, Value src, Value dest, bool inPlace) {
    if (!redirect(src, dest, inPlace))
      buildCopy(b_, loc, src, dest);
  }

  bool redirect(Value src, Value dest, bool inPlace) {
    auto alloc = src.getDefiningOp<kern::AllocOp>();
    if (!alloc || alloc.getType() != dest.getType())
      return false;
    // Exactly one op writes the temporary (directly: nothing writes views).
    Operation *writer = nullptr;
    for (Operation *user : src.getUsers()) {
      if (isa<kern::ReshapeOp>(user) &&
          llvm::any_of(user->getResult(0).getUsers(), [&](Operation *u) {
            return kern::writesBuffer(u, user->getResult(0));
          }))
        return false;
      if (kern::writesBuffer(user, src)) {
        if (writer)
          return false;
        writer = user;
      }
    }
    if (!writer)
      return false;
    if (inPlace) {
      // Nothing after the writer may touch the destination (its old value
      // or a view of it).
      for (Operation *op = writer->getNextNode(); op; op = op->getNextNode())
        if (!isa<kern::ReshapeOp>(op) &&
            llvm::any_of(op->getOperands(), [&](Value v) {
              return kern::rootBuffer(v) == dest;
            }))
          return false;
      // The writer may read the old value only at the position it writes.
      for (Value in : writer->getOperands()) {
        if (in == src || kern::rootBuffer(in) != dest)
          continue;
        auto ew = dyn_cast<kern::ElementwiseOp>(writer);
        if (!ew || cast<MemRefType>(in.getType()).getShape() != ew.getShape())
          return false;
      }
    }
    src.replaceAllUsesWith(dest);
    for (auto &entry : buffers_)
      if (entry.second == src)
        entry.second = dest;
    alloc.erase();
    return true;
  }

  Value alloc(Location loc, Value tensor) {
    return kern::AllocOp::create(b_, loc, bufferTypeOf(tensor.getType()));
  }

  // The buffer of `tensor`. Constants are materialized on first use (many
  // are folded into elementwise bodies and never need a buffer).
  Value buf(Value tensor) {
    if (Value b = buffers_.lookup(tensor))
      return b;
    auto c = tensor.getDefiningOp<tg::ConstantOp>();
    assert(c && "operand lowered before its definition");
    Location loc = c.getLoc();
    Value out;
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    if (dense && dense.isSplat()) {
      out = alloc(loc, c.getResult());
      Attribute v = dense.getSplatValue<Attribute>();
      double value = 0;
      if (auto f = dyn_cast<FloatAttr>(v))
        value = f.getValueAsDouble();
      else
        value = static_cast<double>(cast<IntegerAttr>(v).getValue().getSExtValue());
      kern::FillOp::create(b_, loc, out, b_.getF64FloatAttr(value));
    } else {
      out = kern::ConstantOp::create(b_, loc, bufferTypeOf(c.getType()),
                                     c.getValue());
    }
    buffers_[tensor] = out;
    return out;
  }

  // Any elementwise op: one kern.elementwise whose body is the op's scalar
  // function. Operand buffers appear once each; splat constants are folded.
  LogicalResult lowerScalar(tg::ScalarOpInterface s) {
    Operation *op = s.getOperation();
    Location loc = op->getLoc();
    if (op->getNumResults() == 0)
      return op->emitError("tg-lower-to-kern: elementwise op without results");
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(op->getResult(0).getType()).getShape();
    for (Value r : op->getResults())
      if (cast<RankedTensorType>(r.getType()).getShape() != shape)
        return op->emitError("tg-lower-to-kern: the results of an elementwise "
                             "op must have one shape");
    // operand k -> input slot, or -1 for a folded constant
    llvm::SetVector<Value> inputs;
    SmallVector<int> slot;
    for (Value v : op->getOperands()) {
      if (splatConstant(v)) {
        slot.push_back(-1);
        continue;
      }
      Value b = buf(v);
      inputs.insert(b);
      slot.push_back(std::distance(inputs.begin(), llvm::find(inputs, b)));
    }
    SmallVector<Value> outputs;
    for (Value r : op->getResults())
      outputs.push_back(alloc(loc, r));
    auto ew = kern::buildElementwise(
        b_, loc, inputs.getArrayRef(), outputs,
        [&](OpBuilder &b, ValueRange scalars, Value index,
            SmallVectorImpl<Value> &results) -> LogicalResult {
          SmallVector<Value> operands;
          for (auto [k, v] : llvm::enumerate(op->getOperands()))
            operands.push_back(
                slot[k] >= 0
                    ? scalars[slot[k]]
                    : arith::ConstantOp::create(b, loc, splatConstant(v)).getResult());
          if (failed(s.buildScalar(b, loc, operands, index, results)))
            return op->emitError("tg-lower-to-kern: cannot build the scalar "
                                 "function of ")
                   << op->getName();
          if (results.size() != op->getNumResults())
            return op->emitError("tg-lower-to-kern: the scalar function of ")
                   << op->getName() << " yields " << results.size()
                   << " values for " << op->getNumResults() << " results";
          return success();
        });
    if (failed(ew))
      return failure();
    for (auto [r, out] : llvm::zip(op->getResults(), outputs))
      buffers_[r] = out;
    return success();
  }

  // A widening cast of a 16-bit float to f32 read only by reductions
  // (tg-amp casts a reduction's bf16 input up): the reductions read the
  // 16-bit buffer themselves (kern.reduce loads each element into its f32
  // accumulator: the same values) and the cast writes nothing, which saves
  // a pass that read 2 and wrote 4 bytes per element.
  static bool isCastFoldedIntoReductions(Operation *op) {
    auto c = dyn_cast_or_null<tg::CastOp>(op);
    if (!c || c.getResult().use_empty())
      return false;
    auto from = dyn_cast<RankedTensorType>(c.getInput().getType());
    auto to = dyn_cast<RankedTensorType>(c.getResult().getType());
    if (!from || !to || !to.getElementType().isF32() ||
        !(from.getElementType().isBF16() || from.getElementType().isF16()))
      return false;
    return llvm::all_of(c.getResult().getUsers(), [](Operation *user) {
      return isa<tg::ReduceSumOp, tg::ReduceMeanOp, tg::ReduceMaxOp>(user);
    });
  }

  template <typename ReduceOp>
  LogicalResult reduce(ReduceOp op, kern::ReduceKind kind) {
    Value out = alloc(op.getLoc(), op.getResult());
    Value input = op.getInput();
    if (isCastFoldedIntoReductions(input.getDefiningOp()))
      input = input.getDefiningOp<tg::CastOp>().getInput();
    kern::ReduceOp::create(b_, op.getLoc(), buf(input), out, kind, op.getAxesAttr());
    buffers_[op.getResult()] = out;
    return success();
  }

  LogicalResult lower(Operation *op) {
    Location loc = op->getLoc();
    if (isCastFoldedIntoReductions(op)) // the reductions read its source
      return success();
    if (isLoweredAsNorm(op)) { // LowerNorms.cpp (before casts: it folds some)
      auto bufferOf = [&](Value tensor) { return buf(tensor); };
      auto allocate = [&](Location l, MemRefType t) -> Value {
        return kern::AllocOp::create(b_, l, t);
      };
      NormLoweringContext ctx{b_, bufferOf, allocate, buffers_};
      return lowerNormOp(op, ctx);
    }
    if (auto s = dyn_cast<tg::ScalarOpInterface>(op))
      return lowerScalar(s);
    if (isLoweredAsMatmul(op)) { // LowerMatmuls.cpp
      auto bufferOf = [&](Value tensor) { return buf(tensor); };
      auto allocate = [&](Location l, MemRefType t) -> Value {
        return kern::AllocOp::create(b_, l, t);
      };
      BufferLoweringContext ctx{b_, bufferOf, allocate, buffers_};
      return lowerMatmulOp(op, ctx);
    }
    if (isa<tg::AttentionOp, tg::AttentionGradOp>(op)) { // LowerAttention.cpp
      // (Named: the context's function_refs must not outlive them.)
      auto bufferOf = [&](Value tensor) { return buf(tensor); };
      auto allocate = [&](Location l, MemRefType t) -> Value {
        return kern::AllocOp::create(b_, l, t);
      };
      AttentionLoweringContext ctx{b_, bufferOf, allocate, buffers_, deterministic_};
      return lowerAttentionOp(op, ctx);
    }
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](tg::ConstantOp) { return success(); }) // lowered on demand
        .Case([&](tg::AllReduceOp r) {
          // In place on the input's buffer when nothing else reads it (a
          // gradient), else on a copy.
          Value in = buf(r.getInput());
          Value out = in;
          if (!r.getInput().hasOneUse() || !in.getDefiningOp<kern::AllocOp>()) {
            out = alloc(loc, r.getResult());
            buildCopy(b_, loc, in, out);
          }
          kern::AllReduceOp::create(b_, loc, out, r.getReductionAttr());
          buffers_[r.getResult()] = out;
          return success();
        })
        // ZeRO-1: the exchanges write fresh buffers (an all-gather's is
        // then redirected into its parameter's, see writeResult).
        .Case([&](tg::ReduceScatterOp r) {
          Value out = alloc(loc, r.getResult());
          kern::ReduceScatterOp::create(b_, loc, buf(r.getInput()), out, r.getReductionAttr(),
                                        r.getRanksAttr());
          buffers_[r.getResult()] = out;
          return success();
        })
        .Case([&](tg::RankShardOp r) {
          Value out = alloc(loc, r.getResult());
          kern::RankShardOp::create(b_, loc, buf(r.getInput()), out, r.getRanksAttr());
          buffers_[r.getResult()] = out;
          return success();
        })
        .Case([&](tg::AllGatherOp g) {
          Value out = alloc(loc, g.getResult());
          kern::AllGatherOp::create(b_, loc, buf(g.getInput()), out, g.getRanksAttr());
          buffers_[g.getResult()] = out;
          return success();
        })
        .Case([&](tg::BroadcastToOp bc) {
          Value out = alloc(loc, bc.getResult());
          buildCopy(b_, loc, buf(bc.getInput()), out);
          buffers_[bc.getResult()] = out;
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
        .Case([&](tg::RopeOp r) {
          Value out = alloc(loc, r.getResult());
          kern::RopeOp::create(b_, loc, buf(r.getInput()), buf(r.getCos()),
                               buf(r.getSin()), out, r.getTransposedAttr(),
                               /*sizes=*/nullptr, /*layout=*/nullptr);
          buffers_[r.getResult()] = out;
          return success();
        })
        .Case([&](tg::ReduceSumOp r) { return reduce(r, kern::ReduceKind::sum); })
        .Case([&](tg::ReduceMeanOp r) { return reduce(r, kern::ReduceKind::mean); })
        .Case([&](tg::ReduceMaxOp r) { return reduce(r, kern::ReduceKind::max); })
        .Case([&](tg::ReshapeOp r) {
          buffers_[r.getResult()] = kern::ReshapeOp::create(
              b_, loc, bufferTypeOf(r.getType()), buf(r.getInput()));
          return success();
        })
        .Case([&](tg::TransposeOp t) {
          Value out = alloc(loc, t.getResult());
          kern::TransposeOp::create(b_, loc, buf(t.getInput()), out,
                                    t.getPermAttr());
          buffers_[t.getResult()] = out;
          return success();
        })
        .Case([&](tg::SliceOp s) {
          Value out = alloc(loc, s.getResult());
          kern::SliceOp::create(b_, loc, buf(s.getInput()), out,
                                s.getStartsAttr());
          buffers_[s.getResult()] = out;
          return success();
        })
        .Case([&](tg::SplitOp s) {
          // One slice per piece.
          auto inType = cast<RankedTensorType>(s.getInput().getType());
          int64_t offset = 0, axis = s.getAxis();
          for (Value piece : s.getPieces()) {
            SmallVector<int64_t> starts(inType.getRank(), 0);
            starts[axis] = offset;
            offset += cast<RankedTensorType>(piece.getType()).getDimSize(axis);
            if (piece.use_empty())
              continue;
            Value out = alloc(loc, piece);
            kern::SliceOp::create(b_, loc, buf(s.getInput()), out,
                                  b_.getDenseI64ArrayAttr(starts));
            buffers_[piece] = out;
          }
          return success();
        })
        .Case([&](tg::ConcatOp c) {
          SmallVector<Value> ins;
          for (Value v : c.getInputs())
            ins.push_back(buf(v));
          Value out = alloc(loc, c.getResult());
          kern::ConcatOp::create(b_, loc, ins, out, c.getAxisAttr());
          buffers_[c.getResult()] = out;
          return success();
        })
        .Case([&](tg::GatherOp g) {
          Value out = alloc(loc, g.getResult());
          kern::GatherOp::create(b_, loc, buf(g.getTable()), buf(g.getIds()), out);
          buffers_[g.getResult()] = out;
          return success();
        })
        .Case([&](tg::ScatterAddOp s) {
          Value out = alloc(loc, s.getResult());
          kern::ScatterAddOp::create(b_, loc, buf(s.getUpdates()), buf(s.getIds()),
                                     out);
          buffers_[s.getResult()] = out;
          return success();
        })
        // conv2d and pooling (TgVisionOps.td): one kernel each, attributes
        // (the layout too) kept.
        .Case<tg::Conv2dOp, tg::Conv2dInputGradOp, tg::Conv2dWeightGradOp>(
            [&](Operation *conv) {
              Value result = conv->getResult(0);
              Value out = alloc(loc, result);
              StringRef product = isa<tg::Conv2dOp>(conv)             ? "forward"
                                  : isa<tg::Conv2dInputGradOp>(conv) ? "input_grad"
                                                                     : "weight_grad";
              kern::Conv2dOp::create(
                  b_, loc, buf(conv->getOperand(0)), buf(conv->getOperand(1)), out,
                  b_.getStringAttr(product), cast<DenseI64ArrayAttr>(conv->getAttr("stride")),
                  cast<DenseI64ArrayAttr>(conv->getAttr("padding")),
                  cast<DenseI64ArrayAttr>(conv->getAttr("dilation")),
                  cast<IntegerAttr>(conv->getAttr("groups")), layoutOf(conv));
              buffers_[result] = out;
              return success();
            })
        .Case<tg::MaxPool2dOp, tg::AvgPool2dOp>([&](Operation *pool) {
          Value result = pool->getResult(0);
          Value out = alloc(loc, result);
          kern::Pool2dOp::create(b_, loc, buf(pool->getOperand(0)), Value(), out,
                                 b_.getStringAttr(isa<tg::MaxPool2dOp>(pool) ? "max" : "avg"),
                                 cast<DenseI64ArrayAttr>(pool->getAttr("kernel")),
                                 cast<DenseI64ArrayAttr>(pool->getAttr("stride")),
                                 cast<DenseI64ArrayAttr>(pool->getAttr("padding")),
                                 layoutOf(pool));
          buffers_[result] = out;
          return success();
        })
        .Case([&](tg::Pool2dGradOp p) {
          Value out = alloc(loc, p.getResult());
          kern::Pool2dOp::create(b_, loc, buf(p.getInput()), buf(p.getGrad()), out,
                                 b_.getStringAttr(p.getMode() + "_grad"), p.getKernelAttr(),
                                 p.getStrideAttr(), p.getPaddingAttr(), p.getLayoutAttr());
          buffers_[p.getResult()] = out;
          return success();
        })
        .Default([&](Operation *other) {
          return other->emitError("tg-lower-to-kern: no lowering for ")
                 << other->getName()
                 << " (composite ops are rewritten by tg-decompose first)";
        });
  }

  func::FuncOp old_;
  OpBuilder b_;
  Block *body_ = nullptr;
  llvm::DenseMap<Value, Value> buffers_;
  SmallVector<Value> inPlaceDests_;
  bool deterministic_ = false; // the module's tg.deterministic
};

// Whether nothing touches `root` (or a view of it) after `op`: `op` may
// then write its result over it.
bool lastAccess(Value root, Operation *op) {
  SmallVector<Value> views{root};
  while (!views.empty()) {
    Value v = views.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (auto view = dyn_cast<kern::ReshapeOp>(user)) {
        views.push_back(view.getResult());
        continue;
      }
      if (user != op && (user->getBlock() != op->getBlock() || !user->isBeforeInBlock(op)))
        return false;
    }
  }
  return true;
}

// The cross-entropy gradient writes over the logits when nothing reads
// them afterwards: both are (N, C) of one type, each thread of the kernels
// reads an element before it writes the same position, and a language
// model's logits are the step's largest buffer (GPT-2 124M, B=16: 1.6 GB in
// bf16), so keeping both alive at once costs that much peak memory.
void reuseLogitsForGradient(func::FuncOp f) {
  SmallVector<kern::SoftmaxCrossEntropyGradOp> grads(
      f.getOps<kern::SoftmaxCrossEntropyGradOp>());
  for (kern::SoftmaxCrossEntropyGradOp g : grads) {
    Value logits = g.getLogits(), out = g.getOut();
    if (logits.getType() != out.getType() || !out.getDefiningOp<kern::AllocOp>())
      continue;
    Value root = kern::rootBuffer(logits);
    if (!root.getDefiningOp<kern::AllocOp>())
      continue; // an argument: the caller's buffer
    if (!lastAccess(root, g))
      continue;
    Operation *alloc = out.getDefiningOp();
    out.replaceAllUsesWith(logits);
    alloc->erase();
  }
}

// A GEMM whose f32 residual dies at it accumulates in place: out =
// residual + product writes over the residual (cuBLASLt's C == D; the cpu
// kernel keeps its product apart then). tg-chunk-loss-head's weight
// gradient, summed over row chunks, then takes one buffer instead of two.
// A 16-bit residual keeps a buffer of its own: in place, every cuBLASLt
// candidate of a small bf16 BIAS+residual product was wrong on the H200
// (tests/cuda/gemm_epilogue_test.cu, cuBLASLt 13.1).
void accumulateResidualInPlace(func::FuncOp f) {
  SmallVector<kern::GemmEpilogueOp> gemms(f.getOps<kern::GemmEpilogueOp>());
  for (kern::GemmEpilogueOp g : gemms) {
    Value residual = g.getResidual();
    if (!residual || residual.getType() != g.getOut().getType() ||
        !cast<MemRefType>(residual.getType()).getElementType().isF32())
      continue;
    Value resRoot = kern::rootBuffer(residual), outRoot = kern::rootBuffer(g.getOut());
    auto outAlloc = outRoot.getDefiningOp<kern::AllocOp>();
    if (!outAlloc || !resRoot.getDefiningOp<kern::AllocOp>() ||
        resRoot.getType() != outRoot.getType() || !lastAccess(resRoot, g))
      continue;
    // out's buffer is allocated for g: g writes it first.
    if (llvm::any_of(outRoot.getUsers(), [&](Operation *user) {
          return user != g.getOperation() && !isa<kern::ReshapeOp>(user) &&
                 user->getBlock() == g->getBlock() && user->isBeforeInBlock(g);
        }))
      continue;
    outRoot.replaceAllUsesWith(resRoot);
    outAlloc->erase();
  }
}

struct TgLowerToKernPass : tcc::impl::TgLowerToKernBase<TgLowerToKernPass> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> funcs(getOperation().getOps<func::FuncOp>());
    for (func::FuncOp f : funcs) {
      bool onTensors = llvm::any_of(f.getArgumentTypes(), [](Type t) {
        return isa<RankedTensorType>(t);
      }) || llvm::any_of(f.getResultTypes(), [](Type t) {
        return isa<RankedTensorType>(t);
      });
      if (!onTensors)
        continue;
      std::string name = f.getName().str(); // run() replaces f
      if (failed(FunctionLowering(f).run()))
        return signalPassFailure();
      auto lowered = getOperation().lookupSymbol<func::FuncOp>(name);
      reuseLogitsForGradient(lowered);
      accumulateResidualInPlace(lowered);
    }
  }
};

} // namespace
