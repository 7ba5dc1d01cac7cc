/*
 * tcc step ABI — the one C contract between a compiled step.so (written by
 * tcc's code generators) and the runtime that loads it (trun).
 *
 * A step.so exports exactly one symbol, `tcc_step_get_descriptor`, returning
 * a pointer to a static descriptor. Everything else (entry points, tensor
 * lists) is reached through the descriptor, so adding an entry point later
 * means appending a field, not a new dlsym.
 *
 * Ownership: trun owns all memory. The step never allocates; it computes on
 * the buffers passed in tcc_step_args. GPU steps (target "cuda") also give
 * trun a tcc_device_api: trun allocates device memory through it, so trun
 * itself has no CUDA dependency (the step library links the CUDA runtime).
 *
 * Compatibility rule: TCC_STEP_ABI_VERSION changes whenever an existing field
 * changes meaning or position. trun refuses any other version.
 */
#ifndef TCC_STEP_ABI_H
#define TCC_STEP_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TCC_STEP_ABI_VERSION 3u
#define TCC_STEP_DESCRIPTOR_SYMBOL "tcc_step_get_descriptor"

typedef enum tcc_dtype {
  TCC_DTYPE_INVALID = 0,
  TCC_DTYPE_F32 = 1,
  TCC_DTYPE_F64 = 2,
  TCC_DTYPE_I32 = 3,
  TCC_DTYPE_I64 = 4,
  TCC_DTYPE_U8 = 5,
  TCC_DTYPE_BF16 = 6,
  TCC_DTYPE_F16 = 7,
} tcc_dtype;

typedef enum tcc_init_kind {
  TCC_INIT_ZEROS = 0,
  TCC_INIT_ONES = 1,
  TCC_INIT_NORMAL = 2,  /* mean 0, standard deviation = scale */
  TCC_INIT_UNIFORM = 3, /* uniform in [-scale, scale) */
  TCC_INIT_CONSTANT = 4, /* every element = scale (e.g. the loss scale) */
} tcc_init_kind;

typedef enum tcc_status {
  TCC_STATUS_OK = 0,
  TCC_STATUS_BAD_ARGS = 1,
  TCC_STATUS_RUNTIME_ERROR = 2,
} tcc_status;

/* The learning rate trun passes at optimizer step s (0-based):
 *   CONSTANT:       base_lr
 *   WARMUP_COSINE:  s < warmup_steps:  base_lr * (s + 1) / warmup_steps
 *                   s >= decay_steps:  min_lr
 *                   otherwise, with r = (s - warmup_steps) /
 *                   (decay_steps - warmup_steps):
 *                     min_lr + 0.5 * (1 + cos(pi * r)) * (base_lr - min_lr)
 * (the nanoGPT / llm.c schedule). */
typedef enum tcc_lr_schedule_kind {
  TCC_LR_CONSTANT = 0,
  TCC_LR_WARMUP_COSINE = 1,
} tcc_lr_schedule_kind;

typedef struct tcc_lr_schedule {
  int32_t kind; /* tcc_lr_schedule_kind */
  double base_lr;
  int64_t warmup_steps;
  int64_t decay_steps;
  double min_lr;
} tcc_lr_schedule;

/* The bytes of one element type within some category of memory (e.g. the
   train step's bf16 activations at its memory peak). */
typedef struct tcc_dtype_bytes {
  int32_t dtype; /* tcc_dtype */
  int64_t bytes;
} tcc_dtype_bytes;

typedef struct tcc_tensor_desc {
  const char *name;
  int32_t dtype; /* tcc_dtype */
  int32_t rank;
  const int64_t *shape; /* rank entries */
  int64_t num_elements;
  int64_t size_bytes;
  /* Parameters and optimizer state only (zero for inputs/outputs).
     Optimizer state of a parameter starts at zeros; state of the whole
     step may start elsewhere (the loss scale: CONSTANT). */
  int32_t init_kind; /* tcc_init_kind */
  int32_t trainable; /* 0: frozen, no gradient, no optimizer state */
  double init_scale;
  uint64_t init_seed;
} tcc_tensor_desc;

