// Engine: the engine thread behind EngineApi. It owns the scheduler, the sampler and the model
// runner; requests and cancels come in through mutex-guarded queues, token events go out through
// each request's sink (called on the engine thread). One loop turn: take the queues, then
// Step() = schedule -> run -> postprocess (sample, append, stop, emit, free).
//
// n > 1: each sample is its own sequence that prefills the prompt by itself (simple and always
// correct; forking after one prefill would need shared, copy-on-write KV pages).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine_api.h"
#include "engine/mask_filler.h"
#include "engine/sampler.h"
#include "engine/spec_decode.h"
#include "model/model_runner.h"
#include "scheduler/request.h"
#include "scheduler/scheduler.h"

namespace sparkserve::engine {

// What one engine step did, for benchmarks (bench engine times steady decode with it).
struct StepRecord {
  int64_t index = 0;              // steps since the engine started
  int32_t num_seqs = 0;           // sequences in the step
  int32_t num_tokens = 0;         // tokens fed
  int32_t num_prefill_tokens = 0;
  int32_t num_decode_tokens = 0;
  int32_t num_draft_tokens = 0;   // drafts among the decode tokens (verify windows)
  std::chrono::steady_clock::time_point start{}, end{};  // schedule -> events emitted
};

// Called on the engine thread around each step (must not block): BeforeStep once the step is
// scheduled (its counts filled, `end` not yet), before the model runs it, so that it may ask the
// runner for per-op profiling of that step; AfterStep once its events are out.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void BeforeStep(const StepRecord& record) {}
  virtual void AfterStep(const StepRecord& record) {}
};

struct EngineConfig {
  scheduler::SchedulerConfig scheduler;
  StepObserver* step_observer = nullptr;  // not owned; null: none
  int32_t max_waiting_requests = 256;   // accepted requests not yet running; beyond: ResourceExhausted
  std::vector<int32_t> eos_token_ids;   // from the model's generation config; stop unless ignore_eos
  // Speculative decoding (engine/spec_decode.h). Sequences with an output constraint never draft.
  SpecConfig spec;
};

inline constexpr int32_t kMaxSamplesPerRequest = 128;  // n (OpenAI's limit)
inline constexpr int64_t kParallelSamplingFrom = 4;    // sequences per step before sampling fans out
inline constexpr int64_t kMaxSamplingChunks = 8;

class Engine : public EngineApi {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(std::unique_ptr<model::ModelRunner> model,
                                                        EngineConfig config);
  ~Engine() override;  // Shutdown()

  // Starts the engine thread. Requests submitted before are queued and start together.
  void Start();
  // Stops accepting (Submit answers Unavailable), finishes every accepted request, and returns
  // when the engine thread has exited (starting it first if needed).
  void Drain();
  // Ends every request now (final events kAbort) and stops the engine thread.
  void Shutdown();

