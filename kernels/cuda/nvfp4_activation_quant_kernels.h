// Internal to kernels/cuda: the NVFP4 activation quantisation launchers (nvfp4_activation_quant.cu).
// No absl/fmt here: nvcc compiles this.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/nvfp4_activation_quant.h"

namespace sparkserve::kernels::cuda {

cudaError_t LaunchQuantizeActivationsNvfp4(const __half* x, int64_t groups, float gs, const Nvfp4Activations& out,
                                           cudaStream_t stream);
cudaError_t LaunchQuantizeActivationsNvfp4(const float* x, int64_t groups, float gs, const Nvfp4Activations& out,
                                           cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
