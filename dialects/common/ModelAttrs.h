// Names of the attributes that carry model-level facts through the pipeline:
// which function arguments are parameters (with their initializers), data
// inputs or hyper-parameters, and which results are the loss, gradients,
// updated parameters or eval outputs. One place, so importer, passes and
// codegen agree.
//
// Dialect-neutral (builtin MLIR attributes only, namespace tcc::model), so
// code generation reads these without depending on tg. The attribute names
// keep their `tg.` prefix: the IR spelled them so since the first model file,
// and functions carry them unchanged from import through lowering to kern.
#ifndef TCC_DIALECTS_COMMON_MODELATTRS_H
#define TCC_DIALECTS_COMMON_MODELATTRS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace tcc::model {

// Module attributes.
inline constexpr llvm::StringLiteral kModelNameAttr = "tg.model_name";
// {kind = "sgd", learning_rate, momentum, weight_decay} or
// {kind = "adamw", learning_rate, beta1, beta2, eps, weight_decay} (f64
// values; absent ones are 0, except the AdamW betas and eps, which the
// importer always writes).
inline constexpr llvm::StringLiteral kOptimizerAttr = "tg.optimizer";
// The learning-rate schedule the runtime applies (step_abi.h):
// {kind = "constant"} or {kind = "warmup_cosine", warmup_steps (i64),
// decay_steps (i64), min_lr (f64)}; base_lr is the optimizer's learning_rate.
// Absent: constant.
inline constexpr llvm::StringLiteral kLrScheduleAttr = "tg.lr_schedule";
// Max global L2 norm of the gradients (f64 > 0); absent: no clipping.
inline constexpr llvm::StringLiteral kGradClipAttr = "tg.grad_clip";
// The precision policy tg-amp applied: "bf16" | "fp16" | "tf32" | "fp32" |
// "fp8" (absent: fp32); the step descriptor reports it.
inline constexpr llvm::StringLiteral kPrecisionAttr = "tg.precision";
// On an op: tg-amp's decision, "<type>: <why>" (e.g. "bf16: matmul").
inline constexpr llvm::StringLiteral kAmpAttr = "tg.amp";
// On a tg.matmul (precision fp8): its operands' FP8 formats, "<lhs>x<rhs>"
// with each "e4m3" or "e5m2" ("e4m3xe4m3" in the forward; autodiff gives
// the gradient operand e5m2). tg-lower-to-kern copies it to kern.gemm as
// kFp8GemmAttr; the cuda target casts both operands with per-tensor scales
// from their current amax and runs cuBLASLt's FP8 product.
inline constexpr llvm::StringLiteral kFp8Attr = "tg.fp8";
inline constexpr llvm::StringLiteral kFp8GemmAttr = "kern.fp8";
// Unit attribute (tcc compile --deterministic): a step must be bit-identical
// run to run, so kernels may not take an order-dependent (atomic) path.
// Read by tg-lower-to-kern (kern.attention_grad's `deterministic`).
inline constexpr llvm::StringLiteral kDeterministicAttr = "tg.deterministic";
// Unit attribute (tcc compile --data-parallel): the train step is one rank's
// share of a data-parallel job; tg-all-reduce-gradients averages its
// gradients and loss over the ranks.
inline constexpr llvm::StringLiteral kDataParallelAttr = "tg.data_parallel";
// i64 N (tcc compile --shard-optimizer N, ZeRO-1): with tg.data_parallel,
// each rank keeps the optimizer state of 1/N of every parameter whose
// element count N divides; tg-all-reduce-gradients reduce-scatters those
// gradients, the optimizer updates the rank's shard and all-gathers it.
inline constexpr llvm::StringLiteral kShardOptimizerAttr = "tg.shard_optimizer";
// i64 N (tcc compile --shard-parameters N, ZeRO-3 / FSDP), beside
// tg.shard_optimizer = N: every function takes this rank's 1/N of each
// parameter N divides (1-D) and all-gathers it before each use
// (tg-shard-parameters); the update writes the shard only.
inline constexpr llvm::StringLiteral kShardParametersAttr = "tg.shard_parameters";
// On a parameter argument that tg-shard-parameters sharded: {ranks = N,
// shape = array<i64: ...>}, the whole parameter's shape (the argument is
// the rank's 1-D shard), for the step descriptor's whole tensors.
inline constexpr llvm::StringLiteral kParamShardAttr = "tg.param_shard";
// On each function tg-shard-parameters changed: its decisions (each
// parameter sharded and gathered where, or kept whole and why).
inline constexpr llvm::StringLiteral kShardParameterDecisionsAttr =
    "tg.shard_parameter_decisions";
