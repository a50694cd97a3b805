// Scheduler: continuous batching. Owns the sequences, the slot and KV page pools, and builds each
// step's StepPlan under a token budget: running decodes first (so they keep flowing while a long
// prompt prefills), then running prefills in chunks, then newly admitted sequences. When pages run
// out it preempts the youngest running sequence (recompute: its slot and pages are freed and it later
// re-prefills prompt + generated tokens; nothing it generated is lost). No tensors, no CUDA.
//
// Speculative decoding: after the step's decodes, prefill chunks and admissions are placed, a
// DraftPlanner (the engine's policy) turns decodes into verify windows of 1 + k tokens with the
// budget left. With `mtp`, every forward's rows are teacher-forced through the MTP block in the
// next step (DraftWork), which also drafts the k tokens of that step's MTP verify windows. After
// a verify the engine calls AcceptDrafts: the accepted columns are committed in the next step and
// pages past the accepted positions go back to the pool.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/capacity.h"
#include "model/step_plan.h"
#include "scheduler/kv_page_pool.h"
#include "scheduler/prefix_tree.h"
#include "scheduler/request.h"
#include "scheduler/sequence.h"
#include "scheduler/slot_pool.h"

namespace sparkserve::scheduler {

// Prefix cache (scheduler_prefix.cc): checkpoints of sequence state in the spare state slots
// (capacity.num_slots - max_batch) with their KV pages, in a radix tree over token ids. A new
// sequence resumes from the deepest checkpoint on its path and prefills the rest. Checkpoints are
// taken every `checkpoint_interval` prompt tokens, at the positions the request names
// (Sequence::cache_points: where the chat's last complete message ends), at the last prompt token
// when it names none, and at the end of a finished sequence (its slot and pages become the
// entry). Running sequences always win: entries are evicted (least recently used first) whenever
// a sequence needs pages, before anyone is preempted.
struct PrefixCacheConfig {
  bool enabled = false;
  int32_t checkpoint_interval = 1024;  // 0: none at fixed intervals
  int32_t max_pages = -1;              // KV pages the cache may hold (-1: half the pool)
};

struct SchedulerConfig {
  int32_t max_step_tokens = 2048;  // token budget of one step (all sequences together)
  int32_t prefill_chunk = 512;            // most tokens one sequence prefills in one step (0 = budget)
  int32_t max_batch = 0;                  // most running sequences (0 = the model's slot count)
  int32_t max_drafts = 0;  // speculative decoding: most drafts of one verify window (0: off)
  bool mtp = false;        // drafts come from the runner's MTP block (DraftWork), not the planner
  PrefixCacheConfig prefix;
};

// A decode that may become a verify window this step (DraftPlanner::Plan fills the outputs).
struct SpecCandidate {
  Sequence* seq = nullptr;
  int32_t max_drafts = 0;  // most drafts it may take (context, max_tokens, verify columns)
  bool mtp_ready = false;  // mtp: the MTP block can draft for it this step
  int32_t num_drafts = 0;        // out: k (0: a plain decode)
  std::vector<int32_t> drafts;   // out, drafts made on the host: the k draft tokens
};

// Chooses the verify windows of a step (engine/spec_decode.h implements it).
class DraftPlanner {
 public:
  virtual ~DraftPlanner() = default;
  // `step_tokens`: tokens the step feeds without drafts; `budget`: draft tokens it may add at most.
  virtual void Plan(std::vector<SpecCandidate>& candidates, int64_t step_tokens, int32_t budget) = 0;
};

// One sequence's share of a scheduled step (parallel to StepPlan::seqs).
struct ScheduledSeq {
  Sequence* seq = nullptr;
  int32_t num_tokens = 0;  // tokens fed this step
  bool samples = false;    // this step reaches the end of its tokens: the next token is sampled
  int32_t num_drafts = 0;  // verify window: the last num_drafts of its num_tokens are drafts
  std::vector<int32_t> drafts;  // the drafts made on the host (empty for MTP: the runner drafts)
};

struct ScheduledBatch {
  model::StepPlan plan;
  std::vector<ScheduledSeq> seqs;
  int32_t num_prefill_tokens = 0;  // tokens of chunks longer than one or of resumed sequences
  int32_t num_decode_tokens = 0;   // one-token steps of running sequences (verify windows included)
  int32_t num_draft_tokens = 0;    // drafts among them
  int32_t max_drafts = 0;          // the largest k of the step
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  // Fails on a capacity or config that cannot run anything (no slots, no pages, zero budget).
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(SchedulerConfig config,
                                                           model::ModelCapacity capacity);

  // InvalidArgument (with the numbers) when one sequence of `prompt_tokens` + `max_tokens` could
  // never run: longer than the model's context, or more KV than the whole pool. Reads only the
  // capacity: safe from any thread.
  static absl::Status CheckFits(const model::ModelCapacity& capacity, int64_t prompt_tokens,
                                int64_t max_tokens);

  // Queues a new sequence (status kWaiting). The caller has checked it with CheckFits.
  // `cache_points`: prompt positions worth a prefix-cache checkpoint (chat message ends).
  Sequence* Add(RequestId request_id, int32_t sample_index, std::vector<int32_t> prompt,
                int32_t max_tokens, const std::vector<int32_t>& cache_points = {});

