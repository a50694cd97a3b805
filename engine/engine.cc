// Engine: the engine thread's loop (admit -> schedule -> run -> postprocess), request validation,
// cancellation, drain and metrics (a step's postprocessing: engine_step.cc).
#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/engine_internal.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace sparkserve::engine {

using scheduler::FinishReason;
using scheduler::Request;
using scheduler::RequestId;
using scheduler::SeqId;
using scheduler::Sequence;
using scheduler::TokenEvent;

namespace {

std::vector<double> TtftBounds() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> TpotBounds() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> E2eBounds() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,  15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}
std::vector<double> IterationTokenBounds() {
  return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(std::unique_ptr<model::ModelRunner> model,
                                                       EngineConfig config) {
  if (model == nullptr) return absl::InvalidArgumentError("Engine needs a model runner");
  const model::ModelCapacity capacity = model->capacity();
  ASSIGN_OR_RETURN(auto sched, scheduler::Scheduler::Create(config.scheduler, capacity));
  if (config.max_waiting_requests < 1) {
    return absl::InvalidArgumentError(
        fmt::format("max_waiting_requests must be >= 1, got {}", config.max_waiting_requests));
  }
  for (int32_t id : config.eos_token_ids) {
    if (id < 0 || id >= capacity.vocab_size) {
      return absl::InvalidArgumentError(
          fmt::format("eos token id {} is outside the vocabulary of {}", id, capacity.vocab_size));
    }
  }
  const SpecConfig& spec = config.spec;
  if (spec.mode != SpecMode::kOff) {
    if (spec.max_drafts < 1 || spec.max_drafts > kMaxSpecTokens) {
      return absl::InvalidArgumentError(
          fmt::format("--spec-tokens must be between 1 and {}, got {}", kMaxSpecTokens, spec.max_drafts));
    }
    if (spec.mode == SpecMode::kMtp && !spec.drafter && !model->has_mtp()) {
      return absl::InvalidArgumentError(
          "--spec mtp needs the checkpoint's MTP block (mtp.* weights) on a backend that runs it (the CPU one; the "
          "CUDA backend verifies --spec ngram drafts only so far)");
    }
    if (capacity.max_verify_tokens < spec.max_drafts + 1) {
      return absl::InvalidArgumentError(fmt::format(
          "speculative decoding with {} drafts needs verify windows of {} tokens; this runner verifies {} (the CUDA "
          "runner needs the fp32 GDN state for them)",
          spec.max_drafts, spec.max_drafts + 1, capacity.max_verify_tokens));
    }
  }
  auto engine = std::unique_ptr<Engine>(new Engine(std::move(model), std::move(config), std::move(sched)));
  if (engine->spec_ && engine->config_.spec.policy == SpecPolicy::kAuto && engine->config_.spec.measure_at_start &&
      engine->config_.spec.fixed_costs.empty()) {
    RETURN_IF_ERROR(engine->MeasureSpecCosts());
  }
  return engine;
}

absl::Status Engine::MeasureSpecCosts() {
  const int32_t K = config_.spec.max_drafts;
  const int64_t most = std::min<int64_t>({int64_t{scheduler_->config().max_step_tokens},
                                          int64_t{scheduler_->config().max_batch} * (K + 1), 256,
                                          int64_t{capacity_.max_seq_len} - 1,
                                          int64_t{capacity_.num_kv_pages} * capacity_.kv_page_size});
  ASSIGN_OR_RETURN(std::vector<StepCostPoint> points,
                   MeasureStepCosts(*model_, StepCostCounts(static_cast<int32_t>(std::max<int64_t>(most, 1))), 2));
  for (const StepCostPoint& p : points) spec_->cost_curve().Observe(p.tokens, p.seconds);
  double draft = 0.0;
  if (spec_->mtp()) {
    ASSIGN_OR_RETURN(draft, MeasureMtpDraftStep(*model_, 2));
    spec_->set_draft_step_seconds(draft);
  }
  spdlog::info("engine: speculation {} (k <= {}, policy {}): step cost {:.2f} ms at 1 token, {:.2f} ms at {}{}",
               SpecModeName(config_.spec.mode), K, SpecPolicyName(config_.spec.policy), points.front().seconds * 1e3,
               points.back().seconds * 1e3, points.back().tokens,
               spec_->mtp() ? fmt::format(", MTP draft step {:.2f} ms", draft * 1e3) : std::string());
  return absl::OkStatus();
}

Engine::Engine(std::unique_ptr<model::ModelRunner> model, EngineConfig config,
               std::unique_ptr<scheduler::Scheduler> sched)
    : model_(std::move(model)),
      config_(std::move(config)),
      capacity_(model_->capacity()),
      scheduler_(std::move(sched)),
      unseeded_rng_(std::random_device{}()) {
  if (config_.spec.mode != SpecMode::kOff) {
    std::unique_ptr<Drafter> drafter;
    if (config_.spec.drafter) {  // a host drafter given by the caller (tests)
      struct Shared : Drafter {
        std::shared_ptr<Drafter> d;
        std::string_view name() const override { return d->name(); }
        std::vector<int32_t> Propose(std::span<const int32_t> t, int32_t k) override { return d->Propose(t, k); }
      };
      auto shared = std::make_unique<Shared>();
      shared->d = config_.spec.drafter;
      drafter = std::move(shared);
    } else if (config_.spec.mode == SpecMode::kMtp) {
      drafter = std::make_unique<MtpDrafter>();
    } else {
      drafter = std::make_unique<NgramDrafter>();
    }
    spec_ = std::make_unique<SpecDecoder>(config_.spec, std::move(drafter), [this](const Sequence& seq) {
      auto it = seq_states_.find(seq.id);
      return it != seq_states_.end() && !it->second.matcher;  // constrained outputs never draft
    });
    scheduler_->EnableSpeculation(config_.spec.max_drafts, spec_->mtp(), spec_.get());
  }
  local_.time_to_first_token_s = Histogram::WithBounds(TtftBounds());
  local_.time_per_output_token_s = Histogram::WithBounds(TpotBounds());
  local_.e2e_request_latency_s = Histogram::WithBounds(E2eBounds());
  local_.iteration_tokens = Histogram::WithBounds(IterationTokenBounds());
  local_.total_slots = scheduler_->num_sequence_slots();
  local_.free_slots = scheduler_->num_free_sequence_slots();
  local_.total_kv_pages = scheduler_->num_pages();
  local_.free_kv_pages = scheduler_->num_free_pages();
  local_.max_seq_len = capacity_.max_seq_len;
  stats_ = local_;
}

Engine::~Engine() { Shutdown(); }

// ---- lifecycle ---------------------------------------------------------------------------------

void Engine::Start() {
  std::lock_guard lifecycle(lifecycle_mu_);
  if (state_ == ThreadState::kIdle) {
    thread_ = std::thread(&Engine::Loop, this);
    state_ = ThreadState::kRunning;
  }
}

void Engine::Drain() {
  {
    std::lock_guard lock(mu_);
    draining_ = true;
  }
  wake_.notify_all();
  Start();
  std::lock_guard lifecycle(lifecycle_mu_);
  if (thread_.joinable()) thread_.join();
  state_ = ThreadState::kDone;
}

void Engine::Shutdown() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  Start();  // queued requests still get their final (abort) events
  std::lock_guard lifecycle(lifecycle_mu_);
  if (thread_.joinable()) thread_.join();
  state_ = ThreadState::kDone;
}

