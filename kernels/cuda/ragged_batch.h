// RaggedBatchDevice: one step's token layout in device memory, as every per-sequence CUDA kernel
// reads it (the GPU twin of kernels/cpu RaggedSeq + page tables). Host sizes are fixed for a
// captured CUDA graph; everything that changes between steps lives behind the device pointers.
#pragma once
#include <cstdint>

namespace sparkserve::kernels::cuda {

struct RaggedBatchDevice {
  int num_seqs = 0;                     // S
  int num_tokens = 0;                   // T = sum of tokens over seqs
  int max_seq_tokens = 0;               // most tokens of one seq in this step (grid sizing; >= 1)
  const int32_t* token_begin = nullptr;  // [S + 1] prefix sums: seq s owns tokens [tb[s], tb[s+1])
  const int32_t* start_pos = nullptr;    // [S] position of the seq's first token of this step
  const int32_t* token_seq = nullptr;    // [T] seq index of each token
  const int32_t* positions = nullptr;    // [T] absolute position of each token
  const int32_t* slots = nullptr;        // [S] GDN/conv state slot of each seq
  const uint8_t* keep_columns = nullptr;  // [S] 1: record GDN/conv state after every token (MTP verify)
  const int32_t* page_table = nullptr;   // [S, pages_stride] KV page ids covering [0, start_pos + n)
  int pages_stride = 0;                 // entries per row of page_table
};

}  // namespace sparkserve::kernels::cuda
