// Bulk E4M3FN conversion over spans (see e4m3.h).
#include "quant/e4m3.h"

#include <cassert>

namespace sparkserve::quant {

void DecodeE4M3(std::span<const uint8_t> in, std::span<float> out) {
  assert(in.size() == out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = E4M3ToF32(in[i]);
}

void EncodeE4M3(std::span<const float> in, std::span<uint8_t> out) {
  assert(in.size() == out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = F32ToE4M3(in[i]);
}

}  // namespace sparkserve::quant