// ---- caller side -------------------------------------------------------------------------------

absl::Status Engine::Validate(const Request& r) const {
  const int32_t vocab = capacity_.vocab_size;
  if (r.n < 1 || r.n > kMaxSamplesPerRequest) {
    return absl::InvalidArgumentError(fmt::format("n must be between 1 and {}, got {}", kMaxSamplesPerRequest, r.n));
  }
  RETURN_IF_ERROR(scheduler::Scheduler::CheckFits(capacity_, static_cast<int64_t>(r.prompt_ids.size()),
                                                  r.max_tokens));
  for (size_t i = 0; i < r.prompt_ids.size(); ++i) {
    if (r.prompt_ids[i] < 0 || r.prompt_ids[i] >= vocab) {
      return absl::InvalidArgumentError(fmt::format(
          "prompt token id {} at position {} is outside the vocabulary [0, {})", r.prompt_ids[i], i, vocab));
    }
  }
  if (r.min_tokens < 0 || r.min_tokens > r.max_tokens) {
    return absl::InvalidArgumentError(
        fmt::format("min_tokens ({}) must be between 0 and max_tokens ({})", r.min_tokens, r.max_tokens));
  }
  if (r.constraint && r.constraint->vocab_size() != vocab) {
    return absl::InvalidArgumentError(fmt::format("the output constraint covers {} token ids, the model has {}",
                                                  r.constraint->vocab_size(), vocab));
  }
  const scheduler::SamplingParams& s = r.sampling;
  if (!(std::isfinite(s.temperature) && s.temperature >= 0.0f)) {
    return absl::InvalidArgumentError(fmt::format("temperature must be >= 0, got {}", s.temperature));
  }
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(fmt::format("top_p must be in (0, 1], got {}", s.top_p));
  }
  if (s.top_k < -1) {
    return absl::InvalidArgumentError(fmt::format("top_k must be -1 or 0 (off) or positive, got {}", s.top_k));
  }
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) {
    return absl::InvalidArgumentError(fmt::format("min_p must be in [0, 1], got {}", s.min_p));
  }
  if (!(std::isfinite(s.repetition_penalty) && s.repetition_penalty > 0.0f)) {
    return absl::InvalidArgumentError(
        fmt::format("repetition_penalty must be > 0, got {}", s.repetition_penalty));
  }
  if (!(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(
        fmt::format("presence_penalty must be in [-2, 2], got {}", s.presence_penalty));
  }
  if (!(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(
        fmt::format("frequency_penalty must be in [-2, 2], got {}", s.frequency_penalty));
  }
  if (s.logprobs < -1 || s.logprobs > kMaxLogprobs) {
    return absl::InvalidArgumentError(
        fmt::format("logprobs must be between 0 and {} (or -1 for none), got {}", kMaxLogprobs, s.logprobs));
  }
  for (const auto& [id, bias] : s.logit_bias) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          fmt::format("logit_bias token id {} is outside the vocabulary [0, {})", id, vocab));
    }
    if (!std::isfinite(bias)) {
      return absl::InvalidArgumentError(fmt::format("logit_bias for token {} is not a finite number", id));
    }
  }
  for (int32_t id : r.stop.stop_token_ids) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          fmt::format("stop token id {} is outside the vocabulary [0, {})", id, vocab));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestId> Engine::Submit(Request request, TokenSink sink) {
  std::vector<std::pair<Request, TokenSink>> one;
  one.emplace_back(std::move(request), std::move(sink));
  ASSIGN_OR_RETURN(std::vector<RequestId> ids, SubmitAll(std::move(one)));
  return ids.front();
}

