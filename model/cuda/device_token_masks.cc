// CudaModelRunner::ApplyTokenMasks: a step's structured-output masks onto its logits on the GPU
// (kernels/cuda/token_mask.h), after the engine's mask thread has filled them.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/token_mask.h"
#include "model/cuda/cuda_model_runner.h"

namespace sparkserve::model::cuda {
namespace kc = kernels::cuda;

absl::Status CudaModelRunner::ApplyTokenMasks(const std::vector<RowSampling>& rows, const TokenMasks& masks) {
  std::vector<int32_t> logit_rows, mask_rows;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].mask_row < 0) continue;
    logit_rows.push_back(static_cast<int32_t>(r));
    mask_rows.push_back(rows[r].mask_row);
  }
  if (logit_rows.empty()) return absl::OkStatus();
  // The forward is queued: the GPU runs it while this thread waits for the masks.
  masks.WaitReady();
  const size_t words = masks.words.size();
  const size_t total = words + 2 * logit_rows.size();
  if (mask_host_capacity_ < total) {  // the previous step's copy finished (SampleOnDevice ends synchronised)
    if (mask_host_ != nullptr) cudaFreeHost(mask_host_);
    mask_host_ = nullptr;
    mask_host_capacity_ = 0;
    CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&mask_host_), total * 2 * sizeof(uint32_t)));
    mask_host_capacity_ = total * 2;
    ASSIGN_OR_RETURN(mask_device_, DeviceBuffer<uint32_t>::Allocate(mask_host_capacity_));
  }
  std::memcpy(mask_host_, masks.words.data(), words * sizeof(uint32_t));
  std::memcpy(mask_host_ + words, logit_rows.data(), logit_rows.size() * sizeof(int32_t));
  std::memcpy(mask_host_ + words + logit_rows.size(), mask_rows.data(), mask_rows.size() * sizeof(int32_t));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(mask_device_.data(), mask_host_, total * sizeof(uint32_t), cudaMemcpyHostToDevice, stream_));
  kc::TokenMaskInputs in;
  in.logits = logits_.data();
  in.rows = static_cast<int>(rows.size());
  in.vocab = static_cast<int>(shapes_.vocab.second - shapes_.vocab.first);  // this rank's columns
  in.vocab_begin = shapes_.vocab.first;
  in.words = mask_device_.data();
  in.words_per_row = masks.words_per_row;
  in.logit_rows = reinterpret_cast<const int32_t*>(mask_device_.data() + words);
  in.mask_rows = reinterpret_cast<const int32_t*>(mask_device_.data() + words + logit_rows.size());
  in.count = static_cast<int>(logit_rows.size());
  return kc::ApplyTokenMasks(in, stream_);
}

}  // namespace sparkserve::model::cuda
