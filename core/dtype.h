// Element types of tensors and their names in safetensors files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace sparkserve::core {

enum class DType : uint8_t {
  kF32,
  kBF16,
  kF16,
  kF8E4M3,  // float8_e4m3fn: no infinities, 0x7f/0xff are NaN, max 448
  kU8,
  kI32,
  kI64,
};

// Bytes per element.
size_t DTypeSize(DType t);
// Short lower-case name: f32, bf16, f16, fp8_e4m3, u8, i32, i64.
std::string_view DTypeName(DType t);
// safetensors dtype strings: F32, BF16, F16, F8_E4M3, U8, I32, I64.
std::string_view DTypeSafetensorsName(DType t);
absl::StatusOr<DType> DTypeFromSafetensorsName(std::string_view name);
bool IsFloating(DType t);

}  // namespace sparkserve::core
