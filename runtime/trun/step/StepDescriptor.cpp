#include "runtime/trun/step/StepDescriptor.h"

#include "runtime/initializers/Initializers.h"
#include "runtime/trun/step/MemoryByPrecision.h"
#include "runtime/trun/step/StepEntries.h"
#include "runtime/trun/step/WithBuffers.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <set>
#include <utility>

namespace tcc::trun {
namespace {

// The descriptor up to and including `device`: steps built before the
// memory-plan fields (tcc_step_descriptor_has_memory_by_dtype) end there.
constexpr size_t kMinDescriptorSize =
    offsetof(tcc_step_descriptor, num_train_planned_bytes);

// A descriptor with a larger rank is garbage, not a tensor.
constexpr int32_t kMaxRank = 32;

const char *OrUnset(const char *s) { return s ? s : "(unset)"; }

absl::Status CheckTensor(const tcc_tensor_desc &t, absl::string_view kind,
                         int32_t index, bool has_init,
                         absl::string_view origin) {
  if (!t.name || t.name[0] == '\0')
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": ", kind, " #", index, " has no name"));
  std::string what = absl::StrCat(origin, ": ", kind, " '", t.name, "'");
  if (DtypeSize(t.dtype) == 0)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has unknown dtype ", t.dtype));
  if (t.rank < 0 || t.rank > kMaxRank)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has invalid rank ", t.rank));
  if (t.rank > 0 && !t.shape)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has rank ", t.rank, " but a null shape"));
  int64_t elements = 1;
  for (int32_t d = 0; d < t.rank; ++d) {
    if (t.shape[d] < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has negative dimension ", t.shape[d]));
    if (__builtin_mul_overflow(elements, t.shape[d], &elements))
      return absl::InvalidArgumentError(absl::StrCat(what, " is too large"));
  }
  if (t.num_elements != elements)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has shape ", ShapeString(t), " (", elements,
                     " elements) but num_elements ", t.num_elements));
  int64_t bytes = 0;
  if (__builtin_mul_overflow(elements, DtypeSize(t.dtype), &bytes) ||
      t.size_bytes != bytes)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", elements, " ", DtypeName(t.dtype),
                     " elements but size_bytes ", t.size_bytes));
  if (has_init) {
    if (t.init_kind < TCC_INIT_ZEROS || t.init_kind > TCC_INIT_CONSTANT)
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has unknown init_kind ", t.init_kind));
    if (!std::isfinite(t.init_scale) || t.init_scale < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has invalid init_scale ", t.init_scale));
  }
  return absl::OkStatus();
}

absl::Status CheckTensorList(int32_t count, const tcc_tensor_desc *list,
                             absl::string_view kind, bool has_init,
                             absl::string_view origin,
                             std::set<std::string> &names) {
  if (count < 0)
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": negative ", kind, " count ", count));
  if (count > 0 && !list)
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": ", count, " ", kind, "s but a null list"));
  for (int32_t i = 0; i < count; ++i) {
    if (absl::Status s = CheckTensor(list[i], kind, i, has_init, origin);
        !s.ok())
      return s;
    // Tensors are bound by name (e.g. "logits"): names must be unambiguous.
    if (!names.insert(list[i].name).second)
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": ", kind, " name '", list[i].name, "' is used twice"));
  }
  return absl::OkStatus();
}