absl::StatusOr<std::vector<RequestId>> Engine::SubmitAll(std::vector<std::pair<Request, TokenSink>> requests) {
  for (auto& [request, sink] : requests) {
    if (!sink) return absl::InvalidArgumentError("a request needs a token sink");
    if (request.sampling.top_k < 0 && request.sampling.top_k >= -1) request.sampling.top_k = 0;
    RETURN_IF_ERROR(Validate(request));
  }
  std::lock_guard lock(mu_);
  if (draining_ || stopping_) {
    return absl::UnavailableError("the engine is shutting down and accepts no new requests");
  }
  const int64_t queued = waiting_requests_ + static_cast<int64_t>(inbox_.size());
  if (queued + static_cast<int64_t>(requests.size()) > config_.max_waiting_requests) {
    return absl::ResourceExhaustedError(
        fmt::format("the request queue is full ({} requests waiting); retry later", queued));
  }
  std::vector<RequestId> ids;
  for (auto& [request, sink] : requests) {
    request.id = next_request_id_++;
    ids.push_back(request.id);
    inbox_.push_back({std::move(request), std::move(sink), Clock::now()});
  }
  wake_.notify_one();
  return ids;
}

void Engine::Cancel(RequestId id) { Finish(id, FinishReason::kAbort); }

void Engine::Finish(RequestId id, FinishReason reason) {
  if (reason == FinishReason::kNone) reason = FinishReason::kAbort;
  {
    std::lock_guard lock(mu_);
    ends_.emplace_back(id, reason);
  }
  wake_.notify_one();
}

EngineStats Engine::Stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

// ---- engine thread -----------------------------------------------------------------------------

void Engine::Loop() {
  for (;;) {
    std::vector<Incoming> incoming;
    std::vector<std::pair<RequestId, FinishReason>> ends;
    bool stopping = false, draining = false;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] {
        return stopping_ || draining_ || !inbox_.empty() || !ends_.empty() || !requests_.empty();
      });
      stopping = stopping_;
      draining = draining_;  // read with the inbox: once set, nothing more arrives
      incoming.swap(inbox_);
      ends.swap(ends_);
      waiting_requests_ += static_cast<int64_t>(incoming.size());
    }
    Admit(incoming);
    if (stopping) {
      EndAll(FinishReason::kAbort, "");
      PublishStats(-1);
      Emit();
      return;
    }
    ApplyEnds(ends);
    if (!pending_events_.empty()) {  // cancels are answered before the next forward
      PublishStats(-1);
      Emit();
    }
    if (requests_.empty()) {
      if (draining) return;
      continue;
    }
    Step();
  }
}

