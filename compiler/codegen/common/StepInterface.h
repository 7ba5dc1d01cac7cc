// What a generated step looks like from outside, for both targets: the role
// of each argument of @train_step / @forward, and the step descriptor
// (tensor tables, optimizer, learning-rate schedule, entry points) that
// trun reads through tcc_step_get_descriptor. This is the one place code
// generation reads the model-level attributes (dialects/common/ModelAttrs.h).
#ifndef TCC_COMPILER_CODEGEN_COMMON_STEPINTERFACE_H
#define TCC_COMPILER_CODEGEN_COMMON_STEPINTERFACE_H

#include <optional>
#include <string>
#include <vector>

#include "dialects/common/ModelAttrs.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc::codegen {

using namespace mlir;

// What one argument of a step function is: the generators differ only in
// where each kind lives (host pointers, or the GPU control block).
struct ArgumentRole {
  // EntryState: an extra entry's state (tcc.entry_state), args->entry_state.
  // Buffer: a model buffer (tg.buffer: batch norm's running statistics),
  // args->buffers.
  enum Kind { Param, Input, OptimizerState, Hyper, Loss, Output, TrainOutput, EntryState,
              Buffer };
  Kind kind;
  int index = 0;     // among the arguments of its kind
  // Param, input or output name; hyper-parameter name; the loss's name;
  // optimizer state as "<param name>.<state name>" ("w.adam_m").
  std::string label;
  // Hyper only: the StepArgs expression that holds its value.
  std::string hyperValue;
  // Param, and optimizer state of the whole step: its initializer, for the
  // descriptor's tensor table (state of a parameter starts at zeros).
  std::optional<model::ParamInfo> param;
};

// The roles of f's arguments in order. Unknown or non-scalar
// hyper-parameters, malformed optimizer state, gradients left unapplied and
// arguments without a role are errors on f, prefixed with `generator`
// ("cpu codegen").
FailureOr<SmallVector<ArgumentRole>> classifyArguments(func::FuncOp f,
                                                       StringRef generator);

// A descriptor tensor table entry.
struct TableEntry {
  std::string name;
  MemRefType type;
  std::optional<model::ParamInfo> param; // initializer; none: zeros
};

// Bytes of one step-ABI dtype ("TCC_DTYPE_BF16") in the memory plan.
struct DtypeBytes {
  std::string abiDtype;
  int64_t bytes = 0;
};

// A further entry point (a function with tcc.entry): the descriptor's
// tcc_step_entry. Its parameters, optimizer state and train outputs are
// the descriptor's (found by name); inputs, outputs and state its own.
struct EntryInterface {
  std::string name; // the tcc.entry value, a C identifier
  func::FuncOp f;
  SmallVector<TableEntry> inputs, outputs, state;
  bool trainLike = false; // the name begins with "train"
  // The C function the backends emit for it.
  std::string cName() const { return "tcc_entry_" + name; }
};

// What the descriptor says about a step, read from the planned kern module.
struct StepInterface {
  func::FuncOp train, eval;
  int64_t plannedWorkspace = 0; // kern.workspace_bytes
  std::string modelName = "model", optimizerKind = "none", lossName = "loss",
              precision = "f32", schedule;
  double defaultLr = 0;
  int64_t microBatches = 1;
  SmallVector<TableEntry> params, inputs, outputs, states, trainOutputs;
  // @train_step's kern.planned_bytes_by_dtype / kern.peak_bytes_by_dtype,
  // one entry per ABI dtype (i1 and i8 buffers are both u8).
  SmallVector<DtypeBytes> trainPlannedBytes, trainPeakBytes;
  // The trainable parameters' gradients by dtype (tg.gradient_bytes_by_dtype,
  // from tg-autodiff): the descriptor's train_gradient_bytes.
  SmallVector<DtypeBytes> trainGradientBytes;
  // Model buffers (tg.buffer), in @forward's order: the descriptor's
  // buffers / buffer_torch.
  SmallVector<TableEntry> buffers;
  // Bytes of the dense kern.constant data @train_step reads (the
  // descriptor's train_constant_bytes).
  int64_t trainConstantBytes = 0;
  // The train step combines its gradients over ranks (kern.all_reduce,
  // tcc compile --data-parallel): the descriptor's data_parallel.
  bool dataParallel = false;
  // ZeRO-1 (tcc compile --shard-optimizer N): N (0: not sharded), and for
  // each optimizer state tensor the parameter it holds this rank's shard of
  // (-1: whole): the descriptor's shard_optimizer_ranks and
  // optimizer_state_shard_of.
  int64_t shardRanks = 0;
  SmallVector<int32_t> stateShardOf;
  // ZeRO-3 (tcc compile --shard-parameters N): N (0: parameters whole), and
  // every parameter as a whole tensor (params holds the 1-D shards of those
  // tg-shard-parameters sharded): the descriptor's shard_parameter_ranks and
  // whole_params.
  int64_t shardParameterRanks = 0;
  SmallVector<TableEntry> wholeParams;
  // The input the loss reads as class labels (tg.labels), an index into
  // inputs: the descriptor's label_input names it; -1 (NULL there) when
  // none, or when several are (two losses).
  int32_t labelInput = -1;
  // Further entry points, in module order (descriptor entries[k]; profile
  // entry index 2 + k).
  std::vector<EntryInterface> entries;
};

// `who` prefixes errors ("cpu codegen").
FailureOr<StepInterface> collectStepInterface(ModuleOp module, StringRef who);

// Points f's parameter, optimizer-state and train-output roles at the
// descriptor's tables (by name), for an entry function whose signature
// holds a subset of them in another order; failure (a diagnostic on f)
// when one is not in the descriptor.
LogicalResult remapToDescriptor(func::FuncOp f, const StepInterface &iface,
                                SmallVectorImpl<ArgumentRole> &roles, StringRef who);

// Where `f`'s output scratch may start: the end of f's own memory plan
// (its kern.workspace_bytes; the module's when absent), rounded up to
// `alignment`. Train and eval calls never overlap and keep nothing in the
// arena between calls, so eval's output scratch (GPT-2: the f32 logits,
// 3 GiB) lies inside the bytes only the larger train plan needs instead of
// after them.
int64_t outputScratchBase(func::FuncOp f, int64_t modulePlanned, int64_t alignment);

// The tensor tables, the descriptor and tcc_step_get_descriptor. `archLines`
// is the arch string initializer line(s); entry points are tcc_train and
// tcc_eval; `deviceApi` the descriptor's device field.
// `entryFlops`: FLOPs per call of each of iface.entries (whose functions
// are EntryInterface::cName).
void emitDescriptor(llvm::raw_ostream &s, const StepInterface &iface, StringRef target,
                    StringRef archLines, int64_t workspaceBytes, double trainFlops,
                    double evalFlops, StringRef deviceApi,
                    ArrayRef<double> entryFlops = {});

} // namespace tcc::codegen

#endif // TCC_COMPILER_CODEGEN_COMMON_STEPINTERFACE_H
