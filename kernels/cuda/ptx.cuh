// The inline-PTX wrappers the kernel families share: cp.async copies global -> shared (with or
// without zero-fill), their commit / wait groups, ldmatrix, and mma.m16n8k16 with f32 accumulators.
// Device code only; every kernel file includes this instead of writing its own.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkserve::kernels::cuda {

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- cp.async: 16-byte copies bypass L1 (.cg), 8 / 4-byte ones go through it (.ca, all PTX allows).
// The `valid` forms copy only when valid and otherwise zero-fill the destination without reading src.

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SharedAddress(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SharedAddress(smem)), "l"(gmem),
               "r"(valid ? 16 : 0)
               : "memory");
}
// The same at a shared-memory address: src_bytes (0 or 16) of src, the rest zero-filled.
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void CpAsync8(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(SharedAddress(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void CpAsync8(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(SharedAddress(smem)), "l"(gmem),
               "r"(valid ? 8 : 0)
               : "memory");
}
__device__ __forceinline__ void CpAsync4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(SharedAddress(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void CpAsync4(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(SharedAddress(smem)), "l"(gmem),
               "r"(valid ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight (0: all landed).
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---- ldmatrix: four 8x8 b16 matrices from shared memory (lane l gives row l % 8 of matrix l / 8).

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// ---- mma.m16n8k16: c (16x8 f32) += A (16x16, row) * B (16x8, col). Lane 4g + t holds A (g, 2t..),
// (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..) in a0..a3, B (2t.., g), (2t + 8.., g) in b0, b1, and
// c (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).

__device__ __forceinline__ void MmaF16F32(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                          uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void MmaF16F32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  MmaF16F32(c, a[0], a[1], a[2], a[3], b0, b1);
}
__device__ __forceinline__ void MmaBf16F32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// d = A B (no accumulator input: the compiler passes zero registers).
__device__ __forceinline__ void MmaF16F32Fresh(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.f));
}

}  // namespace sparkserve::kernels::cuda
