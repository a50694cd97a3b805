// The head's ClusterRunner against real NodeServers on loopback (in this process, Gloo over TCP):
// logits of TP = 2 and 4 equal TP = 1 on the golden fixtures, greedy output through the engine is
// the same, a second start ships no tensor bytes, a corrupted cached blob is fetched again (and only
// it), a lost node fails the step at once and the head re-syncs by itself when the node is back,
// a TP that does not divide the heads is refused naming the config field, and the NCCL join
// protocol (the head's unique id to every node, set-up errors that stop the retries) works with a
// stand-in NCCL.
#include "engine/cluster/cluster_runner.h"

#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "engine/cluster/cluster_setup.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "node/node_server.h"
#include "tests/unit/model/golden_fixture.h"
#include "tests/unit/temp_dir.h"

namespace sparkserve::engine::cluster {
namespace {

using ::testing::HasSubstr;
using model::testing::GoldenDir;
using model::testing::LoadGolden;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "cluster-test-token";

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

model::RunnerOptions SmallRunner() {
  model::RunnerOptions o;
  o.backend = model::Backend::kCpu;
  o.max_batch = 4;
  o.max_seq_len = 64;
  o.max_step_tokens = 64;
  return o;
}

// `count` nodes on 127.0.0.1, each with its own cache directory (kept across restarts).
class Nodes {
 public:
  explicit Nodes(int count, std::shared_ptr<core::NcclGroups> nccl = nullptr)
      : dir_("cluster_nodes"), nccl_(std::move(nccl)) {
    for (int i = 0; i < count; ++i) {
      ports_.push_back(0);
      servers_.push_back(nullptr);
      Start(i);
    }
  }
  void Start(int i) {
    node::NodeOptions o;
    o.host = "127.0.0.1";
    o.port = ports_[i];
    o.token = kToken;
    o.cache_dir = CacheDir(i);
    o.nccl = nccl_;
    absl::StatusOr<std::unique_ptr<node::NodeServer>> s = node::NodeServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    servers_[i] = *std::move(s);
    ports_[i] = servers_[i]->port();
  }
  void Stop(int i) { servers_[i].reset(); }
  std::filesystem::path CacheDir(int i) const { return dir_.path() / ("cache" + std::to_string(i)); }
  std::vector<std::string> Targets() const {
    std::vector<std::string> t;
    for (int p : ports_) t.push_back("127.0.0.1:" + std::to_string(p));
    return t;
  }
  node::NodeServer& server(int i) { return *servers_[i]; }