  // Builds the next step. May preempt running sequences (their status becomes kPreempted).
  ScheduledBatch Schedule();
  // After the model ran `batch`: the tokens it fed are now in each sequence's state.
  void CommitStep(const ScheduledBatch& batch);
  // Appends a sampled token to a sequence that sampled in the committed step.
  void AppendToken(Sequence* seq, int32_t token);
  // After a verify window of `seq` in the committed step: `accepted` of its drafts held, so 1 +
  // accepted of its columns are now in its state.
  void AcceptDrafts(Sequence* seq, int32_t accepted);
  // Turns speculation on: verify windows of up to `max_drafts` drafts chosen by `planner` (not
  // owned); `mtp`: the runner drafts (DraftWork on every forward's rows).
  void EnableSpeculation(int32_t max_drafts, bool mtp, DraftPlanner* planner) {
    config_.max_drafts = max_drafts;
    config_.mtp = mtp;
    planner_ = planner;
  }
  // Forgets a sequence (finished, cancelled or failed); its slot and pages are free at once, or,
  // with `cache`, become the prefix cache's entry at its end (its state must be sound).
  void Free(SeqId id, bool cache = false);
  // Drops every prefix-cache entry (after a failed step: their state may be wrong).
  void ClearPrefixCache();

  Sequence* Find(SeqId id) const;
  const SchedulerConfig& config() const { return config_; }
  const model::ModelCapacity& capacity() const { return capacity_; }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }  // incl. preempted
  int32_t num_free_slots() const { return slots_.num_free(); }
  // The slots sequences may run in (those the prefix cache holds at most excluded), and how many of
  // them are free.
  int32_t num_sequence_slots() const { return slots_.num_slots() - max_entries_; }
  int32_t num_free_sequence_slots() const { return slots_.num_free() + tree_.num_entries() - max_entries_; }
  int32_t num_slots() const { return slots_.num_slots(); }
  int32_t num_free_pages() const { return pages_.num_free(); }
  int32_t num_pages() const { return pages_.num_pages(); }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Prefix cache: prompt tokens looked up and found (vLLM's prefix_cache_queries/hits), entries
  // (state slots) and the KV pages they hold.
  int64_t prefix_queries() const { return prefix_queries_; }
  int64_t prefix_hits() const { return prefix_hits_; }
  int32_t num_cache_entries() const { return tree_.num_entries(); }
  int32_t num_cache_pages() const { return cache_pages_; }
  // Of those, the pages no running sequence holds (evicted for any request that needs them).
  int32_t num_cache_only_pages() const;
  int32_t max_cache_entries() const { return max_entries_; }

 private:
  Scheduler(SchedulerConfig config, model::ModelCapacity capacity);

  // Tokens `seq` may feed this step with `budget` tokens left.
  int32_t ChunkFor(const Sequence& seq, int32_t budget) const;
  // Grows `seq`'s page table to cover `tokens` positions, preempting running sequences younger
  // than `seq` (youngest first, dropping any share they already had in `batch`). False when even
  // that leaves too few pages.
  bool ReservePages(Sequence& seq, int64_t tokens, std::vector<ScheduledSeq>& batch, int32_t& budget);
  void Preempt(Sequence& seq);
  // Turns the step's decodes into verify windows (the planner's choice, within `budget`).
  void PlanDrafts(std::vector<ScheduledSeq>& picked, int32_t budget);
  // The step's column commits and MTP work of every running sequence.
  void AddSpecWork(const std::vector<ScheduledSeq>& picked, model::StepPlan& plan);
  // Prefix cache (scheduler_prefix.cc).
  bool prefix_on() const { return config_.prefix.enabled && max_entries_ > 0; }
  std::vector<int32_t> CachePointsFor(int32_t prompt_len, const std::vector<int32_t>& hints) const;
  // The next checkpoint position past num_computed (0: none).
  int32_t NextCachePoint(const Sequence& seq) const;
  // Checkpoints `seq` at num_computed (copies queued for the next plan).
  void TakeCheckpoint(Sequence& seq);
  // Makes the entry's state and pages `seq`'s (a waiting sequence that just got its slot).
  void ResumeFrom(Sequence& seq, const PrefixEntry& entry);
  // Evicts the least recently used entry other than `keep`; false when there is none.
  bool EvictOne(int64_t keep = -1);
  void EnforceCacheBudget();
  void AddCacheRefs(const std::vector<int32_t>& pages, int32_t sign);
  void InsertByArrival(std::deque<Sequence*>& queue, Sequence* seq);
  void InsertByArrival(std::vector<Sequence*>& list, Sequence* seq);
  void RemoveRunning(Sequence* seq);
  void RemoveWaiting(Sequence* seq);

  SchedulerConfig config_;
  model::ModelCapacity capacity_;
  SlotPool slots_;
  KvPagePool pages_;
  std::unordered_map<SeqId, std::unique_ptr<Sequence>> seqs_;
  std::vector<Sequence*> running_;  // by arrival, oldest first
  std::deque<Sequence*> waiting_;   // by arrival, oldest first (preempted ones go back in order)
  SeqId next_id_ = 1;
  int64_t next_arrival_ = 0;
  int64_t num_preemptions_ = 0;
  int64_t step_ = 0;  // steps scheduled
  DraftPlanner* planner_ = nullptr;
  // Prefix cache.
  PrefixTree tree_;
  int32_t max_entries_ = 0;   // spare state slots
  int32_t max_cache_pages_ = 0;
  std::vector<int32_t> cache_page_refs_;  // [num_pages]: entries holding each page
  int32_t cache_pages_ = 0;               // pages held by at least one entry
  std::vector<model::SlotCopy> pending_copies_;       // for the next plan
  std::vector<model::PageCopy> pending_page_copies_;  // for the next plan
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace sparkserve::scheduler
