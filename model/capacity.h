// ModelCapacity: what a model runner can hold, which the scheduler plans against (no tensors).
#pragma once
#include <cstdint>

namespace sparkserve::model {

struct ModelCapacity {
  int32_t num_slots = 0;       // GDN/conv state slots (= max running sequences)
  int32_t num_kv_pages = 0;    // KV pages in the pool
  int32_t kv_page_size = 0;    // tokens per page
  int32_t vocab_size = 0;
  int32_t max_seq_len = 0;
  int32_t max_verify_tokens = 0;  // most columns of a keep_column_states seq (1 + drafts); < 2: no speculation
};

}  // namespace sparkserve::model
