// C spellings of MLIR types and values that both code generators print:
// storage and compute types of element types, the step ABI's dtype names,
// exact literals, loads and stores of half types through the prelude
// helpers, dense constants as array initializers, and op locations as
// model node names.
#ifndef TCC_COMPILER_CODEGEN_COMMON_CTYPES_H
#define TCC_COMPILER_CODEGEN_COMMON_CTYPES_H

#include <string>

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace tcc::codegen {

using namespace mlir;

// Which generated language a printer writes.
enum class CodeTarget { Cpu, Cuda };

// The C type a buffer element is stored as.
std::string storageType(Type t);

// The C type a scalar of type `t` is computed in (half types in float).
std::string scalarType(Type t);

// The unsigned type of the same width, for wrapping integer arithmetic.
std::string unsignedType(Type t);

// The step ABI's TCC_DTYPE_* name of `t`.
const char *abiDType(Type t);

inline MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

int64_t bufferBytes(MemRefType t);

// "(2,3)": a buffer's shape for comments.
std::string shapeComment(MemRefType t);

// The model node(s) an op comes from: "fc1", or "ln1+gelu" for fused ops.
std::string locName(Location loc);

// A kernel's label in the profiles and the kernel list: "node: kern.op",
// plus what the op computes where one op name covers several products
// (a layer's three convolutions carry one node): "c1: kern.conv2d input
// gradient", "p1: kern.pool2d max gradient".
std::string kernelLabel(Operation *op);

// A C literal of `v` in the compute type of float type `t`, exact.
std::string floatLiteral(double v, Type t);

std::string intLiteral(const APInt &v, Type t);

// The namespace of a target's prelude helpers.
std::string preludeNamespace(CodeTarget target);

// A stored element of type `et` as its compute type, and back: halves
// convert through float with the prelude's helpers.
std::string loadElement(Type et, const std::string &e, CodeTarget target);
std::string storeElement(Type et, const std::string &e, CodeTarget target);

// The element type a fixed kernel family of the prelude (reductions,
// softmax cross-entropy, gather / scatter-add, CPU gemm) is instantiated
// with: storageType, except bf16 / f16, which get the prelude's own types
// (tcc_cpu::bf16, tcc_cuda::f16, ...) so that a family never treats their
// bits as integers.
std::string familyElementType(Type et, CodeTarget target);

// Pointer `p` to a buffer of element type `et` (declared with
// storageType), as the family's pointer type (a reinterpret_cast for
// bf16 / f16; `p` itself otherwise).
std::string familyPointer(Type et, const std::string &p, bool written, CodeTarget target);

// The stored value kern.fill writes: `v` as an element of type `et`.
std::string fillValue(Type et, double v, CodeTarget target);

// The elements of a dense constant as a C array initializer body, eight a
// line ("\n    1.0f, 2.0f, ..."): exact float literals, half types as
// their bits, integers through intLiteral.
std::string denseInitializer(DenseElementsAttr dense, Type et);

} // namespace tcc::codegen

#endif // TCC_COMPILER_CODEGEN_COMMON_CTYPES_H
