// One entry point (@train_step or @forward) of a CUDA step: the host body
// that enqueues its kernels, the functions writing hyper-parameters into
// and reading the loss and train outputs out of the control block, its
// launch label table and its tcc_cuda_host::Entry.
//
// The emitter is one class; its kernel families live in files of their own
// (a new family is a new file and a case in emitOp):
//   CudaStepEmitter.cpp     arguments, launches, the op dispatch, the entry
//   ElementwiseKernels.cpp  kern.elementwise (scalar and 16-byte vector)
//   ReductionKernels.cpp    kern.reduce (prelude families, generated rest)
//   GemmKernels.cpp         kern.gemm through cuBLASLt
//   Fp8GemmKernels.cpp      kern.gemm as an FP8 product (--precision fp8)
//   Fp8Gemm.cpp             which products are FP8, their slots and kept casts
//                           (Fp8Gemm.h's analysis)
//   BufferFootprint.cpp     the bytes a buffer occupies; what an op may touch
//   Fp8CastProducers.cpp    elementwise results computed by their FP8 casts
//   CopyKernels.cpp         transpose / slice / concat, fill, constants
//   PreludeKernels.cpp      wrappers of the prelude's fixed families
//                           (gather, scatter-add, softmax cross-entropy)
//   AttentionKernels.cpp    the flash-attention launchers (kern.attention,
//                           kern.attention_grad)
//   RopeKernels.cpp         kern.rope (the prelude's rope family)
//   MultiTensorKernels.cpp  kern.multi_elementwise, kern.multi_sum
//   NormKernels.cpp         kern.layer_norm, kern.layer_norm_grad (the
//                           prelude's fused norm family)
#ifndef TCC_COMPILER_CODEGEN_CUDA_CUDASTEPEMITTER_H
#define TCC_COMPILER_CODEGEN_CUDA_CUDASTEPEMITTER_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/common/AttentionCall.h"
#include "compiler/codegen/common/LoopLayout.h"
#include "compiler/codegen/common/StepArguments.h"
#include "compiler/codegen/cuda/BufferFootprint.h"
#include "compiler/codegen/cuda/CudaCodegenOptions.h"
#include "compiler/codegen/cuda/Fp8Gemm.h"
#include "compiler/codegen/cuda/KernelRegistry.h"
#include "dialects/kern/KernDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

// kControlLossOffset, kControlHyperOffset, kControlHeaderBytes: the layout
// cuda_host_support.h reads (the header is constants only, for inclusion
// inside a namespace).
namespace tcc::codegen::control {
#include "compiler/codegen/cuda/ControlBlockLayout.h"
} // namespace tcc::codegen::control

namespace tcc::codegen::cuda {

// An elementwise body (kern.elementwise, kern.multi_elementwise) printed
// as a device lambda, `auto body = [&](<per-element inputs a<k>>, int64_t
// flat, <results o<j> by reference>) {...};`, after `preamble` (the scalar
// inputs in<k>[0] loaded once as a<k>, and the ops that depend on nothing
// else, hoisted).
struct ElementwiseBody {
  std::string preamble, lambda;
  llvm::SmallVector<size_t> perElementInput; // the inputs passed per element, in order
  int64_t ops = 0;                           // non-constant ops per element
};
// How the body reads its block argument k (input in<k>, elements of `type`).
struct BodyArgument {
  enum Kind { Skip, Scalar, PerElement } kind;
  mlir::Type type;
};
// `flat`: the block argument of the flat index; `indent`: of the lambda's
// statements.
mlir::FailureOr<ElementwiseBody> printBodyLambda(mlir::Block &body,
                                                 llvm::ArrayRef<BodyArgument> args,
                                                 mlir::Value flat,
                                                 llvm::ArrayRef<mlir::Type> outTypes,
                                                 llvm::StringRef indent);

// A launch of one of the prelude's fixed kernel families through a
// generated wrapper `void (cudaStream_t s, p0, ..., pN[, status, code])`.
struct FamilyLaunch {
  StringRef kind;              // the wrapper's name suffix ("reduce", "gather")
  std::string launcherCall;    // the prelude launcher call, on p0..pN
  SmallVector<Value> buffers;  // p0..pN
  SmallVector<bool> written;   // which buffers are outputs (not const)
  bool checked = false;        // takes status and code (bad ids or labels)
  double flops = 0, bytes = 0; // for the kernel list
  std::string shape;           // for the kernel list
};

class CudaStepEmitter : public ArgumentPlacement {
public:
  // `entry` is "train" or "eval"; `gemmSites` numbers cuBLASLt plans
  // across both entries.
  CudaStepEmitter(func::FuncOp f, StringRef entry, KernelRegistry &kernels,
                  const CudaCodegenOptions &options, int &gemmSites)
      : f_(f), entry_(entry.str()), kernels_(kernels), options_(options),
        gemmSites_(gemmSites) {}