void Engine::Admit(std::vector<Incoming>& incoming) {
  for (Incoming& in : incoming) {
    auto state = std::make_unique<RequestState>();
    RequestState& req = *state;
    req.id = in.request.id;
    req.request = std::move(in.request);
    req.sink = std::make_shared<TokenSink>(std::move(in.sink));
    req.arrival = in.arrival;
    if (!req.request.stop.ignore_eos) req.stop_ids = config_.eos_token_ids;
    req.stop_ids.insert(req.stop_ids.end(), req.request.stop.stop_token_ids.begin(),
                        req.request.stop.stop_token_ids.end());
    std::sort(req.stop_ids.begin(), req.stop_ids.end());
    req.stop_ids.erase(std::unique(req.stop_ids.begin(), req.stop_ids.end()), req.stop_ids.end());
    const uint64_t request_seed = req.request.sampling.seed.value_or(unseeded_rng_());
    for (int32_t i = 0; i < req.request.n; ++i) {
      Sequence* seq = scheduler_->Add(req.id, i, req.request.prompt_ids, req.request.max_tokens,
                                      req.request.cache_points);
      SeqState& st = seq_states_[seq->id] = SeqState{&req, SequenceSeed(request_seed, i)};
      if (req.request.constraint) st.matcher = req.request.constraint->NewMatcher();
      req.seqs.push_back(seq->id);
    }
    req.num_unfinished = req.request.n;
    requests_.emplace(req.id, std::move(state));
  }
}

void Engine::ApplyEnds(const std::vector<std::pair<RequestId, FinishReason>>& ends) {
  for (const auto& [id, reason] : ends) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second->num_unfinished == 0) continue;  // already finished
    EndRequest(*it->second, reason, "");
  }
}

void Engine::Step() {
  StepRecord record;
  record.index = step_index_++;
  record.start = Clock::now();
  scheduler::ScheduledBatch batch = scheduler_->Schedule();
  if (batch.empty()) {  // cannot happen with validated requests; never spin or hang on it
    spdlog::error("engine: the scheduler placed no sequence with {} requests in flight", requests_.size());
    EndAll(FinishReason::kError, "internal error: the scheduler could not place the request");
    PublishStats(-1);
    Emit();
    return;
  }
  record.num_seqs = static_cast<int32_t>(batch.seqs.size());
  record.num_tokens = static_cast<int32_t>(batch.plan.num_tokens());
  record.num_prefill_tokens = batch.num_prefill_tokens;
  record.num_decode_tokens = batch.num_decode_tokens;
  record.num_draft_tokens = batch.num_draft_tokens;
  if (config_.step_observer != nullptr) config_.step_observer->BeforeStep(record);
  // Verify windows are sampled on the host, column after column (their drafts decide the context).
  if (model_->samples_on_device() && batch.num_draft_tokens == 0) batch.plan.sampling = RowSamplings(batch);
  StartMasks(batch);
  const Clock::time_point run_start = Clock::now();
  absl::StatusOr<model::StepOutput> output = model_->Run(batch.plan);
  if (spec_ && output.ok()) spec_->ObserveStep(batch.plan.num_tokens(), batch.max_drafts, Seconds(Clock::now() - run_start));
  WaitMasks();  // a runner sampling on its device waited already (plan.masks.ready)
  if (output.ok()) {
    Postprocess(batch, *output);
    PublishStats(batch.plan.num_tokens());
  } else {
    spdlog::error("engine: model forward failed: {}", std::string(output.status().message()));
    scheduler_->ClearPrefixCache();  // the failed step's copies may not have run
    FailBatch(batch, fmt::format("model forward failed: {}", std::string(output.status().message())),
              absl::IsUnavailable(output.status()));
    PublishStats(-1);
  }
  Emit();
  if (!batch.plan.masks.words.empty()) mask_words_ = std::move(batch.plan.masks.words);
  if (config_.step_observer != nullptr) {
    record.end = Clock::now();
    config_.step_observer->AfterStep(record);
  }
}