// param_torch, when present: a key and a valid perm per parameter, and
// every key (names and aliases) non-empty and used once.
absl::Status CheckTorchTable(const tcc_step_descriptor &d, absl::string_view origin) {
  if (!tcc_step_descriptor_has_torch(&d) || !d.param_torch)
    return absl::OkStatus();
  std::map<std::string, std::string> owners; // key -> parameter
  for (int32_t i = 0; i < d.num_params; ++i) {
    const tcc_tensor_desc &p = d.params[i];
    const tcc_torch_tensor &t = d.param_torch[i];
    std::string what = absl::StrCat(origin, ": param '", p.name, "'");
    if (t.perm) {
      std::vector<bool> seen(p.rank, false);
      for (int32_t k = 0; k < p.rank; ++k) {
        if (t.perm[k] < 0 || t.perm[k] >= p.rank || seen[t.perm[k]])
          return absl::InvalidArgumentError(absl::StrCat(
              what, ": torch perm [", absl::StrJoin(t.perm, t.perm + p.rank, ", "),
              "] is not a permutation of its ", p.rank, " dimensions"));
        seen[t.perm[k]] = true;
      }
    }
    if (t.num_aliases < 0 || (t.num_aliases > 0 && !t.aliases))
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", t.num_aliases, " torch aliases but ",
          t.aliases ? "a negative count" : "a null list"));
    for (int32_t k = -1; k < t.num_aliases; ++k) {
      const char *key = k < 0 ? t.name : t.aliases[k];
      std::string which = k < 0 ? std::string("torch name") : absl::StrCat("torch alias #", k);
      if (!key || key[0] == '\0')
        return absl::InvalidArgumentError(absl::StrCat(what, " has no ", which));
      auto [it, added] = owners.emplace(key, p.name);
      if (!added)
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": ", which, " '", key, "' is also a key of param '", it->second, "'"));
    }
  }
  return absl::OkStatus();
}

bool IsNonNegativeFinite(double v) { return std::isfinite(v) && v >= 0; }

// "cpu" steps compute on host memory; "cuda" steps bring the device API
// trun allocates and copies through (it links no CUDA itself).
absl::Status CheckTarget(const tcc_step_descriptor &d,
                         absl::string_view origin) {
  bool cuda = std::strcmp(d.target, "cuda") == 0;
  if (!cuda && std::strcmp(d.target, "cpu") != 0)
    return absl::FailedPreconditionError(
        absl::StrCat(origin, ": step targets '", d.target,
                     "' but this trun runs only 'cpu' and 'cuda' steps"));
  if (!cuda) {
    if (d.device)
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": a 'cpu' step with a device API (device must be NULL)"));
    return absl::OkStatus();
  }
  const tcc_device_api *api = d.device;
  if (!api)
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": a 'cuda' step without a device API "
                             "(device is NULL)"));
  // Up to profile_read; gemm_choice and gemm_note are read when present.
  constexpr size_t kMinDeviceApiSize =
      offsetof(tcc_device_api, profile_read) + sizeof(api->profile_read);
  if (api->struct_size < kMinDeviceApiSize)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: device API is %u bytes, this trun needs at least %u — "
        "recompile with a matching tcc",
        origin, api->struct_size, kMinDeviceApiSize));
  const std::pair<const char *, bool> functions[] = {
      {"init", api->init != nullptr},
      {"alloc", api->alloc != nullptr},
      {"release", api->release != nullptr},
      {"alloc_pinned", api->alloc_pinned != nullptr},
      {"release_pinned", api->release_pinned != nullptr},
      {"to_device", api->to_device != nullptr},
      {"to_host", api->to_host != nullptr},
      {"fill_zero", api->fill_zero != nullptr},
      {"upload_async", api->upload_async != nullptr},
      {"wait_uploads", api->wait_uploads != nullptr},
      {"last_error", api->last_error != nullptr},
      {"execution_note", api->execution_note != nullptr},
      {"allocated_bytes", api->allocated_bytes != nullptr},
      {"peak_allocated_bytes", api->peak_allocated_bytes != nullptr},
      {"copy_on_device", api->copy_on_device != nullptr},
      {"set_profiling", api->set_profiling != nullptr},
      {"profile_read", api->profile_read != nullptr},
  };
  for (const auto &[name, set] : functions)
    if (!set)
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": device API has a null '", name, "' function"));
  if (tcc_device_api_has_gemm_choice(api) && (!api->gemm_choice || !api->gemm_note))
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": device API has a null '",
        api->gemm_choice ? "gemm_note" : "gemm_choice", "' function"));
  if (tcc_device_api_has_release_graphs(api) && !api->release_graphs)
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": device API has a null 'release_graphs' function"));
  return absl::OkStatus();
}

