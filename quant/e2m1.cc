// Bulk E2M1 packing and unpacking over spans (see e2m1.h).
#include "quant/e2m1.h"

#include <cassert>

namespace sparkserve::quant {

void UnpackE2M1(std::span<const uint8_t> packed, std::span<float> out) {
  assert(out.size() == 2 * packed.size());
  for (size_t j = 0; j < packed.size(); ++j) {
    out[2 * j] = E2M1ToF32(packed[j] & 0xfu);
    out[2 * j + 1] = E2M1ToF32(packed[j] >> 4);
  }
}

void PackE2M1(std::span<const float> in, std::span<uint8_t> packed) {
  assert(in.size() == 2 * packed.size());
  for (size_t j = 0; j < packed.size(); ++j) {
    packed[j] = PackE2M1(F32ToE2M1(in[2 * j]), F32ToE2M1(in[2 * j + 1]));
  }
}

}  // namespace sparkserve::quant
