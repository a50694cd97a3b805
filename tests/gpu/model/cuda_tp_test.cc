// gpu_tp_test: tensor parallelism of the CUDA runner on ONE GPU (tests/gpu/run.sh section tp1gpu).
// Two ranks run as two threads of this process, each a CudaModelRunner over its rank's shard
// (model/shard_cuts.h), exchanging partial sums and candidates through core::InProcessGroup's device
// path (staged through host memory: NCCL refuses two ranks on one GPU). Against the TP=1 runner on
// the same checkpoint:
//   - logits within the CUDA runner tests' tolerance (max |err| / max |logit| <= 2e-2), greedy
//     equal wherever TP=1's top-2 gap > 1e-2, both ranks' outputs bit-identical (lockstep), with
//     CUDA graphs on (replayed in segments around the host-staged all-reduces) and off;
//   - sampling on the device over the split vocabulary: greedy rows equal where the gap is decided,
//     sampled rows (top-k, min-p, top-p, penalties, banned ids, bias; and rows that take the
//     gathered whole rows: temperature alone, logprobs) drawing TP=1's token for the same uniform
//     on nearly every row;
//   - the split sampler alone on identical logits (DeviceSampler's candidates of each slice, their
//     candidate rows sampled) against the whole-row sampler: the same id on every row, exactly;
// The collectives' own GPU checks (the in-process device path, NCCL) are in tp_collectives_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/collective.h"
#include "head/demo/demo_model.h"
#include "kernels/cpu/ops.h"
#include "model/config.h"
#include "model/cuda/cuda_model_runner.h"
#include "model/cuda/device_sampler.h"
#include "model/shard_cuts.h"
#include "model/split_vocab_sampling.h"
#include "quant/checkpoint.h"
#include "tests/unit/temp_dir.h"

namespace sparkserve::model {
namespace {

constexpr double kLogitTolerance = 2e-2;  // tests/gpu/model/cuda_runner_test.cc
constexpr float kTieGap = 1e-2f;
constexpr int kSlots = 8, kPages = 64, kPageSize = 16, kMaxSeq = 256;

cuda::CudaRunnerOptions Options(bool graphs) {
  cuda::CudaRunnerOptions o;
  o.max_seq_len = kMaxSeq;
  o.num_slots = kSlots;
  o.num_kv_pages = kPages;
  o.kv_page_size = kPageSize;
  o.max_step_tokens = 64;
  o.cuda_graphs = graphs;
  return o;
}

// TP=1 and the two ranks of TP=2 on the same checkpoint.
struct Runners {
  std::unique_ptr<core::InProcessGroup> group;  // outlives the ranks (declared first)
  std::unique_ptr<cuda::CudaModelRunner> one;
  std::vector<std::unique_ptr<cuda::CudaModelRunner>> ranks;
  int64_t vocab = 0;
};

absl::Status LoadRunners(const std::string& dir, bool graphs, int32_t world, Runners* r) {
  ASSIGN_OR_RETURN(Qwen35Config config, LoadQwen35Config(dir));
  ASSIGN_OR_RETURN(quant::Checkpoint full, quant::Checkpoint::Open(dir));
  ASSIGN_OR_RETURN(r->one, cuda::CudaModelRunner::Load(dir, Options(graphs)));
  r->group = std::make_unique<core::InProcessGroup>(world);
  for (int32_t q = 0; q < world; ++q) {
    ASSIGN_OR_RETURN(ShardPlan plan, ShardPlan::Make(q, world, config));
    ASSIGN_OR_RETURN(quant::Checkpoint shard, CutShard(full, config, plan));
    ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaModelRunner> rank,
                     cuda::CudaModelRunner::Load(shard, config, plan, &r->group->rank(q), Options(graphs)));
    r->ranks.push_back(std::move(rank));
  }
  r->vocab = config.vocab_size;
  return absl::OkStatus();
}

struct Outputs {
  absl::StatusOr<StepOutput> one;
  std::vector<absl::StatusOr<StepOutput>> ranks;
};

// The plan on TP=1 and on every rank (each rank on its own thread, as they would run in lockstep).
Outputs RunAll(Runners& r, const StepPlan& plan) {
  Outputs o{r.one->Run(plan), {}};
  o.ranks.resize(r.ranks.size(), absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t q = 0; q < r.ranks.size(); ++q) {
    threads.emplace_back([&, q] { o.ranks[q] = r.ranks[q]->Run(plan); });
  }
  for (std::thread& t : threads) t.join();
  return o;
}

struct Agreement {
  double worst = 0;
  int decided = 0, equal = 0;          // greedy: rows with TP=1's top-2 gap > kTieGap, and agreeing
  int sampled = 0, sampled_equal = 0;  // sampled rows (temperature > 0), and those drawing TP=1's id
};

float TopGap(const float* row, int64_t V) {
  std::vector<float> s(row, row + V);
  std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<float>());
  return s[0] - s[1];
}