  // Makes this a further entry of `iface` (tcc.entry, descriptor
  // entries[k]): profile entry 2 + k, the runtime's name `name`; call
  // before emit. `entry` (the constructor's) is then "entry_<name>".
  void asEntry(const StepInterface &iface, int k, StringRef name) {
    entryOf_ = &iface;
    profileEntry_ = 2 + k;
    displayName_ = name.str();
  }

  LogicalResult emit(int64_t outputScratchBase, double &flops);

  // The body, hyper, finish functions, label table and entry.
  std::string source() const;

  int64_t outputScratchBytes() const { return scratch_.bytes; }
  int64_t controlBytes() const { return controlBytes_; }
  // The most scratch any kern.reduce's phases take (ReducePlan), in the
  // shared workspace after the control block.
  int64_t reduceScratchBytes() const { return reduceScratchBytes_; }
  const std::vector<Launch> &launches() const { return launches_; }
  // Attention call sites that run on cuDNN when it loads (attention.h).
  // ... and convolutions (ConvKernels.cpp): cuDNN sites of either kind
  // (the step then links the cuDNN unit).
  int cudnnAttentionSites() const {
    return static_cast<int>(attentionSites_.size() + convSites_.size());
  }
  // cuBLASLt epilogue products a CUTLASS sm90 instance also computes
  // (host_support/gemm.h cutlass_epilogue_for, the same test on the
  // static shape): the step then links the CUTLASS unit when it can.
  int cutlassSm90Sites() const { return cutlassSm90Sites_; }
  // Attention sites tcc's sm90 kernels may run (timed against cuDNN's at
  // run time, host_support/attention_sm90_choice.h): the step then links
  // the sm90 attention units.
  int sm90AttentionSites() const { return sm90AttentionSites_; }

  // Hyper-parameters, the loss and train outputs live in the control block.
  FailureOr<std::string> placeArgument(const ArgumentRole &role, const std::string &n,
                                       MemRefType t) override;

private:
  std::string fresh(Value v) { return names_.fresh(v); }
  std::string name(Value v) { return names_(v); }

  // Who checks a launch for errors: the generic after_launch line the
  // emitter writes after the call, or the call itself (host-support calls
  // such as gemm and memset_zero that return their own status).
  enum class LaunchCheck { AfterLaunch, InCall };
  // A launch of `kernel`: the call, its check, its label and list entry.
  void launch(llvm::raw_ostream &os, Operation *op, const std::string &kernel,
              const std::string &call, const std::string &shape, double flops,
              double bytes, LaunchCheck check = LaunchCheck::AfterLaunch);
  // Adds grid-stride kernel `k` and launches it on `buffers` (the
  // launcher's parameters after the stream, in order).
  void launchGridStride(llvm::raw_ostream &os, Operation *op, const GridStrideKernel &k,
                        ValueRange buffers, double flops, double bytes);
  int32_t nextId() const { return static_cast<int32_t>(labels_.size()); }

  LogicalResult emitOp(Operation *op, llvm::raw_ostream &os, double &flops);

