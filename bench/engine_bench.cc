// bench engine: requests through the engine (no HTTP); steady decode steps timed per batch and
// context against the bandwidth floor, and prefill timed to first tokens.
#include "bench/engine_bench.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <utility>

#include "engine/engine.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#ifdef SPARKSERVE_WITH_CUDA
#include "kernels/cuda/memory_bandwidth.h"
#include "model/cuda/cuda_model_runner.h"
#endif

namespace sparkserve::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Point {
  int batch = 0, context = 0;
  double tok_per_s = 0, ms_per_step = 0;
  double bytes_per_step = 0, weight_bytes = 0, kv_bytes = 0, state_bytes = 0;
  double floor_ms = 0, ratio = 0;  // 0 when unknown (CPU backend)
};

struct PrefillPoint {
  int batch = 0, prompt = 0;
  double seconds = 0, tok_per_s = 0;
};

// The engine's steps as they run, and the per-op profile of one chosen step (CUDA). Called on the
// engine thread; the bench thread reads it between runs, when the engine is idle.
class StepLog final : public engine::StepObserver {
 public:
  std::function<void()> start_profile;  // asks the runner to profile the next step
  std::function<void()> take_profile;   // collects that step's profile

  void BeforeStep(const engine::StepRecord& r) override {
    std::lock_guard lock(mu_);
    if (profile_when_ && start_profile && profile_when_(r)) {
      profile_when_ = nullptr;
      profiled_index_ = r.index;
      start_profile();
    }
  }
  void AfterStep(const engine::StepRecord& r) override {
    std::lock_guard lock(mu_);
    records_.push_back(r);
    if (r.index == profiled_index_) {
      profiled_index_ = -1;
      take_profile();
    }
  }
  // Profiles the first later step for which `when` is true.
  void ProfileWhen(std::function<bool(const engine::StepRecord&)> when) {
    std::lock_guard lock(mu_);
    profile_when_ = std::move(when);
  }
  std::vector<engine::StepRecord> Take() {
    std::lock_guard lock(mu_);
    return std::exchange(records_, {});
  }

 private:
  std::mutex mu_;
  std::vector<engine::StepRecord> records_;
  std::function<bool(const engine::StepRecord&)> profile_when_;
  int64_t profiled_index_ = -1;
};

// Submits `batch` greedy requests of `prompt_len` random ids (at least one) generating `max_tokens`
// each, eos ignored, and waits until every one has finished.
absl::Status RunRequests(engine::Engine& engine, int batch, int prompt_len, int max_tokens, int vocab,
                         std::mt19937& rng) {
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    int unfinished = 0;
    std::string error;
  };
  auto wait = std::make_shared<Wait>();
  wait->unfinished = batch;
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<std::pair<scheduler::Request, engine::TokenSink>> requests;
  for (int b = 0; b < batch; ++b) {
    scheduler::Request r;
    r.prompt_ids.resize(static_cast<size_t>(std::max(prompt_len, 1)));
    for (int32_t& t : r.prompt_ids) t = id(rng);
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    r.stop.ignore_eos = true;
    requests.emplace_back(std::move(r), [wait](const scheduler::TokenEvent& e) {
      if (e.finish == scheduler::FinishReason::kNone) return;
      std::lock_guard lock(wait->mu);
      if (e.finish == scheduler::FinishReason::kError && wait->error.empty()) wait->error = e.error;
      if (--wait->unfinished == 0) wait->cv.notify_all();
    });
  }
  // Together, so that the batch starts in one step however the OS schedules this thread: one at a
  // time, a fast model finished the first request before the second arrived.
  if (auto submitted = engine.SubmitAll(std::move(requests)); !submitted.ok()) return submitted.status();
  std::unique_lock lock(wait->mu);
  wait->cv.wait(lock, [&] { return wait->unfinished == 0; });
  if (!wait->error.empty()) return absl::InternalError(wait->error);
  return absl::OkStatus();
}