// The schedule's fields, before trun computes a learning rate from them.
absl::Status CheckSchedule(const tcc_step_descriptor &d,
                           absl::string_view origin) {
  const tcc_lr_schedule &s = d.lr_schedule;
  if (s.kind != TCC_LR_CONSTANT && s.kind != TCC_LR_WARMUP_COSINE)
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": unknown lr_schedule kind ", s.kind));
  if (s.base_lr != d.default_learning_rate)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: lr_schedule.base_lr %g differs from default_learning_rate %g",
        origin, s.base_lr, d.default_learning_rate));
  if (s.kind == TCC_LR_CONSTANT)
    return absl::OkStatus();
  if (s.warmup_steps < 0 || s.decay_steps <= 0 ||
      s.decay_steps < s.warmup_steps)
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": warmup_cosine schedule needs 0 <= warmup_steps <= "
                "decay_steps and decay_steps > 0, got warmup_steps ",
        s.warmup_steps, ", decay_steps ", s.decay_steps));
  if (!IsNonNegativeFinite(s.min_lr))
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: invalid lr_schedule.min_lr %g", origin, s.min_lr));
  return absl::OkStatus();
}

// " torch fc1.weight [256, 784] (perm [1, 0]), aliases lm_head.weight" for a
// parameter PyTorch holds under another name or layout; "" otherwise.
std::string TorchNote(const tcc_step_descriptor &d, int32_t i);

void PrintTensors(const char *title, int32_t count, const tcc_tensor_desc *list,
                  bool has_init, std::ostream &out,
                  const tcc_step_descriptor *params_of = nullptr, int32_t first = 0) {
  out << title << ": " << count << "\n";
  for (int32_t i = 0; i < count; ++i) {
    const tcc_tensor_desc &t = list[i];
    out << "  " << t.name << "  " << DtypeName(t.dtype) << " " << ShapeString(t)
        << "  " << t.size_bytes << " bytes";
    if (has_init) {
      out << "  init " << InitKindName(t.init_kind);
      if (t.init_kind == TCC_INIT_NORMAL || t.init_kind == TCC_INIT_UNIFORM)
        out << absl::StrFormat("(scale=%g, seed=%u)", t.init_scale,
                               t.init_seed);
      if (t.init_kind == TCC_INIT_CONSTANT)
        out << absl::StrFormat("(%g)", t.init_scale);
      // Optimizer state is never trained: only parameters say either.
      if (std::strcmp(title, "params") == 0)
        out << (t.trainable ? "  trainable" : "  frozen");
    }
    if (params_of)
      out << TorchNote(*params_of, first + i);
    out << "\n";
  }
}

} // namespace

// ZeRO-3: whole_params names the same parameters as params, each either
// the same tensor or whole to a 1-D shard of 1/N of its elements.
absl::Status CheckWholeParams(const tcc_step_descriptor &d, absl::string_view origin) {
  const int32_t n = ShardParameterRanks(d);
  if (!n)
    return absl::OkStatus();
  if (ShardOptimizerRanks(d) != n)
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": parameters sharded over ", n, " ranks but the optimizer state over ",
        ShardOptimizerRanks(d)));
  for (int32_t i = 0; i < d.num_params; ++i) {
    const tcc_tensor_desc &p = d.params[i], &w = d.whole_params[i];
    if (!w.name || !p.name || std::strcmp(w.name, p.name) != 0 || w.dtype != p.dtype ||
        w.rank < 0 || (w.rank > 0 && !w.shape))
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": whole parameter ", i, " does not describe parameter '",
          p.name ? p.name : "?", "'"));
    bool sharded = false; // (compares the shapes: only once w's is known to be there)
    WholeParam(d, i, &sharded);
    if (sharded && (p.rank != 1 || p.num_elements * n != w.num_elements))
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": parameter '", p.name, "' is neither whole nor a 1-D shard of 1/", n,
          " of its whole ", w.num_elements, " elements"));
  }
  return absl::OkStatus();
}