/* Data parallelism: what a step compiled with tcc compile --data-parallel
 * calls to combine a buffer over the ranks (tcc_step_args.collectives; NULL:
 * one rank, the buffers stay as they are). */
typedef enum tcc_reduction {
  TCC_REDUCE_SUM = 0,
  TCC_REDUCE_MEAN = 1,
} tcc_reduction;

typedef struct tcc_collectives {
  int32_t rank;       /* in [0, world_size) */
  int32_t world_size;
  void *context;      /* the runtime's (an MPI communicator, NCCL's) */
  /* `buffer` (count elements of dtype) becomes, on every rank, the sum or the
     mean over the ranks of each rank's buffer. `stream`: the CUDA stream on
     GPU targets, NULL on the cpu. 0 on success, else an error the step
     returns (the runtime says what failed). */
  int32_t (*all_reduce)(void *context, void *buffer, int64_t count, tcc_dtype dtype,
                        tcc_reduction reduction, void *stream);
  /* GPU targets: all_reduce may return once the reduction is queued (on a
     communication stream that waits for the work `stream` had queued), so
     that it overlaps the rest of the backward. wait makes `stream` wait for
     every all_reduce queued so far; the step calls it before the first
     kernel that reads a reduced buffer. NULL: all_reduce is synchronous
     with `stream` (the cpu back end). */
  int32_t (*wait)(void *context, void *stream);
  /* Appended for steps compiled with tcc compile --shard-optimizer N (ZeRO-1;
     the descriptor's shard_optimizer_ranks), which call them; other steps
     never read these fields.
     reduce_scatter: `recv` (recv_count elements) becomes this rank's part,
     elements [rank * recv_count, (rank + 1) * recv_count), of the sum or the
     mean over the ranks of each rank's `send` (world_size * recv_count
     elements). all_gather: `recv` (world_size * send_count elements) becomes
     every rank's `send` (send_count elements) in rank order. `send` and
     `recv` do not overlap. On GPU targets both may return once queued, like
     all_reduce, and `wait` covers them too. */
  int32_t (*reduce_scatter)(void *context, const void *send, void *recv, int64_t recv_count,
                            tcc_dtype dtype, tcc_reduction reduction, void *stream);
  int32_t (*all_gather)(void *context, const void *send, void *recv, int64_t send_count,
                        tcc_dtype dtype, void *stream);
  /* Appended: one bucket of all-reduces (kern-schedule-collectives groups
     gradients into buckets): buffers[i] (counts[i] elements of dtype) each
     as all_reduce would, issued together (NCCL: one group, one launch).
     NULL: the step calls all_reduce once per buffer. */
  int32_t (*all_reduce_bucket)(void *context, int32_t n, void *const *buffers,
                               const int64_t *counts, tcc_dtype dtype, tcc_reduction reduction,
                               void *stream);
} tcc_collectives;

/* Arguments of one train or eval call. Arrays are in descriptor order.
 * GPU steps: params, optimizer_state, inputs, outputs and workspace are
 * device buffers (from tcc_device_api.alloc); loss and train_outputs are
 * host memory, written before the call returns (the call is synchronous). */
