// Scheduler: admission, chunked prefill, decode-first step building and recompute preemption.
#include "scheduler/scheduler.h"

#include <algorithm>
#include <string>

#include "fmt/format.h"

namespace sparkserve::scheduler {

const char* SeqStatusName(SeqStatus s) {
  switch (s) {
    case SeqStatus::kWaiting: return "waiting";
    case SeqStatus::kRunning: return "running";
    case SeqStatus::kPreempted: return "preempted";
    case SeqStatus::kFinished: return "finished";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(SchedulerConfig config,
                                                             model::ModelCapacity capacity) {
  if (capacity.num_slots <= 0 || capacity.num_kv_pages <= 0 || capacity.kv_page_size <= 0 ||
      capacity.max_seq_len <= 0 || capacity.vocab_size <= 0) {
    return absl::InvalidArgumentError(fmt::format(
        "model capacity cannot run anything: {} slots, {} KV pages of {} tokens, max_seq_len {}, "
        "vocab {}",
        capacity.num_slots, capacity.num_kv_pages, capacity.kv_page_size, capacity.max_seq_len,
        capacity.vocab_size));
  }
  if (config.max_batch < 0 || config.prefill_chunk < 0 || config.max_step_tokens <= 0) {
    return absl::InvalidArgumentError(fmt::format(
        "scheduler config: max_step_tokens ({}, --max-num-batched-tokens) must be > 0, prefill_chunk ({}) and "
        "max_batch ({}) >= 0",
        config.max_step_tokens, config.prefill_chunk, config.max_batch));
  }
  if (config.max_batch > capacity.num_slots) {
    return absl::InvalidArgumentError(fmt::format(
        "max_batch ({}) exceeds the model's {} state slots", config.max_batch, capacity.num_slots));
  }
  if (config.max_batch == 0) config.max_batch = capacity.num_slots;
  if (config.max_step_tokens < config.max_batch) {
    return absl::InvalidArgumentError(fmt::format(
        "max_step_tokens ({}) is smaller than max_batch ({}): running sequences could not "
        "all decode in one step",
        config.max_step_tokens, config.max_batch));
  }
  return std::unique_ptr<Scheduler>(new Scheduler(config, capacity));
}

Scheduler::Scheduler(SchedulerConfig config, model::ModelCapacity capacity)
    : config_(config),
      capacity_(capacity),
      slots_(capacity.num_slots),
      pages_(capacity.num_kv_pages, capacity.kv_page_size),
      max_entries_(config.prefix.enabled ? std::max(0, capacity.num_slots - config.max_batch) : 0),
      max_cache_pages_(config.prefix.max_pages >= 0 ? std::min(config.prefix.max_pages, capacity.num_kv_pages)
                                                     : capacity.num_kv_pages / 2),
      cache_page_refs_(static_cast<size_t>(capacity.num_kv_pages), 0) {}

absl::Status Scheduler::CheckFits(const model::ModelCapacity& capacity, int64_t prompt_tokens,
                                  int64_t max_tokens) {
  if (prompt_tokens <= 0) return absl::InvalidArgumentError("the prompt has no tokens");
  if (max_tokens < 1) {
    return absl::InvalidArgumentError(fmt::format("max_tokens must be at least 1, got {}", max_tokens));
  }
  const int64_t total = prompt_tokens + max_tokens;
  if (total > capacity.max_seq_len) {
    return absl::InvalidArgumentError(fmt::format(
        "prompt ({} tokens) + max_tokens ({}) = {} tokens exceeds the model's context of {} tokens",
        prompt_tokens, max_tokens, total, capacity.max_seq_len));
  }
  // The last generated token is never fed back, so the KV cache holds total - 1 positions.
  const int64_t kv_capacity = int64_t{capacity.num_kv_pages} * capacity.kv_page_size;
  if (total - 1 > kv_capacity) {
    return absl::InvalidArgumentError(fmt::format(
        "prompt ({} tokens) + max_tokens ({}) = {} tokens exceeds the KV cache capacity of {} "
        "tokens",
        prompt_tokens, max_tokens, total, kv_capacity));
  }
  return absl::OkStatus();
}

Sequence* Scheduler::Add(RequestId request_id, int32_t sample_index, std::vector<int32_t> prompt,
                         int32_t max_tokens, const std::vector<int32_t>& cache_points) {
  auto seq = std::make_unique<Sequence>();
  seq->id = next_id_++;
  seq->request_id = request_id;
  seq->sample_index = sample_index;
  seq->arrival = next_arrival_++;
  seq->num_prompt_tokens = static_cast<int32_t>(prompt.size());
  seq->tokens = std::move(prompt);
  seq->max_tokens = max_tokens;
  if (prefix_on()) seq->cache_points = CachePointsFor(seq->num_prompt_tokens, cache_points);
  Sequence* raw = seq.get();
  seqs_.emplace(raw->id, std::move(seq));
  waiting_.push_back(raw);  // newest arrival: back of the queue
  return raw;
}

int32_t Scheduler::ChunkFor(const Sequence& seq, int32_t budget) const {
  int32_t n = std::min(seq.num_pending(), budget);
  if (seq.num_pending() > 1 && config_.prefill_chunk > 0) n = std::min(n, config_.prefill_chunk);
  if (const int32_t point = NextCachePoint(seq); point > 0) n = std::min(n, point - seq.num_computed);
  return std::max(n, 0);
}

ScheduledBatch Scheduler::Schedule() {
  const int64_t preemptions_before = num_preemptions_;
  std::vector<ScheduledSeq> picked;
  int32_t budget = config_.max_step_tokens;

  // Running sequences: decodes first, then prefill chunks; within each, oldest first.
  for (bool decode_pass : {true, false}) {
    const std::vector<Sequence*> candidates = running_;  // Preempt edits running_
    for (Sequence* seq : candidates) {
      if (budget == 0) break;
      if (seq->status != SeqStatus::kRunning || seq->num_pending() <= 0) continue;
      if ((seq->num_pending() == 1) != decode_pass) continue;
      const int32_t n = ChunkFor(*seq, budget);
      if (!ReservePages(*seq, int64_t{seq->num_computed} + n, picked, budget)) {
        Preempt(*seq);  // it is the youngest that needs room: it waits for older ones to finish
        continue;
      }
      picked.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
      budget -= n;
    }
  }

  // Admission: waiting and preempted sequences in arrival order; never skip the head (no
  // starvation), never preempt for a newcomer. Not in a step that had to preempt (vLLM does the
  // same), and only when the whole pending prefill fits the free pages: a sequence that would be
  // preempted again halfway through its prompt only wastes steps.
  const bool preempted_this_step = num_preemptions_ != preemptions_before;
  while (!preempted_this_step && budget > 0 && !waiting_.empty() && num_running() < config_.max_batch) {
    Sequence* seq = waiting_.front();
    // The deepest checkpoint on its path that leaves at least one token to feed (the one whose
    // logits it samples from); its full pages are shared, so they need no free ones.
    const PrefixEntry* entry = prefix_on() ? tree_.Match(seq->tokens, seq->num_tokens() - 1) : nullptr;
    const auto need = [&] {
      return pages_.PagesFor(seq->num_tokens()) - (entry ? entry->depth / pages_.page_size() : 0);
    };
    while (need() > pages_.num_free() && EvictOne(entry ? entry->id : -1)) {
    }
    if (entry != nullptr && need() > pages_.num_free()) {  // its entry's own pages are in the way too
      entry = nullptr;
      while (need() > pages_.num_free() && EvictOne()) {
      }
    }
    if (need() > pages_.num_free() || slots_.num_free() == 0) break;
    waiting_.pop_front();
    seq->slot = *slots_.Acquire();
    seq->status = SeqStatus::kRunning;
    seq->num_computed = 0;
    if (prefix_on() && seq->num_preemptions == 0) {  // counted once per sequence, as vLLM
      prefix_queries_ += seq->num_prompt_tokens;
      seq->num_cached = entry ? std::min(entry->depth, seq->num_prompt_tokens) : 0;
      prefix_hits_ += seq->num_cached;
    }
    if (entry != nullptr) ResumeFrom(*seq, *entry);
    const int32_t n = ChunkFor(*seq, budget);
    pages_.Grow(seq->kv_pages, int64_t{seq->num_computed} + n);
    InsertByArrival(running_, seq);
    picked.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
    budget -= n;
  }

  ++step_;
  if (config_.max_drafts > 0 && planner_ != nullptr && budget > 0) PlanDrafts(picked, budget);

  ScheduledBatch batch;
  batch.plan.copies = std::move(pending_copies_);  // checkpoints of the last step, then resumes
  batch.plan.page_copies = std::move(pending_page_copies_);
  pending_copies_.clear();
  pending_page_copies_.clear();
  batch.plan.seqs.reserve(picked.size());
  for (const ScheduledSeq& s : picked) {
    const Sequence& seq = *s.seq;
    model::SeqWork work;
    work.slot = seq.slot;
    work.start_pos = seq.num_computed;
    const int32_t fed = s.num_tokens - s.num_drafts;
    work.tokens.assign(seq.tokens.begin() + seq.num_computed, seq.tokens.begin() + seq.num_computed + fed);
    work.kv_pages = seq.kv_pages;
    work.logits = s.samples ? model::LogitsWanted::kLast : model::LogitsWanted::kNone;
    if (s.num_drafts > 0) {  // verify window: the token before the drafts, then the drafts
      work.tokens.insert(work.tokens.end(), s.drafts.begin(), s.drafts.end());
      work.num_drafts = s.drafts.empty() ? s.num_drafts : 0;  // MTP: this step's DraftWork makes them
      work.keep_column_states = true;
      work.logits = model::LogitsWanted::kAll;
      batch.num_draft_tokens += s.num_drafts;
      batch.max_drafts = std::max(batch.max_drafts, s.num_drafts);
    }
    batch.plan.seqs.push_back(std::move(work));
    const bool decode = seq.num_computed > 0 && seq.num_pending() == 1;
    (decode ? batch.num_decode_tokens : batch.num_prefill_tokens) += s.num_tokens;
  }
  AddSpecWork(picked, batch.plan);
  batch.seqs = std::move(picked);
  return batch;
}

void Scheduler::PlanDrafts(std::vector<ScheduledSeq>& picked, int32_t budget) {
  std::vector<SpecCandidate> candidates;
  std::vector<size_t> where;
  int64_t step_tokens = 0;
  const int32_t most_columns = std::min(config_.max_drafts + 1, capacity_.max_verify_tokens);
  for (size_t i = 0; i < picked.size(); ++i) {
    const ScheduledSeq& s = picked[i];
    step_tokens += s.num_tokens;
    const Sequence& seq = *s.seq;
    if (!(s.samples && s.num_tokens == 1 && seq.num_computed > 0)) continue;  // decodes only
    // a accepted drafts + the bonus token: a + 1 <= tokens it may still generate, and positions
    // num_computed .. num_computed + k inside the context.
    const int32_t left = seq.max_tokens - seq.num_generated() - 1;
    const int32_t room = capacity_.max_seq_len - seq.num_computed - 1;
    const int32_t most = std::min({most_columns - 1, left, room});
    if (most <= 0) continue;
    SpecCandidate c;
    c.seq = s.seq;
    c.max_drafts = most;
    c.mtp_ready = config_.mtp && !seq.mtp_off && seq.mtp_step == step_ - 1 && seq.mtp_count > 0 &&
                  seq.mtp_pos + seq.mtp_count == seq.num_computed;
    if (config_.mtp && !c.mtp_ready) continue;
    candidates.push_back(std::move(c));
    where.push_back(i);
  }
  if (candidates.empty()) return;
  planner_->Plan(candidates, step_tokens, budget);
  for (size_t c = 0; c < candidates.size(); ++c) {
    SpecCandidate& cand = candidates[c];
    int32_t k = std::clamp(cand.num_drafts, 0, std::min(cand.max_drafts, budget));
    if (!config_.mtp) k = std::min(k, static_cast<int32_t>(cand.drafts.size()));
    Sequence& seq = *cand.seq;
    // Pages for the drafts' positions come only from free pages: drafts never preempt anyone.
    while (k > 0 && !pages_.Grow(seq.kv_pages, int64_t{seq.num_computed} + 1 + k)) --k;
    if (k == 0) continue;
    ScheduledSeq& s = picked[where[c]];
    s.num_drafts = k;
    s.num_tokens = 1 + k;
    if (!config_.mtp) s.drafts.assign(cand.drafts.begin(), cand.drafts.begin() + k);
    budget -= k;
  }
}

void Scheduler::AddSpecWork(const std::vector<ScheduledSeq>& picked, model::StepPlan& plan) {
  for (Sequence* seq : running_) {
    if (seq->commit_columns > 0) {
      plan.commits.push_back({seq->slot, seq->commit_columns});
      seq->commit_columns = 0;
    }
  }
  if (!config_.mtp) return;
  for (Sequence* seq : running_) {
    if (seq->mtp_off || seq->mtp_step != step_ - 1 || seq->mtp_count <= 0) continue;
    // Position p takes the token at p + 1: every one of them must be known by now.
    if (seq->mtp_pos + seq->mtp_count >= seq->num_tokens()) continue;
    model::DraftWork w;
    w.slot = seq->slot;
    w.start_pos = seq->mtp_pos;
    w.tokens.assign(seq->tokens.begin() + seq->mtp_pos + 1, seq->tokens.begin() + seq->mtp_pos + 1 + seq->mtp_count);
    w.hidden_row = seq->mtp_row;
    auto it = std::find_if(picked.begin(), picked.end(), [&](const ScheduledSeq& s) { return s.seq == seq; });
    if (it != picked.end() && it->num_drafts > 0) w.num_drafts = it->num_drafts;
    w.kv_pages = seq->kv_pages;
    plan.drafts.push_back(std::move(w));
  }
}

bool Scheduler::ReservePages(Sequence& seq, int64_t tokens, std::vector<ScheduledSeq>& picked,
                             int32_t& budget) {
  while (pages_.Missing(seq.kv_pages, tokens) > pages_.num_free()) {
    if (EvictOne()) continue;  // cached entries go before any running sequence
    Sequence* victim = running_.back();  // youngest running sequence
    if (victim == &seq || victim->arrival < seq.arrival) return false;
    auto it = std::find_if(picked.begin(), picked.end(),
                           [&](const ScheduledSeq& s) { return s.seq == victim; });
    if (it != picked.end()) {
      budget += it->num_tokens;
      picked.erase(it);
    }
    Preempt(*victim);
  }
  return pages_.Grow(seq.kv_pages, tokens);
}

void Scheduler::Preempt(Sequence& seq) {
  RemoveRunning(&seq);
  slots_.Release(seq.slot);
  seq.slot = -1;
  pages_.Release(seq.kv_pages);
  seq.num_computed = 0;  // recompute: prompt + generated tokens are prefilled again on resume
  seq.mtp_count = 0;     // its MTP work starts again with the re-prefill
  seq.commit_columns = 0;
  seq.status = SeqStatus::kPreempted;
  ++seq.num_preemptions;
  ++num_preemptions_;
  InsertByArrival(waiting_, &seq);
}

void Scheduler::CommitStep(const ScheduledBatch& batch) {
  int32_t row = 0;
  for (const ScheduledSeq& s : batch.seqs) {
    Sequence& seq = *s.seq;
    if (config_.mtp) {  // its rows of this forward, for the MTP work of the next step
      seq.mtp_pos = seq.num_computed;
      seq.mtp_count = s.num_tokens;
      seq.mtp_row = row;
      seq.mtp_step = step_;
    }
    row += s.num_tokens;
    if (s.num_drafts == 0) {  // a verify window waits for AcceptDrafts
      seq.num_computed += s.num_tokens;
      if (prefix_on() && std::binary_search(seq.cache_points.begin(), seq.cache_points.end(), seq.num_computed)) {
        TakeCheckpoint(seq);
      }
    }
  }
}

void Scheduler::AppendToken(Sequence* seq, int32_t token) { seq->tokens.push_back(token); }

void Scheduler::AcceptDrafts(Sequence* seq, int32_t accepted) {
  seq->num_computed += 1 + accepted;
  seq->commit_columns = 1 + accepted;
  seq->mtp_count = 1 + accepted;  // rows of the rejected drafts are not its history
  pages_.Shrink(seq->kv_pages, seq->num_computed);
}

void Scheduler::Free(SeqId id, bool cache) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Sequence* seq = it->second.get();
  if (seq->status == SeqStatus::kRunning) {
    RemoveRunning(seq);
    // Its state becomes the entry at its end: only a committed one (no verify columns pending) that
    // the cache does not hold yet.
    const std::span<const int32_t> path(seq->tokens.data(), static_cast<size_t>(seq->num_computed));
    if (cache && prefix_on() && seq->num_computed > 0 && seq->commit_columns == 0 && !tree_.Contains(path)) {
      pages_.Shrink(seq->kv_pages, seq->num_computed);
      AddCacheRefs(seq->kv_pages, +1);
      tree_.Insert(path, seq->slot, std::move(seq->kv_pages));
      seq->kv_pages.clear();
      EnforceCacheBudget();
    } else {
      slots_.Release(seq->slot);
      pages_.Release(seq->kv_pages);
    }
  } else if (seq->status == SeqStatus::kWaiting || seq->status == SeqStatus::kPreempted) {
    RemoveWaiting(seq);
  }
  seq->status = SeqStatus::kFinished;
  seqs_.erase(it);
}

Sequence* Scheduler::Find(SeqId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

void Scheduler::InsertByArrival(std::deque<Sequence*>& queue, Sequence* seq) {
  auto at = std::upper_bound(queue.begin(), queue.end(), seq,
                             [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
  queue.insert(at, seq);
}

void Scheduler::InsertByArrival(std::vector<Sequence*>& list, Sequence* seq) {
  auto at = std::upper_bound(list.begin(), list.end(), seq,
                             [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
  list.insert(at, seq);
}

void Scheduler::RemoveRunning(Sequence* seq) {
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
}

void Scheduler::RemoveWaiting(Sequence* seq) {
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
}

}  // namespace sparkserve::scheduler
