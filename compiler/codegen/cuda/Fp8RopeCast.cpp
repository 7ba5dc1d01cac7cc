// Rotary embeddings computed by the FP8 cast that reads them (tg-amp's
// fp8 precision, issue 37). In a LLaMA-style backward, attention's
// backward writes dq and dk, two kern.rope ops rotate them back into their
// columns of the packed dqkv buffer (attention wrote dv's columns there
// itself), and the buffer is read only by the QKV products' gradients, as
// one kept E5M2 cast. Launched, each rope reads its input and writes its
// band in 16 bits, which the cast reads back. Instead the ropes are not
// launched; the cast's source (prelude Fp8RopeSource) computes each band
// from the rope's input and tables as the rope kernel would (each output
// rounded once to the same 16 bits, so the FP8 bytes, scales and
// statistics are those of the unfused step) and reads the other columns
// from the buffer.
#include "compiler/codegen/cuda/CudaStepEmitter.h"
#include "compiler/codegen/cuda/Fp8Gemm.h"
#include "dialects/kern/RopeLayout.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

namespace {

// Where a rope writes in a (rows x cols) buffer: heads of `dim` columns
// from `col`, row b * positions + i for (b, i); nullopt (with `why`) when
// its output is not such a band.
struct RopeBand {
  int64_t col = 0, heads = 0, dim = 0, positions = 0;
  bool overlaps(const RopeBand &o) const {
    return o.col < col + heads * dim && col < o.col + o.heads * o.dim;
  }
};
std::optional<RopeBand> bandOf(kern::RopeOp r, int64_t rows, int64_t cols, std::string &why) {
  const kern::RopeSizes s = kern::ropeSizes(r);
  const kern::AttentionTensorLayout out = kern::ropeLayouts(r, s)[1];
  if (s.batch * s.positions != rows || (s.positions > 1 && out.row != cols) ||
      (s.heads > 1 && out.head != s.dim) || (s.batch > 1 && out.batch != s.positions * cols) ||
      out.offset < 0 || out.offset + s.heads * s.dim > cols) {
    why = "it does not write whole heads of each row of its FP8 reader's operand";
    return std::nullopt;
  }
  // The source's 8-element groups lie in one half of one head.
  if (s.dim % 16 != 0 || out.offset % 8 != 0 || cols % 8 != 0) {
    why = "its heads or columns are not whole groups of 8 in each half";
    return std::nullopt;
  }
  return RopeBand{out.offset, s.heads, s.dim, s.positions};
}

} // namespace

std::optional<std::string> CudaStepEmitter::fp8RopeCastComputes(kern::RopeOp r) {
  // Looked for where FP8 products read the buffer the rope writes (not a
  // step argument); said only then.
  if (!fp8ProductsIn(r))
    return std::nullopt;
  Value p = r.getOut();
  const Footprint out = footprint(p);
  if (out.argument)
    return std::nullopt;
  auto wholeBuffer = [&](Value v) { return sameWorkspaceBytes(footprint(v), out); };
  // The first FP8 product reading the buffer, past ropes that write other
  // bands of it (the other of q and k; their bands are checked below).
  Operation *first = nullptr;
  SmallVector<kern::RopeOp> between;
  for (Operation *op = r->getNextNode(); op; op = op->getNextNode()) {
    if (Fp8Gemm f = Fp8Gemm::of(op); f.runs() && (wholeBuffer(f.a) || wholeBuffer(f.b))) {
      first = op;
      break;
    }
    auto other = dyn_cast<kern::RopeOp>(op);
    if (other && wholeBuffer(other.getOut()) && !overlaps(footprint(other.getInput()), out)) {
      between.push_back(other);
      continue;
    }
    if (mayRead(op, out) || mayWrite(op, out))
      return std::nullopt; // read otherwise first (attention, forward), or overwritten
  }
  if (!first)
    return std::nullopt;
  std::string why;
  SmallVector<std::pair<Operation *, int>> readers = fp8ReadersOf(first->getPrevNode(), p, why);
  if (readers.empty())
    return std::nullopt;
  if (!why.empty())
    return why;
  if (r->getParentOp() != f_.getOperation())
    return std::string("not in the step's top-level block");
  Type et = mrt(r.getInput()).getElementType(), te = mrt(r.getCos()).getElementType();
  if ((!et.isBF16() && !et.isF16()) || mrt(p).getElementType() != et)
    return std::string("its input and output are not the same 16-bit type");
  if (!te.isF32() && te != et)
    return std::string("its tables are neither f32 nor its element type");
  OperandCast c = operandOf(Fp8Gemm::of(readers.front().first), readers.front().second);
  if (c.rows * c.cols != mrt(p).getNumElements())
    return std::string("its FP8 reader takes part of its buffer");
  std::optional<RopeBand> band = bandOf(r, c.rows, c.cols, why);
  if (!band)
    return why;
  for (Value table : {r.getCos(), r.getSin()}) {
    MemRefType tt = mrt(table);
    if (tt.getShape() != ArrayRef<int64_t>{band->positions, band->dim} ||
        !tt.getLayout().isIdentity())
      return std::string("its tables are not contiguous (positions, head size)");
  }
  // Every rope left to one cast is one source instance: the same head
  // size, positions and types, and bands that do not overlap.
  for (const Fp8Deferred &d : fp8Deferred_) {
    if (!sameStart(d.result, out))
      continue;
    auto other = dyn_cast<kern::RopeOp>(d.op);
    if (!other)
      return std::string("the cast computes its buffer from another op");
    std::optional<RopeBand> ob = bandOf(other, c.rows, c.cols, why);
    if (!ob || ob->dim != band->dim || ob->positions != band->positions ||
        mrt(other.getCos()).getElementType() != te)
      return std::string("another rope left to the cast differs in head size, positions or "
                         "table type");
    if (ob->overlaps(*band))
      return std::string("another rope left to the cast writes its columns");
  }
  if (std::optional<std::string> no = fp8OneCastFor(readers))
    return no;
  // Its input and tables must still hold its operands when the first
  // reader casts, and nothing before then reads or writes its band (the
  // scan above: only the ropes `between` touch the buffer).
  if (std::optional<std::string> written =
          fp8InputWrittenBefore(r, {r.getInput(), r.getCos(), r.getSin()}, first))
    return written;
  for (kern::RopeOp other : between) {
    std::optional<RopeBand> ob = bandOf(other, c.rows, c.cols, why);
    if (!ob || ob->overlaps(*band))
      return std::string("a later rope writes its columns before its FP8 reader");
  }
  fp8Deferred_.push_back({out, r.getOperation()});
  return std::string();
}

