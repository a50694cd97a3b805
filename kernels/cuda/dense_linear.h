// Dense bf16 linear on CUDA (W16A16; layers a quantised checkpoint leaves unquantised, e.g. the GDN
// in_proj_a/b, or a whole bf16 model): y = x W^T with fp32 accumulation, any shape. Up to 8 rows
// it is a GEMV that reads each weight once with 16-byte loads; more rows take a tiled path.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace sparkserve::kernels::cuda {

// y[r, o] = sum_i x[r, i] * w[o, i]. w bf16 [out, in] row-major (device, 16-byte aligned rows when
// in % 8 == 0; any `in` works); x f16 [rows, in]; y f32 [rows, out]. rows >= 1.
absl::Status DenseLinearBf16(const __nv_bfloat16* w, int out, int in, const __half* x, int rows, float* y,
                             cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