void Engine::FailBatch(const scheduler::ScheduledBatch& batch, const std::string& error, bool unavailable) {
  std::vector<RequestId> ids;
  for (const auto& s : batch.seqs) ids.push_back(s.seq->request_id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (RequestId id : ids) {
    auto it = requests_.find(id);
    if (it != requests_.end() && it->second->num_unfinished > 0) {
      EndRequest(*it->second, FinishReason::kError, error, unavailable);
    }
  }
}

void Engine::EndAll(FinishReason reason, const std::string& error) {
  std::vector<RequestId> ids;
  for (const auto& [id, req] : requests_) {
    if (req->num_unfinished > 0) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  for (RequestId id : ids) EndRequest(*requests_.at(id), reason, error);
}

void Engine::EndRequest(RequestState& req, FinishReason reason, const std::string& error, bool unavailable) {
  for (int32_t index = 0; index < static_cast<int32_t>(req.seqs.size()); ++index) {
    if (req.seqs[static_cast<size_t>(index)] == 0) continue;
    TokenEvent event;
    event.index = index;
    event.finish = reason;
    event.error = error;
    event.unavailable = unavailable;
    pending_events_.push_back({req.sink, std::move(event)});
    ReleaseSample(req, index, reason);
  }
}

void Engine::ReleaseSample(RequestState& req, int32_t index, FinishReason reason) {
  SeqId& seq_id = req.seqs[static_cast<size_t>(index)];
  if (seq_id == 0) return;
  scheduler_->Free(seq_id, /*cache=*/reason != FinishReason::kError);
  seq_states_.erase(seq_id);
  if (spec_) spec_->Forget(seq_id);
  seq_id = 0;
  req.last_reason = reason;
  if (--req.num_unfinished > 0) return;
  switch (reason) {
    case FinishReason::kStop: local_.requests_finished_stop++; break;
    case FinishReason::kLength: local_.requests_finished_length++; break;
    case FinishReason::kAbort: local_.requests_finished_abort++; break;
    case FinishReason::kError:
    case FinishReason::kNone: local_.requests_finished_error++; break;
  }
  if (reason != FinishReason::kError) {
    local_.e2e_request_latency_s.Observe(Seconds(Clock::now() - req.arrival));
  }
  completed_.push_back(req.id);  // forgotten in PublishStats, once no caller holds `req`
}

void Engine::PublishStats(int64_t step_tokens) {
  for (RequestId id : completed_) requests_.erase(id);
  completed_.clear();
  if (step_tokens >= 0) {
    local_.steps_total++;
    local_.iteration_tokens.Observe(static_cast<double>(step_tokens));
  }
  int64_t running = 0;
  for (const auto& [id, req] : requests_) {
    for (SeqId seq_id : req->seqs) {
      const Sequence* seq = seq_id ? scheduler_->Find(seq_id) : nullptr;
      if (seq && seq->status == scheduler::SeqStatus::kRunning) {
        ++running;
        break;
      }
    }
  }
  local_.num_requests_running = running;
  local_.num_requests_waiting = static_cast<int64_t>(requests_.size()) - running;
  local_.free_slots = scheduler_->num_free_sequence_slots();
  local_.free_kv_pages = scheduler_->num_free_pages();
  local_.num_preemptions_total = scheduler_->num_preemptions();
  local_.prefix_cache_queries = scheduler_->prefix_queries();
  local_.prefix_cache_hits = scheduler_->prefix_hits();
  local_.prefix_cache_entries = scheduler_->num_cache_entries();
  local_.prefix_cache_max_entries = scheduler_->max_cache_entries();
  local_.prefix_cache_pages = scheduler_->num_cache_pages();
  local_.prefix_cache_only_pages = scheduler_->num_cache_only_pages();
  if (spec_) {
    const SpecCounters& c = spec_->counters();
    local_.spec_num_drafts = c.num_drafts;
    local_.spec_num_draft_tokens = c.num_draft_tokens;
    local_.spec_num_accepted_tokens = c.num_accepted_tokens;
    local_.spec_accepted_per_pos = c.accepted_per_pos;
  }
  local_.constraint_mask_seconds_total = mask_filler_.total_compute_seconds();
  local_.constraint_wait_seconds_total = mask_wait_seconds_;
  std::lock_guard lock(mu_);
  stats_ = local_;
  waiting_requests_ = local_.num_requests_waiting;
}

void Engine::Emit() {
  std::vector<Pending> events;
  events.swap(pending_events_);
  for (Pending& p : events) (*p.sink)(p.event);
}

}  // namespace sparkserve::engine