absl::Status ValidateDescriptor(const tcc_step_descriptor &d,
                                absl::string_view origin) {
  // The version comes first: with another version no other field is
  // guaranteed to be where this trun expects it.
  if (d.abi_version != TCC_STEP_ABI_VERSION)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: ABI version %u, this trun supports %u — recompile with a "
        "matching tcc",
        origin, d.abi_version, TCC_STEP_ABI_VERSION));
  // Fields may be appended without a version bump: a larger struct is fine,
  // a smaller one lacks fields this trun reads — except the memory-plan
  // fields after `device`, which are read only when present.
  if (d.struct_size < kMinDescriptorSize)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: descriptor is %u bytes, this trun needs at least %u — recompile "
        "with a matching tcc",
        origin, d.struct_size, kMinDescriptorSize));
  if (!d.model_name)
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": descriptor has no model_name"));
  if (!d.target)
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": descriptor has no target"));
  if (absl::Status s = CheckTarget(d, origin); !s.ok())
    return s;
  if (!d.train || !d.eval)
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": descriptor has a null ",
                     d.train ? "eval" : "train", " entry point"));
  if (!IsNonNegativeFinite(d.default_learning_rate))
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": invalid default_learning_rate ", d.default_learning_rate));
  if (tcc_step_descriptor_has_constant_bytes(&d) && d.train_constant_bytes < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": negative train_constant_bytes ", d.train_constant_bytes));
  if (tcc_step_descriptor_has_data_parallel(&d) && d.data_parallel != 0 &&
      d.data_parallel != 1)
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": data_parallel is ", d.data_parallel, " (0 or 1)"));
  if (d.workspace_bytes < 0)
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": negative workspace_bytes ", d.workspace_bytes));
  if (!IsNonNegativeFinite(d.train_flops_per_step) ||
      !IsNonNegativeFinite(d.eval_flops_per_step))
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": invalid flops per step"));

  if (absl::Status s = CheckSchedule(d, origin); !s.ok())
    return s;
  if (d.micro_batches < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": micro_batches must be >= 1, got ", d.micro_batches));

  std::set<std::string> names;
  if (absl::Status s = CheckTensorList(d.num_params, d.params, "param",
                                       /*has_init=*/true, origin, names);
      !s.ok())
    return s;
  if (absl::Status s = CheckTensorList(d.num_optimizer_state, d.optimizer_state,
                                       "optimizer state",
                                       /*has_init=*/true, origin, names);
      !s.ok())
    return s;
  if (absl::Status s = CheckTensorList(d.num_inputs, d.inputs, "input",
                                       /*has_init=*/false, origin, names);
      !s.ok())
    return s;
  if (absl::Status s = CheckTensorList(d.num_outputs, d.outputs, "output",
                                       /*has_init=*/false, origin, names);
      !s.ok())
    return s;
  // Train outputs have their own names (e.g. "grad:w" next to param "w").
  std::set<std::string> train_output_names;
  if (absl::Status s =
          CheckTensorList(d.num_train_outputs, d.train_outputs, "train output",
                          /*has_init=*/false, origin, train_output_names);
      !s.ok())
    return s;
  if (absl::Status s = CheckMemoryByDtype(d, origin); !s.ok())
    return s;
  if (absl::Status s = CheckWholeParams(d, origin); !s.ok())
    return s;
  // The PyTorch table describes the whole parameters (ZeRO-3: not the shards).
  WholeParameters whole(d);
  if (absl::Status s = CheckTorchTable(whole.descriptor(), origin); !s.ok())
    return s;
  // Model buffers: named like the parameters (checkpoints hold both in one
  // file), their state_dict keys checked with the parameters' (WithBuffers.h).
  if (tcc_step_descriptor_has_buffers(&d)) {
    if (absl::Status s = CheckTensorList(d.num_buffers, d.buffers, "buffer",
                                         /*has_init=*/true, origin, names);
        !s.ok())
      return s;
    for (int32_t i = 0; i < d.num_buffers; ++i)
      if (d.buffers[i].init_kind != TCC_INIT_ZEROS && d.buffers[i].init_kind != TCC_INIT_ONES)
        return absl::InvalidArgumentError(absl::StrCat(
            origin, ": buffer '", d.buffers[i].name, "' must start at zeros or ones, not ",
            InitKindName(d.buffers[i].init_kind)));
    if (d.buffer_torch)
      for (int32_t i = 0; i < d.num_buffers; ++i)
        if (d.buffer_torch[i].perm)
          return absl::InvalidArgumentError(absl::StrCat(
              origin, ": buffer '", d.buffers[i].name,
              "' has a torch perm (buffers keep tcc's layout)"));
    WithBuffers view(whole.descriptor());
    if (absl::Status s = CheckTorchTable(view.descriptor(), origin); !s.ok())
      return s;
  }
  if (absl::Status s = ValidateEntries(d, origin); !s.ok())
    return s;
  // trun shows these in its progress lines: each must be one f32 value.
  for (const char *name :
       {"grad_norm", "loss_scale", "skipped", "skipped_steps"}) {
    int32_t i = FindTrainOutput(d, name);
    if (i != -1 && (d.train_outputs[i].dtype != TCC_DTYPE_F32 ||
                    d.train_outputs[i].num_elements != 1))
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": train output '", name, "' must be one f32 value, got ",
          DtypeName(d.train_outputs[i].dtype), " ",
          ShapeString(d.train_outputs[i])));
  }
  return absl::OkStatus();
}

