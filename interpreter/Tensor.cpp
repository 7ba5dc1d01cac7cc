#include "interpreter/Tensor.h"

namespace tcc::interp {

int64_t product(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Tensor Tensor::zeros(llvm::ArrayRef<int64_t> shape) {
  return Tensor{std::vector<int64_t>(shape.begin(), shape.end()),
                std::vector<double>(product(shape), 0.0)};
}

int64_t Tensor::numElements() const { return product(shape); }

} // namespace tcc::interp