// Rank 0's logits against TP=1's; every rank's output equal to rank 0's, bit for bit.
void CompareLogits(const Outputs& o, int64_t V, Agreement* a, const std::string& what) {
  ASSERT_TRUE(o.one.ok()) << what << ": " << o.one.status();
  for (const auto& r : o.ranks) ASSERT_TRUE(r.ok()) << what << ": " << r.status();
  const StepOutput& one = *o.one;
  const StepOutput& tp = *o.ranks[0];
  ASSERT_EQ(one.logits.shape(), tp.logits.shape()) << what;
  ASSERT_EQ(one.logit_row_begin, tp.logit_row_begin) << what;
  for (size_t q = 1; q < o.ranks.size(); ++q) {
    const StepOutput& other = *o.ranks[q];
    ASSERT_EQ(other.logits.shape(), tp.logits.shape()) << what;
    EXPECT_TRUE(std::equal(tp.logits.data<float>(), tp.logits.data<float>() + tp.logits.numel(),
                           other.logits.data<float>()))
        << what << ": rank " << q << "'s logits differ from rank 0's";
    EXPECT_TRUE(std::equal(tp.last_hidden.data<float>(), tp.last_hidden.data<float>() + tp.last_hidden.numel(),
                           other.last_hidden.data<float>()))
        << what << ": rank " << q << "'s last_hidden differs from rank 0's";
  }
  const int64_t R = one.logits.dim(0);
  for (int64_t r = 0; r < R; ++r) {
    const float* c = one.logits.data<float>() + r * V;
    const float* g = tp.logits.data<float>() + r * V;
    double err = 0, ref = 1e-6;
    for (int64_t i = 0; i < V; ++i) {
      ASSERT_TRUE(std::isfinite(g[i])) << what << ": row " << r << " logit " << i << " is " << g[i];
      err = std::max(err, std::abs(static_cast<double>(g[i]) - c[i]));
      ref = std::max(ref, std::abs(static_cast<double>(c[i])));
    }
    a->worst = std::max(a->worst, err / ref);
    if (V > 1 && TopGap(c, V) > kTieGap) {
      ++a->decided;
      a->equal += kernels::cpu::Argmax(c, V) == kernels::cpu::Argmax(g, V);
    }
  }
}

std::vector<int32_t> PagesOf(int slot, int count) {  // non-contiguous, interleaved across slots
  std::vector<int32_t> pages;
  for (int i = 0; i < count; ++i) pages.push_back(kPages - 1 - (i * kSlots + slot));
  return pages;
}

struct Seq {
  int slot = 0;
  int page_slot = -1;  // whose page table it reads (-1: its own)
  std::vector<int32_t> tokens;
};

SeqWork Work(const Seq& s, int start, int n, LogitsWanted logits) {
  SeqWork w;
  w.slot = s.slot;
  w.start_pos = start;
  w.tokens.assign(s.tokens.begin() + start, s.tokens.begin() + start + n);
  w.kv_pages = PagesOf(s.page_slot >= 0 ? s.page_slot : s.slot, (start + n + kPageSize - 1) / kPageSize);
  w.logits = logits;
  return w;
}

SeqWork Decode(const Seq& s) { return Work(s, static_cast<int>(s.tokens.size()) - 1, 1, LogitsWanted::kLast); }