#ifdef SPARKSERVE_WITH_CUDA
// One profiled step's op times, biggest first (bench engine --profile).
void PrintOpProfile(FILE* f, const std::string& what, std::vector<model::cuda::CudaModelRunner::OpTime> ops) {
  std::sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) { return x.micros > y.micros; });
  double total = 0;
  for (const auto& op : ops) total += op.micros;
  std::fprintf(f, "profile: %s on the GPU: %.1f us\n", what.c_str(), total);
  std::fprintf(f, "  %-24s %6s %10s %10s %6s\n", "op", "count", "total us", "us each", "share");
  for (const auto& op : ops) {
    std::fprintf(f, "  %-24s %6d %10.1f %10.2f %5.1f%%\n", op.op.c_str(), op.count, op.micros, op.micros / op.count,
                 100 * op.micros / total);
  }
}
#endif

absl::Status CheckArgs(const BenchEngineArgs& a) {
  if (a.batches.empty() || a.contexts.empty() || a.steps < 1 || a.warmup < 0 || a.repeats < 1) {
    return absl::InvalidArgumentError(
        "need at least one --batch and --context, --steps >= 1, --warmup >= 0, --repeats >= 1");
  }
  for (int b : a.batches) {
    if (b < 1) return absl::InvalidArgumentError(fmt::format("--batch {} < 1", b));
  }
  for (int c : a.contexts) {
    if (c < 0) return absl::InvalidArgumentError(fmt::format("--context {} < 0", c));
  }
  for (int p : a.prompt_lens) {
    if (p < 1) return absl::InvalidArgumentError(fmt::format("--prompt-len {} < 1", p));
  }
  if (a.runner.max_step_tokens < 1) {
    return absl::InvalidArgumentError(fmt::format("--max-num-batched-tokens {} < 1", a.runner.max_step_tokens));
  }
  return absl::OkStatus();
}

void PrintTable(FILE* table, const BenchEngineArgs& a, const std::string& backend, double copy_bw,
                const std::vector<Point>& points, const std::vector<PrefillPoint>& prefills) {
  std::fprintf(table, "bench engine: %s, backend %s%s\n", a.model_dir.c_str(), backend.c_str(),
               copy_bw > 0 ? fmt::format(", copy bandwidth {:.0f} GB/s", copy_bw / 1e9).c_str() : "");
  std::fprintf(table, "%6s %8s %10s %10s %12s %10s %7s\n", "batch", "context", "tok/s", "ms/step", "GB/step", "floor ms",
               "ratio");
  for (const Point& p : points) {
    std::fprintf(table, "%6d %8d %10.1f %10.3f %12.3f %10.3f %7s\n", p.batch, p.context, p.tok_per_s, p.ms_per_step,
                 p.bytes_per_step / 1e9, p.floor_ms,
                 p.ratio > 0 ? fmt::format("{:.1f}%", 100 * p.ratio).c_str() : "-");
  }
  if (!prefills.empty()) {
    std::fprintf(table, "%6s %8s %12s %12s\n", "batch", "prompt", "prefill t/s", "TTFT ms");
    for (const PrefillPoint& p : prefills) {
      std::fprintf(table, "%6d %8d %12.0f %12.1f\n", p.batch, p.prompt, p.tok_per_s, 1e3 * p.seconds);
    }
  }
}

void WriteJson(const BenchEngineArgs& a, const std::string& backend, double copy_bw, const std::vector<Point>& points,
               const std::vector<PrefillPoint>& prefills) {
  nlohmann::json j;
  j["model_dir"] = a.model_dir;
  j["backend"] = backend;
  j["copy_bandwidth_bytes_per_s"] = copy_bw;
  j["steps"] = a.steps;
  j["repeats"] = a.repeats;
  for (const Point& p : points) {
    j["points"].push_back({{"batch", p.batch}, {"context", p.context}, {"tok_per_s", p.tok_per_s},
                           {"ms_per_step", p.ms_per_step}, {"bytes_per_step", p.bytes_per_step},
                           {"weight_bytes", p.weight_bytes}, {"kv_bytes", p.kv_bytes},
                           {"state_bytes", p.state_bytes}, {"floor_ms", p.floor_ms}, {"floor_ratio", p.ratio}});
  }
  for (const PrefillPoint& p : prefills) {
    j["prefill"].push_back({{"batch", p.batch}, {"prompt_len", p.prompt}, {"tok_per_s", p.tok_per_s},
                            {"time_to_first_tokens_s", p.seconds}});
  }
  if (a.json_path == "-") {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::ofstream(a.json_path) << j.dump(2) << "\n";
  }
}

