// The interpreter's value: a dense row-major tensor of doubles. In a header
// of its own so that the helpers the op-group files share
// (InterpreterSupport.h) need not include the evaluator's entry point
// (TgInterpreter.h), whose implementation includes them.
#ifndef TCC_INTERPRETER_TENSOR_H
#define TCC_INTERPRETER_TENSOR_H

#include <cstdint>
#include <vector>

#include "llvm/ADT/ArrayRef.h"

namespace tcc::interp {

// A dense row-major tensor. Every element type is held as a double: f32 and
// f64 values are evaluated in float64, and integer tensors (labels) hold
// their integer values exactly (any int32 / int64 label fits in 53 bits).
struct Tensor {
  std::vector<int64_t> shape; // empty for a scalar
  std::vector<double> data;   // product(shape) elements, row-major

  static Tensor zeros(llvm::ArrayRef<int64_t> shape);
  static Tensor scalar(double value) { return Tensor{{}, {value}}; }
  int64_t numElements() const;
};

// The number of elements of a tensor of `shape` (1 for a scalar).
int64_t product(llvm::ArrayRef<int64_t> shape);

} // namespace tcc::interp

#endif
