// ggml block formats dequantised to f32 (see gguf_dequant.h).
#include "quant/gguf_dequant.h"

#include <cstring>

#include "core/half.h"
#include "fmt/format.h"
#include "quant/gguf_reader.h"

namespace sparkserve::quant {
namespace {

constexpr int kQK = 256;  // K-quant super-block

float F16At(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return core::F16ToF32(h);
}

// The 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes `q`.
void ScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void Q8_0Block(const uint8_t* b, float* y) {
  const float d = F16At(b);
  for (int k = 0; k < 32; ++k) y[k] = static_cast<float>(static_cast<int8_t>(b[2 + k])) * d;
}

void Q4KBlock(const uint8_t* b, float* y) {
  const float d = F16At(b), min = F16At(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  int is = 0;
  for (int j = 0; j < kQK; j += 64) {
    uint8_t sc, m;
    ScaleMinK4(is, scales, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    ScaleMinK4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
    is += 2;
  }
}

void Q5KBlock(const uint8_t* b, float* y) {
  const float d = F16At(b), min = F16At(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  int is = 0;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < kQK; j += 64) {
    uint8_t sc, m;
    ScaleMinK4(is, scales, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    ScaleMinK4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    ql += 32;
    is += 2;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

void Q6KBlock(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = F16At(b + 208);
  for (int n = 0; n < kQK; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = static_cast<int8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

absl::Status DequantizeGgml(uint32_t type, std::span<const uint8_t> src, float* dst, int64_t n) {
  int64_t be = 0, bb = 0;
  if (!GgmlBlockLayout(type, &be, &bb)) {
    return absl::UnimplementedError(fmt::format("ggml type {} cannot be dequantised here", GgmlTypeName(type)));
  }
  if (n < 0 || n % be != 0 || static_cast<uint64_t>(n / be * bb) != src.size()) {
    return absl::InvalidArgumentError(fmt::format("{}: {} elements need {} bytes of blocks, got {}", GgmlTypeName(type), n,
                                                  n % be == 0 ? n / be * bb : -1, src.size()));
  }
  const uint8_t* s = src.data();
  const int64_t blocks = n / be;
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: std::memcpy(dst, s, static_cast<size_t>(n) * 4); break;
    case GgmlType::kF16: for (int64_t k = 0; k < n; ++k) dst[k] = F16At(s + 2 * k); break;
    case GgmlType::kBF16:
      for (int64_t k = 0; k < n; ++k) {
        uint16_t h;
        std::memcpy(&h, s + 2 * k, 2);
        dst[k] = core::Bf16ToF32(h);
      }
      break;
    case GgmlType::kQ8_0: for (int64_t k = 0; k < blocks; ++k) Q8_0Block(s + k * bb, dst + k * be); break;
    case GgmlType::kQ4_K: for (int64_t k = 0; k < blocks; ++k) Q4KBlock(s + k * bb, dst + k * be); break;
    case GgmlType::kQ5_K: for (int64_t k = 0; k < blocks; ++k) Q5KBlock(s + k * bb, dst + k * be); break;
    case GgmlType::kQ6_K: for (int64_t k = 0; k < blocks; ++k) Q6KBlock(s + k * bb, dst + k * be); break;
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::quant