// Logits: chunked prefill, a chunk with every row's logits, decode steps (graph-captured when
// graphs are on), a slot reused, a forked slot.
void LogitScenario(Runners& r, Agreement* a) {
  const int64_t V = r.vocab;
  auto step = [&](const StepPlan& plan, const std::string& what) -> StepOutput {
    const Outputs o = RunAll(r, plan);
    CompareLogits(o, V, a, what);
    return o.one.ok() ? *o.one : StepOutput{};
  };
  auto greedy = [&](const StepOutput& o, int row) { return kernels::cpu::Argmax(o.logits.data<float>() + row * V, V); };
  uint32_t x = 4242;
  auto next_id = [&] { x = x * 1664525u + 1013904223u; return static_cast<int32_t>((x >> 8) % V); };
  std::vector<Seq> seqs(3);
  const int prompt_len[3] = {5, 37, 1};
  for (int s = 0; s < 3; ++s) {
    seqs[s].slot = s == 2 ? 3 : s;
    for (int i = 0; i < prompt_len[s]; ++i) seqs[s].tokens.push_back(next_id());
  }
  StepPlan plan;
  plan.seqs = {Work(seqs[0], 0, 5, LogitsWanted::kLast), Work(seqs[1], 0, 20, LogitsWanted::kNone),
               Work(seqs[2], 0, 1, LogitsWanted::kAll)};
  StepOutput out = step(plan, "prefill step");
  if (!out.logits.defined()) return;
  seqs[0].tokens.push_back(greedy(out, 0));
  seqs[2].tokens.push_back(greedy(out, 1));
  plan.seqs = {Work(seqs[0], 5, 1, LogitsWanted::kLast), Work(seqs[1], 20, 17, LogitsWanted::kAll),
               Work(seqs[2], 1, 1, LogitsWanted::kLast)};
  out = step(plan, "chunk + decode step");
  if (!out.logits.defined()) return;
  seqs[0].tokens.push_back(greedy(out, 0));
  seqs[1].tokens.push_back(greedy(out, 17));
  seqs[2].tokens.push_back(greedy(out, 18));
  for (int t = 0; t < 16; ++t) {
    plan.seqs.clear();
    for (const Seq& s : seqs) plan.seqs.push_back(Decode(s));
    out = step(plan, "decode step " + std::to_string(t));
    if (!out.logits.defined()) return;
    for (int s = 0; s < 3; ++s) seqs[s].tokens.push_back(greedy(out, s));
    if (t == 6) {  // seq 0 ends; a new sequence takes its slot
      seqs[0].tokens = {next_id(), next_id(), next_id()};
      plan.seqs = {Work(seqs[0], 0, 3, LogitsWanted::kLast)};
      out = step(plan, "slot reuse prefill");
      if (!out.logits.defined()) return;
      seqs[0].tokens.push_back(greedy(out, 0));
    }
  }
  Seq fork = seqs[1];
  fork.slot = 2;
  fork.page_slot = 1;
  plan.copies = {{1, 2}};
  plan.seqs = {Decode(fork)};
  step(plan, "forked slot decode");
}

// Row s's sampling at decode step t: greedy, candidates (top-k with min-p / top-p / penalties /
// banned / bias), and on even steps rows that take the gathered whole rows (temperature alone;
// logprobs).
RowSampling SamplingOf(int s, int t, int64_t V, const std::vector<int32_t>& history) {
  RowSampling r;
  r.uniform = std::fmod(0.137 + 0.618033988749895 * (t * 7 + s * 3), 1.0);
  switch (s) {
    case 0: r.temperature = 0.0f; break;
    case 1: r.temperature = 0.8f; r.top_k = 20; r.min_p = 0.02f; break;
    case 2: r.temperature = 1.0f; r.top_k = 50; r.top_p = 0.9f; break;
    case 3:
      r.temperature = 0.0f;
      r.repetition_penalty = 1.2f;
      r.presence_penalty = 0.5f;
      r.banned = {static_cast<int32_t>(V / 2), static_cast<int32_t>(V - 1)};
      r.bias = {{3, 1.0f}, {static_cast<int32_t>(V - 2), -1.0f}};
      for (const int32_t id : history) {
        if (std::find(r.history_ids.begin(), r.history_ids.end(), id) != r.history_ids.end()) continue;
        r.history_ids.push_back(id);
        r.history_output_counts.push_back(1);
      }
      break;
    // Even steps: rows that need the gathered whole rows (so the whole step takes them); odd
    // steps: candidates again.
    case 4:
      r.temperature = t % 2 == 0 ? 0.9f : 0.6f;  // even: no truncation
      r.top_k = t % 2 == 0 ? 0 : 5;
      break;
    default:
      r.temperature = 0.0f;
      r.num_logprobs = t % 2 == 0 ? 3 : -1;  // even: logprobs
      break;
  }
  return r;
}