double LearningRateAt(const tcc_lr_schedule &schedule, double base_lr,
                      int64_t step) {
  if (schedule.kind != TCC_LR_WARMUP_COSINE)
    return base_lr;
  if (step < schedule.warmup_steps)
    return base_lr * static_cast<double>(step + 1) /
           static_cast<double>(schedule.warmup_steps);
  if (step >= schedule.decay_steps)
    return schedule.min_lr;
  double r = static_cast<double>(step - schedule.warmup_steps) /
             static_cast<double>(schedule.decay_steps - schedule.warmup_steps);
  return schedule.min_lr +
         0.5 * (1.0 + std::cos(M_PI * r)) * (base_lr - schedule.min_lr);
}

std::string ScheduleString(const tcc_lr_schedule &s) {
  if (s.kind != TCC_LR_WARMUP_COSINE)
    return "constant";
  return absl::StrFormat(
      "warmup_cosine (linear warmup over %d steps, cosine to %g at step %d)",
      s.warmup_steps, s.min_lr, s.decay_steps);
}

int32_t FindTrainOutput(const tcc_step_descriptor &d, absl::string_view name) {
  for (int32_t i = 0; i < d.num_train_outputs; ++i)
    if (d.train_outputs[i].name && name == d.train_outputs[i].name)
      return i;
  return -1;
}

int32_t FindFp8ScalingState(const tcc_step_descriptor &d) {
  for (int32_t i = 0; i < d.num_optimizer_state; ++i) {
    const tcc_tensor_desc &t = d.optimizer_state[i];
    if (!t.name || std::strcmp(t.name, TCC_FP8_SCALING_STATE) != 0)
      continue;
    const bool whole = !ShardOptimizerRanks(d) || d.optimizer_state_shard_of[i] == -1;
    const bool shaped = t.dtype == TCC_DTYPE_F32 && t.rank == 2 && t.shape &&
                        t.shape[0] >= 0 &&
                        t.shape[1] == TCC_FP8_SCALING_RECORD_FLOATS &&
                        t.num_elements == t.shape[0] * TCC_FP8_SCALING_RECORD_FLOATS &&
                        t.size_bytes == t.num_elements * static_cast<int64_t>(sizeof(float));
    return whole && shaped ? i : -1;
  }
  return -1;
}