typedef struct tcc_step_args {
  void **params;            /* num_params buffers, updated in place by train */
  void **optimizer_state;   /* num_optimizer_state buffers, updated in place */
  const void **inputs;      /* num_inputs buffers for this batch */
  void **outputs;           /* eval only: num_outputs buffers, may be NULL */
  void *workspace;          /* workspace_bytes, 64-byte aligned */
  float *loss;              /* out: the scalar loss of this batch */
  float learning_rate;      /* the schedule value for this step, from trun */
  int64_t step;             /* 0-based optimizer step number */
  void *stream;             /* reserved: the CUDA stream on GPU targets */
  const void *collectives;  /* a const tcc_collectives * (data-parallel steps),
                               or NULL: one rank */
  uint64_t rng_seed;        /* the run's seed: dropout masks are a function of
                               (rng_seed, step, op), so a resumed run repeats them */
  void **train_outputs;     /* train only: num_train_outputs buffers (e.g.
                               grad_norm), may be NULL */
  /* Appended (issue 17). The step reads them only when its descriptor has
     buffers / entries (a runtime must zero-initialize the struct). */
  void **buffers;           /* num_buffers buffers (batch norm's running
                               statistics): train updates them, eval and the
                               extra entries read them */
  void **entry_state;       /* an extra entry's num_state buffers (a KV
                               cache), kept by the runtime between calls */
} tcc_step_args;

typedef int32_t (*tcc_step_fn)(const tcc_step_args *args);

/* GPU steps: one launch of the step's kernel list as timed while profiling
 * (tcc_device_api.profile_read). */
typedef struct tcc_launch_time {
  int32_t entry;        /* 0: train, 1: eval, 2 + k: the descriptor's entries[k] */
  int32_t launch;       /* position in the entry's launch order (the '#' of
                           the dumped kernels.txt) */
  const char *kernel;   /* e.g. "tcc_k14_ew", "cublasLtMatmul" */
  const char *label;    /* model node, kern op and kernel, e.g.
                           "h.0.attn.probs: kern.reduce (tcc_k15_reduce)" */
  double flops, bytes;  /* of one launch (as kernels.txt) */
  double milliseconds;  /* summed over the profiled calls */
  int64_t calls;        /* profiled calls that ran it */
} tcc_launch_time;

/* GPU steps: how the algorithm of one cuBLASLt product was chosen
 * (tcc_device_api.gemm_choice). Strings live as long as the step library. */
typedef struct tcc_gemm_choice {
  const char *descriptor; /* types, shape, layouts, epilogue, alignment, e.g.
                             "bf16->bf16 16384x2304x768 NN bias beta0 align256
                             ws33554432 32F" */
  const char *algorithm;  /* e.g. "algo 66 tile 128x256 stages#13 splitK 1
                             swizzle 0 reduction 0 cluster#2" */
  const char *source;     /* "search" (timed at the first call), "cache" (a
                             search's result from an earlier run) or
                             "heuristic" (cuBLASLt's first answer) */
  double best_ms;         /* search/cache: the chosen algorithm's time per call */
  double heuristic_ms;    /* search/cache: cuBLASLt's first answer's time */
} tcc_gemm_choice;

/* GPU steps only: device memory and copies, implemented by the step library
 * with the CUDA runtime. Every function returning int32_t returns a
 * tcc_status; after a failure, last_error() says what failed (the CUDA or
 * cuBLAS error, and the kernel and step where it was seen). */
