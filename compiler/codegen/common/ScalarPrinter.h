// Prints the scalar ops of a kern.elementwise body (arith and math) as C++
// statements, for both targets: the CPU and CUDA flavours differ only in
// the prelude namespace of their helpers and in how C math functions are
// named.
#ifndef TCC_COMPILER_CODEGEN_COMMON_SCALARPRINTER_H
#define TCC_COMPILER_CODEGEN_COMMON_SCALARPRINTER_H

#include <string>
#include <utility>
#include <vector>

#include "compiler/codegen/common/CTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace tcc::codegen {

// Prints the scalar ops of a kern.elementwise body as C++ statements.
class ScalarPrinter {
public:
  // `target` picks the helper namespace (tcc_cpu / tcc_cuda) and how C
  // math functions are named (std:: on the CPU, CUDA's global overloads).
  ScalarPrinter(llvm::DenseMap<Value, std::string> &names,
                CodeTarget target = CodeTarget::Cpu)
      : names_(names), target_(target) {}

  // Declared scalars in order: (C type, name).
  const std::vector<std::pair<std::string, std::string>> &declared() const {
    return declared_;
  }

  // Emits `const T sN = expr;` for `op`'s result, or nothing when an
  // earlier op printed the same expression (its name is reused).
  LogicalResult print(Operation *op, std::string &out);

private:
  std::string n(Value v) { return names_.lookup(v); }

  FailureOr<std::string> expression(Operation *op, Type t);

  std::string helper(StringRef fn) const;
  std::string libm(StringRef fn) const;

  llvm::DenseMap<Value, std::string> &names_;
  CodeTarget target_;
  std::vector<std::pair<std::string, std::string>> declared_;
  llvm::StringMap<std::string> printed_; // "T expr" -> its name
};

} // namespace tcc::codegen

#endif // TCC_COMPILER_CODEGEN_COMMON_SCALARPRINTER_H
