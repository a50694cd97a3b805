// StepPlan: everything one tensor-parallel rank does in one step (DESIGN.md §4), built by the
// scheduler, encoded by proto/step_plan_codec.h for remote ranks, run by ModelRunner::Run. No
// tensors inside: every operand is an id, a position or an index into state the runner keeps.
//
// A step runs, in order: `copies` (slot state copies), `page_copies` (KV page copies), `commits` (verified columns become slot
// state), `drafts` (the MTP block over positions of the previous step, then greedy drafts), the
// forward of `seqs` (a ragged batch; a verify seq takes this step's drafts of its slot as its last
// input tokens), and the sampling of its logit rows with `sampling` (runners that sample on their
// device; ModelRunner::samples_on_device), each first restricted to its row of `masks` if it names
// one.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "model/row_sampling.h"

namespace sparkserve::model {

using SlotId = int32_t;  // index of a sequence's state slot (GDN recurrent state + conv window)

enum class LogitsWanted : uint8_t {
  kNone,  // prefill chunk that is not the last
  kLast,  // logits of the last token only (decode, last prefill chunk)
  kAll,   // logits of every token (MTP verify, scoring)
};

struct SeqWork {                     // one sequence's share of a step
  SlotId slot = 0;                   // its GDN/conv state slot
  int32_t start_pos = 0;             // position of its first input token (= tokens already in its state)
  std::vector<int32_t> tokens;       // 1 (decode), n (prefill chunk), the token before the drafts (verify)
  // Verify: this many more input tokens follow `tokens`: the drafts this step's DraftWork of the same
  // slot makes (so the forward's input is tokens + drafts, 1 + k columns).
  int32_t num_drafts = 0;
  std::vector<int32_t> kv_pages;     // page ids of its KV cache covering positions [0, start_pos + n)
  LogitsWanted logits = LogitsWanted::kLast;
  bool keep_column_states = false;   // verify: keep GDN/conv state after every column (ColumnCommit)
  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()) + num_drafts; }
};

// Before the forward: slot `dst` takes a copy of slot `src`'s recurrent state, conv window and
// kept hidden rows (prefix-cache checkpoints and n > 1 forks are slots too).
struct SlotCopy {
  SlotId src = 0;
  SlotId dst = 0;
};

// Before the forward, after the slot copies: KV page `dst` takes a copy of page `src` in every
// attention layer (and the MTP layer's pages): the prefix cache's copy-on-write of a partly
// filled last page.
struct PageCopy {
  int32_t src = 0;
  int32_t dst = 0;
};

// Before the forward: after a keep_column_states forward of n columns for `slot` (an earlier
// step), the slot keeps the state after column accepted - 1 (1 <= accepted <= n). The KV cache
// needs no rollback: positions past the accepted ones are written again later.
struct ColumnCommit {
  SlotId slot = 0;
  int32_t accepted = 0;
};

// Before the forward: MTP work of one sequence (FORMATS.md §2). The MTP block takes positions
// [start_pos, start_pos + n) teacher-forced: position start_pos + i gets tokens[i] (the token AT
// start_pos + i + 1) and the target's hidden at start_pos + i after the final norm, which is token
// row hidden_row + i of the most recent forward before this step (rows in that plan's token order,
// drafts included; the runner keeps them until the next forward). Their K/V go to the MTP's own
// pages. Then num_drafts
// greedy drafts: draft 0 is the argmax of the last position's logits, draft j > 0 one more MTP step
// at position start_pos + n - 1 + j taking draft j - 1 and the MTP's own hidden of the step before.
struct DraftWork {
  SlotId slot = 0;
  int32_t start_pos = 0;
  std::vector<int32_t> tokens;       // n >= 1
  int32_t hidden_row = 0;            // first row of the most recent forward
  int32_t num_drafts = 0;            // 0: only the MTP's KV is filled
  std::vector<int32_t> kv_pages;     // MTP KV pages covering [0, start_pos + n - 1 + num_drafts)
  LogitsWanted logits = LogitsWanted::kNone;  // kAll: MTP logits of every position and draft step
};

// Allowed-token bitmasks of the step's constrained draws (structured outputs): row r allows token v
// iff bit v % 32 of words[r * words_per_row + v / 32] is set (words_per_row = (vocab + 31) / 32).
// A tensor-parallel rank holding vocab slice [v0, v1) reads the bits of its slice.
struct TokenMasks {
  int32_t words_per_row = 0;
  std::vector<uint32_t> words;  // [rows, words_per_row]
  // The engine fills `words` (already sized) on another thread while the forward runs: a runner
  // calls ready() once it has queued the forward and before it first reads a mask; it returns when
  // the masks are complete. Empty: complete already. Not encoded: a runner that ships the plan to
  // other ranks calls it before encoding.
  std::function<void()> ready;

  int32_t rows() const { return words_per_row > 0 ? static_cast<int32_t>(words.size() / static_cast<size_t>(words_per_row)) : 0; }
  void WaitReady() const {
    if (ready) ready();
  }
};

struct StepPlan {
  std::vector<SlotCopy> copies;
  std::vector<PageCopy> page_copies;
  std::vector<ColumnCommit> commits;
  std::vector<DraftWork> drafts;
  std::vector<SeqWork> seqs;
  // One per logit row of the forward, in row order, for runners that sample on their device; empty:
  // the step returns logits and the engine samples on the host.
  std::vector<RowSampling> sampling;
  TokenMasks masks;  // rows named by RowSampling::mask_row

  int64_t num_tokens() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += s.num_tokens();
    return n;
  }
};

}  // namespace sparkserve::model
