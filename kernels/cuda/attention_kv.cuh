// The KV pool element formats (attention.h KvDtype) as the attention kernels read and write them:
// 8 elements at a time (one 16-byte bf16 load or one 8-byte fp8 load), widened to f32 or f16.
// Shared by attention.cu, prefill_attention.cu and qk_norm_rope.cu.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_common.cuh"

namespace sparkserve::kernels::cuda {

// f32 pair -> f16x2, round to nearest even, saturating at +-65504 (NaN stays NaN).
__device__ __forceinline__ uint32_t F32x2ToF16x2Sat(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// bf16 elements: the value itself.
struct Bf16Kv {
  static constexpr KvDtype kDtype = KvDtype::kBf16;
  static constexpr int kBytes = 2;
  static constexpr bool kScaled = false;  // k_scale / v_scale unused
  using Vec8 = uint4;

  static __device__ __forceinline__ Vec8 Zero() { return make_uint4(0, 0, 0, 0); }
  // Read-once global load (bypasses L1).
  static __device__ __forceinline__ Vec8 LoadStreaming8(const uint8_t* p) { return LoadStreaming(p); }
  static __device__ __forceinline__ Vec8 LoadGlobal8(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
  static __device__ __forceinline__ Vec8 LoadShared8(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }
  static __device__ __forceinline__ void StoreShared8(uint8_t* p, const Vec8& v) { *reinterpret_cast<uint4*>(p) = v; }
  static __device__ __forceinline__ void ToF32(const Vec8& u, float (&f)[8]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 p = Bf16PairToFloat2(w[j]);
      f[2 * j] = p.x;
      f[2 * j + 1] = p.y;
    }
  }
  // 8 elements as 8 f16 (exact inside f16's range, saturating outside it).
  static __device__ __forceinline__ uint4 ToF16(const Vec8& u) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
    uint32_t h[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 p = Bf16PairToFloat2(w[j]);
      h[j] = F32x2ToF16x2Sat(p.x, p.y);
    }
    return make_uint4(h[0], h[1], h[2], h[3]);
  }
  static __device__ __forceinline__ void Store(void* pool, size_t elem, float x, float /*scale*/) {
    static_cast<__nv_bfloat16*>(pool)[elem] = __float2bfloat16_rn(x);
  }
};

// float8_e4m3fn elements: value = e4m3 * scale (the scale is applied by the kernels, not here).
struct Fp8Kv {
  static constexpr KvDtype kDtype = KvDtype::kFp8E4M3;
  static constexpr int kBytes = 1;
  static constexpr bool kScaled = true;
  using Vec8 = uint2;

  static __device__ __forceinline__ Vec8 Zero() { return make_uint2(0, 0); }
  static __device__ __forceinline__ Vec8 LoadStreaming8(const uint8_t* p) {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
  }
  static __device__ __forceinline__ Vec8 LoadGlobal8(const uint8_t* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }
  static __device__ __forceinline__ Vec8 LoadShared8(const uint8_t* p) { return *reinterpret_cast<const uint2*>(p); }
  static __device__ __forceinline__ void StoreShared8(uint8_t* p, const Vec8& v) { *reinterpret_cast<uint2*>(p) = v; }
  // Two codes (low byte first) -> f16x2, exact (every e4m3 value is an f16).
  static __device__ __forceinline__ uint32_t PairToF16x2(uint32_t two_codes) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes), __NV_E4M3);
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  }
  static __device__ __forceinline__ uint4 ToF16(const Vec8& u) {
    return make_uint4(PairToF16x2(u.x & 0xffffu), PairToF16x2(u.x >> 16), PairToF16x2(u.y & 0xffffu),
                      PairToF16x2(u.y >> 16));
  }
  static __device__ __forceinline__ void ToF32(const Vec8& u, float (&f)[8]) {
    const uint4 h = ToF16(u);
    const uint32_t w[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      __half2_raw raw;
      raw.x = static_cast<unsigned short>(w[j] & 0xffffu);
      raw.y = static_cast<unsigned short>(w[j] >> 16);
      const float2 x = __half22float2(__half2(raw));
      f[2 * j] = x.x;
      f[2 * j + 1] = x.y;
    }
  }
  // e4m3(x / scale): IEEE division (even under --use_fast_math), then round to nearest even with
  // saturation at +-448 (cvt.rn.satfinite), which is quant::F32ToE4M3 bit for bit.
  static __device__ __forceinline__ void Store(void* pool, size_t elem, float x, float scale) {
    static_cast<uint8_t*>(pool)[elem] =
        static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fdiv_rn(x, scale), __NV_SATFINITE, __NV_E4M3));
  }
};

// Element offset of (position `pos`, kv head 0) in a K/V pool, through the seq's page-table row.
__device__ __forceinline__ size_t KvRowOffset(const KvPoolDevice& kv, const int32_t* pages, int pos) {
  const int page = pages[pos / kv.page_size];
  return (static_cast<size_t>(page) * kv.page_size + pos % kv.page_size) * kv.kv_heads * kv.head_dim;
}

}  // namespace sparkserve::kernels::cuda
