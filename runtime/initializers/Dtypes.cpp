#include "runtime/initializers/Dtypes.h"

#include "tcc/step_abi.h"

#include "absl/strings/str_cat.h"

namespace tcc::trun {

int64_t DtypeSize(int32_t dtype) {
  switch (dtype) {
  case TCC_DTYPE_F32:
  case TCC_DTYPE_I32:
    return 4;
  case TCC_DTYPE_F64:
  case TCC_DTYPE_I64:
    return 8;
  case TCC_DTYPE_U8:
    return 1;
  case TCC_DTYPE_BF16:
  case TCC_DTYPE_F16:
    return 2;
  default:
    return 0;
  }
}

std::string DtypeName(int32_t dtype) {
  switch (dtype) {
  case TCC_DTYPE_F32:
    return "f32";
  case TCC_DTYPE_F64:
    return "f64";
  case TCC_DTYPE_I32:
    return "i32";
  case TCC_DTYPE_I64:
    return "i64";
  case TCC_DTYPE_U8:
    return "u8";
  case TCC_DTYPE_BF16:
    return "bf16";
  case TCC_DTYPE_F16:
    return "f16";
  default:
    return absl::StrCat("dtype(", dtype, ")");
  }
}

bool IsFloatingDtype(int32_t dtype) {
  return dtype == TCC_DTYPE_F32 || dtype == TCC_DTYPE_F64 ||
         dtype == TCC_DTYPE_BF16 || dtype == TCC_DTYPE_F16;
}

bool IsIntegerDtype(int32_t dtype) {
  return dtype == TCC_DTYPE_I32 || dtype == TCC_DTYPE_I64 ||
         dtype == TCC_DTYPE_U8;
}

} // namespace tcc::trun
