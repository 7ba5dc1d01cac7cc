//===- Passes.td - tcc passes ---------------------------------------------===//
//
// Every arrow of the pipeline (compiler/pipeline/Pipeline.cpp) is one of these
// passes; each lives in its own file and has a lit test in tests/lit/passes.
//
//===----------------------------------------------------------------------===//
#ifndef TCC_PASSES
#define TCC_PASSES

include "mlir/Pass/PassBase.td"

def TgCacheRope : Pass<"tg-cache-rope", "mlir::ModuleOp"> {
  let summary = "Rotary embeddings: position-only tables become constants, rotations one tg.rope";
  let description = [{
    Before autodiff and tg-amp. (1) A value computed only from constants and
    iotas (no function argument reaches it) through a transcendental op
    (exp, sin, cos, ...) is evaluated once at compile time by the float64
    reference interpreter, rounded to its type, and becomes a dense
    tg.constant: step data instead of a subgraph recomputed every step.
    Tables over max-table-bytes stay computed. (2) x * cos +
    rotate_half(x) * sin, and concat(x1*c - x2*s, x2*c + x1*s) on half
    tables, become one tg.rope. Each decision (and each almost-rotation left
    alone, with the op and condition that failed) is recorded on the op as
    tg.cache_rope = "<decision>: <why>" (--dump-dir:
    NN-tg-cache-rope-report.txt).
  }];
  let options = [
    Option<"maxTableBytes", "max-table-bytes", "int64_t", /*default=*/"64 << 20",
           "largest table computed at compile time, in bytes (64 MiB)">,
  ];
  let dependentDialects = ["tcc::tg::TgDialect", "mlir::func::FuncDialect"];
}

def TgDeriveGenerate : Pass<"tg-derive-generate", "mlir::ModuleOp"> {
  let summary = "Generation with a KV cache: @prefill and @decode entries derived from @forward";
  let description = [{
    After tg-amp, before autodiff; only with tcc compile --generate. A
    GPT-like @forward (token ids (B, T) in, logits (B, T, V) out, causal
    tg.attention) gets two entry functions (tcc.entry): @prefill (tokens
    (B, T) and lengths (B): the forward at the full context, every
    attention's k and v written into the KV-cache state, logits (B, V) at
    each row's last prompt position) and @decode (tokens (B) at positions
    pos (B): every op of the logits' slice re-specialized from T to 1, a
    (T, C) position table and tg.rope's tables read at pos, k and v written
    into the caches at pos, attention over cache positions <= pos; logits
    (B, V)). Caches: "kv.<l>.k" / "kv.<l>.v" (B, Hkv, T, D) per attention
    (tcc.entry_state). Only existing tg ops. The decision or why nothing was
    derived is recorded on @forward as tg.derive_generate.
  }];
  let dependentDialects = ["tcc::tg::TgDialect", "mlir::func::FuncDialect"];
}

def TgCacheFrozen : Pass<"tg-cache-frozen", "mlir::ModuleOp"> {
  let summary = "Splits the frozen encoder off the train step: @encode and @train_cached";
  let description = [{
    After the training recipe (and its CSE), only with tcc compile
    --cache-frozen. Finds in @train_step the values computed from the
    per-sample inputs and frozen parameters only (constants allowed) through
    ops that keep batch rows apart, and among them those the rest of the
    step reads (the cut). When the encoder does real work (a product,
    convolution or attention, and at least 4 FLOPs per cached value), adds
    the entries @encode (the inputs it reads and its frozen parameters ->
    the cut values, tg.output named after their nodes) and @train_cached
    (@train_step with the cut values as inputs, the encoder and the inputs
    only it read removed). @train_step and @forward stay as they are.
    Dropout, a reduction or norm over the batch, batch norm, a product over
    the batch rows end the encoder there. The decision (the cut, bytes per
    sample, FLOPs saved per step) or why nothing was cut is @train_step's
    tg.cache_frozen.
  }];
  let dependentDialects = ["tcc::tg::TgDialect", "mlir::func::FuncDialect"];
}