typedef struct tcc_device_api {
  uint32_t struct_size; /* sizeof(tcc_device_api) at build time */
  /* Selects GPU `ordinal` and creates the step's streams and library
     handles. Call once, before anything else. */
  int32_t (*init)(int32_t ordinal);
  /* Device memory, 256-byte aligned; NULL (and last_error) on failure. */
  void *(*alloc)(uint64_t bytes);
  void (*release)(void *device_ptr);
  /* Page-locked host memory for staging; NULL on failure. */
  void *(*alloc_pinned)(uint64_t bytes);
  void (*release_pinned)(void *host_ptr);
  /* Synchronous copies; they wait for work queued on the step stream. */
  int32_t (*to_device)(void *dst, const void *src, uint64_t bytes);
  int32_t (*to_host)(void *dst, const void *src, uint64_t bytes);
  int32_t (*fill_zero)(void *dst, uint64_t bytes);
  /* Queues `count` host-to-device copies on the copy stream and records an
     event; a later train/eval call whose inputs include one of these
     destinations waits for it on its stream (others do not, so the copy of
     the next batch overlaps the current step). Sources should be pinned
     (alloc_pinned) for the copies to run asynchronously. */
  int32_t (*upload_async)(int32_t count, void *const *dst,
                          const void *const *src, const uint64_t *bytes);
  /* Blocks until all queued uploads are done (their sources may be reused). */
  int32_t (*wait_uploads)(void);
  /* The message of the last failure ("" if none). */
  const char *(*last_error)(void);
  /* One line on how the last call ran, e.g. "CUDA graph: replayed (412
     kernels)" or "CUDA graph: off (TCC_CUDA_GRAPHS=0)". */
  const char *(*execution_note)(void);
  /* Bytes of device memory allocated through alloc: now and at the peak. */
  uint64_t (*allocated_bytes)(void);
  uint64_t (*peak_allocated_bytes)(void);
  /* Device-to-device copy, queued on the step stream: ordered after the
     calls before it and before the calls after it (trun's --on-nan skip
     keeps its copy of the weights on the GPU with it). */
  int32_t (*copy_on_device)(void *dst, const void *src, uint64_t bytes);
  /* Profiling. While on, train and eval calls run their kernels one by one
     (no CUDA graph) with a CUDA event after each launch, and each launch's
     time (from the previous event) is summed. set_profiling(1) also clears
     the sums; set_profiling(0) goes back to graphs. */
  int32_t (*set_profiling)(int32_t on);
  /* Copies up to `capacity` records of launches that ran while profiling
     (train's, then eval's, in launch order) and returns how many there are
     (call with capacity 0 to size the array); -1 on failure. */
  int32_t (*profile_read)(tcc_launch_time *out, int32_t capacity);
  /* Launch `launch` of entry `entry` (0: train, 1: eval), once that entry
     has run: 1 and *out if it is a cuBLASLt product, else 0. */
  int32_t (*gemm_choice)(int32_t entry, int32_t launch, tcc_gemm_choice *out);
  /* One line on how the cuBLASLt algorithms were chosen so far, e.g. "GEMM
     algorithms: 16 shapes searched (up to 16 candidates each, 0.84 s), 0
     from the cache (...)"; "" before any product. */
  const char *(*gemm_note)(void);
  /* Destroys the CUDA graphs captured so far (the next train / eval call
     captures again). A runtime calls it before destroying an NCCL
     communicator whose collectives the captured steps hold: NCCL's
     ncclCommDestroy waits until every graph holding its operations is
     destroyed, so a step library that kept its graphs to the process's end
     made each rank of a data-parallel run wait forever at exit. */
  int32_t (*release_graphs)(void);
} tcc_device_api;

/* Whether device API `api` includes gemm_choice and gemm_note (appended
   after profile_read; steps built before them still load without). */
#define tcc_device_api_has_gemm_choice(api)                        \
  ((api)->struct_size >= offsetof(tcc_device_api, gemm_note) +   \
                             sizeof(const char *(*)(void)))

/* Whether device API `api` includes release_graphs (appended after
   gemm_note; steps built before it still load without). */
#define tcc_device_api_has_release_graphs(api)                        \
  ((api)->struct_size >= offsetof(tcc_device_api, release_graphs) +   \
                             sizeof(int32_t (*)(void)))

/* How PyTorch holds one parameter (an entry of the descriptor's
   param_torch). Strings live as long as the step library. */
typedef struct tcc_torch_tensor {
  const char *name;    /* the state_dict key; never NULL: the parameter's own
                          name when the model gives none */
  const int32_t *perm; /* rank entries, a permutation of [0, rank): the
                          PyTorch tensor is the parameter permuted,
                          torch.shape[k] = shape[perm[k]] (nn.Linear's
                          (out, in) weight of tcc's (in, out): {1, 0});
                          NULL: the same layout */
  int32_t num_aliases;
  const char *const *aliases; /* num_aliases further keys holding the same
                                 tensor (tied weights); NULL when none */
} tcc_torch_tensor;