// Sampling on the device: each step first "peeks" at every seq's logits through a forked slot
// (its GDN state copied to a spare slot, reading the seq's pages; the real step then rewrites the
// same KV position with the same values), then samples the real step on TP=1 and on both ranks.
void SamplingScenario(Runners& r, Agreement* a) {
  const int64_t V = r.vocab;
  constexpr int kSeqs = 6;
  std::vector<Seq> seqs(kSeqs);
  uint32_t x = 777;
  for (int s = 0; s < kSeqs; ++s) {
    seqs[s].slot = s;
    for (int i = 0; i < 4 + 3 * s; ++i) {
      x = x * 1664525u + 1013904223u;
      seqs[s].tokens.push_back(static_cast<int32_t>((x >> 8) % V));
    }
  }
  StepPlan prefill;
  for (const Seq& s : seqs) prefill.seqs.push_back(Work(s, 0, static_cast<int>(s.tokens.size()) - 1, LogitsWanted::kNone));
  const Outputs p = RunAll(r, prefill);
  ASSERT_TRUE(p.one.ok()) << p.one.status();
  for (const auto& q : p.ranks) ASSERT_TRUE(q.ok()) << q.status();
  for (int t = 0; t < 12; ++t) {
    // The peek: seqs 0..1 on spare slots 6..7, then 2..3, then 4..5 (two spare slots).
    std::vector<std::vector<float>> peek(kSeqs);
    for (int b = 0; b < kSeqs; b += 2) {
      StepPlan plan;
      for (int s = b; s < b + 2; ++s) {
        Seq fork = seqs[s];
        fork.slot = 6 + (s - b);
        fork.page_slot = s;
        plan.copies.push_back({seqs[s].slot, fork.slot});
        plan.seqs.push_back(Decode(fork));
      }
      const Outputs o = RunAll(r, plan);
      CompareLogits(o, V, a, "peek " + std::to_string(t));
      if (!o.one.ok()) return;
      for (int s = b; s < b + 2; ++s) {
        const float* row = o.one->logits.data<float>() + (s - b) * V;
        peek[s].assign(row, row + V);
      }
    }
    StepPlan plan;
    for (int s = 0; s < kSeqs; ++s) {
      plan.seqs.push_back(Decode(seqs[s]));
      plan.sampling.push_back(SamplingOf(s, t, V, seqs[s].tokens));
    }
    const Outputs o = RunAll(r, plan);
    ASSERT_TRUE(o.one.ok()) << o.one.status();
    for (const auto& q : o.ranks) ASSERT_TRUE(q.ok()) << q.status();
    ASSERT_EQ(o.one->sampled.size(), static_cast<size_t>(kSeqs));
    for (size_t q = 0; q < o.ranks.size(); ++q) {
      ASSERT_EQ(o.ranks[q]->sampled.size(), static_cast<size_t>(kSeqs));
      for (int s = 0; s < kSeqs; ++s) {
        const SampledRow& mine = o.ranks[q]->sampled[s];
        const SampledRow& first = o.ranks[0]->sampled[s];
        EXPECT_EQ(mine.status, SampledRow::kDone) << "step " << t << " row " << s << " rank " << q;
        EXPECT_EQ(mine.id, first.id) << "step " << t << " row " << s << ": the ranks drew different ids";
      }
    }
    for (int s = 0; s < kSeqs; ++s) {
      const RowSampling& rs = plan.sampling[s];
      const SampledRow& one = o.one->sampled[s];
      const SampledRow& tp = o.ranks[0]->sampled[s];
      ASSERT_EQ(one.status, SampledRow::kDone) << "TP=1 left row " << s << " to the host";
      if (rs.temperature < kSplitGreedyTemperature) {
        if (rs.history_ids.empty() && rs.bias.empty() && TopGap(peek[s].data(), V) > kTieGap) {
          EXPECT_EQ(one.id, kernels::cpu::Argmax(peek[s].data(), V)) << "TP=1's greedy draw vs its own logits";
          ++a->decided;
          a->equal += tp.id == one.id;
        }
        if (rs.num_logprobs >= 0) {
          EXPECT_NEAR(tp.logprob, one.logprob, 0.05) << "step " << t << " row " << s;
          EXPECT_EQ(tp.top_logprobs.size(), one.top_logprobs.size());
        }
      } else {
        ++a->sampled;
        a->sampled_equal += tp.id == one.id;
      }
      seqs[s].tokens.push_back(one.id);  // both sides continue with TP=1's token
    }
  }
}