// The step cost curve: one sequence of n tokens a step, n = 1..256, and one MTP draft step.
int PrintStepCostCurve(model::ModelRunner& runner, bool mtp, FILE* f) {
  auto points = engine::MeasureStepCosts(runner, engine::StepCostCounts(256), 3);
  if (!points.ok()) {
    spdlog::error("bench engine: step cost curve: {}", std::string(points.status().message()));
    return 1;
  }
  const double one = points->front().seconds;
  std::fprintf(f, "step cost curve (one sequence, fastest of 3):\n%8s %10s %12s %10s\n", "tokens", "ms/step",
               "us/token", "x 1 token");
  for (const engine::StepCostPoint& p : *points) {
    std::fprintf(f, "%8d %10.3f %12.1f %10.2f\n", p.tokens, 1e3 * p.seconds, 1e6 * p.seconds / p.tokens,
                 p.seconds / one);
  }
  if (mtp) {
    auto draft = engine::MeasureMtpDraftStep(runner, 3);
    if (!draft.ok()) {
      spdlog::error("bench engine: MTP draft step: {}", std::string(draft.status().message()));
      return 1;
    }
    std::fprintf(f, "one MTP draft step: %.3f ms (%.1f%% of a 1-token step)\n", 1e3 * *draft, 100.0 * *draft / one);
  }
  return 0;
}

}  // namespace