 private:
  test_support::TempDir dir_;
  std::shared_ptr<core::NcclGroups> nccl_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<node::NodeServer>> servers_;
};

ClusterOptions Options(const Nodes& nodes) {
  ClusterOptions o;
  o.nodes = nodes.Targets();
  o.token = kToken;
  o.op_timeout = milliseconds(2000);
  o.connect_timeout = milliseconds(2000);
  o.max_backoff = milliseconds(1000);
  return o;
}

struct Loaded {
  std::unique_ptr<model::ModelRunner> runner;
  ClusterRunner* cluster = nullptr;
};

Loaded LoadCluster(const std::string& fixture, const Nodes& nodes, model::RunnerOptions o = SmallRunner()) {
  Loaded out;
  absl::StatusOr<model::LoadedRunner> r = LoadRunner(GoldenDir(fixture), o, Options(nodes), &out.cluster);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return out;
  out.runner = std::move(r->runner);
  absl::Status st = out.cluster->WaitUntilServing(std::chrono::seconds(30));
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

// Logits of every position of the golden prompt, then of two decode steps after it.
std::vector<float> Score(model::ModelRunner& runner, const std::vector<int32_t>& ids) {
  std::vector<float> out;
  model::StepPlan plan;
  plan.seqs.push_back(model::testing::Seq(0, 0, ids, model::testing::Pages(0, 4), model::LogitsWanted::kAll));
  absl::StatusOr<model::StepOutput> step = runner.Run(plan);
  EXPECT_TRUE(step.ok()) << step.status();
  if (!step.ok()) return {};
  out.assign(step->logits.data<float>(), step->logits.data<float>() + step->logits.numel());
  for (int32_t i = 0; i < 2; ++i) {
    model::StepPlan decode;
    decode.seqs.push_back(model::testing::Seq(0, static_cast<int32_t>(ids.size()) + i, {ids[static_cast<size_t>(i)]},
                                              model::testing::Pages(0, 4), model::LogitsWanted::kLast));
    step = runner.Run(decode);
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) return {};
    out.insert(out.end(), step->logits.data<float>(), step->logits.data<float>() + step->logits.numel());
  }
  return out;
}

std::vector<float> ScoreOneRank(const std::string& fixture, const std::vector<int32_t>& ids) {
  absl::StatusOr<model::LoadedRunner> r = model::LoadModelRunner(GoldenDir(fixture), SmallRunner());
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? Score(*r->runner, ids) : std::vector<float>{};
}

TEST(ClusterRunner, TwoAndFourRanksEqualOneRankOnTheGoldenFixtures) {
  for (const auto& [fixture, node_counts] :
       std::vector<std::pair<std::string, std::vector<int>>>{{"text_tied", {1}}, {"vl_tied", {1, 3}}}) {
    SCOPED_TRACE(fixture);
    const std::vector<int32_t> ids = LoadGolden(fixture).ids;
    const std::vector<float> one = ScoreOneRank(fixture, ids);
    ASSERT_FALSE(one.empty());
    for (int n : node_counts) {
      SCOPED_TRACE(n + 1);
      Nodes nodes(n);
      Loaded c = LoadCluster(fixture, nodes);
      ASSERT_NE(c.runner, nullptr);
      const std::vector<float> many = Score(*c.runner, ids);
      ASSERT_EQ(many.size(), one.size());
      EXPECT_LE(model::testing::RelErr(many.data(), one.data(), one.size()), 1e-5);
      EXPECT_EQ(c.cluster->status().world, n + 1);
      for (int i = 0; i < n; ++i) EXPECT_EQ(nodes.server(i).service().state(), proto::NODE_STATE_RUNNING);
    }
  }
}

std::vector<int32_t> Greedy(std::unique_ptr<model::ModelRunner> runner, const std::vector<int32_t>& prompt) {
  EngineConfig ec;
  ec.scheduler.max_batch = 4;
  ec.scheduler.max_step_tokens = 64;
  auto engine = Engine::Create(std::move(runner), ec);
  EXPECT_TRUE(engine.ok()) << engine.status();
  (*engine)->Start();
  scheduler::Request req;
  req.prompt_ids = prompt;
  req.max_tokens = 12;
  req.sampling.temperature = 0;
  req.stop.ignore_eos = true;
  auto out = Generate(**engine, req, std::chrono::seconds(60));
  (*engine)->Shutdown();
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->front().ids : std::vector<int32_t>{};
}

TEST(ClusterRunner, GreedyOutputThroughTheEngineEqualsOneRank) {
  const std::vector<int32_t> prompt = LoadGolden("text_tied").ids;
  absl::StatusOr<model::LoadedRunner> one = model::LoadModelRunner(GoldenDir("text_tied"), SmallRunner());
  ASSERT_TRUE(one.ok());
  const std::vector<int32_t> expected = Greedy(std::move(one->runner), prompt);
  ASSERT_EQ(expected.size(), 12u);
  Nodes nodes(1);
  Loaded c = LoadCluster("text_tied", nodes);
  ASSERT_NE(c.runner, nullptr);
  EXPECT_EQ(Greedy(std::move(c.runner), prompt), expected);
}

// The blob of the largest tensor a node holds in its cache.
std::filesystem::path LargestBlob(const std::filesystem::path& cache) {
  std::filesystem::path best;
  uintmax_t size = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(cache / "blobs")) {
    if (e.is_regular_file() && e.file_size() > size) {
      size = e.file_size();
      best = e.path();
    }
  }
  return best;
}

TEST(ClusterRunner, SecondStartShipsNothingAndACorruptedBlobIsFetchedAgain) {
  Nodes nodes(1);
  uint64_t first_sent = 0;
  {
    Loaded c = LoadCluster("text_tied", nodes);
    ASSERT_NE(c.runner, nullptr);
    first_sent = c.cluster->status().shard_bytes_sent_total;
    EXPECT_GT(first_sent, 0u);
    EXPECT_EQ(c.cluster->status().shard_bytes_reused_total, 0u);
  }
  {  // a new head, the same node (its runner still loaded)
    Loaded c = LoadCluster("text_tied", nodes);
    ASSERT_NE(c.runner, nullptr);
    EXPECT_EQ(c.cluster->status().shard_bytes_sent_total, 0u);
    EXPECT_EQ(c.cluster->status().shard_bytes_reused_total, first_sent);
  }
  nodes.Stop(0);  // a restarted node: everything from its disk cache
  nodes.Start(0);
  {
    Loaded c = LoadCluster("text_tied", nodes);
    ASSERT_NE(c.runner, nullptr);
    EXPECT_EQ(c.cluster->status().shard_bytes_sent_total, 0u);
  }
  nodes.Stop(0);
  const std::filesystem::path blob = LargestBlob(nodes.CacheDir(0));
  ASSERT_FALSE(blob.empty());
  const uintmax_t blob_size = std::filesystem::file_size(blob);
  {
    std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(blob_size / 2));
    f.put('\x7f');
  }
  nodes.Start(0);
  Loaded c = LoadCluster("text_tied", nodes);
  ASSERT_NE(c.runner, nullptr);
  EXPECT_EQ(c.cluster->status().shard_bytes_sent_total, blob_size);  // that tensor, and only it
  const std::vector<int32_t> ids = LoadGolden("text_tied").ids;
  const std::vector<float> one = ScoreOneRank("text_tied", ids);
  const std::vector<float> many = Score(*c.runner, ids);
  ASSERT_EQ(many.size(), one.size());
  EXPECT_LE(model::testing::RelErr(many.data(), one.data(), one.size()), 1e-5);
}