/* A further entry point of the step (the descriptor's entries): called
   with tcc_step_args like train / eval. `params` and `buffers` are the
   descriptor's; `inputs` / `outputs` are this entry's own lists; its
   `state` tensors (zeros at the start, e.g. a KV cache) stay with the
   runtime between calls and come as args->entry_state. An entry whose name
   begins with "train" updates params / optimizer_state like train (and
   writes *loss and train_outputs); the others leave them untouched and
   write *loss only when they compute one. The descriptor's
   workspace_bytes covers every entry. Names in use: "encode" (the frozen
   encoder split off by tcc: per-sample inputs -> cached features),
   "train_cached" / "eval_cached" (train / eval from those features),
   "prefill" / "decode" (generation with a KV cache). */
typedef struct tcc_step_entry {
  const char *name;
  tcc_step_fn fn;
  int32_t num_inputs;
  const tcc_tensor_desc *inputs;
  int32_t num_outputs;
  const tcc_tensor_desc *outputs;
  int32_t num_state;
  const tcc_tensor_desc *state;
  double flops_per_call; /* counted by the code generator */
} tcc_step_entry;

typedef struct tcc_step_descriptor {
  uint32_t abi_version; /* TCC_STEP_ABI_VERSION */
  uint32_t struct_size; /* sizeof(tcc_step_descriptor) at build time */
  const char *model_name;
  const char *target; /* "cpu" or "cuda" */
  const char *arch;   /* e.g. "x86_64" or "sm_90" */
  const char *precision; /* "f32" */
  const char *optimizer; /* "sgd" or "adamw" */
  const char *loss_name; /* name of the loss value in the model */
  double default_learning_rate; /* = lr_schedule.base_lr */
  tcc_lr_schedule lr_schedule;
  int32_t micro_batches; /* gradient accumulation: micro-batches per step */

  int32_t num_params;
  const tcc_tensor_desc *params;
  int32_t num_optimizer_state;
  const tcc_tensor_desc *optimizer_state;
  int32_t num_inputs;
  const tcc_tensor_desc *inputs;
  int32_t num_outputs; /* eval outputs, e.g. logits */
  const tcc_tensor_desc *outputs;
  int32_t num_train_outputs; /* train outputs besides the loss, e.g. grad_norm */
  const tcc_tensor_desc *train_outputs;

  int64_t workspace_bytes;
  double train_flops_per_step;
  double eval_flops_per_step;

  tcc_step_fn train; /* forward + backward + optimizer update, in place */
  tcc_step_fn eval;  /* forward only: loss and outputs, params untouched */

  /* target "cuda": the device API (NULL for "cpu"). */
  const tcc_device_api *device;

  /* Appended without a version bump: a step built before these fields has
     a struct_size that ends at `device`, and trun reads them only when
     struct_size covers them (tcc_step_descriptor_has_memory_by_dtype).
     The train step's workspace temporaries by element type, from the
     compile-time memory plan (sizes rounded up to 64 bytes), at most one
     entry per dtype: */
  int32_t num_train_planned_bytes;
  const tcc_dtype_bytes *train_planned_bytes; /* all temporaries, summed
                                                 without reuse */
  int32_t num_train_peak_bytes;
  const tcc_dtype_bytes *train_peak_bytes; /* those live where the workspace
                                              arena is fullest */

  /* Appended after the memory-by-dtype fields, without a version bump
     (tcc_step_descriptor_has_constant_bytes): bytes of the constant tables
     the train step reads, compiled into the library (dense constants such
     as the rotary cos / sin tables tg-cache-rope computes at compile time);
     0 when it reads none. */
  int64_t train_constant_bytes;

  /* Appended after train_constant_bytes (tcc_step_descriptor_has_data_parallel):
     1 when the train step was compiled with tcc compile --data-parallel (it
     averages its gradients and loss through tcc_step_args.collectives); a
     step with 0 trains one rank's batch and cannot run across ranks. */
  int32_t data_parallel;

  /* Appended after data_parallel (tcc_step_descriptor_has_shard_optimizer):
     ZeRO-1 (tcc compile --shard-optimizer N). shard_optimizer_ranks is N, the
     only world size the step runs at (0: not sharded). For each optimizer
     state tensor i, optimizer_state_shard_of[i] is the index of the
     parameter whose flattened elements [rank * n / N, (rank + 1) * n / N)
     the tensor holds on rank `rank` (n: the parameter's elements; the
     tensor is 1-D with n / N elements), or -1 when the tensor is whole (the
     same on every rank). Checkpoints hold the whole, parameter-shaped
     tensor. NULL when shard_optimizer_ranks is 0. */
  int32_t shard_optimizer_ranks;
  const int32_t *optimizer_state_shard_of;

  /* Appended after optimizer_state_shard_of (tcc_step_descriptor_has_torch):
     how PyTorch holds each parameter (the model's Parameter.torch), for
     trun --save-weights and --init-from: num_params entries in parameter
     order, or NULL when no parameter of the model has one (every state_dict
     key is then the parameter's name, every layout tcc's). */
  const tcc_torch_tensor *param_torch;

  /* Appended after param_torch (tcc_step_descriptor_has_buffers): tensors
     kept with the parameters that are not trained by gradients (batch
     norm's running mean / variance and batches seen): initialized from
     their init fields, updated in place by train, read by eval and the
     entries, saved in checkpoints and by --save-weights (PyTorch buffers,
     under buffer_torch's keys). buffer_torch: num_buffers entries, or NULL
     (keys = names, tcc's layout). */
  int32_t num_buffers;
  const tcc_tensor_desc *buffers;
  const tcc_torch_tensor *buffer_torch;

  /* Appended after the buffers (tcc_step_descriptor_has_entries): further
     entry points (tcc_step_entry), none when num_entries is 0. */
  int32_t num_entries;
  const tcc_step_entry *entries;

  /* Appended after the entries (tcc_step_descriptor_has_gradient_bytes):
     the bytes of the trainable parameters' gradients by element type (at
     most one entry per dtype), temporaries of the train step inside its
     workspace; frozen parameters have none. */
  int32_t num_train_gradient_bytes;
  const tcc_dtype_bytes *train_gradient_bytes;

  /* Appended after train_gradient_bytes
     (tcc_step_descriptor_has_shard_parameters): ZeRO-3 (tcc compile
     --shard-parameters N, which also sets shard_optimizer_ranks = N).
     shard_parameter_ranks is N (0: every parameter whole). whole_params
     holds num_params entries: each parameter as checkpoints, --init-from
     and --save-weights hold it (name, dtype, shape, initializer). When the
     shapes of params[i] and whole_params[i] differ, params[i] is rank
     `rank`'s 1-D shard: the flattened elements [rank * n / N, (rank + 1) *
     n / N) of whole_params[i] (n elements); when they are the same, the
     parameter is whole on every rank. The step's functions gather the
     shards themselves. NULL when shard_parameter_ranks is 0. */
  int32_t shard_parameter_ranks;
  const tcc_tensor_desc *whole_params;

  /* Appended after whole_params (tcc_step_descriptor_has_label_input): the
     name of the input the loss reads as class labels (the targets of a
     cross-entropy), or NULL when the loss reads none (a regression, an
     autoencoder): an integer input [B] that feeds an embedding is a
     feature, not labels. */
  const char *label_input;
} tcc_step_descriptor;