// On the module (tcc compile --reduce-gradients-in f32): every gradient is
// reduced over the ranks in f32, also one computed in bf16 or f16.
inline constexpr llvm::StringLiteral kReduceGradientsInF32Attr = "tg.reduce_gradients_in_f32";
// On @train_step: tg-all-reduce-gradients' decisions (gradients reduced in
// bf16 / f16, late casts moved up; sharded or kept whole and why), for its
// report in the dumps.
inline constexpr llvm::StringLiteral kGradientCollectiveDecisionsAttr =
    "tg.gradient_collective_decisions";
// On a tg.attention or a tg.softmax: tg-fuse-attention's decision,
// "fused: <shape>" or "not fused at <op> (<node>): <why>".
inline constexpr llvm::StringLiteral kFuseAttentionAttr = "tg.fuse_attention";
// On an op: tg-cache-rope's decision, "cached: ...", "fused: ...", "not
// cached: ..." or "not fused: ..." (the NN-tg-cache-rope-report.txt dump).
inline constexpr llvm::StringLiteral kCacheRopeAttr = "tg.cache_rope";
// Micro-batches per optimizer step (i64 K >= 1); absent: 1.
inline constexpr llvm::StringLiteral kMicroBatchesAttr = "tg.micro_batches";
// Dynamic loss scaling (torch.cuda.amp.GradScaler), written by the driver
// (tcc compile --loss-scale dynamic): {init_scale (f64 > 0), growth_factor
// (f64 > 1), backoff_factor (f64 in (0, 1)), growth_interval (i64 >= 1)}.
// Absent: no loss scaling. Read by tg-autodiff (the seed),
// tg-unscale-gradients and tg-update-loss-scale.
inline constexpr llvm::StringLiteral kLossScalingAttr = "tg.loss_scaling";

// Function names of the step.
inline constexpr llvm::StringLiteral kForwardFunc = "forward";
inline constexpr llvm::StringLiteral kTrainStepFunc = "train_step";

// A further entry point of the step (step_abi.h tcc_step_entry): a function
// carrying this string attribute (its entry name, e.g. "encode",
// "train_cached", "prefill") is lowered like @forward and emitted as the
// descriptor's entries[k], in module order. Its arguments carry the roles
// below (parameters by name from the descriptor's table; inputs and outputs
// its own lists). A name beginning with "train" updates parameters and
// optimizer state like @train_step.
inline constexpr llvm::StringLiteral kEntryAttr = "tcc.entry";
// On an argument of an entry function: a state tensor of the entry (a KV
// cache), kept by the runtime between calls (tcc_step_args.entry_state),
// zeros at the start; the value is its name.
inline constexpr llvm::StringLiteral kEntryStateAttr = "tcc.entry_state";
// On a result of an entry function (tensor level): the new value of the
// i-th entry state argument, written back in place (like tg.updates_param).
inline constexpr llvm::StringLiteral kUpdatesEntryStateAttr = "tcc.updates_entry_state";

