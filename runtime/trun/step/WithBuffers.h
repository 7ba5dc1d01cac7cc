// A step's descriptor as checkpoints, --save-weights and --init-from see
// it: the parameters followed by the model buffers (batch norm's running
// statistics, the descriptor's buffers), so that they are saved, restored
// and matched like parameters: in model.safetensors and the checkpoint
// fingerprint, under their state_dict keys (buffer_torch) in a PyTorch
// state_dict. A step without buffers is seen as it is.
#ifndef TCC_RUNTIME_TRUN_STEP_WITHBUFFERS_H
#define TCC_RUNTIME_TRUN_STEP_WITHBUFFERS_H

#include "tcc/step_abi.h"

#include <vector>

namespace tcc::trun {

class WithBuffers {
public:
  explicit WithBuffers(const tcc_step_descriptor &d) : d_(d) {
    if (!tcc_step_descriptor_has_buffers(&d) || d.num_buffers == 0)
      return;
    tensors_.assign(d.params, d.params + d.num_params);
    tensors_.insert(tensors_.end(), d.buffers, d.buffers + d.num_buffers);
    d_.params = tensors_.data();
    d_.num_params = static_cast<int32_t>(tensors_.size());
    bool paramTorch = tcc_step_descriptor_has_torch(&d) && d.param_torch;
    if (paramTorch || d.buffer_torch) {
      // Entries without one: the tensor's own name, tcc's layout.
      for (int32_t i = 0; i < d.num_params; ++i)
        torch_.push_back(paramTorch ? d.param_torch[i]
                                    : tcc_torch_tensor{d.params[i].name, nullptr, 0, nullptr});
      for (int32_t i = 0; i < d.num_buffers; ++i)
        torch_.push_back(d.buffer_torch
                             ? d.buffer_torch[i]
                             : tcc_torch_tensor{d.buffers[i].name, nullptr, 0, nullptr});
      d_.param_torch = torch_.data();
    }
  }
  WithBuffers(const WithBuffers &) = delete;
  WithBuffers &operator=(const WithBuffers &) = delete;

  const tcc_step_descriptor &descriptor() const { return d_; }

  // params followed by buffers (the pointers of one call's tensors).
  template <typename T>
  static std::vector<T> Join(std::vector<T> params, const std::vector<T> &buffers) {
    params.insert(params.end(), buffers.begin(), buffers.end());
    return params;
  }

private:
  tcc_step_descriptor d_;
  std::vector<tcc_tensor_desc> tensors_;
  std::vector<tcc_torch_tensor> torch_;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEP_WITHBUFFERS_H