class TensorParallelVsOne : public ::testing::Test {
 public:
  TensorParallelVsOne(std::string dir, bool graphs) : dir_(std::move(dir)), graphs_(graphs) {}
  void TestBody() override {
    Runners r;
    const absl::Status loaded = LoadRunners(dir_, graphs_, 2, &r);
    ASSERT_TRUE(loaded.ok()) << loaded;
    Agreement logits, sampling;
    LogitScenario(r, &logits);
    SamplingScenario(r, &sampling);
    std::printf("[tp1gpu] %s graphs=%d: TP=2 vs TP=1 max|err|/max|logit| %.3g (peeks %.3g), greedy %d/%d + %d/%d "
                "decided rows, sampled rows drawing TP=1's id %d/%d\n",
                dir_.c_str(), graphs_ ? 1 : 0, logits.worst, sampling.worst, logits.equal, logits.decided,
                sampling.equal, sampling.decided, sampling.sampled_equal, sampling.sampled);
    EXPECT_LE(std::max(logits.worst, sampling.worst), kLogitTolerance);
    EXPECT_EQ(logits.equal, logits.decided);
    EXPECT_EQ(sampling.equal, sampling.decided);
    EXPECT_GT(logits.decided, 0) << "no decided rows: the comparison checked nothing";
    EXPECT_GT(sampling.sampled, 0);
    // Same uniform, logits within the tolerance: a different token only where the uniform falls
    // within the logits' error of a boundary of the cumulative distribution.
    EXPECT_GE(sampling.sampled_equal, 0.85 * sampling.sampled);
  }

 private:
  std::string dir_;
  bool graphs_;
};

