// bench engine: prefill to each context, time greedy decode steps, compare with the bandwidth floor.
#include "bench/engine_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "fmt/format.h"
#include "head/cli/model_runner_factory.h"
#include "head/engine/sampler.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#ifdef SPARKSERVE_WITH_CUDA
#include "model/cuda/cuda_model_runner.h"
#include "kernels/cuda/memory_bandwidth.h"
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

struct SeqState {
  int slot = 0;
  std::vector<int32_t> pages;
  std::vector<int32_t> tokens;
};

// Prefills every seq to `context` tokens (random ids), several seqs per step up to the step budget.
// With `sample_first`, each seq's last chunk asks for its logits and the first token is sampled
// (greedy, where the engine samples): the whole call is then the batch's time to first token.
absl::Status Prefill(model::ModelRunner& runner, std::vector<SeqState>& seqs, int context, int step_tokens,
                     int vocab, std::mt19937& rng, bool sample_first = false) {
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  for (SeqState& s : seqs) {
    s.tokens.resize(static_cast<size_t>(std::max(context, 1)));
    for (int32_t& t : s.tokens) t = id(rng);
  }
  if (context == 0) return absl::OkStatus();  // the first decode step starts the sequence
  std::vector<int> done(seqs.size(), 0);
  while (true) {
    model::StepPlan plan;
    int budget = step_tokens;
    for (size_t i = 0; i < seqs.size() && budget > 0; ++i) {
      const int n = std::min(context - done[i], budget);
      if (n <= 0) continue;
      model::SeqWork w;
      w.slot = seqs[i].slot;
      w.start_pos = done[i];
      w.tokens.assign(seqs[i].tokens.begin() + done[i], seqs[i].tokens.begin() + done[i] + n);
      w.kv_pages = seqs[i].pages;
      done[i] += n;
      w.logits = sample_first && done[i] == context ? model::LogitsWanted::kLast : model::LogitsWanted::kNone;
      plan.seqs.push_back(std::move(w));
      budget -= n;
    }
    if (plan.seqs.empty()) return absl::OkStatus();
    size_t rows = 0;
    for (const model::SeqWork& w : plan.seqs) rows += w.logits == model::LogitsWanted::kLast;
    model::RowSampling greedy;
    greedy.temperature = 0.0f;
    auto out = sample_first && runner.samples_on_device()
                   ? runner.ForwardSampled(plan, std::vector<model::RowSampling>(rows, greedy))
                   : runner.Forward(plan);
    if (!out.ok()) return out.status();
  }
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

}  // namespace