tcc_tensor_desc WholeParam(const tcc_step_descriptor &d, int32_t i, bool *sharded) {
  tcc_tensor_desc t = ShardParameterRanks(d) ? d.whole_params[i] : d.params[i];
  if (sharded) {
    const tcc_tensor_desc &p = d.params[i];
    *sharded = p.rank != t.rank || !std::equal(p.shape, p.shape + p.rank, t.shape);
  }
  return t;
}

WholeParameters::WholeParameters(const tcc_step_descriptor &d) : whole_(d) {
  if (!ShardParameterRanks(d))
    return;
  for (int32_t i = 0; i < d.num_params; ++i)
    params_.push_back(WholeParam(d, i));
  whole_.params = params_.data();
  whole_.shard_parameter_ranks = 0;
  whole_.whole_params = nullptr;
}

tcc_tensor_desc WholeOptimizerState(const tcc_step_descriptor &d, int32_t i, bool *sharded) {
  tcc_tensor_desc t = d.optimizer_state[i];
  const int32_t p = ShardOptimizerRanks(d) ? d.optimizer_state_shard_of[i] : -1;
  const bool shard = p >= 0 && p < d.num_params;
  if (shard) { // shaped like its (whole) parameter
    const tcc_tensor_desc param = WholeParam(d, p);
    t.rank = param.rank;
    t.shape = param.shape;
    t.num_elements = param.num_elements;
    t.size_bytes = param.num_elements * DtypeSize(t.dtype);
  }
  if (sharded)
    *sharded = shard;
  return t;
}

namespace {

std::string TorchNote(const tcc_step_descriptor &d, int32_t i) {
  TorchTensor t = TorchTensorOf(d, i);
  if (t.name == d.params[i].name && t.perm.empty() && t.aliases.empty())
    return "";
  std::vector<int64_t> shape = TorchShapeOf(d, i);
  std::string note = absl::StrCat("  torch ", t.name, " [", absl::StrJoin(shape, ", "), "]");
  if (!t.perm.empty())
    absl::StrAppend(&note, " (perm [", absl::StrJoin(t.perm, ", "), "])");
  if (!t.aliases.empty())
    absl::StrAppend(&note, ", aliases ", absl::StrJoin(t.aliases, " "));
  return note;
}

} // namespace

TorchTensor TorchTensorOf(const tcc_step_descriptor &d, int32_t i) {
  TorchTensor t;
  const tcc_tensor_desc &p = d.params[i];
  if (!tcc_step_descriptor_has_torch(&d) || !d.param_torch) {
    t.name = p.name;
    return t;
  }
  const tcc_torch_tensor &torch = d.param_torch[i];
  t.name = torch.name;
  if (torch.perm) {
    t.perm.assign(torch.perm, torch.perm + p.rank);
    bool identity = true;
    for (int32_t k = 0; k < p.rank; ++k)
      identity = identity && t.perm[k] == k;
    if (identity)
      t.perm.clear();
  }
  for (int32_t k = 0; k < torch.num_aliases; ++k)
    t.aliases.push_back(torch.aliases[k]);
  return t;
}

std::vector<int64_t> TorchShapeOf(const tcc_step_descriptor &d, int32_t i) {
  const tcc_tensor_desc &p = d.params[i];
  std::vector<int64_t> shape(p.shape, p.shape + p.rank);
  std::vector<int32_t> perm = TorchTensorOf(d, i).perm;
  if (perm.empty())
    return shape;
  std::vector<int64_t> torch(p.rank);
  for (int32_t k = 0; k < p.rank; ++k)
    torch[k] = shape[perm[k]];
  return torch;
}

