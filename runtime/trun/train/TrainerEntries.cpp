// Trainer::CallEntry: one call of a further entry point of the step
// (descriptor.entries), with the entry's own inputs, outputs and state.
#include "runtime/trun/train/Trainer.h"

#include "runtime/trun/step/StepDescriptor.h"
#include "runtime/trun/step/StepEntries.h"

#include "absl/strings/str_cat.h"

#include <cstring>
#include <limits>

namespace tcc::trun {

absl::StatusOr<EntryBuffers *> Trainer::BuffersOfEntry(int32_t entry) {
  if (entry < 0 || entry >= NumEntries(descriptor_))
    return absl::InvalidArgumentError(
        absl::StrCat("step '", descriptor_.model_name, "' has no entry #", entry));
  if (entry_buffers_.size() < static_cast<size_t>(descriptor_.num_entries))
    entry_buffers_.resize(descriptor_.num_entries);
  if (entry_buffers_[entry])
    return entry_buffers_[entry].get();
  const tcc_step_entry &e = descriptor_.entries[entry];
  auto b = std::make_unique<EntryBuffers>();
  auto sizes = [](int32_t n, const tcc_tensor_desc *list) {
    std::vector<int64_t> s;
    for (int32_t i = 0; i < n; ++i)
      s.push_back(list[i].size_bytes);
    return s;
  };
  // Entries with identical state tables (names, dtypes, sizes, in order)
  // share one set of state buffers: prefill writes the KV cache decode
  // reads (tg-derive-generate gives both the same table). The first entry
  // created owns them.
  const EntryBuffers *shared = nullptr;
  for (int32_t j = 0; j < descriptor_.num_entries && !shared && e.num_state > 0; ++j) {
    const tcc_step_entry &o = descriptor_.entries[j];
    if (j == entry || !entry_buffers_[j] || o.num_state != e.num_state)
      continue;
    bool same = true;
    for (int32_t i = 0; same && i < e.num_state; ++i)
      same = std::strcmp(o.state[i].name, e.state[i].name) == 0 &&
             o.state[i].dtype == e.state[i].dtype && o.state[i].size_bytes == e.state[i].size_bytes;
    if (same)
      shared = entry_buffers_[j].get();
  }
  if (device_) {
    std::string name = absl::StrCat("entry '", e.name, "' ");
    auto state = DeviceArena::Create(*device_, name + "state",
                                     sizes(shared ? 0 : e.num_state, e.state));
    auto inputs = DeviceArena::Create(*device_, name + "inputs", sizes(e.num_inputs, e.inputs));
    auto outputs =
        DeviceArena::Create(*device_, name + "outputs", sizes(e.num_outputs, e.outputs));
    for (auto *a : {&state, &inputs, &outputs})
      if (!a->ok())
        return a->status();
    b->device_state = std::move(*state);
    b->device_inputs = std::move(*inputs);
    b->device_outputs = std::move(*outputs);
    if (shared)
      b->state_ptrs = shared->state_ptrs;
    else
      b->state_ptrs.assign(b->device_state->tensors().begin(),
                           b->device_state->tensors().begin() + e.num_state);
    b->output_ptrs.assign(b->device_outputs->tensors().begin(),
                          b->device_outputs->tensors().begin() + e.num_outputs);
    for (int32_t i = 0; i < e.num_inputs; ++i)
      b->input_ptrs.push_back(b->device_inputs->tensor(i));
  } else {
    if (shared)
      b->state_ptrs = shared->state_ptrs;
    for (int32_t i = 0; i < e.num_state && !shared; ++i) {
      b->host_state.emplace_back(static_cast<size_t>(e.state[i].size_bytes));
      std::memset(b->host_state.back().data(), 0, e.state[i].size_bytes);
      b->state_ptrs.push_back(b->host_state.back().data());
    }
    b->input_ptrs.assign(e.num_inputs, nullptr);
    b->output_ptrs.assign(e.num_outputs, nullptr);
  }
  entry_buffers_[entry] = std::move(b);
  return entry_buffers_[entry].get();
}

absl::Status Trainer::ResetEntryState(int32_t entry) {
  absl::StatusOr<EntryBuffers *> b = BuffersOfEntry(entry);
  if (!b.ok())
    return b.status();
  const tcc_step_entry &e = descriptor_.entries[entry];
  for (int32_t i = 0; i < e.num_state; ++i) {
    if (!device_) {
      std::memset((*b)->state_ptrs[i], 0, e.state[i].size_bytes);
    } else if (int32_t rc = device_->fill_zero((*b)->state_ptrs[i], e.state[i].size_bytes)) {
      return DeviceCallStatus(*device_, rc, absl::StrCat("zeroing the state of entry ", e.name));
    }
  }
  return absl::OkStatus();
}

absl::Status Trainer::CallEntry(int32_t entry, const std::vector<const void *> &inputs,
                                const std::vector<void *> &outputs, float base_lr,
                                absl::string_view what) {
  absl::StatusOr<EntryBuffers *> got = BuffersOfEntry(entry);
  if (!got.ok())
    return got.status();
  EntryBuffers &b = **got;
  const tcc_step_entry &e = descriptor_.entries[entry];
  if (inputs.size() != static_cast<size_t>(e.num_inputs) ||
      (!outputs.empty() && outputs.size() != static_cast<size_t>(e.num_outputs)))
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": entry '", e.name, "' takes ", e.num_inputs, " inputs and ", e.num_outputs,
        " outputs, got ", inputs.size(), " and ", outputs.size()));
  const bool trains = EntryTrains(e);
  if (device_) {
    if (absl::Status s = buffers_->SyncToDevice(); !s.ok())
      return s;
    for (int32_t i = 0; i < e.num_inputs; ++i)
      if (int32_t rc = device_->to_device(const_cast<void *>(b.input_ptrs[i]), inputs[i],
                                          e.inputs[i].size_bytes))
        return DeviceCallStatus(*device_, rc,
                                absl::StrCat(what, ": uploading input ", e.inputs[i].name));
  } else {
    b.input_ptrs = inputs;
  }
  tcc_step_args args = args_;
  args.inputs = b.input_ptrs.data();
  args.entry_state = b.state_ptrs.data();
  args.step = steps_done_;
  std::vector<void *> host_outputs(e.num_outputs, nullptr);
  for (size_t i = 0; i < outputs.size(); ++i)
    host_outputs[i] = outputs[i];
  args.outputs = device_ ? b.output_ptrs.data() : host_outputs.data();
  if (trains)
    args.learning_rate = static_cast<float>(
        LearningRateAt(descriptor_.lr_schedule, base_lr, steps_done_));
  loss_ = std::numeric_limits<float>::quiet_NaN();
  args.loss = &loss_;
  int32_t status = e.fn(&args);
  if (trains)
    buffers_->DeviceWritten();
  if (status != TCC_STATUS_OK)
    return CallError(absl::StrCat(what, " (entry ", e.name, ")"), status);
  if (trains) {
    args_.learning_rate = args.learning_rate;
    ++steps_done_;
  }
  if (device_)
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i])
        if (int32_t rc = device_->to_host(outputs[i], b.output_ptrs[i], e.outputs[i].size_bytes))
          return DeviceCallStatus(*device_, rc,
                                  absl::StrCat(what, ": reading output ", e.outputs[i].name));
  return absl::OkStatus();
}

} // namespace tcc::trun