FailureOr<CudaStepEmitter::Fp8CastSource>
CudaStepEmitter::fp8RopeSource(ArrayRef<kern::RopeOp> ropes, const OperandCast &c) {
  Type et = mrt(c.value).getElementType();
  kern::RopeOp front = ropes.front();
  Type te = mrt(front.getCos()).getElementType();
  std::string why;
  std::optional<RopeBand> like = bandOf(front, c.rows, c.cols, why);
  if (!like)
    return front->emitError("cuda codegen: a rope left to an FP8 cast: ") << why;
  Fp8CastSource src;
  src.type = llvm::formatv("tcc_cuda::Fp8RopeSource<{0}, {1}, {2}, {3}, {4}, {5}>",
                           familyElementType(et, CodeTarget::Cuda),
                           familyElementType(te, CodeTarget::Cuda), c.cols, like->dim,
                           like->positions, ropes.size())
                 .str();
  SmallVector<std::string> params = {"const " + storageType(et) + " *p0"}, bands,
                           args = {name(c.value)};
  double bandElements = 0;
  for (auto [k, op] : llvm::enumerate(ropes)) {
    kern::RopeOp r = op;
    std::optional<RopeBand> band = bandOf(r, c.rows, c.cols, why);
    if (!band)
      return r->emitError("cuda codegen: a rope left to an FP8 cast: ") << why;
    const kern::RopeSizes s = kern::ropeSizes(r);
    const kern::AttentionTensorLayout in = kern::ropeLayouts(r, s)[0];
    const std::string x = llvm::formatv("x{0}", k).str(), cs = llvm::formatv("c{0}", k).str(),
                      sn = llvm::formatv("s{0}", k).str();
    params.push_back(llvm::formatv("const {0} *{1}, const {2} *{3}, const {2} *{4}",
                                   storageType(et), x, storageType(te), cs, sn)
                         .str());
    bands.push_back(llvm::formatv("{{{0}, tcc_cuda::RopeStrides{{{1}, {2}, {3}, {4}}, {5}, {6}, "
                                  "{7}, {8}, {9}}",
                                  familyPointer(et, x, false, CodeTarget::Cuda), in.offset,
                                  in.batch, in.head, in.row,
                                  familyPointer(te, cs, false, CodeTarget::Cuda),
                                  familyPointer(te, sn, false, CodeTarget::Cuda), band->col,
                                  band->heads, r.getTransposed() ? "true" : "false")
                        .str());
    args.push_back(name(r.getInput()));
    args.push_back(name(r.getCos()));
    args.push_back(name(r.getSin()));
    bandElements += static_cast<double>(s.elements());
    src.bytes += static_cast<double>(s.elements()) * kern::elementBytes(et) +
                 2.0 * bufferBytes(mrt(r.getCos()));
  }
  const double elements = static_cast<double>(c.rows) * c.cols;
  src.bytes += (elements - bandElements) * kern::elementBytes(et); // the buffer's other columns
  src.flops = 3.0 * bandElements;                                   // emitRope's
  src.params = llvm::join(params, ", ");
  src.init = src.type + "{" + familyPointer(et, "p0", false, CodeTarget::Cuda) + ", {" +
             llvm::join(bands, ", ") + "}}";
  src.args = llvm::join(args, ", ");
  return src;
}

} // namespace tcc::codegen::cuda