// The split sampler alone: logits [R, V] on the device sampled whole (TP=1's path) and as W
// slices (each slice's candidates, the gathered candidate rows sampled): the same ids, exactly.
TEST(SplitVocabSamplerOnGpu, CandidateRowsDrawTheWholeRowsIds) {
  constexpr int R = 48;
  for (const int V : {4096, 4093, 151}) {
    for (const int W : {2, 3, 4}) {
      SCOPED_TRACE(testing::Message() << "vocab " << V << " world " << W);
      std::mt19937 rng(static_cast<uint32_t>(V * 10 + W));
      std::normal_distribution<float> n(0.0f, 3.0f);
      std::vector<float> logits(static_cast<size_t>(R) * V);
      for (float& v : logits) v = std::round(n(rng) * 8.0f) / 8.0f;  // ties, across slices too
      std::vector<RowSampling> rows;
      for (int r = 0; r < R; ++r) {
        RowSampling s = SamplingOf(r % 4, r, V, {1, 2, 3, static_cast<int32_t>(V - 3)});
        if (r % 4 == 1) s.top_k = 1 + r % 30;
        s.uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
        if (s.top_k >= V) s.top_k = V / 2;
        rows.push_back(s);
      }
      const SplitSamplingPlan plan = PlanSplitSampling(rows, V);
      ASSERT_TRUE(plan.candidates);
      auto sampler = cuda::DeviceSampler::Create(R, std::max<int64_t>(V, int64_t{W} * kMaxSplitCandidates));
      ASSERT_TRUE(sampler.ok()) << sampler.status();
      cuda::DeviceSampler& ds = **sampler;
      cudaStream_t stream = nullptr;
      ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
      auto whole = kernels::cuda::DeviceBuffer<float>::FromHost(logits);
      ASSERT_TRUE(whole.ok()) << whole.status();
      ASSERT_TRUE(ds.Upload(rows, stream).ok());
      ASSERT_TRUE(ds.Sample(whole->data(), V, nullptr, stream).ok());
      ASSERT_TRUE(ds.EnqueueResults(stream).ok());
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const std::vector<SampledRow> expected = ds.Results();
      // Each simulated rank's slice, then the gather (rank-major blocks of rows * 2k floats).
      ASSERT_TRUE(ds.ReserveCandidates(W, plan.k).ok());
      const size_t block = static_cast<size_t>(R) * 2 * static_cast<size_t>(plan.k);
      std::vector<kernels::cuda::DeviceBuffer<float>> slices;
      for (int q = 0; q < W; ++q) {
        const Range part = ShardPlan{q, W}.Part(V);
        const int Vq = static_cast<int>(part.second - part.first);
        std::vector<float> host(static_cast<size_t>(R) * Vq);
        for (int r = 0; r < R; ++r) {
          std::copy_n(logits.begin() + static_cast<int64_t>(r) * V + part.first, Vq, host.begin() + static_cast<int64_t>(r) * Vq);
        }
        auto slice = kernels::cuda::DeviceBuffer<float>::FromHost(host);
        ASSERT_TRUE(slice.ok()) << slice.status();
        std::vector<RowSampling> local;
        for (const RowSampling& row : rows) local.push_back(RestrictToSlice(row, part));
        ASSERT_TRUE(ds.Upload(local, stream).ok());
        ASSERT_TRUE(ds.SelectCandidates(slice->data(), Vq, static_cast<int>(part.first), plan.k, stream).ok());
        ASSERT_EQ(cudaMemcpyAsync(ds.gathered_candidates() + static_cast<size_t>(q) * block, ds.local_candidates(),
                                  block * sizeof(float), cudaMemcpyDeviceToDevice, stream),
                  cudaSuccess);
        slices.push_back(std::move(*slice));
      }
      std::vector<RowSampling> merged;
      for (const RowSampling& row : rows) merged.push_back(ForCandidateRow(row));
      ASSERT_TRUE(ds.Upload(merged, stream).ok());
      ASSERT_TRUE(ds.SampleCandidates(W, plan.k, stream).ok());
      ASSERT_TRUE(ds.EnqueueResults(stream).ok());
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const std::vector<SampledRow> got = ds.Results();
      ASSERT_EQ(got.size(), expected.size());
      for (int r = 0; r < R; ++r) {
        EXPECT_EQ(expected[r].status, SampledRow::kDone) << "row " << r;
        EXPECT_EQ(got[r].status, expected[r].status) << "row " << r;
        EXPECT_EQ(got[r].id, expected[r].id) << "row " << r << " (top_k " << rows[r].top_k << ")";
      }
      cudaStreamDestroy(stream);
    }
  }
}

void RegisterModel(const std::string& name, const std::string& dir) {
  for (const bool graphs : {true, false}) {
    ::testing::RegisterTest("TensorParallelVsOne", (name + (graphs ? "_graphs" : "_eager")).c_str(), nullptr, nullptr,
                            __FILE__, __LINE__, [=]() -> ::testing::Test* { return new TensorParallelVsOne(dir, graphs); });
  }
}

}  // namespace
}  // namespace sparkserve::model

int main(int argc, char** argv) {
  using namespace sparkserve;
  ::testing::InitGoogleTest(&argc, argv);
  test_support::TempDir tmp("gpu_tp");
  for (const char* recipe : {"nvfp4-mixed", "nvfp4", "fp8", "bf16"}) {
    head::DemoModelOptions o;
    o.recipe = recipe;
    o.seed = 11;
    o.progress = false;
    const std::string dir = tmp / (std::string("demo_") + recipe);
    auto r = head::WriteDemoModel(dir, o);
    if (!r.ok()) {
      std::fprintf(stderr, "demo model %s: %s\n", recipe, std::string(r.status().message()).c_str());
      return 2;
    }
    std::string name = std::string("demo_") + recipe;
    std::replace(name.begin(), name.end(), '-', '_');
    model::RegisterModel(name, dir);
  }
  // SPARKSERVE_GPU_MODELS (colon-separated model directories, e.g. the random 4B) run too.
  if (const char* extra = std::getenv("SPARKSERVE_GPU_MODELS")) {
    std::string all = extra, dir;
    int i = 0;
    for (size_t at = 0; at <= all.size(); ++at) {
      if (at == all.size() || all[at] == ':') {
        if (!dir.empty()) model::RegisterModel("extra" + std::to_string(i++), dir);
        dir.clear();
      } else {
        dir += all[at];
      }
    }
  }
  return RUN_ALL_TESTS();
}