/* Whether descriptor `d` (its struct_size) includes the memory-by-dtype
   fields above. */
#define tcc_step_descriptor_has_memory_by_dtype(d)                      \
  ((d)->struct_size >= offsetof(tcc_step_descriptor, train_peak_bytes) + \
                           sizeof(const tcc_dtype_bytes *))

/* Whether descriptor `d` includes train_constant_bytes. */
#define tcc_step_descriptor_has_constant_bytes(d)                           \
  ((d)->struct_size >= offsetof(tcc_step_descriptor, train_constant_bytes) + \
                           sizeof(int64_t))

/* Whether descriptor `d` includes data_parallel. */
#define tcc_step_descriptor_has_data_parallel(d)                     \
  ((d)->struct_size >= offsetof(tcc_step_descriptor, data_parallel) + \
                           sizeof(int32_t))

/* Whether descriptor `d` includes shard_optimizer_ranks and
   optimizer_state_shard_of. */
#define tcc_step_descriptor_has_shard_optimizer(d)                          \
  ((d)->struct_size >= offsetof(tcc_step_descriptor, optimizer_state_shard_of) + \
                           sizeof(const int32_t *))

/* Whether descriptor `d` includes param_torch. */
#define tcc_step_descriptor_has_torch(d)                               \
  ((d)->struct_size >= offsetof(tcc_step_descriptor, param_torch) + \
                           sizeof(const tcc_torch_tensor *))