void PrintDescriptorInfo(const tcc_step_descriptor &sharded, std::ostream &out) {
  // The parameters as the model has them (ZeRO-3: whole, not this rank's
  // shards; the memory table below counts one rank's).
  WholeParameters whole(sharded);
  const tcc_step_descriptor &d = whole.descriptor();
  int64_t param_values = 0, param_bytes = 0, trainable_values = 0;
  for (int32_t i = 0; i < d.num_params; ++i) {
    param_values += d.params[i].num_elements;
    param_bytes += d.params[i].size_bytes;
    if (d.params[i].trainable)
      trainable_values += d.params[i].num_elements;
  }
  out << "model: " << d.model_name << "\n";
  out << "target: " << d.target << " (" << OrUnset(d.arch) << "), precision "
      << OrUnset(d.precision) << "\n";
  out << "optimizer: " << OrUnset(d.optimizer) << ", default learning rate "
      << absl::StrFormat("%g", d.default_learning_rate) << "\n";
  out << "lr schedule: " << ScheduleString(d.lr_schedule) << "\n";
  out << "micro-batches per step: " << d.micro_batches << "\n";
  out << "loss: " << OrUnset(d.loss_name) << "\n";
  out << "param values: " << param_values << " (" << trainable_values
      << " trainable), " << param_bytes << " bytes\n";
  PrintTensors("params", d.num_params, d.params, /*has_init=*/true, out, &d);
  PrintTensors("optimizer state", d.num_optimizer_state, d.optimizer_state,
               /*has_init=*/true, out);
  if (tcc_step_descriptor_has_buffers(&d) && d.num_buffers > 0) {
    // Saved in checkpoints and by --save-weights with the parameters.
    WithBuffers view(d);
    PrintTensors("buffers", d.num_buffers, d.buffers, /*has_init=*/true, out,
                 &view.descriptor(), d.num_params);
  }
  PrintTensors("inputs", d.num_inputs, d.inputs, /*has_init=*/false, out);
  PrintTensors("outputs", d.num_outputs, d.outputs, /*has_init=*/false, out);
  PrintTensors("train outputs", d.num_train_outputs, d.train_outputs,
               /*has_init=*/false, out);
  PrintEntries(d, out);
  out << "workspace: " << d.workspace_bytes << " bytes\n";
  if (tcc_step_descriptor_has_constant_bytes(&d))
    out << "constant tables: " << d.train_constant_bytes
        << " bytes (read by the train step, compiled into the library)\n";
  out << absl::StrFormat("flops/step: train %.4g, eval %.4g\n",
                         d.train_flops_per_step, d.eval_flops_per_step);
  out << (IsDataParallel(d) ? "data parallel: yes (gradients and loss averaged over "
                              "the ranks; trun --nproc, torchrun, srun or mpirun)\n"
                            : "data parallel: no (one rank; tcc compile --data-parallel "
                              "to train across ranks)\n");
  if (int32_t ranks = ShardOptimizerRanks(sharded)) {
    // The descriptor's optimizer state sizes are one rank's (its shards).
    int64_t per_rank = 0, whole_bytes = 0;
    int32_t count = 0;
    for (int32_t i = 0; i < sharded.num_optimizer_state; ++i) {
      bool shard = false;
      per_rank += sharded.optimizer_state[i].size_bytes;
      whole_bytes += WholeOptimizerState(sharded, i, &shard).size_bytes;
      count += shard;
    }
    out << absl::StrFormat(
        "optimizer sharded (ZeRO-1): over exactly %d %s; %d of %d state tensors sharded; "
        "%d bytes of optimizer state per rank (%d unsharded)\n",
        ranks, ranks == 1 ? "rank" : "ranks", count, sharded.num_optimizer_state, per_rank,
        whole_bytes);
  }
  if (int32_t ranks = ShardParameterRanks(sharded)) {
    int64_t per_rank = 0;
    int32_t count = 0;
    for (int32_t i = 0; i < sharded.num_params; ++i) {
      bool shard = false;
      WholeParam(sharded, i, &shard);
      per_rank += sharded.params[i].size_bytes;
      count += shard;
    }
    out << absl::StrFormat(
        "parameters sharded (ZeRO-3): over exactly %d %s; %d of %d parameters sharded; "
        "%d bytes of parameters per rank (%d whole); each function all-gathers them "
        "before use\n",
        ranks, ranks == 1 ? "rank" : "ranks", count, sharded.num_params, per_rank, param_bytes);
  }
  PrintMemoryByPrecision(sharded, out);
}

} // namespace tcc::trun
