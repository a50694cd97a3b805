// Structured outputs on the GPU: a step's token masks applied to its logits before sampling
// (kernels/cuda/sampling.h then sees disallowed tokens as -inf, as the host sampler does).
// Masks are the engine's bit rows (model::TokenMasks); a rank holding a slice of the vocabulary
// (tensor-parallel lm_head) passes where its slice begins.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace sparkserve::kernels::cuda {

struct TokenMaskInputs {
  float* logits = nullptr;            // f32 [rows, vocab]: this rank's logits, masked in place
  int rows = 0;
  int vocab = 0;                      // columns of `logits` (this rank's slice)
  int64_t vocab_begin = 0;            // the global token id of column 0
  const uint32_t* words = nullptr;    // [mask rows, words_per_row]: bit v % 32 of word v / 32 = token v allowed
  int words_per_row = 0;              // >= (vocab_begin + vocab + 31) / 32
  const int32_t* logit_rows = nullptr;  // [count] the logits row each pair masks
  const int32_t* mask_rows = nullptr;   // [count] the mask row it keeps to
  int count = 0;
};

// logits[logit_rows[i], v] = -inf where token vocab_begin + v is not allowed by mask row
// mask_rows[i], for every i < count. No host synchronisation (graph-capturable). InvalidArgument
// on bad sizes or null pointers; row indices live on the device and are not checked.
absl::Status ApplyTokenMasks(const TokenMaskInputs& in, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
