#include "runtime/initializers/Dtypes.h"

#include "tcc/step_abi.h"

#include "absl/strings/str_cat.h"

namespace tcc::trun {

namespace {

struct DtypeInfo {
  int32_t dtype;
  const char *name;
  int64_t bytes;
};

// Every dtype of the ABI, once.
constexpr DtypeInfo kDtypes[] = {
    {TCC_DTYPE_F32, "f32", 4}, {TCC_DTYPE_F64, "f64", 8},
    {TCC_DTYPE_I32, "i32", 4}, {TCC_DTYPE_I64, "i64", 8},
    {TCC_DTYPE_U8, "u8", 1},   {TCC_DTYPE_BF16, "bf16", 2},
    {TCC_DTYPE_F16, "f16", 2},
};

const DtypeInfo *Find(int32_t dtype) {
  for (const DtypeInfo &info : kDtypes)
    if (info.dtype == dtype)
      return &info;
  return nullptr;
}

} // namespace

int64_t DtypeSize(int32_t dtype) {
  const DtypeInfo *info = Find(dtype);
  return info ? info->bytes : 0;
}

std::string DtypeName(int32_t dtype) {
  if (const DtypeInfo *info = Find(dtype))
    return info->name;
  return absl::StrCat("dtype(", dtype, ")");
}

int32_t DtypeFromName(absl::string_view name) {
  for (const DtypeInfo &info : kDtypes)
    if (name == info.name)
      return info.dtype;
  return TCC_DTYPE_INVALID;
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