  absl::StatusOr<scheduler::RequestId> Submit(scheduler::Request request, TokenSink sink) override;
  // Several requests that reach the engine thread together (the same step admits them, as far as
  // they fit): a benchmark's batch must not depend on how the submitting thread is scheduled. All or
  // none are accepted.
  absl::StatusOr<std::vector<scheduler::RequestId>> SubmitAll(
      std::vector<std::pair<scheduler::Request, TokenSink>> requests);
  void Cancel(scheduler::RequestId id) override;
  void Finish(scheduler::RequestId id, scheduler::FinishReason reason) override;
  EngineStats Stats() const override;
  const model::ModelCapacity& capacity() const { return capacity_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct RequestState;
  struct SeqState {
    RequestState* request = nullptr;
    uint64_t rng_seed = 0;
    Clock::time_point last_token{};
    bool has_token = false;
    PenaltyHistory penalty_history;  // for device sampling of penalised draws (RowSamplings)
    std::unique_ptr<scheduler::ConstraintMatcher> matcher;  // structured output; null: free
  };
  struct Incoming {
    scheduler::Request request;
    TokenSink sink;
    Clock::time_point arrival;
  };
  struct Draw {  // one sequence to sample this step
    scheduler::Sequence* seq = nullptr;
    SeqState* state = nullptr;
    std::span<const float> logits;
    SamplingContext ctx;
    absl::StatusOr<SampledToken> token;
    bool on_device = false;  // `token` came from the runner's device sampler
    // Verify window: its k drafts and the logits row of its first column (column j: row + j).
    const scheduler::ScheduledSeq* verify = nullptr;
    std::span<const int32_t> drafts;
    int64_t first_row = 0;
  };
  struct Pending {  // an event for a sink, emitted after the step's bookkeeping
    std::shared_ptr<TokenSink> sink;
    scheduler::TokenEvent event;
  };

  Engine(std::unique_ptr<model::ModelRunner> model, EngineConfig config,
         std::unique_ptr<scheduler::Scheduler> scheduler);
  absl::Status Validate(const scheduler::Request& request) const;

  void Loop();
  void Admit(std::vector<Incoming>& incoming);
  void ApplyEnds(const std::vector<std::pair<scheduler::RequestId, scheduler::FinishReason>>& ends);
  void Step();
  void Postprocess(const scheduler::ScheduledBatch& batch, const model::StepOutput& output);
  // Ends every unfinished sample of `request` with a final event carrying `reason`.
  void EndRequest(RequestState& request, scheduler::FinishReason reason, const std::string& error,
                  bool unavailable = false);
  // Frees a sample's sequence (slot, pages); the request is forgotten at the next PublishStats
  // once all its samples have ended.
  void ReleaseSample(RequestState& request, int32_t index, scheduler::FinishReason reason);
  // Samples every draw; in parallel on the core thread pool when there are several (each draw
  // depends only on its own row and stream, so the result is the same either way).
  void SampleAll(std::vector<Draw>& draws);
  // Appends a draw's token, checks stops and queues its event; false when the sample ended
  // (finished or failed: `finished` / `failed` say which).
  struct Ended {
    scheduler::RequestId request;
    int32_t index;
    scheduler::FinishReason reason;
  };
  bool AppendDrawn(Draw& d, Clock::time_point now, std::vector<Ended>& finished,
                   std::vector<scheduler::RequestId>& failed);
  // The rest of a verify window whose column 0 was drawn: columns while drafts hold, then the
  // scheduler and the policy learn how many did.
  void FinishVerify(Draw& d, const model::StepOutput& output, Clock::time_point now, std::vector<Ended>& finished,
                    std::vector<scheduler::RequestId>& failed);
  // Start-up: the step cost curve (and MTP draft step) the auto policy weighs drafts against.
  absl::Status MeasureSpecCosts();
  // The sampler's view of a scheduled seq (params, history, banned ids below min_tokens, stream).
  SamplingContext ContextOf(const scheduler::ScheduledSeq& s) const;
  // What a device-sampling runner needs for each sampling seq of `batch`, in plan order.
  std::vector<model::RowSampling> RowSamplings(const scheduler::ScheduledBatch& batch);
  // Sizes batch.plan.masks for the step's constrained draws, names their rows in plan.sampling
  // (device sampling) and step_mask_rows_, and starts filling them on the mask thread; the
  // plan's masks.ready waits for it. The masks depend on tokens accepted in the previous step.
  void StartMasks(scheduler::ScheduledBatch& batch);
  void WaitMasks();
  void FailBatch(const scheduler::ScheduledBatch& batch, const std::string& error, bool unavailable = false);
  void EndAll(scheduler::FinishReason reason, const std::string& error);
  void PublishStats(int64_t step_tokens);
  void Emit();

  std::unique_ptr<model::ModelRunner> model_;
  const EngineConfig config_;
  const model::ModelCapacity capacity_;

  // Engine thread only.
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<SpecDecoder> spec_;  // null: no speculation
  std::mutex samplers_mu_;
  std::vector<std::unique_ptr<Sampler>> idle_samplers_;  // scratch per concurrent sampling chunk
  std::mt19937_64 unseeded_rng_;
  std::unordered_map<scheduler::RequestId, std::unique_ptr<RequestState>> requests_;
  std::unordered_map<scheduler::SeqId, SeqState> seq_states_;
  std::vector<Pending> pending_events_;
  std::vector<scheduler::RequestId> completed_;  // every sample ended; erased in PublishStats
  MaskFiller mask_filler_;
  std::vector<int32_t> step_mask_rows_;  // per sampled row of the step: its mask row, or -1
  std::vector<uint32_t> mask_words_;      // token-mask storage, lent to each step's plan
  double mask_wait_seconds_ = 0.0;        // time steps waited for masks after queueing the forward
  EngineStats local_;                             // published to stats_ after each step
  int64_t step_index_ = 0;

  // Shared with Submit/Cancel/Stats callers.
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Incoming> inbox_;
  std::vector<std::pair<scheduler::RequestId, scheduler::FinishReason>> ends_;
  int64_t waiting_requests_ = 0;  // accepted, not running yet (inbox excluded)
  scheduler::RequestId next_request_id_ = 1;
  bool draining_ = false;
  bool stopping_ = false;
  EngineStats stats_;
  enum class ThreadState : uint8_t { kIdle, kRunning, kDone };
  std::mutex lifecycle_mu_;  // Start/Drain/Shutdown
  ThreadState state_ = ThreadState::kIdle;
  std::thread thread_;
};

}  // namespace sparkserve::engine