  // Data parallelism (kern.all_reduce): the reduction is queued on the
  // runtime's communication stream and overlaps the kernels after it; the
  // step stream waits for it (tcc_collectives.wait) only before the first
  // op whose buffers overlap a buffer still being reduced, or at the end.
  // (Buffers' bytes: BufferFootprint.h's Footprint.)
  LogicalResult emitAllReduce(kern::AllReduceOp r, llvm::raw_ostream &os);
  LogicalResult emitAllReduceBucket(kern::AllReduceBucketOp bucket, llvm::raw_ostream &os);
  // ZeRO-1: kern.reduce_scatter and kern.all_gather queued like the
  // all-reduce (both buffers busy until the wait); kern.rank_shard, a copy
  // on the step stream at this rank's offset.
  LogicalResult emitShardExchange(Operation *op, llvm::raw_ostream &os);
  void declareCollectives(llvm::raw_ostream &os);
  void waitIfTouchingReduced(Operation *op, llvm::raw_ostream &os);
  void waitForReductions(llvm::raw_ostream &os);
  SmallVector<Footprint> reducing_;
  bool declaredCollectives_ = false;

  // PreludeKernels.cpp
  LogicalResult emitFamily(Operation *op, llvm::raw_ostream &os, const FamilyLaunch &l);
  LogicalResult emitGather(kern::GatherOp g, llvm::raw_ostream &os);
  LogicalResult emitScatterAdd(kern::ScatterAddOp sa, llvm::raw_ostream &os, double &flops);
  LogicalResult emitSoftmaxXent(kern::SoftmaxCrossEntropyOp x, llvm::raw_ostream &os,
                                double &flops);
  LogicalResult emitSoftmaxXentGrad(kern::SoftmaxCrossEntropyGradOp x, llvm::raw_ostream &os,
                                    double &flops);
  LogicalResult emitSoftmaxXentWithGrad(kern::SoftmaxCrossEntropyWithGradOp x,
                                        llvm::raw_ostream &os, double &flops);
  // AttentionKernels.cpp
  LogicalResult emitAttention(kern::AttentionOp a, llvm::raw_ostream &os, double &flops);
  LogicalResult emitAttentionGrad(kern::AttentionGradOp g, llvm::raw_ostream &os,
                                  double &flops);
  FailureOr<std::string> attentionDropoutKey(Operation *op, const AttentionCall &c);
  void launchAttention(llvm::raw_ostream &os, Operation *op, const std::string &kernel,
                       const std::string &hostArgs, const std::string &dropoutKey,
                       const AttentionCall &c, double flops, double bytes,
                       const std::string &cudnnCall = "",
                       const std::string &sm90Call = "");
  // Why tcc's sm90 kernels cannot run a cuDNN site ("" when they may).
  std::string sm90AttentionRefusal(const AttentionCall &c, bool backward) const;
  // A call cuDNN may run: its AttentionSite declaration's name ("" when it
  // may not: dropout, f32, a head size the flash kernels lack, --no-cudnn),
  // and whether tcc's sm90 kernels are timed against it there (the
  // declaration's comment says why not).
  struct CudnnAttentionSite {
    std::string name;
    bool sm90 = false;
  };
  CudnnAttentionSite cudnnAttentionSite(Operation *op, const AttentionCall &c, Type element,
                                        bool backward);
  // RopeKernels.cpp
  LogicalResult emitRope(kern::RopeOp r, llvm::raw_ostream &os, double &flops);
  // MultiTensorKernels.cpp
  LogicalResult emitMultiElementwise(kern::MultiElementwiseOp e, llvm::raw_ostream &os,
                                     double &flops);
  LogicalResult emitMultiSum(kern::MultiSumOp m, llvm::raw_ostream &os, double &flops);
  // NormKernels.cpp
  LogicalResult emitLayerNorm(kern::LayerNormOp n, llvm::raw_ostream &os, double &flops);
  LogicalResult emitLayerNormGrad(kern::LayerNormGradOp g, llvm::raw_ostream &os,
                                  double &flops);
  LogicalResult emitBatchNormReduction(Operation *op, Value input, ArrayRef<Value> buffers,
                                       size_t firstWritten, StringRef launcher,
                                       double flopsPerValue, llvm::raw_ostream &os,
                                       double &flops);
  LogicalResult emitBatchNormStats(kern::BatchNormStatsOp op, llvm::raw_ostream &os,
                                   double &flops);
  LogicalResult emitBatchNormGradSums(kern::BatchNormGradSumsOp op, llvm::raw_ostream &os,
                                      double &flops);
  // ConvKernels.cpp
  LogicalResult emitConv2d(kern::Conv2dOp c, llvm::raw_ostream &os, double &flops);
  LogicalResult emitPool2d(kern::Pool2dOp p, llvm::raw_ostream &os, double &flops);
  // The ConvSite declaration of a convolution cuDNN may run ("" when it may
  // not: f64, --no-cudnn, no cuDNN frontend at compile time).
  std::string cudnnConvSite(kern::Conv2dOp c, int product, ArrayRef<int64_t> x,
                            ArrayRef<int64_t> w, ArrayRef<int64_t> y, bool nhwc);
  // CopyKernels.cpp
  LogicalResult emitCopy(Operation *op, llvm::raw_ostream &os, const StridedCopy &c,
                         StringRef kind);
  LogicalResult emitFill(kern::FillOp fill, llvm::raw_ostream &os);
  LogicalResult emitConstant(kern::ConstantOp c, llvm::raw_ostream &os);
  // GemmKernels.cpp
  LogicalResult emitGemm(kern::GemmOp g, llvm::raw_ostream &os, double &flops);
  LogicalResult emitGemmEpilogue(kern::GemmEpilogueOp g, llvm::raw_ostream &os,
                                 double &flops);
  LogicalResult emitGemmDgelu(kern::GemmDgeluOp g, llvm::raw_ostream &os, double &flops);
  LogicalResult emitGemmBiasGrad(kern::GemmBiasGradOp g, llvm::raw_ostream &os,
                                 double &flops);
  // Fp8GemmKernels.cpp: a kern.gemm (or residual-only kern.gemm_epilogue)
  // tg-amp's fp8 precision marked; the FP8 casts held in the scratch slots
  // (Fp8Gemm.h), forgotten after an op that writes their source or may use
  // the shared workspace.
  LogicalResult emitGemmFp8(Operation *g, const Fp8Gemm &f, llvm::raw_ostream &os,
                            double &flops);
  void forgetFp8Casts(Operation *op);
  struct Fp8Cast {
    Footprint source;
    Type element;
    int64_t rows = 0, cols = 0; // as stored
    bool e5m2 = false, plain = false, transposed = false;
    int slot = 0;
    uint64_t lastUse = 0;
  };
  SmallVector<Fp8Cast> fp8Casts_;
  uint64_t fp8Clock_ = 0;
  Fp8Slot fp8Slot_;
  // Delayed scaling: the step state tg-fp8-scaling added to a train step
  // (f32 [records, 32]: model::kFp8ScalingState), found on the first cast;
  // each cast the function emits takes the next record.
  std::optional<std::pair<Value, int64_t>> fp8Records_;
  int64_t fp8RecordsUsed_ = 0;
  // The function's kept casts (Fp8Gemm.h), planned on the first product.
  std::optional<Fp8KeptPlan> fp8Kept_;
  // The batched casts (Fp8KeptPlan): emitted at the first product; each
  // one's record, taken at its first reader (emit() puts it in the batch).
  bool fp8BatchEmitted_ = false;
  llvm::DenseMap<int, int64_t> fp8BatchRecords_;
  SmallVector<SmallVector<int>> fp8BatchGroups_; // each batch launch's casts
  // Fp8CastProducers.cpp: an elementwise op whose 16-bit results only FP8
  // products read (SwiGLU's gate x up before the MLP's output product; its
  // backward's dG and dU) is not launched; the first reader's cast computes
  // each element from the op's inputs instead (a generated cast source),
  // so the results are never written or read back in 16 bits.
  // std::nullopt: no FP8 product reads a result; "": left to the cast
  // (fp8Deferred_); else why not.
  std::optional<std::string> fp8CastComputes(kern::ElementwiseOp e);
  // `emit` unless `refused` is "" (the cast computes the op); a refusal
  // is added to the launch's shape.
  LogicalResult emitUnlessCastComputes(const std::optional<std::string> &refused,
                                       llvm::raw_ostream &os,
                                       llvm::function_ref<LogicalResult()> emit);
  // The FP8 products reading `result` of `producer` (product, operand), in
  // order.
  static SmallVector<std::pair<Operation *, int>>
  fp8ReadersOf(Operation *producer, Value result, std::string &why);
  // Whether the module of `op` has FP8 products (fp8Slot_, planned on the
  // first call).
  bool fp8ProductsIn(Operation *op);
  // Why a cast at `maker` would not find `inputs` as `producer` left them
  // (an op between the two writes one), else std::nullopt.
  static std::optional<std::string> fp8InputWrittenBefore(Operation *producer, ValueRange inputs,
                                                          Operation *maker);
  // Whether the first FP8 reader of a result that FP8 products read is the
  // maker of its one kept cast (every later reader taking that cast), or
  // its only reader; else why not.
  std::optional<std::string>
  fp8OneCastFor(ArrayRef<std::pair<Operation *, int>> readers);
  // Whether every reader after the first takes kept cast `cast` (not as
  // its maker); fp8Kept_ planned.
  bool fp8LaterReadersTake(ArrayRef<std::pair<Operation *, int>> readers, int cast) const;
  // Fp8CastProducers.cpp: a member of a multi-tensor f32 -> 16-bit cast
  // (the step's weight casts, one kern-fuse-horizontal group) whose result
  // only FP8 products read, through one cast that the first product's
  // batch makes (Fp8KeptPlan: the weights under delayed scaling), is not
  // launched; the batch reads the f32 input and rounds it as the member
  // would (prelude Fp8Rounded), so the 16-bit copy is never written or
  // read (4 bytes an element less: 2 written, 2 read back). Same answers as
  // fp8CastComputes; "" records the input in fp8BatchSources_.
  std::optional<std::string> fp8BatchComputes(kern::MultiElementwiseOp e, int64_t member);
  // Batched kept cast (Fp8KeptPlan::casts index) -> the f32 tensor its
  // batch launch reads in place of the 16-bit copy left unwritten.
  llvm::DenseMap<int, Value> fp8BatchSources_;
  // NormKernels.cpp: a kern.layer_norm whose 16-bit output only FP8
  // products read (LLaMA's RMSNorm before the QKV and MLP products) is not
  // launched either; its first reader's cast normalizes and casts in one
  // pass (prelude launch_layer_norm_fp8_quantize), so y is never written or
  // read back. Same answers as fp8CastComputes.
  std::optional<std::string> fp8NormCastComputes(kern::LayerNormOp n);
  // The cast of `c` (an operand the deferred norm `n` writes) as one
  // kernel: its definition text, parameters, call arguments, work and bytes.
  struct Fp8NormCastKernel {
    std::string text, params, args;
    double flops = 0, bytes = 0;
  };
  Fp8NormCastKernel fp8NormCastKernel(kern::LayerNormOp n, const OperandCast &c, bool plain,
                                      bool transposed, bool delayed);
  // NormKernels.cpp: a kern.layer_norm_grad whose 16-bit copy of dx (the
  // residual stream's gradient as the next products' operand) only FP8
  // products read runs at its first reader's cast instead of where it is:
  // one launch writes dx, the sums and the FP8 bytes (prelude
  // launch_layer_norm_backward_fp8_quantize), so the copy is never written
  // or read back. Same answers as fp8CastComputes.
  std::optional<std::string> fp8NormGradCastComputes(kern::LayerNormGradOp g);
  Fp8NormCastKernel fp8NormGradCastKernel(kern::LayerNormGradOp g, const OperandCast &c,
                                          bool plain, bool transposed, bool delayed);
  // Fp8RopeCast.cpp: a kern.rope writing a band of columns of a buffer
  // that only FP8 products read, through one kept cast made by the first
  // (LLaMA's backward: dq and dk rotated back into the packed dqkv buffer)
  // is not launched; that cast's source computes the band from the rope's
  // input and tables (prelude Fp8RopeSource) and reads the other columns
  // from the buffer. Same answers as fp8CastComputes.
  std::optional<std::string> fp8RopeCastComputes(kern::RopeOp r);
  // An op left to the cast of its first FP8 reader: a kern.elementwise
  // (Fp8CastProducers.cpp), a kern.layer_norm or a kern.layer_norm_grad
  // (NormKernels.cpp), kern.rope ops (Fp8RopeCast.cpp).
  struct Fp8Deferred {
    Footprint result;
    Operation *op;
  };
  SmallVector<Fp8Deferred> fp8Deferred_;
  // A group's casts (Fp8KeptPlan::Group) at its maker, `g`: one launch
  // computing every result of the group's op (left to it by
  // fp8CastComputes) into its kept casts. The groups made so far: their
  // other members' first readers take their records and cast nothing.
  bool emitFp8GroupCast(Operation *g, int group, llvm::raw_ostream &os, double &flops);
  llvm::DenseSet<int> fp8GroupsMade_;
  // The cast source (prelude fp8_kernels.cuh) computing `e`'s result:
  // `definition` defines struct @NAME@_src over e's inputs, which the
  // launcher takes as `params` and builds as `init`; the launch passes
  // `args`. `flops` and `bytes`: e's work and the inputs it reads.
  // `type`: the source's type (a prelude template's instance has no
  // definition).
  struct Fp8CastSource {
    std::string definition, params, init, args, type = "@NAME@_src";
    double flops = 0, bytes = 0;
  };
  FailureOr<Fp8CastSource> fp8ElementwiseSource(kern::ElementwiseOp e);
  // The cast source computing the bands of the ropes left to the cast of
  // `c` (fp8RopeCastComputes) and reading the rest of c's buffer.
  FailureOr<Fp8CastSource> fp8RopeSource(ArrayRef<kern::RopeOp> ropes, const OperandCast &c);
  // ElementwiseKernels.cpp
  LogicalResult emitElementwise(kern::ElementwiseOp e, llvm::raw_ostream &os, double &flops);
  FailureOr<ElementwiseBody> printElementwiseBody(kern::ElementwiseOp e);
  // ReductionKernels.cpp
  LogicalResult emitReduce(kern::ReduceOp r, llvm::raw_ostream &os, double &flops);
  LogicalResult emitGenericReduce(kern::ReduceOp r, llvm::raw_ostream &os, int kind,
                                  double bytes);