def TgAmp : Pass<"tg-amp", "mlir::ModuleOp"> {
  let summary = "Automatic mixed precision: casts @forward to the --precision policy";
  let description = [{
    Before autodiff. With precision bf16 or fp16: matmuls take low-precision
    operands (f32 accumulation) and produce low-precision results; losses,
    reductions and norms compute in f32; every other op follows its operands
    (a weight or constant meeting a low activation is cast down, an f32
    activation meeting a low one keeps the op f32). Parameters stay f32, a
    weight is cast once; results keep their declared types. Each decision
    is recorded on the op as tg.amp = "<type>: <why>". fp32 and tf32 change
    no op. fp8 is bf16 plus FP8 products: each matmul of a weight whose
    sizes are multiples of 16, except the LM head (its result feeds the
    loss) and those --fp8-keep names, gets tg.fp8 = "e4m3xe4m3" (its
    reason, or why it stayed bf16, in tg.amp). Sets tg.precision on the
    module.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "bf16 | fp16 | tf32 | fp32 | fp8">,
    Option<"target", "target", "std::string", /*default=*/"\"cuda\"",
           "cpu | cuda: convolutions go to the low type only on cuda">,
    Option<"fp8Keep", "fp8-keep", "std::string", /*default=*/"\"\"",
           "fp8: comma-separated names; a matmul whose node or weight name "
           "contains one stays bf16">,
  ];
  let dependentDialects = ["tcc::tg::TgDialect", "mlir::func::FuncDialect"];
}

def TgConvLayout : Pass<"tg-conv-layout", "mlir::ModuleOp"> {
  let summary = "Chooses NCHW or channels-last for each chain of convolutions, pooling and "
                "batch norm ops, and rewrites the channels-last ones";
  let description = [{
    After tg-amp, on @forward. Chains are connected conv2d / max_pool2d /
    avg_pool2d / rank-4 batch_norm ops (linked through layout-neutral
    rank-4 ops). A chain goes channels-last on the cuda target when its
    convolutions are bf16 / f16, one at least with channels per group
    multiples of 8, and `channels-last` is set (the compile uses cuDNN,
    whose tensor-core engines read NHWC): its ops take layout = "NHWC"
    (batch norm the (N*H*W, C) view), and the transposes this needs are
    moved past elementwise ops, reductions and concatenations until only
    the chain's edges keep one. Every op gets tg.layout = "<layout>: <why>"
    and the function tg.layout_decisions, one line per chain plus the
    transposes left (--dump-dir: NN-tg-conv-layout-report.txt). The
    pipeline runs it only for models with vision ops.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "compile target: cpu or cuda">,
    Option<"channelsLast", "channels-last", "bool", /*default=*/"false",
           "chains may go channels-last (tcc compile sets it on cuda when cuDNN is used "
           "and --no-channels-last is not given)">,
  ];
  let dependentDialects = ["tcc::tg::TgDialect", "mlir::func::FuncDialect"];
}

def TgAutodiff : Pass<"tg-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff: @forward -> @train_step returning loss and gradients";
  let description = [{
    Clones @forward into @train_step and appends the backward graph, built
    op by op through GradientOpInterface, walking the forward ops in reverse.
    The seed d loss is 1, or with tg.loss_scaling on the module the new f32
    optimizer-state argument "loss_scale" (tg.opt_state = {name,
    init_value}), so every gradient is scaled by it.
    Gradients of a value used several times are summed. Integer inputs and
    frozen parameters (trainable = false) get no gradient. @train_step
    returns the loss followed by one gradient per trainable parameter
    (result attribute tg.grad_of = parameter index). Dead forward values
    (eval-only outputs, gradients nobody needs) are removed.
  }];
  let dependentDialects = ["tcc::tg::TgDialect", "mlir::func::FuncDialect"];
}

def TgStripTrainOnlyOps : Pass<"tg-strip-train-only-ops", "mlir::ModuleOp"> {
  let summary = "Makes @forward an eval function: removes train-only ops";
  let description = [{
    Runs after tg-autodiff (which cloned @forward into @train_step). In
    @forward only, every tg.dropout is replaced by its input and every
    tg.attention's dropout is turned off (rate 0, no rng operands);
    @train_step keeps its dropouts.
  }];
  let dependentDialects = ["tcc::tg::TgDialect", "mlir::func::FuncDialect"];
}

def TgAccumulateMicroBatches : Pass<"tg-accumulate-micro-batches", "mlir::ModuleOp"> {
  let summary = "Gradient accumulation: one step over K micro-batches";
  let description = [{
    With tg.micro_batches = K on the module: the data inputs of @train_step
    and @forward become K times larger along their first dimension; the body
    runs once per micro-batch on a slice, and the step returns the mean of
    the K losses and of the K gradients (for a loss that is a batch mean,
    those of one batch of K micro-batches). Eval outputs are concatenated
    along their first dimension. Dropout op ids (tg.dropout, tg.attention,
    tg.attention_grad) are mixed with the micro-batch index, so each
    micro-batch gets its own masks. No-op without
    tg.micro_batches.
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgUnscaleGradients : Pass<"tg-unscale-gradients", "mlir::ModuleOp"> {
  let summary = "Loss scaling: unscales the gradients and checks them for inf/NaN";
  let description = [{
    With tg.loss_scaling on the module (tg-autodiff then seeded the backward
    pass with the "loss_scale" state S): every gradient result of
    @train_step is multiplied by 1 / S, and the step reports the train
    outputs "loss_scale" (S) and "skipped" (1.0 when the summed squares of
    the unscaled gradients are not finite: some element is inf or NaN, as
    GradScaler.unscale_ checks, or beyond ~1e19; else 0.0). The sums of
    squares are built as tg-clip-grad-norm builds them, so CSE shares them
    with clipping. Runs before clipping. No-op without tg.loss_scaling.
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgClipGradNorm : Pass<"tg-clip-grad-norm", "mlir::ModuleOp"> {
  let summary = "Clips the gradients to the global norm tg.grad_clip";
  let description = [{
    As torch.nn.utils.clip_grad_norm_: total = sqrt(sum of squares of all
    gradients), every gradient times min(max_norm / (total + 1e-6), 1).
    @train_step reports total (before clipping) as the train output
    tg.train_output = "grad_norm". Built from tg primitives. No-op without
    tg.grad_clip.
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgSgdUpdate : Pass<"tg-sgd-update", "mlir::ModuleOp"> {
  let summary = "Applies SGD (momentum, weight decay) in @train_step";
  let description = [{
    For modules whose tg.optimizer is sgd (others are left to their
    optimizer's pass): adds the learning-rate argument (tg.hyper =
    "learning_rate", supplied by the runtime every step so schedules stay
    outside the compiled code) and replaces each gradient result by the
    updated parameter (tg.updates_param = index), as torch.optim.SGD:
    tg.sgd_update, or with momentum tg.momentum_update and one buffer per
    parameter (tg.opt_state argument, tg.updates_opt_state result). Weight
    decay is skipped for parameters marked no_weight_decay.
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgAdamWUpdate : Pass<"tg-adamw-update", "mlir::ModuleOp"> {
  let summary = "Applies AdamW in @train_step";
  let description = [{
    For modules whose tg.optimizer is adamw (others are left to their
    optimizer's pass): adds the learning_rate (f32) and step (i64)
    hyper-parameter arguments and, per trainable parameter, the state
    arguments adam_m and adam_v (tg.opt_state = {param, name}); each
    gradient result becomes tg.adamw_update's new parameter (tg.updates_param)
    and the new moments are appended as results (tg.updates_opt_state).
    Weight decay is skipped for parameters marked no_weight_decay.
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgUpdateLossScale : Pass<"tg-update-loss-scale", "mlir::ModuleOp"> {
  let summary = "Loss scaling: skips the update on overflow and adapts the scale";
  let description = [{
    After the optimizer passes, with tg.loss_scaling: where the step reports
    "skipped" = 1, every updated parameter and optimizer state keeps its old
    value (tg.select); the scale S becomes S * backoff_factor on a skipped
    step, S * growth_factor after growth_interval good steps in a row (when
    finite), as GradScaler.update. Adds the f32 state
    "loss_scale_good_steps" and "loss_scale_skipped_steps" (zeros at the
    start), the train output "skipped_steps" (updates skipped so far), and
    makes tg.adamw_update count only applied steps (step minus skipped
    ones), as PyTorch's Adam does. No-op without tg.loss_scaling.
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgEmitGradients : Pass<"tg-emit-gradients", "mlir::ModuleOp"> {
  let summary = "Returns the gradients as train outputs instead of updating";
  let description = [{
    Used instead of clipping and the optimizer (tcc compile
    --emit-gradients): each gradient result of @train_step becomes the train
    output tg.train_output = "grad:<param name>", so the step reports the
    loss and the gradients and leaves the parameters unchanged.
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgFuseCrossEntropy : Pass<"tg-fuse-cross-entropy", "mlir::ModuleOp"> {
  let summary = "cross_entropy (no ignore_index) -> mean of the fused softmax_cross_entropy";
  let description = [{
    Runs before autodiff: tg.cross_entropy(logits (..., C), targets (...))
    becomes reduce_mean(softmax_cross_entropy(reshape(logits, (N, C)),
    reshape(targets, (N)))), whose gradient is the fused
    softmax_cross_entropy_grad, so loss and gradient are one kernel each
    instead of tg-decompose's log-softmax and one-hot primitives. An op with
    ignore_index is left as it is. The data input a cross-entropy reads as
    its targets (through reshapes and casts) gets tg.labels, for the step
    descriptor's label_input.
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgFuseRmsNorm : Pass<"tg-fuse-rms-norm", "mlir::ModuleOp"> {
  let summary = "RMSNorm written out (x * rsqrt(mean(x^2) + eps) * w) -> tg.rms_norm";
  let description = [{
    Runs before autodiff and tg-amp. An RMSNorm written in primitives, as
    imported PyTorch code writes it: mul(x, x) or pow(x, 2), reduce_mean
    over the last axis with keep_dims, add of a splat constant eps, rsqrt
    (or 1 / sqrt, or dividing x by sqrt), times x, and an optional product
    by a (C) weight, becomes one tg.rms_norm: fused kernels forward and
    backward (kern.layer_norm / kern.layer_norm_grad) instead of a
    reduction and three elementwise passes forward and five kernels
    backward. Intermediates read elsewhere are left alone. Each decision
    (fused, or the condition that failed for a reduce_mean over the last
    axis of a square) is recorded as tg.fuse_rms_norm on the op (--dump-dir:
    NN-tg-fuse-rms-norm-report.txt).
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgFuseAttention : Pass<"tg-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Written-out scaled dot-product attention -> tg.attention (flash attention)";
  let description = [{
    Runs before tg-amp and autodiff. From each tg.softmax over the last
    axis: matmul(q, k^T) (transpose_rhs or a tg.transpose of k's last two
    dimensions), an optional scale (mul or div by a splat constant, on the
    scores or on q or k), an optional causal mask (tg.causal_mask with -inf,
    an additive constant 0 / -inf, or tg.select with a lower-triangular
    constant and -inf), the softmax, an optional tg.dropout and matmul(p, v)
    become one tg.attention on q (B, H, T, D) and k, v (B, Hkv, S, D)
    (reshapes around it); k and v broadcast over a trailing block of the
    batch dimensions (matmul broadcasting or tg.broadcast_to) become grouped
    heads. Intermediates read elsewhere, finite mask values, causal T > S
    and, with target=cuda, head sizes other than 64 and 128, f64 or archs
    before sm_80 are left unfused. Each softmax left alone gets
    tg.fuse_attention = "not fused at <op> (<node>): <why>", each
    tg.attention "fused: <shape>".
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu | cuda: on cuda only what the flash kernels take fuses">,
    Option<"cudaArch", "cuda-arch", "std::string", /*default=*/"\"\"",
           "sm_XY of the cuda target (empty: not checked)">,
    Option<"enabled", "enabled", "bool", /*default=*/"true",
           "false: fuse nothing, and report each match as left written out "
           "(tcc compile --no-fuse-attention)">,
  ];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgFuseMatmulEpilogue : Pass<"tg-fuse-matmul-epilogue", "mlir::ModuleOp"> {
  let summary = "matmul + bias add [+ gelu] [+ cast + residual add] -> tg.matmul_epilogue";
  let description = [{
    Runs after the training recipe and the first CSE (tg.matmul_epilogue has
    no gradient). From each tg.matmul whose only reader is an add of an (N)
    bias: the bias add, a tg.gelu of the sum (its other readers, the
    backward's gelu_grad, read the op's pre_activation result) and an add of
    a residual of the result's shape, optionally through a tg.cast, become
    one tg.matmul_epilogue (one GEMM with an epilogue). Batched weights and
    transposed batched lhs are left alone (one GEMM takes one weight
    matrix). With target=cuda only what cuBLASLt's epilogues compute fuses:
    no f64, gelu in its tanh form and with N a multiple of 8, a residual
    only without an activation. The residual sum has the product's type,
    or f32 after a 16-bit product (the GEMM's C/D types). Every
    matmul gets tg.fuse_epilogue = "fused: <epilogue>[; <part> left out:
    <why>]" on the fused op or "not fused: <why>" on itself.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu | cuda: on cuda only what cuBLASLt's epilogues compute fuses">,
    Option<"enabled", "enabled", "bool", /*default=*/"true",
           "false: fuse nothing, and report each match as left unfused "
           "(tcc compile --no-fuse-epilogue)">,
    Option<"biasGradient", "bias-gradient", "bool", /*default=*/"true",
           "false: leave every bias gradient's reduce_sum out of its weight "
           "gradient's product (tcc compile --no-fuse-bias-grad)">,
    Option<"normBiasGradient", "norm-bias-gradient", "bool", /*default=*/"true",
           "false: fuse the residual stream's bias gradients into their weight "
           "gradients' products like the others instead of leaving them to the "
           "layer_norm_grad that writes dY (tcc compile --no-norm-bias-grad)">,
  ];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgDecompose : Pass<"tg-decompose", "mlir::ModuleOp"> {
  let summary = "Rewrites composite tg ops into the primitives lowering knows";
  let description = [{
    softmax, log_softmax (max-subtracted), cross_entropy (log_softmax,
    one-hot through iota/equal/select, ignore_index mask, mean over counted
    positions; NaN when a counted target is outside [0, C)), causal_mask
    (iota/slice/greater/select) and split (slices) become elementwise ops,
    reductions, slices and constants. layer_norm, rms_norm and their
    gradient ops stay whole (tg-lower-to-kern gives each a fused kernel). The
    expansions are those the gradient rules use (TgStructuralBuilders.h),
    so CSE afterwards merges forward and backward copies.
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgAllReduceGradients : Pass<"tg-all-reduce-gradients", "mlir::ModuleOp"> {
  let summary = "Data parallelism: @train_step's gradients and loss averaged over the ranks";
  let description = [{
    With tg.data_parallel on the module (tcc compile --data-parallel):
    every gradient result (tg.grad_of) and the loss result (tg.loss) of
    @train_step becomes tg.all_reduce(mean) of itself, after autodiff and
    micro-batch accumulation, before unscaling, clipping and the
    optimizer, which then see the global batch's gradients on every rank.
    No-op without the attribute. With tg.shard_optimizer = N (ZeRO-1) a
    gradient whose element count N divides is tg.reduce_scatter'd instead
    (this rank's 1/N, result marked tg.grad_shard = N) and the optimizer
    passes update only that shard. A gradient cast(x) of an x computed in
    bf16 or f16 is reduced as cast(all_reduce(x)) (in the narrow type, so
    kern-schedule-collectives can issue it right after x's product); with
    tg.reduce_gradients_in_f32 it stays f32 and its late casts move up to
    right after x's producer instead. The decisions go to
    NN-tg-all-reduce-gradients-report.txt.
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgChunkLossHead : Pass<"tg-chunk-loss-head", "mlir::ModuleOp"> {
  let summary = "Computes the loss head's logits and their gradient in row chunks";
  let description = [{
    Runs on @train_step after the last CSE, before tg-remat. A
    tg.softmax_cross_entropy_grad whose logits come from one tg.matmul
    (X W^T) read by the loss and its gradient only, and whose gradient feeds
    GEMMs that keep rows apart (dX = G W) or sum over them (dW = G^T X),
    is computed in `chunks` pieces of rows at the place of the logits'
    matmul: per piece its logits, loss rows, gradient, dX rows and a GEMM
    that adds the piece's dW to an f32 sum. One piece of logits is live at
    a time instead of all of them. Losses and dX are those of the unchunked
    step; dW is summed in f32 across pieces. @train_step's
    tg.loss_chunk_decisions says what was chunked or why not, and
    tg.loss_chunk_seconds (when a head was chunked) the estimated time
    added. chunks <= 1: nothing.
  }];
  let options = [
    Option<"chunks", "chunks", "int64_t", /*default=*/"1",
           "pieces of rows the loss head is computed in (<= 1: unchanged)">,
  ];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgShardParameters : Pass<"tg-shard-parameters", "mlir::ModuleOp"> {
  let summary = "ZeRO-3 / FSDP: each rank holds 1/N of every parameter, gathered before each use";
  let description = [{
    With tg.shard_parameters = N on the module (tcc compile
    --shard-parameters N, which implies --shard-optimizer N): in every
    function, each parameter argument of n elements, N dividing n, becomes
    this rank's 1-D shard of n / N elements (tg.param_shard records the
    whole shape). Before each op that reads the parameter, a tg.all_gather
    of the shard makes the whole tensor for that op alone, so a whole
    parameter lives only from its gather to its reader (the forward's and
    the backward's readers gather separately). A parameter read through a
    cast to bf16 / f16 (tg-amp's weight cast) gathers the cast shard: half
    the bytes. In @train_step the ZeRO-1 update already works on the shard:
    its tg.rank_shard becomes the argument itself, and the all-gather of
    the updated shard is dropped (the result is the new shard). Parameters
    N does not divide stay whole. Runs after the last CSE (which would merge
    the gathers), before tg-remat. Decisions: NN-tg-shard-parameters-report.txt.
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgFp8Scaling : Pass<"tg-fp8-scaling", "mlir::ModuleOp"> {
  let summary = "Delayed scaling for FP8 casts: one state record per cast of each train step";
  let description = [{
    After tg-remat, with --precision fp8 and delayed scaling (tcc compile's
    default for fp8). Each function that updates parameters and holds FP8
    products (tg.matmul with tg.fp8) gets the whole-step optimizer state
    "fp8_scaling", f32 [2 * products, 32], zeros at the start (init_value
    0): one record per operand cast, the step ABI's tcc_fp8_scaling_record.
    The graph does not read it; the cuda code generator gives each FP8 cast
    the next record (its scale from the record's amax history, updated in
    place by the cast) and trun checkpoints it with the other state. Other
    functions are unchanged; a function that already has the state is an
    error.
  }];
  let dependentDialects = ["tcc::tg::TgDialect", "mlir::func::FuncDialect"];
}

def TgRemat : Pass<"tg-remat", "mlir::ModuleOp"> {
  let summary = "Recomputes forward values in the backward so the step's peak fits a budget";
  let description = [{
    Runs on @train_step after the last CSE, before tg-lower-to-kern. While
    the largest sum of live tensors (results of top-level ops, reshapes as
    views, function arguments outside) exceeds `budget` bytes, drops the
    value live across that peak that frees the most bytes per estimated
    second of recompute (GEMMs and attention by FLOPs, the rest by bytes
    moved) and clones the ops that make it (with any operand that is dead
    by then) right before its first reader after the peak. The clones
    compute exactly what the originals did. Each clone carries tg.remat;
    @train_step's tg.remat_decisions lists every choice (bytes freed,
    FLOPs added) and the largest values left at the last peak with why.
    budget < 0 only reports. tcc compile --memory-budget sets the budget
    and re-plans until kern-plan-memory's plan fits. First, with or without
    a budget (unless copies=false), values made only by copies (broadcasts,
    concatenations, transposes, slices; not casts) of values live anyway
    are recomputed where that frees at least copy-min-bytes (1 MiB) at the
    peak.
  }];
  let options = [
    Option<"budget", "budget", "int64_t", /*default=*/"-1",
           "bytes the live temporaries of @train_step may take (tensor estimate); "
           "< 0: recompute only copies, report the peak">,
    Option<"copies", "copies", "bool", /*default=*/"true",
           "recompute copies (broadcasts, concatenations, transposes, slices) across "
           "the peak "
           "even without a budget">,
    Option<"copyMinBytes", "copy-min-bytes", "int64_t", /*default=*/"1048576",
           "the least a recomputed copy must free at the peak (net of what it "
           "keeps alive)">,
  ];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgLowerToKern : Pass<"tg-lower-to-kern", "mlir::ModuleOp"> {
  let summary = "Lowers tg functions on tensors to kern ops on buffers";
  let description = [{
    Tensor arguments become buffers; results become output-buffer arguments
    (the loss, eval outputs) or, for updated parameters, in-place updates of
    the parameter buffer. Every temporary is a kern.alloc for
    kern-plan-memory to place.
  }];
  let dependentDialects = ["tcc::kern::KernDialect", "mlir::func::FuncDialect"];
}

def KernFuseElementwise : Pass<"kern-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Merges a producer kern.elementwise into its only consumer";
  let description = [{
    When a kern.elementwise writes a temporary read by exactly one later
    kern.elementwise at its own shape (no broadcast), the two become one
    kernel whose body computes the temporary as a scalar, so it never goes
    through memory. Repeats along chains. Then siblings: a kernel right
    after another of its shape that reads a buffer in common with it, and
    touches nothing the other writes, joins it (both outputs, common inputs
    read once). Runs before kern-plan-memory.
  }];
  let dependentDialects = ["tcc::kern::KernDialect"];
}

def KernFuseCrossEntropyGrad
    : Pass<"kern-fuse-cross-entropy-grad", "mlir::ModuleOp"> {
  let summary = "Softmax cross-entropy loss and gradient in one pass over the logits";
  let description = [{
    A kern.softmax_cross_entropy and the later kern.softmax_cross_entropy_grad
    of the same logits and labels become one
    kern.softmax_cross_entropy_with_grad at the gradient's position when the
    gradient's upstream value does not depend on the loss (a mean or sum
    loss); the ops reading the loss move after it. Each row of logits is
    then read once for both. Runs before kern-plan-memory.
  }];
  let dependentDialects = ["tcc::kern::KernDialect"];
}

def KernFoldAttentionLayout : Pass<"kern-fold-attention-layout", "mlir::ModuleOp"> {
  let summary = "Folds the slices, transposes and concats around attention into its strides";
  let description = [{
    Each kern.attention / kern.attention_grad tensor produced by a chain of
    kern.slice / kern.transpose copies (q, k, v split out of a packed
    projection, heads moved forward), or consumed by kern.transpose /
    kern.concat copies (out back to (B, T, H, D), dq, dk, dv concatenated
    into the packed gradient), is read or written in place instead: the op
    gets `sizes` / `layout` (offset and batch, head, row strides per
    tensor) on the chain's end buffer, and the copies are erased. Only when
    safe (single writers, no reads in between, a concat only when all its
    inputs fold, 16-byte strides); each decision is recorded as
    kern.fold_layout on the op (--dump-dir:
    NN-kern-fold-attention-layout-report.txt). After
    kern-fuse-elementwise, before kern-plan-memory.
  }];
  let dependentDialects = ["tcc::kern::KernDialect"];
}

def KernFuseHorizontal : Pass<"kern-fuse-horizontal", "mlir::ModuleOp"> {
  let summary = "Groups independent kernels with one body into multi-tensor kernels";
  let description = [{
    kern.elementwise kernels with the same body whose inputs are full or
    single-element become one kern.multi_elementwise; whole-tensor
    kern.reduce sums one kern.multi_sum. A kernel joins a group when it can
    move to the group's first kernel: no dependence on a member, nothing in
    between touching its buffers, no gemm or attention in between. Each
    decision is recorded as kern.fuse_horizontal. Runs after
    kern-fuse-elementwise, before kern-plan-memory.
  }];
  let options = [
    Option<"enabled", "enabled", "bool", /*default=*/"true",
           "false: group nothing (every kernel stays its own launch)">,
  ];
  let dependentDialects = ["tcc::kern::KernDialect"];
}

def KernScheduleCollectives : Pass<"kern-schedule-collectives", "mlir::ModuleOp"> {
  let summary = "Issues each kern.all_reduce / reduce_scatter / all_gather as soon as its input is final";
  let description = [{
    Moves every kern.all_reduce, kern.reduce_scatter and kern.all_gather
    (tcc compile --data-parallel, --shard-optimizer) up to right after the
    last op before it that touches one of its buffers (through
    kern.reshape), so that on a GPU the exchange overlaps the rest of the
    backward. Then consecutive all-reduces of one element type and
    reduction become buckets (kern.all_reduce_bucket at the last member's
    place) of up to `bucket-bytes` (0: no buckets), as DDP's: one NCCL group
    instead of one call per gradient. Records kern.schedule_collectives on
    each moved op and bucket and the list on the function. Runs after
    kern-fuse-horizontal, before kern-plan-memory.

    ZeRO-3's gathers (tg-shard-parameters: a kern.all_gather into a fresh
    buffer, read by the op after it) are prefetched instead: each moves up
    to right after the reader of an earlier gather, as far as the bytes
    gathered in between stay within `gather-ahead-bytes`, so it runs while
    the kernels before its own reader compute, and a run of them is one
    NCCL group. Its buffer is then live from there (the memory plan counts
    it).
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"25 << 20",
           "close a bucket of all-reduces once it holds this many bytes "
           "(25 MiB, DDP's default; 0: no buckets)">,
    Option<"gatherAheadBytes", "gather-ahead-bytes", "int64_t", /*default=*/"64 << 20",
           "ZeRO-3: the whole-parameter bytes a gather may be issued ahead of its "
           "reader by (64 MiB; 0: each gather right before its reader)">
  ];
  let dependentDialects = ["tcc::kern::KernDialect"];
}

def KernPlanMemory : Pass<"kern-plan-memory", "mlir::ModuleOp"> {
  let summary = "Places every kern.alloc in one workspace arena by liveness";
  let description = [{
    Computes each temporary's live range in program order (following
    kern.reshape aliases), then assigns 64-byte aligned offsets greedy by size (largest first, each at the lowest offset free over its range),
    reusing space of buffers that are dead. Replaces allocs by
    kern.workspace_view and records kern.workspace_bytes on each function
    and (the maximum) on the module.
  }];
  let dependentDialects = ["tcc::kern::KernDialect"];
}

#endif // TCC_PASSES
