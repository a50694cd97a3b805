// Internal to kernels/cuda: the sampling kernel's launcher (sampling.cu), called by sampling.cc after
// the argument checks. No absl/fmt here: nvcc compiles this.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/cuda/sampling.h"

namespace sparkserve::kernels::cuda {

// One block of 1024 threads per row; `workspace` holds SampleWorkspaceBytes(in.rows, in.vocab).
cudaError_t LaunchSample(const SamplingInputs& in, const SamplingOutputs& out, float* workspace, cudaStream_t stream);
// One block of 1024 threads per row (SelectCandidates); the same workspace.
cudaError_t LaunchSelectCandidates(const SamplingInputs& in, int id_begin, int k, float* candidates, float* workspace,
                                   cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
