// Sizes and names of the step ABI's dtypes (TCC_DTYPE_* of
// tcc/step_abi.h). Here rather than in trun because the initializers, which
// `tcc run` links without trun, name a dtype they cannot fill.
#ifndef TCC_RUNTIME_INITIALIZERS_DTYPES_H
#define TCC_RUNTIME_INITIALIZERS_DTYPES_H

#include "absl/strings/string_view.h"

#include <cstdint>
#include <string>

namespace tcc::trun {

// Bytes per element; 0 for TCC_DTYPE_INVALID or unknown values.
int64_t DtypeSize(int32_t dtype);
// "f32", "i32", ...; "dtype(N)" for unknown values.
std::string DtypeName(int32_t dtype);
// The dtype DtypeName names ("f32"); TCC_DTYPE_INVALID if none.
int32_t DtypeFromName(absl::string_view name);
bool IsFloatingDtype(int32_t dtype);
bool IsIntegerDtype(int32_t dtype);

} // namespace tcc::trun

#endif // TCC_RUNTIME_INITIALIZERS_DTYPES_H