  func::FuncOp f_;
  std::string entry_;
  // Further entries (asEntry): the descriptor it belongs to, the profile
  // index and the name errors and the runtime use; counts of f's inputs,
  // outputs and entry state (for run_call's Entry).
  const StepInterface *entryOf_ = nullptr;
  int profileEntry_ = -1;
  std::string displayName_;
  int numInputs_ = 0, numOutputs_ = 0, numState_ = 0;
  KernelRegistry &kernels_;
  std::vector<Launch> launches_; // in label order
  const CudaCodegenOptions &options_;
  int &gemmSites_;
  int cutlassSm90Sites_ = 0;
  int sm90AttentionSites_ = 0;
  ValueNames names_;
  OutputScratch scratch_{0, 0, 256};
  std::string body_, hyper_, finish_;
  std::string attentionDecls_;               // file-scope AttentionSite objects
  std::vector<std::string> attentionSites_; // their names
  std::vector<std::string> convSites_;      // ConvSite objects (in attentionDecls_)
  std::vector<std::string> labels_;
  int hyperSlots_ = 0; // control-block hyper-parameter slots used
  int64_t reduceScratchBytes_ = 0;
  int64_t controlBytes_ = control::kControlHeaderBytes; // header + train outputs so far
};

} // namespace tcc::codegen::cuda

#endif // TCC_COMPILER_CODEGEN_CUDA_CUDASTEPEMITTER_H
