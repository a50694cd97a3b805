// Engine, a step's postprocessing: the output's shape checks, sampling (host rows and the device's
// sampled rows), verify windows' acceptance, appending tokens with stop checks, and the structured
// outputs' masks filled while the forward runs.
#include <algorithm>
#include <string>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace sparkserve::engine {

using scheduler::FinishReason;
using scheduler::RequestId;
using scheduler::SeqId;
using scheduler::Sequence;
using scheduler::TokenEvent;

namespace {

absl::Status CheckStepOutput(const scheduler::ScheduledBatch& batch, const model::StepOutput& out,
                             int32_t vocab) {
  const size_t n = batch.seqs.size();
  if (out.logit_row_begin.size() != n + 1) {
    return absl::InternalError(fmt::format("step output has {} logit row offsets for {} sequences",
                                           out.logit_row_begin.size(), n));
  }
  bool any_rows = false;
  for (size_t i = 0; i < n; ++i) {
    const int32_t rows = out.logit_row_begin[i + 1] - out.logit_row_begin[i];
    if (rows < 0 || (batch.seqs[i].samples && rows < 1) ||
        (batch.seqs[i].num_drafts > 0 && rows != batch.seqs[i].num_tokens)) {
      return absl::InternalError(fmt::format("step output has {} logit rows for sequence {} of the plan", rows, i));
    }
    any_rows = any_rows || rows > 0;
  }
  if (!out.sampled.empty()) {  // sampled on the device: logits only for the rows left to the host
    if (static_cast<int32_t>(out.sampled.size()) != out.logit_row_begin[n]) {
      return absl::InternalError(fmt::format("step output has {} sampled rows for {} logit rows", out.sampled.size(),
                                             out.logit_row_begin[n]));
    }
    any_rows = std::any_of(out.sampled.begin(), out.sampled.end(),
                           [](const model::SampledRow& r) { return r.status != model::SampledRow::kDone; });
  }
  if (!any_rows) return absl::OkStatus();
  const core::Tensor& l = out.logits;
  if (!l.defined() || l.dtype() != core::DType::kF32 || !l.device().is_cpu() || l.rank() != 2 ||
      l.dim(1) != vocab || l.dim(0) < out.logit_row_begin[n] || out.logit_row_begin[0] < 0) {
    return absl::InternalError(fmt::format("step output logits are {} (want f32 [{}, {}] on the cpu)",
                                           l.defined() ? l.ToString() : "undefined", out.logit_row_begin[n], vocab));
  }
  if (out.drafts.size() != batch.plan.drafts.size()) {
    return absl::InternalError(fmt::format("step output has drafts of {} draft works, the plan {}", out.drafts.size(),
                                           batch.plan.drafts.size()));
  }
  for (size_t i = 0; i < out.drafts.size(); ++i) {
    if (static_cast<int32_t>(out.drafts[i].size()) != batch.plan.drafts[i].num_drafts) {
      return absl::InternalError(fmt::format("draft work {} made {} drafts of {}", i, out.drafts[i].size(),
                                             batch.plan.drafts[i].num_drafts));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void Engine::Postprocess(const scheduler::ScheduledBatch& batch, const model::StepOutput& output) {
  if (absl::Status st = CheckStepOutput(batch, output, capacity_.vocab_size); !st.ok()) {
    FailBatch(batch, std::string(st.message()));
    return;
  }
  scheduler_->CommitStep(batch);
  const int32_t vocab = capacity_.vocab_size;
  const Clock::time_point now = Clock::now();
  std::vector<Ended> finished;
  std::vector<RequestId> failed;

  // Sample every sequence whose step reached its last token (a verify window: its column 0 here).
  std::vector<Draw> draws;
  size_t sampled_row = 0;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const scheduler::ScheduledSeq& s = batch.seqs[i];
    if (!s.samples) continue;
    const int32_t mask_row = sampled_row < step_mask_rows_.size() ? step_mask_rows_[sampled_row] : -1;
    ++sampled_row;
    Draw d;
    d.seq = s.seq;
    d.state = &seq_states_.at(s.seq->id);
    const int64_t row = s.num_drafts > 0 ? output.logit_row_begin[i] : output.logit_row_begin[i + 1] - 1;
    if (s.num_drafts > 0) {
      d.verify = &s;
      d.first_row = row;
      d.drafts = s.drafts;
      if (s.drafts.empty()) {  // MTP: the drafts this step's DraftWork of its slot made
        for (size_t w = 0; w < batch.plan.drafts.size(); ++w) {
          if (batch.plan.drafts[w].slot == s.seq->slot) d.drafts = output.drafts[w];
        }
      }
    }
    if (!output.sampled.empty() && output.sampled[static_cast<size_t>(row)].status == model::SampledRow::kDone) {
      const model::SampledRow& r = output.sampled[static_cast<size_t>(row)];
      SampledToken t;
      t.id = r.id;
      t.logprob = r.logprob;
      for (const auto& [id, lp] : r.top_logprobs) t.top_logprobs.push_back({id, lp});
      d.token = std::move(t);
      d.on_device = true;
    } else {
      d.logits = std::span<const float>(output.logits.data<float>() + row * vocab, static_cast<size_t>(vocab));
    }
    d.ctx = ContextOf(s);
    if (mask_row >= 0) {
      const auto W = static_cast<size_t>(batch.plan.masks.words_per_row);
      d.ctx.allowed = std::span<const uint32_t>(batch.plan.masks.words.data() + static_cast<size_t>(mask_row) * W, W);
    }
    draws.push_back(std::move(d));
  }
  SampleAll(draws);
  for (const Draw& d : draws) {
    RequestState& req = *d.state->request;
    if (!d.token.ok() && req.error.empty()) {
      req.error = fmt::format("sampling failed: {}", std::string(d.token.status().message()));
      failed.push_back(req.id);
    }
  }

  // Append, check stops, queue events; verify windows go on while their drafts hold.
  for (Draw& d : draws) {
    if (!d.state->request->error.empty()) continue;  // ends with kError below
    if (d.verify != nullptr) {
      FinishVerify(d, output, now, finished, failed);
    } else {
      AppendDrawn(d, now, finished, failed);
    }
  }
  for (const Ended& e : finished) ReleaseSample(*requests_.at(e.request), e.index, e.reason);
  for (RequestId id : failed) {
    auto it = requests_.find(id);
    if (it != requests_.end() && it->second->num_unfinished > 0) {
      EndRequest(*it->second, FinishReason::kError, it->second->error);
    }
  }
}

void Engine::FinishVerify(Draw& d, const model::StepOutput& output, Clock::time_point now,
                          std::vector<Ended>& finished, std::vector<RequestId>& failed) {
  const int32_t k = d.verify->num_drafts;
  const int32_t vocab = capacity_.vocab_size;
  RequestState& req = *d.state->request;
  int32_t accepted = 0;
  std::unique_ptr<Sampler> sampler;
  for (int32_t j = 0;; ++j) {
    if (j > 0) {  // column j: drawn as plain decoding would, the drafts before it now in the output
      if (!sampler) sampler = std::make_unique<Sampler>(vocab);
      d.logits = std::span<const float>(output.logits.data<float>() + (d.first_row + j) * vocab,
                                        static_cast<size_t>(vocab));
      d.ctx = ContextOf(*d.verify);
      d.token = sampler->Sample(d.logits, d.ctx);
      if (!d.token.ok()) {
        req.error = fmt::format("sampling failed: {}", std::string(d.token.status().message()));
        failed.push_back(req.id);
        break;
      }
    }
    const bool alive = AppendDrawn(d, now, finished, failed);
    const bool held = j < k && static_cast<size_t>(j) < d.drafts.size() && d.token->id == d.drafts[static_cast<size_t>(j)];
    if (held) ++accepted;
    if (!alive || !held) break;
  }
  scheduler_->AcceptDrafts(d.seq, accepted);
  spec_->Record(d.seq->id, k, accepted);
}

bool Engine::AppendDrawn(Draw& d, Clock::time_point now, std::vector<Ended>& finished,
                         std::vector<RequestId>& failed) {
  Sequence* seq = d.seq;
  SeqState& st = *d.state;
  RequestState& req = *st.request;
  absl::StatusOr<SampledToken>& token = d.token;
  bool stop_token = std::binary_search(req.stop_ids.begin(), req.stop_ids.end(), token->id);
  // A constrained output takes text tokens, stop ids with text included (they end it only where it
  // may end); a stop id without text was only allowed where the output can end.
  const bool as_text = st.matcher && (!stop_token || (st.matcher->active() && st.matcher->IsText(token->id)));
  if (as_text && !st.matcher->Accept(token->id)) {
    // The mask allowed it, so this is a bug: end the request rather than emit what breaks the format.
    req.error = fmt::format("internal error: token {} was sampled but the output constraint does not allow it",
                            token->id);
    failed.push_back(req.id);
    return false;
  }
  scheduler_->AppendToken(seq, token->id);

  local_.generation_tokens_total++;
  if (!req.first_token_seen) {
    req.first_token_seen = true;
    local_.time_to_first_token_s.Observe(Seconds(now - req.arrival));
    local_.prompt_tokens_total += static_cast<int64_t>(req.request.prompt_ids.size());
  }
  if (st.has_token) local_.time_per_output_token_s.Observe(Seconds(now - st.last_token));
  st.has_token = true;
  st.last_token = now;

  TokenEvent event;
  event.index = seq->sample_index;
  event.ids = {token->id};
  event.cached_tokens = seq->num_cached;
  if (req.request.sampling.logprobs >= 0) {
    event.logprobs = {{token->id, token->logprob}};
    event.top_logprobs = {std::move(token->top_logprobs)};
  }
  if (stop_token && as_text && !st.matcher->CanEnd()) stop_token = false;  // text the output goes on from
  if (stop_token) {
    event.finish = FinishReason::kStop;  // stop ids cannot be sampled below min_tokens
  } else if (st.matcher && st.matcher->IsTerminated()) {
    event.finish = FinishReason::kStop;  // the constrained output is complete: nothing may follow
  } else if (seq->num_generated() >= req.request.max_tokens) {
    event.finish = FinishReason::kLength;
  }
  const bool ended = event.finish != FinishReason::kNone;
  if (ended) finished.push_back({req.id, seq->sample_index, event.finish});
  pending_events_.push_back({req.sink, std::move(event)});
  return !ended;
}

void Engine::SampleAll(std::vector<Draw>& draws) {
  const auto run = [&](int64_t begin, int64_t end) {
    std::unique_ptr<Sampler> sampler;
    {
      std::lock_guard lock(samplers_mu_);
      if (!idle_samplers_.empty()) {
        sampler = std::move(idle_samplers_.back());
        idle_samplers_.pop_back();
      }
    }
    if (!sampler) sampler = std::make_unique<Sampler>(capacity_.vocab_size);
    for (int64_t i = begin; i < end; ++i) {
      Draw& d = draws[static_cast<size_t>(i)];
      if (!d.on_device) d.token = sampler->Sample(d.logits, d.ctx);
    }
    std::lock_guard lock(samplers_mu_);
    idle_samplers_.push_back(std::move(sampler));
  };
  const auto n = static_cast<int64_t>(draws.size());
  if (n < kParallelSamplingFrom) {
    run(0, n);
  } else {
    // At most kMaxSamplingChunks chunks: each holds a Sampler's vocabulary-sized scratch.
    core::ThreadPool::Global().ParallelFor(n, (n + kMaxSamplingChunks - 1) / kMaxSamplingChunks, run);
  }
}

SamplingContext Engine::ContextOf(const scheduler::ScheduledSeq& s) const {
  const SeqState& st = seq_states_.at(s.seq->id);
  const RequestState& req = *st.request;
  SamplingContext ctx;
  ctx.params = &req.request.sampling;
  ctx.prompt = s.seq->prompt();
  ctx.output = s.seq->output();
  if (s.seq->num_generated() < req.request.min_tokens) ctx.banned = req.stop_ids;
  ctx.rng_seed = st.rng_seed;
  return ctx;
}

std::vector<model::RowSampling> Engine::RowSamplings(const scheduler::ScheduledBatch& batch) {
  std::vector<model::RowSampling> rows;
  for (const scheduler::ScheduledSeq& s : batch.seqs) {
    if (s.samples) rows.push_back(ToRowSampling(ContextOf(s), &seq_states_.at(s.seq->id).penalty_history));
  }
  return rows;
}

void Engine::StartMasks(scheduler::ScheduledBatch& batch) {
  model::TokenMasks& masks = batch.plan.masks;
  step_mask_rows_.clear();
  const auto W = static_cast<size_t>((capacity_.vocab_size + 31) / 32);
  std::vector<MaskFiller::Row> rows;
  size_t constrained = 0;
  for (const scheduler::ScheduledSeq& s : batch.seqs) {
    if (!s.samples) continue;
    const SeqState& st = seq_states_.at(s.seq->id);
    const bool active = st.matcher && st.matcher->active();
    step_mask_rows_.push_back(active ? static_cast<int32_t>(constrained++) : -1);
  }
  if (constrained == 0) return;
  masks.words_per_row = static_cast<int32_t>(W);
  masks.words = std::move(mask_words_);  // last step's storage: no allocation; FillMask writes every word
  masks.words.resize(constrained * W);
  size_t row = 0;
  for (const scheduler::ScheduledSeq& s : batch.seqs) {
    if (!s.samples) continue;
    const int32_t mask_row = step_mask_rows_[row];
    if (mask_row >= 0) {
      SeqState& st = seq_states_.at(s.seq->id);
      if (row < batch.plan.sampling.size()) batch.plan.sampling[row].mask_row = mask_row;
      rows.push_back({st.matcher.get(), std::span<uint32_t>(masks.words.data() + static_cast<size_t>(mask_row) * W, W),
                      st.request->stop_ids});
    }
    ++row;
  }
  masks.ready = [this] { WaitMasks(); };
  mask_filler_.Start(std::move(rows));
}

void Engine::WaitMasks() {
  const Clock::time_point start = Clock::now();
  mask_filler_.Wait();
  mask_wait_seconds_ += Seconds(Clock::now() - start);
}

}  // namespace sparkserve::engine