int RunBenchEngine(const BenchEngineArgs& a) {
  if (absl::Status st = CheckArgs(a); !st.ok()) {
    spdlog::error("bench engine: {}", std::string(st.message()));
    return 2;
  }
  const int max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  int max_context = *std::max_element(a.contexts.begin(), a.contexts.end());
  for (int p : a.prompt_lens) max_context = std::max(max_context, p);
  model::RunnerOptions options = a.runner;
  options.max_batch = max_batch;
  options.max_step_tokens = std::max(a.runner.max_step_tokens, max_batch);
  options.cuda_graphs = !a.enforce_eager;
  // Decode steps of a point: the warm-up, the timed windows, one more that ends the last window,
  // one to profile. Sequences whose prefill ends early decode beside the others' prefill, so each
  // generates up to `slack` more tokens than the full-batch steps need.
  const int decode_steps = a.warmup + a.steps * a.repeats + 1 + (a.profile ? 1 : 0);
  const int slack =
      (max_batch * std::max(max_context, 1) + options.max_step_tokens - 1) / options.max_step_tokens + 1;
  options.max_seq_len = std::max(max_context, 1) + decode_steps + slack + 2;
  const bool spec = a.spec.mode != engine::SpecMode::kOff;
  if (spec) {  // the cost curve runs up to 256 tokens in one sequence; every window may add K
    options.max_verify_tokens = a.spec.max_drafts + 1;
    options.max_seq_len = std::max(options.max_seq_len + (decode_steps + slack) * a.spec.max_drafts, 257);
    options.max_step_tokens = std::max(options.max_step_tokens, 256);
  }
  engine::cluster::ClusterRunner* cluster = nullptr;
  auto loaded = engine::cluster::LoadRunner(a.model_dir, options, a.cluster, &cluster);
  if (!loaded.ok()) {
    spdlog::error("bench engine: loading {}: {}", a.model_dir, std::string(loaded.status().message()));
    return 1;
  }
  if (cluster != nullptr) {
    if (absl::Status st = cluster->WaitUntilServing(std::chrono::minutes(10)); !st.ok()) {
      spdlog::error("bench engine: {}", std::string(st.message()));
      return 1;
    }
  }
  if (spec && PrintStepCostCurve(*loaded->runner, a.spec.mode == engine::SpecMode::kMtp,
                                 a.json_path == "-" ? stderr : stdout) != 0) {
    return 1;
  }
  const int vocab = static_cast<int>(loaded->config.vocab_size);
  const std::string backend = loaded->backend_description;
  FILE* const out = a.json_path == "-" ? stderr : stdout;
  StepLog log;
  double copy_bw = 0;
  std::string profile_title;
#ifdef SPARKSERVE_WITH_CUDA
  auto* cuda_runner = dynamic_cast<model::cuda::CudaModelRunner*>(loaded->runner.get());
  if (cuda_runner != nullptr) {
    auto bw = kernels::cuda::MeasureCopyBandwidth();
    if (!bw.ok()) {
      spdlog::error("bench engine: measuring copy bandwidth: {}", std::string(bw.status().message()));
      return 1;
    }
    copy_bw = bw->bytes_per_second;
    log.start_profile = [cuda_runner] { cuda_runner->ProfileNextStep(); };
    log.take_profile = [cuda_runner, out, &profile_title] {
      PrintOpProfile(out, profile_title, cuda_runner->TakeOpProfile());
    };
  }
#endif
  engine::EngineConfig ec;
  ec.scheduler.max_batch = max_batch;
  ec.scheduler.max_step_tokens = options.max_step_tokens;
  // A prompt takes the whole step budget, as serve's default (--prefill-chunk 0); the scheduler's own
  // default of 512 cut a 4096-token prefill into 8 steps (22.8k tok/s instead of 31.6k on the H200).
  ec.scheduler.prefill_chunk = 0;
  ec.max_waiting_requests = std::max(256, max_batch);
  ec.step_observer = &log;
  ec.spec = a.spec;
  auto created = engine::Engine::Create(std::move(loaded->runner), ec);
  if (!created.ok()) {
    spdlog::error("bench engine: {}", std::string(created.status().message()));
    return 1;
  }
  engine::Engine& engine = **created;
  engine.Start();
  std::mt19937 rng(1234);

  std::vector<Point> points;
  for (const int context : a.contexts) {
    for (const int batch : a.batches) {
      // Full-batch decode steps: every sequence feeds one token.
      const auto full_decode = [batch](const engine::StepRecord& r) {
        return r.num_seqs == batch && r.num_decode_tokens == batch + r.num_draft_tokens && r.num_prefill_tokens == 0;
      };
      const int timed = a.steps * a.repeats;
      if (a.profile) {
        profile_title = fmt::format("batch {} context {}, one decode step", batch, context);
        auto seen = std::make_shared<int>(0);
        log.ProfileWhen([=](const engine::StepRecord& r) { return full_decode(r) && (*seen)++ == a.warmup + timed + 1; });
      }
      log.Take();
      const auto t_run = Clock::now();
      // A verify step may accept up to K drafts, so a speculating sequence asks for (1 + K) tokens a step:
      // else one that prefilled a step ahead finishes before the others ran their full-batch steps.
      const int tokens_per_step = spec ? 1 + a.spec.max_drafts : 1;
      if (auto st = RunRequests(engine, batch, context, (decode_steps + slack) * tokens_per_step, vocab, rng);
          !st.ok()) {
        spdlog::error("bench engine: batch {} context {}: {}", batch, context, std::string(st.message()));
        return 1;
      }
      std::vector<engine::StepRecord> decode;
      for (const engine::StepRecord& r : log.Take()) {
        if (full_decode(r)) decode.push_back(r);
      }
      if (static_cast<int>(decode.size()) < a.warmup + timed + 1) {
        spdlog::error("bench engine: batch {} context {}: only {} full-batch decode steps ran (want {})", batch,
                      context, decode.size(), a.warmup + timed + 1);
        return 1;
      }
      spdlog::info("bench engine: batch {} context {}: {} steps in {:.2f} s", batch, context, decode.size(),
                   std::chrono::duration<double>(Clock::now() - t_run).count());
      std::vector<double> seconds;
      for (int r = 0; r < a.repeats; ++r) {
        const size_t first = static_cast<size_t>(a.warmup + r * a.steps);
        seconds.push_back(std::chrono::duration<double>(decode[first + a.steps].start - decode[first].start).count());
      }
      std::sort(seconds.begin(), seconds.end());
      const double median = seconds[seconds.size() / 2];
      Point p;
      p.batch = batch;
      p.context = context;
      p.ms_per_step = median * 1e3 / a.steps;
      p.tok_per_s = static_cast<double>(batch) * a.steps / median;
#ifdef SPARKSERVE_WITH_CUDA
      if (cuda_runner != nullptr) {
        // Tokens cached at the middle of the timed steps (the first token of the prompt included).
        const int64_t mid = std::max(context, 1) + 1 + a.warmup + timed / 2;
        const model::cuda::DecodeTraffic t = cuda_runner->DecodeTrafficAt(std::vector<int64_t>(batch, mid));
        p.weight_bytes = static_cast<double>(t.weight_bytes);
        p.kv_bytes = static_cast<double>(t.kv_bytes);
        p.state_bytes = static_cast<double>(t.state_bytes);
        p.bytes_per_step = p.weight_bytes + p.kv_bytes + p.state_bytes;
        p.floor_ms = p.bytes_per_step / copy_bw * 1e3;
        p.ratio = p.floor_ms / p.ms_per_step;
      }
#endif
      points.push_back(p);
      spdlog::info("bench engine: batch {} context {}: {:.1f} tok/s ({:.3f} ms/step)", batch, context, p.tok_per_s,
                   p.ms_per_step);
    }
  }
  // Prefill: fresh requests of `prompt` random ids, timed from submission to every first token.
  std::vector<PrefillPoint> prefills;
  for (const int prompt : a.prompt_lens) {
    for (const int batch : a.batches) {
      std::vector<double> seconds;
      for (int r = 0; r < a.repeats + 1 + (a.profile ? 1 : 0); ++r) {  // a warm-up first; a profiled run last
        const bool profiled = a.profile && r == a.repeats + 1;
        if (profiled) {
          profile_title = fmt::format("batch {} prompt {}, the first prefill step ({} tokens a step at most)", batch,
                                      prompt, options.max_step_tokens);
          log.ProfileWhen([](const engine::StepRecord& rec) { return rec.num_prefill_tokens > 0; });
        }
        const auto t0 = Clock::now();
        if (auto st = RunRequests(engine, batch, prompt, 1, vocab, rng); !st.ok()) {
          spdlog::error("bench engine: prefill of {} tokens: {}", prompt, std::string(st.message()));
          return 1;
        }
        if (r > 0 && !profiled) seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      log.Take();
      std::sort(seconds.begin(), seconds.end());
      PrefillPoint p{batch, prompt, seconds[seconds.size() / 2], 0};
      p.tok_per_s = static_cast<double>(batch) * prompt / p.seconds;
      prefills.push_back(p);
      spdlog::info("bench engine: prefill batch {} x {} tokens: {:.0f} tok/s, time to first tokens {:.1f} ms", batch,
                   prompt, p.tok_per_s, 1e3 * p.seconds);
    }
  }
  engine.Shutdown();
  PrintTable(out, a, backend, copy_bw, points, prefills);
  if (cluster != nullptr) {  // the head's own per-step costs of tensor parallelism across machines
    const engine::cluster::ClusterStatus cs = cluster->status();
    const double steps = static_cast<double>(std::max<int64_t>(cs.steps_total, 1));
    std::fprintf(out,
                 "cluster: %d ranks (%s); %lld steps; per step: control %.1f us (encode the plan + write it to every "
                 "node), lockstep check %.1f us\n",
                 cs.world, cs.transport.c_str(), static_cast<long long>(cs.steps_total),
                 1e6 * cs.control_seconds_total / steps, 1e6 * cs.lockstep_seconds_total / steps);
  }
  if (!a.json_path.empty()) WriteJson(a, backend, copy_bw, points, prefills);
  return 0;
}

}  // namespace sparkserve::bench
