// StepPlan: the work of one forward step over a ragged batch (built by the scheduler, broadcast to
// every tensor-parallel rank, executed by ModelRunner::Forward). Serialisable; no tensors inside.
#pragma once
#include <cstdint>
#include <vector>

namespace sparkserve::model {

using SlotId = int32_t;  // index of a sequence's state slot (GDN recurrent state + conv window)

enum class LogitsWanted : uint8_t {
  kNone,  // prefill chunk that is not the last
  kLast,  // logits of the last token only (decode, last prefill chunk)
  kAll,   // logits of every token (MTP verify, scoring)
};

struct SeqWork {                     // one sequence's share of a step
  SlotId slot = 0;                   // its GDN/conv state slot
  int32_t start_pos = 0;             // position of tokens[0] (= tokens already in its state)
  std::vector<int32_t> tokens;       // 1 (decode), n (prefill chunk), 1+k (verify)
  std::vector<int32_t> kv_pages;     // page ids of its KV cache covering positions [0, start_pos + n)
  LogitsWanted logits = LogitsWanted::kLast;
  bool keep_column_states = false;   // MTP verify: keep GDN/conv state after every token (see MTP)
};

struct StepPlan {
  std::vector<SeqWork> seqs;
  int64_t num_tokens() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += static_cast<int64_t>(s.tokens.size());
    return n;
  }
};

}  // namespace sparkserve::model