int RunBenchEngine(const BenchEngineArgs& a) {
  if (a.batches.empty() || a.contexts.empty() || a.steps < 1 || a.warmup < 0 || a.repeats < 1) {
    spdlog::error("bench engine: need at least one --batch and --context, --steps >= 1, --warmup >= 0, --repeats >= 1");
    return 2;
  }
  for (int b : a.batches) {
    if (b < 1) { spdlog::error("bench engine: --batch {} < 1", b); return 2; }
  }
  for (int c : a.contexts) {
    if (c < 0) { spdlog::error("bench engine: --context {} < 0", c); return 2; }
  }
  for (int p : a.prompt_lens) {
    if (p < 1) { spdlog::error("bench engine: --prompt-len {} < 1", p); return 2; }
  }
  if (a.max_step_tokens < 1) {
    spdlog::error("bench engine: --max-num-batched-tokens {} < 1", a.max_step_tokens);
    return 2;
  }
  const int max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  int max_context = *std::max_element(a.contexts.begin(), a.contexts.end());
  for (int p : a.prompt_lens) max_context = std::max(max_context, p);
  head::RunnerSizing sizing;
  sizing.backend = a.backend;
  sizing.max_batch = max_batch;
  sizing.max_seq_len = max_context + a.warmup + a.steps * a.repeats + 2;
  sizing.max_step_tokens = std::max(a.max_step_tokens, max_batch);
  sizing.cuda_graphs = !a.enforce_eager;
  sizing.kv_dtype = a.kv_dtype;
  sizing.state_dtype = a.state_dtype;
  auto loaded = head::LoadModelRunner(a.model_dir, sizing);
  if (!loaded.ok()) {
    spdlog::error("bench engine: loading {}: {}", a.model_dir, std::string(loaded.status().message()));
    return 1;
  }
  model::ModelRunner& runner = *loaded->runner;
  const int vocab = static_cast<int>(loaded->config.vocab_size);
  const int page = runner.capacity().kv_page_size;
  const int pages_per_seq = (sizing.max_seq_len + page - 1) / page;
  double copy_bw = 0;
#ifdef SPARKSERVE_WITH_CUDA
  auto* cuda_runner = dynamic_cast<model::cuda::CudaModelRunner*>(&runner);
  if (cuda_runner != nullptr) {
    auto bw = kernels::cuda::MeasureCopyBandwidth();
    if (!bw.ok()) {
      spdlog::error("bench engine: measuring copy bandwidth: {}", std::string(bw.status().message()));
      return 1;
    }
    copy_bw = bw->bytes_per_second;
  }
#endif
  head::Sampler sampler(vocab);
  scheduler::SamplingParams greedy;
  greedy.temperature = 0.0f;
  model::RowSampling greedy_row;
  greedy_row.temperature = 0.0f;
  std::mt19937 rng(1234);
  std::vector<Point> points;
  for (const int context : a.contexts) {
    for (const int batch : a.batches) {
      std::vector<SeqState> seqs(static_cast<size_t>(batch));
      for (int s = 0; s < batch; ++s) {
        seqs[s].slot = s;
        for (int p = 0; p < pages_per_seq; ++p) seqs[s].pages.push_back(s * pages_per_seq + p);
      }
      const auto t_prefill = Clock::now();
      if (auto st = Prefill(runner, seqs, context, sizing.max_step_tokens, vocab, rng); !st.ok()) {
        spdlog::error("bench engine: prefill to {} tokens: {}", context, std::string(st.message()));
        return 1;
      }
      spdlog::info("bench engine: batch {} prefilled to {} tokens in {:.2f} s", batch, context,
                   std::chrono::duration<double>(Clock::now() - t_prefill).count());
      // One decode step: every seq feeds its last token; rows are sampled on the host.
      auto decode = [&]() -> absl::Status {
        model::StepPlan plan;
        for (SeqState& s : seqs) {
          model::SeqWork w;
          w.slot = s.slot;
          w.start_pos = static_cast<int32_t>(s.tokens.size()) - 1;
          w.tokens = {s.tokens.back()};
          w.kv_pages = s.pages;
          plan.seqs.push_back(std::move(w));
        }
        // Sampling as the engine does it: on the runner's device when it can, else on the host.
        const bool on_device = runner.samples_on_device();
        auto out = on_device ? runner.ForwardSampled(plan, std::vector<model::RowSampling>(seqs.size(), greedy_row))
                             : runner.Forward(plan);
        if (!out.ok()) return out.status();
        for (int s = 0; s < batch; ++s) {
          if (on_device && out->sampled[static_cast<size_t>(s)].status == model::SampledRow::kDone) {
            seqs[s].tokens.push_back(out->sampled[static_cast<size_t>(s)].id);
            continue;
          }
          head::SamplingContext ctx;
          ctx.params = &greedy;
          auto tok = sampler.Sample({out->logits.data<float>() + static_cast<int64_t>(s) * vocab,
                                     static_cast<size_t>(vocab)}, ctx);
          if (!tok.ok()) return tok.status();
          seqs[s].tokens.push_back(tok->id);
        }
        return absl::OkStatus();
      };
      // Context 0: the one random token is decoded at position 0 by the first warm-up step.
      for (int i = 0; i < a.warmup; ++i) {
        if (auto st = decode(); !st.ok()) {
          spdlog::error("bench engine: decode: {}", std::string(st.message()));
          return 1;
        }
      }
      std::vector<double> seconds;
      [[maybe_unused]] const int start_context = static_cast<int>(seqs[0].tokens.size());
      for (int r = 0; r < a.repeats; ++r) {
        const auto t0 = Clock::now();
        for (int i = 0; i < a.steps; ++i) {
          if (auto st = decode(); !st.ok()) {
            spdlog::error("bench engine: decode: {}", std::string(st.message()));
            return 1;
          }
        }
        seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
#ifdef SPARKSERVE_WITH_CUDA
      if (a.profile && cuda_runner != nullptr) {
        cuda_runner->ProfileNextStep();
        if (auto st = decode(); !st.ok()) {
          spdlog::error("bench engine: profiled decode: {}", std::string(st.message()));
          return 1;
        }
        PrintOpProfile(a.json_path == "-" ? stderr : stdout,
                       fmt::format("batch {} context {}, one decode step", batch, context),
                       cuda_runner->TakeOpProfile());
      }
#endif
      std::sort(seconds.begin(), seconds.end());
      const double median = seconds[seconds.size() / 2];
      Point p;
      p.batch = batch;
      p.context = context;
      p.ms_per_step = median * 1e3 / a.steps;
      p.tok_per_s = static_cast<double>(batch) * a.steps / median;
#ifdef SPARKSERVE_WITH_CUDA
      if (cuda_runner != nullptr) {
        const int64_t mid = start_context + a.steps * a.repeats / 2;
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
  // Prefill: fresh sequences of `prompt` random tokens, timed to each one's first sampled token.
  struct PrefillPoint {
    int batch = 0, prompt = 0;
    double seconds = 0, tok_per_s = 0;
  };
  std::vector<PrefillPoint> prefills;
  for (const int prompt : a.prompt_lens) {
    for (const int batch : a.batches) {
      std::vector<SeqState> seqs(static_cast<size_t>(batch));
      for (int s = 0; s < batch; ++s) {
        seqs[s].slot = s;
        for (int p = 0; p < pages_per_seq; ++p) seqs[s].pages.push_back(s * pages_per_seq + p);
      }
      std::vector<double> seconds;
      for (int r = 0; r < a.repeats + 1; ++r) {  // the first is a warm-up
        const auto t0 = Clock::now();
        if (auto st = Prefill(runner, seqs, prompt, sizing.max_step_tokens, vocab, rng, true); !st.ok()) {
          spdlog::error("bench engine: prefill of {} tokens: {}", prompt, std::string(st.message()));
          return 1;
        }
        if (r > 0) seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
#ifdef SPARKSERVE_WITH_CUDA
      if (a.profile && cuda_runner != nullptr) {  // the first step of one more prefill
        cuda_runner->ProfileNextStep();
        if (auto st = Prefill(runner, seqs, prompt, sizing.max_step_tokens, vocab, rng, true); !st.ok()) {
          spdlog::error("bench engine: profiled prefill: {}", std::string(st.message()));
          return 1;
        }
        PrintOpProfile(a.json_path == "-" ? stderr : stdout,
                       fmt::format("batch {} prompt {}, the first prefill step ({} tokens a step at most)", batch,
                                   prompt, sizing.max_step_tokens),
                       cuda_runner->TakeOpProfile());
      }
#endif
      std::sort(seconds.begin(), seconds.end());
      PrefillPoint p{batch, prompt, seconds[seconds.size() / 2], 0};
      p.tok_per_s = static_cast<double>(batch) * prompt / p.seconds;
      prefills.push_back(p);
      spdlog::info("bench engine: prefill batch {} x {} tokens: {:.0f} tok/s, time to first tokens {:.1f} ms", batch,
                   prompt, p.tok_per_s, 1e3 * p.seconds);
    }
  }
  FILE* table = a.json_path == "-" ? stderr : stdout;
  std::fprintf(table, "bench engine: %s, backend %s%s\n", a.model_dir.c_str(), loaded->backend_description.c_str(),
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
  if (!a.json_path.empty()) {
    nlohmann::json j;
    j["model_dir"] = a.model_dir;
    j["backend"] = loaded->backend_description;
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
  return 0;
}

}  // namespace sparkserve::bench