// Argument attributes.
inline constexpr llvm::StringLiteral kParamAttr = "tg.param"; // ParamInfo dict
inline constexpr llvm::StringLiteral kInputAttr = "tg.input"; // name
// Unit attribute beside tg.input: the loss reads this input as the class
// labels (targets) of a cross-entropy (tg-fuse-cross-entropy marks it), so
// the step descriptor names it (label_input) and trun takes its labels
// from it, not from whichever integer input is shaped [batch].
inline constexpr llvm::StringLiteral kLabelsAttr = "tg.labels";
// A per-step scalar the runtime passes through tcc_step_args:
// "learning_rate" (f32), "step" (i64, 0-based optimizer step), "rng_seed"
// (i64, the run's seed for counter-based randomness such as dropout).
inline constexpr llvm::StringLiteral kHyperAttr = "tg.hyper";
// A model buffer (batch norm's running statistics): a ParamInfo dictionary
// (name, init zeros | ones, torch; trainable false). The train step updates
// it in place (kUpdatesBufferAttr); eval reads it.
inline constexpr llvm::StringLiteral kBufferAttr = "tg.buffer";
// Optimizer state (explicit in the step, allocated and checkpointed by the
// runtime): {param = <param index>, name = "adam_m" | "adam_v" | "momentum"}
// (zeros at the start), or state of the whole step, not of one parameter:
// {name = "loss_scale" | ..., init_value = <f64>} (starts at init_value).
inline constexpr llvm::StringLiteral kOptStateAttr = "tg.opt_state";
// In a parameter's tg.opt_state with ZeRO-1: N, the state holds this rank's
// 1/N of the parameter's flattened elements (1-D).
inline constexpr llvm::StringLiteral kShardRanksField = "shard_ranks";
// Values of kHyperAttr and of the kOptStateAttr name.
inline constexpr llvm::StringLiteral kLearningRateHyper = "learning_rate";
inline constexpr llvm::StringLiteral kStepHyper = "step";
inline constexpr llvm::StringLiteral kRngSeedHyper = "rng_seed";
inline constexpr llvm::StringLiteral kAdamMState = "adam_m";
inline constexpr llvm::StringLiteral kAdamVState = "adam_v";
inline constexpr llvm::StringLiteral kMomentumState = "momentum";
// Loss-scaling state (no param): the current scale, the good steps since the
// last change of the scale (GradScaler's growth tracker), and the updates
// skipped so far (AdamW counts only the steps it applied, as PyTorch does).
inline constexpr llvm::StringLiteral kLossScaleState = "loss_scale";
inline constexpr llvm::StringLiteral kLossScaleGoodStepsState =
    "loss_scale_good_steps";
inline constexpr llvm::StringLiteral kLossScaleSkippedStepsState =
    "loss_scale_skipped_steps";
// FP8 delayed scaling (tg-fp8-scaling): f32 [records, 32], one record per
// FP8 cast of the train step (the step ABI's tcc_fp8_scaling_record,
// TCC_FP8_SCALING_STATE).
inline constexpr llvm::StringLiteral kFp8ScalingState = "fp8_scaling";
// Floats per record: TCC_FP8_SCALING_RECORD_FLOATS.
inline constexpr int64_t kFp8ScalingRecordFloats = 32;

// Result attributes.
inline constexpr llvm::StringLiteral kLossAttr = "tg.loss";     // name of the loss
inline constexpr llvm::StringLiteral kOutputAttr = "tg.output"; // eval output name
inline constexpr llvm::StringLiteral kGradOfAttr = "tg.grad_of"; // param index
// On the train step: [[element type, bytes], ...] of the trainable
// parameters' gradients (tg-autodiff), for the descriptor's
// train_gradient_bytes.
inline constexpr llvm::StringLiteral kGradientBytesAttr = "tg.gradient_bytes_by_dtype";
// i64 N, beside tg.grad_of: the result is this rank's 1/N of the gradient
// (flattened, reduce-scattered over N ranks), not all of it.
inline constexpr llvm::StringLiteral kGradShardAttr = "tg.grad_shard";
inline constexpr llvm::StringLiteral kUpdatesParamAttr = "tg.updates_param"; // param index
// Updated optimizer state, written in place: index among tg.opt_state args.
inline constexpr llvm::StringLiteral kUpdatesOptStateAttr = "tg.updates_opt_state";
// Updated buffer, written in place: index among tg.buffer args.
inline constexpr llvm::StringLiteral kUpdatesBufferAttr = "tg.updates_buffer";
// A value the train entry point reports besides the loss (e.g. "grad_norm",
// or gradients when compiled to emit them): tcc_step_args.train_outputs.
inline constexpr llvm::StringLiteral kTrainOutputAttr = "tg.train_output";
// Train outputs: the global gradient norm before clipping, and (tcc compile
// --emit-gradients) each gradient as "grad:<param name>".
inline constexpr llvm::StringLiteral kGradNormOutput = "grad_norm";
inline constexpr llvm::StringLiteral kGradOutputPrefix = "grad:";
// Train outputs of a step with loss scaling (f32 scalars): the scale this
// step used, 1 when its update was skipped (non-finite gradients) else 0,
// and the updates skipped so far, this one included.
inline constexpr llvm::StringLiteral kLossScaleOutput = "loss_scale";
inline constexpr llvm::StringLiteral kSkippedOutput = "skipped";
inline constexpr llvm::StringLiteral kSkippedStepsOutput = "skipped_steps";