TEST(ClusterRunner, ALostNodeFailsStepsAtOnceAndTheHeadResyncsWhenItIsBack) {
  Nodes nodes(1);
  Loaded c = LoadCluster("text_tied", nodes);
  ASSERT_NE(c.runner, nullptr);
  const std::vector<int32_t> ids = LoadGolden("text_tied").ids;
  const std::vector<float> before = Score(*c.runner, ids);
  ASSERT_FALSE(before.empty());
  nodes.Stop(0);
  model::StepPlan plan;
  plan.seqs.push_back(model::testing::Seq(1, 0, ids, model::testing::Pages(4, 4), model::LogitsWanted::kLast));
  const auto t0 = Clock::now();
  absl::StatusOr<model::StepOutput> failed = c.runner->Run(plan);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(Since(t0), 5.0);
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("127.0.0.1"));
  const ClusterStatus degraded = c.cluster->status();
  EXPECT_FALSE(degraded.serving);
  EXPECT_THAT(degraded.detail, HasSubstr("degraded"));
  // While degraded, steps fail at once.
  const auto t1 = Clock::now();
  EXPECT_EQ(c.runner->Run(plan).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(Since(t1), 0.5);
  // The node comes back on its port: the head re-syncs by itself.
  nodes.Start(0);
  const auto t2 = Clock::now();
  ASSERT_TRUE(c.cluster->WaitUntilServing(std::chrono::seconds(30)).ok()) << c.cluster->status().detail;
  EXPECT_LT(Since(t2), 30.0);
  EXPECT_EQ(c.cluster->status().syncs_total, 2);
  const std::vector<float> after = Score(*c.runner, ids);
  ASSERT_EQ(after.size(), before.size());
  EXPECT_LE(model::testing::RelErr(after.data(), before.data(), before.size()), 1e-6);
}

TEST(ClusterRunner, ATensorParallelSizeThatDoesNotDivideTheHeadsIsRefused) {
  Nodes nodes(1);
  ClusterRunner* cluster = nullptr;
  absl::StatusOr<model::LoadedRunner> r =
      LoadRunner(GoldenDir("text_untied"), SmallRunner(), Options(nodes), &cluster);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), ::testing::AllOf(HasSubstr("2 ranks"), HasSubstr("does not divide")));
}

// A stand-in for NCCL: the ranks given the same unique id meet in one in-process group (host
// buffers, as the CPU runner uses). Joining waits for every rank, as ncclCommInitRank does; a rank
// told to fail makes the others' joins fail too (as NCCL's bootstrap does).
class StandInNccl : public core::NcclGroups {
 public:
  absl::Status fail_rank_1 = absl::OkStatus();

  absl::StatusOr<std::string> NewUniqueId() override {
    std::lock_guard<std::mutex> lock(mu_);
    return fmt::format("stand-in id {}", ids_made_++);
  }
  absl::StatusOr<std::unique_ptr<core::Collective>> Join(const core::NcclOptions& o) override {
    std::unique_lock<std::mutex> lock(mu_);
    Meeting& m = meetings_[o.unique_id];
    if (!m.group) m.group = std::make_shared<core::InProcessGroup>(o.world, nullptr);
    joins_.push_back({o.unique_id, o.rank});
    if (o.rank == 1 && !fail_rank_1.ok()) {
      m.failed = true;
      cv_.notify_all();
      return fail_rank_1;
    }
    ++m.arrived;
    cv_.notify_all();
    if (!cv_.wait_for(lock, o.timeout, [&] { return m.failed || m.arrived == o.world; })) {
      return absl::DeadlineExceededError("stand-in NCCL: not every rank joined");
    }
    if (m.failed) return absl::UnavailableError("stand-in NCCL: a peer failed the join");
    return std::unique_ptr<core::Collective>(std::make_unique<Rank>(m.group, o.rank));
  }
  // (unique id, rank) of every join so far.
  std::vector<std::pair<std::string, int32_t>> joins() {
    std::lock_guard<std::mutex> lock(mu_);
    return joins_;
  }