/* Whether descriptor `d` includes num_buffers, buffers and buffer_torch. */
#define tcc_step_descriptor_has_buffers(d)                                \
  ((d)->struct_size >= offsetof(tcc_step_descriptor, buffer_torch) + \
                           sizeof(const tcc_torch_tensor *))

/* Whether descriptor `d` includes num_entries and entries. */
#define tcc_step_descriptor_has_entries(d)                            \
  ((d)->struct_size >= offsetof(tcc_step_descriptor, entries) + \
                           sizeof(const tcc_step_entry *))

/* Whether descriptor `d` includes train_gradient_bytes. */
#define tcc_step_descriptor_has_gradient_bytes(d)                            \
  ((d)->struct_size >= offsetof(tcc_step_descriptor, train_gradient_bytes) + \
                           sizeof(const tcc_dtype_bytes *))

/* Whether descriptor `d` includes shard_parameter_ranks and whole_params. */
#define tcc_step_descriptor_has_shard_parameters(d)                   \
  ((d)->struct_size >= offsetof(tcc_step_descriptor, whole_params) + \
                           sizeof(const tcc_tensor_desc *))

/* Whether descriptor `d` includes label_input. */
#define tcc_step_descriptor_has_label_input(d)                       \
  ((d)->struct_size >= offsetof(tcc_step_descriptor, label_input) + \
                           sizeof(const char *))

/*
 * FP8 delayed scaling (tcc compile --precision fp8 --fp8-scaling delayed,
 * the default): the train step's whole-step optimizer state named
 * TCC_FP8_SCALING_STATE, f32 [sites, 32], holds one record per FP8 cast
 * site of the step (each operand the step casts to FP8), zeros at the
 * start, updated in place by every cast and checkpointed like any state.
 * A record's scale is 0 until its first cast, which scales by the tensor's
 * own amax (current scaling); each cast then puts its input's amax into the
 * history and sets the next scale to the format's largest finite value
 * over the history's maximum. trun reads the records on its log steps
 * (saturated / flushed elements of each site's last cast). Sites the step
 * never cast (an operand shared with an earlier product's cast) stay zero.
 */
#define TCC_FP8_SCALING_STATE "fp8_scaling"
#define TCC_FP8_AMAX_HISTORY 16
typedef struct tcc_fp8_scaling_record {
  float scale;     /* the next cast's scale (0: none yet) */
  float next;      /* the history entry the next cast writes, 0..15 */
  float amax;      /* the last cast's input amax */
  float elements;  /* the last cast's elements */
  float saturated; /* ... of them past the format's largest finite value */
  float flushed;   /* ... non-zero ones that became zero */
  float casts;     /* casts so far (exact to 2^24) */
  float reserved0;
  float amax_history[TCC_FP8_AMAX_HISTORY];
  float reserved1[8];
} tcc_fp8_scaling_record;
#define TCC_FP8_SCALING_RECORD_FLOATS 32

typedef const tcc_step_descriptor *(*tcc_step_get_descriptor_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TCC_STEP_ABI_H */
