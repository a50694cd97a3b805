// Internal to kernels/cuda: the token-mask kernel's launcher (token_mask.cu), called by
// token_mask.cc after the argument checks. No absl/fmt here: nvcc compiles this.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/cuda/token_mask.h"

namespace sparkserve::kernels::cuda {

cudaError_t LaunchApplyTokenMasks(const TokenMaskInputs& in, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