// A parameter's description, stored as a dictionary in kParamAttr.
struct ParamInfo {
  std::string name;
  std::string init = "zeros"; // zeros | ones | normal | uniform
  double scale = 0.0;
  uint64_t seed = 0;
  bool trainable = true;
  // Exempt from weight decay. Written only when set, so the dictionaries of
  // models without it stay as they were.
  bool noWeightDecay = false;
  // How PyTorch holds it (TorchTensor in the schema; the step descriptor's
  // param_torch): the state_dict key (empty: `name`), the permutation with
  // torch = tcc.permute(torchPerm) (empty: the same layout) and further
  // keys of the same tensor. Written as a `torch` dictionary only when set.
  std::string torchName;
  std::vector<int64_t> torchPerm;
  std::vector<std::string> torchAliases;

  bool hasTorch() const {
    return !torchName.empty() || !torchPerm.empty() || !torchAliases.empty();
  }
  // The state_dict key.
  const std::string &torchKey() const { return torchName.empty() ? name : torchName; }

  mlir::DictionaryAttr toAttr(mlir::Builder &b) const {
    llvm::SmallVector<mlir::NamedAttribute> fields = {
        b.getNamedAttr("name", b.getStringAttr(name)),
        b.getNamedAttr("init", b.getStringAttr(init)),
        b.getNamedAttr("scale", b.getF64FloatAttr(scale)),
        b.getNamedAttr("seed", b.getI64IntegerAttr(static_cast<int64_t>(seed))),
        b.getNamedAttr("trainable", b.getBoolAttr(trainable)),
    };
    if (noWeightDecay)
      fields.push_back(b.getNamedAttr("no_weight_decay", b.getBoolAttr(true)));
    if (hasTorch()) {
      llvm::SmallVector<llvm::StringRef> aliases(torchAliases.begin(), torchAliases.end());
      fields.push_back(b.getNamedAttr(
          "torch", b.getDictionaryAttr({
                       b.getNamedAttr("name", b.getStringAttr(torchName)),
                       b.getNamedAttr("perm", b.getI64ArrayAttr(torchPerm)),
                       b.getNamedAttr("aliases", b.getStrArrayAttr(aliases)),
                   })));
    }
    return b.getDictionaryAttr(fields);
  }

  // Returns nullopt when the dictionary misses a field or has a wrong type.
  static std::optional<ParamInfo> fromAttr(mlir::Attribute attr) {
    auto dict = llvm::dyn_cast_or_null<mlir::DictionaryAttr>(attr);
    if (!dict)
      return std::nullopt;
    auto name = dict.getAs<mlir::StringAttr>("name");
    auto init = dict.getAs<mlir::StringAttr>("init");
    auto scale = dict.getAs<mlir::FloatAttr>("scale");
    auto seed = dict.getAs<mlir::IntegerAttr>("seed");
    auto trainable = dict.getAs<mlir::BoolAttr>("trainable");
    if (!name || !init || !scale || !seed || !trainable)
      return std::nullopt;
    ParamInfo p;
    p.name = name.str();
    p.init = init.str();
    p.scale = scale.getValueAsDouble();
    p.seed = static_cast<uint64_t>(seed.getInt());
    p.trainable = trainable.getValue();
    if (mlir::Attribute nwd = dict.get("no_weight_decay")) {
      auto flag = llvm::dyn_cast<mlir::BoolAttr>(nwd);
      if (!flag)
        return std::nullopt;
      p.noWeightDecay = flag.getValue();
    }
    if (mlir::Attribute torch = dict.get("torch"))
      if (!readTorch(torch, p))
        return std::nullopt;
    return p;
  }

private:
  static bool readTorch(mlir::Attribute attr, ParamInfo &p) {
    auto dict = llvm::dyn_cast<mlir::DictionaryAttr>(attr);
    auto name = dict ? dict.getAs<mlir::StringAttr>("name") : nullptr;
    auto perm = dict ? dict.getAs<mlir::ArrayAttr>("perm") : nullptr;
    auto aliases = dict ? dict.getAs<mlir::ArrayAttr>("aliases") : nullptr;
    if (!name || !perm || !aliases)
      return false;
    p.torchName = name.str();
    for (mlir::Attribute d : perm) {
      auto i = llvm::dyn_cast<mlir::IntegerAttr>(d);
      if (!i)
        return false;
      p.torchPerm.push_back(i.getInt());
    }
    for (mlir::Attribute a : aliases) {
      auto s = llvm::dyn_cast<mlir::StringAttr>(a);
      if (!s)
        return false;
      p.torchAliases.push_back(s.str());
    }
    return true;
  }
};

} // namespace tcc::model

#endif