 private:
  class Rank : public core::Collective {
   public:
    Rank(std::shared_ptr<core::InProcessGroup> g, int32_t r) : g_(std::move(g)), r_(r) {}
    int32_t rank() const override { return r_; }
    int32_t world() const override { return g_->rank(r_).world(); }
    absl::Status AllReduceSum(std::span<float> d) override { return g_->rank(r_).AllReduceSum(d); }
    absl::Status AllGather(std::span<const float> l, std::vector<float>* out) override {
      return g_->rank(r_).AllGather(l, out);
    }
    std::string transport() const override { return "stand-in nccl"; }

   private:
    std::shared_ptr<core::InProcessGroup> g_;
    int32_t r_;
  };
  struct Meeting {
    std::shared_ptr<core::InProcessGroup> group;
    int32_t arrived = 0;
    bool failed = false;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  int ids_made_ = 0;
  std::map<std::string, Meeting> meetings_;
  std::vector<std::pair<std::string, int32_t>> joins_;
};

// text_tied at TP = 2 over `nccl` with `nodes` (which use the same stand-in).
absl::StatusOr<model::LoadedRunner> LoadOverNccl(const Nodes& nodes, std::shared_ptr<StandInNccl> nccl,
                                                 ClusterRunner** cluster) {
  ClusterOptions o = Options(nodes);
  o.collective = CollectiveKind::kNccl;
  o.nccl = std::move(nccl);
  return LoadRunner(GoldenDir("text_tied"), SmallRunner(), o, cluster);
}

TEST(ClusterRunner, NcclJoinsWithTheHeadsUniqueIdAndEqualsOneRank) {
  auto nccl = std::make_shared<StandInNccl>();
  Nodes nodes(1, nccl);
  ClusterRunner* cluster = nullptr;
  absl::StatusOr<model::LoadedRunner> r = LoadOverNccl(nodes, nccl, &cluster);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->backend_description, HasSubstr("nccl"));
  ASSERT_TRUE(cluster->WaitUntilServing(std::chrono::seconds(30)).ok());
  EXPECT_THAT(cluster->status().transport, HasSubstr("stand-in nccl"));
  const std::vector<int32_t> ids = LoadGolden("text_tied").ids;
  const std::vector<float> one = ScoreOneRank("text_tied", ids);
  const std::vector<float> two = Score(*r->runner, ids);
  ASSERT_EQ(two.size(), one.size());
  EXPECT_LE(model::testing::RelErr(two.data(), one.data(), one.size()), 1e-5);
  // Both ranks joined once, with the one id the head made.
  const auto joins = nccl->joins();
  ASSERT_EQ(joins.size(), 2u);
  EXPECT_EQ(joins[0].first, joins[1].first);
  EXPECT_THAT(std::vector<int32_t>({joins[0].second, joins[1].second}), ::testing::UnorderedElementsAre(0, 1));
}

TEST(ClusterRunner, ANodesNcclSetUpErrorStopsStartUpNamingTheNode) {
  auto nccl = std::make_shared<StandInNccl>();
  nccl->fail_rank_1 = absl::InvalidArgumentError("Duplicate GPU detected: rank 0 and rank 1 both on CUDA device 0");
  Nodes nodes(1, nccl);
  ClusterRunner* cluster = nullptr;
  absl::StatusOr<model::LoadedRunner> r = LoadOverNccl(nodes, nccl, &cluster);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto t0 = Clock::now();
  const absl::Status st = cluster->WaitUntilServing(std::chrono::seconds(30));
  EXPECT_LT(Since(t0), 15.0);  // no retries until the deadline: the set-up error is final
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()),
              ::testing::AllOf(HasSubstr(nodes.Targets()[0]), HasSubstr("Duplicate GPU detected")));
}

TEST(ClusterRunner, RealNcclWithTheCpuBackendIsRefused) {
  Nodes nodes(1);
  ClusterOptions o = Options(nodes);
  o.collective = CollectiveKind::kNccl;
  ClusterRunner* cluster = nullptr;
  absl::StatusOr<model::LoadedRunner> r = LoadRunner(GoldenDir("text_tied"), SmallRunner(), o, &cluster);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("CUDA backend"));
}

}  // namespace
}  // namespace sparkserve::engine::cluster
