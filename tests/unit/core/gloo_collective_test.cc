// GlooCollective on loopback: ranks as threads (sums and gathers against sums computed here, every
// rank's bits identical), a hung peer (the operation fails within the timeout, and the group stays
// failed), a killed peer process (the operation fails at once), joins that cannot complete.
#include "core/gloo_collective.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"

namespace sparkserve::core {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Every rank joins through one in-memory store on its own thread, then runs `fn`.
template <typename Fn>
void RunRanks(int32_t world, GlooOptions base, Fn fn) {
  InMemoryRendezvousStore store;
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions o = base;
      o.rank = r;
      o.world = world;
      absl::StatusOr<std::unique_ptr<GlooCollective>> c = GlooCollective::Create(o, store);
      ASSERT_TRUE(c.ok()) << c.status();
      fn(r, **c);
    });
  }
  for (auto& t : threads) t.join();
}

// Rank r's element i: distinct, non-integer values, so that a wrong order or a missing rank shows.
float Value(int32_t r, size_t i) { return static_cast<float>(r + 1) * 0.37f + static_cast<float>(i % 1013) * 0.011f; }

TEST(GlooCollective, SumsAndGathersEqualOnEveryRank) {
  for (int32_t world : {2, 3, 4}) {
    SCOPED_TRACE(world);
    const size_t n = 3001;  // not a multiple of the ring's chunks
    std::vector<std::vector<float>> sums(world), gathers(world);
    RunRanks(world, GlooOptions{}, [&](int32_t r, Collective& c) {
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.world(), world);
      std::vector<float> data(n);
      for (size_t i = 0; i < n; ++i) data[i] = Value(r, i);
      ASSERT_TRUE(c.AllReduceSum(data).ok());
      sums[r] = data;
      // Lengths differ per rank (rank 1 gives none).
      std::vector<float> local(r == 1 ? 0 : static_cast<size_t>(r + 2));
      for (size_t i = 0; i < local.size(); ++i) local[i] = static_cast<float>(100 * r + i);
      ASSERT_TRUE(c.AllGather(local, &gathers[r]).ok());
    });
    for (size_t i = 0; i < n; ++i) {
      double expected = 0;
      for (int32_t r = 0; r < world; ++r) expected += Value(r, i);
      ASSERT_NEAR(sums[0][i], expected, 1e-5 * std::abs(expected) + 1e-6) << i;
    }
    std::vector<float> concat;
    for (int32_t r = 0; r < world; ++r) {
      for (int i = 0; i < (r == 1 ? 0 : r + 2); ++i) concat.push_back(static_cast<float>(100 * r + i));
    }
    for (int32_t r = 0; r < world; ++r) {
      EXPECT_EQ(std::memcmp(sums[r].data(), sums[0].data(), n * sizeof(float)), 0) << "rank " << r << " differs";
      EXPECT_EQ(gathers[r], concat) << "rank " << r;
    }
  }
}

TEST(GlooCollective, SixteenMegabytesSumExactly) {
  const size_t n = (16 << 20) / sizeof(float);
  std::vector<float> first;
  RunRanks(2, GlooOptions{}, [&](int32_t r, Collective& c) {
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>((i * 7 + static_cast<size_t>(r)) % 4096);
    ASSERT_TRUE(c.AllReduceSum(data).ok());
    for (size_t i = 0; i < n; i += 4099) {
      ASSERT_EQ(data[i], static_cast<float>((i * 7) % 4096 + (i * 7 + 1) % 4096)) << i;
    }
    if (r == 0) first = data;
  });
  EXPECT_EQ(first.size(), n);
}

TEST(GlooCollective, HungPeerFailsWithinTheTimeoutAndTheGroupStaysFailed) {
  GlooOptions o;
  o.timeout = milliseconds(500);
  std::promise<void> rank0_done;
  RunRanks(2, o, [&](int32_t r, Collective& c) {
    if (r == 1) {  // joins, then never takes part (a hung process)
      rank0_done.get_future().wait();
      return;
    }
    std::vector<float> data(16, 1.0f);
    const auto t0 = Clock::now();
    absl::Status st = c.AllReduceSum(data);
    const double took = Since(t0);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("all-reduce"));
    EXPECT_GE(took, 0.4);
    EXPECT_LT(took, 3.0);
    const auto t1 = Clock::now();
    EXPECT_EQ(c.AllReduceSum(data).code(), absl::StatusCode::kUnavailable);  // spent: fails at once
    EXPECT_LT(Since(t1), 0.1);
    rank0_done.set_value();
  });
}

TEST(GlooCollective, JoinWithoutTheOtherRanksTimesOut) {
  InMemoryRendezvousStore store;
  GlooOptions o;
  o.rank = 0;
  o.world = 3;
  o.timeout = milliseconds(300);
  o.connect_timeout = milliseconds(300);
  const auto t0 = Clock::now();
  absl::StatusOr<std::unique_ptr<GlooCollective>> c = GlooCollective::Create(o, store);
  EXPECT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("could not join"));
  EXPECT_LT(Since(t0), 5.0);
}

TEST(GlooCollective, RefusesAnAddressPeersCannotReach) {
  InMemoryRendezvousStore store;
  GlooOptions o;
  o.world = 2;
  o.host = "0.0.0.0";
  absl::StatusOr<std::unique_ptr<GlooCollective>> c = GlooCollective::Create(o, store);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
}

// A store in a directory, for ranks in different processes: one file per key, written atomically.
class DirectoryStore : public RendezvousStore {
 public:
  explicit DirectoryStore(std::filesystem::path dir) : dir_(std::move(dir)) {}
  absl::Status Set(const std::string& key, const std::string& value) override {
    const auto tmp = dir_ / (Name(key) + ".tmp" + std::to_string(getpid()));
    std::ofstream(tmp, std::ios::binary) << value;
    std::filesystem::rename(tmp, dir_ / Name(key));
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Get(const std::string& key, milliseconds timeout) override {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      std::ifstream in(dir_ / Name(key), std::ios::binary);
      if (in) return std::string(std::istreambuf_iterator<char>(in), {});
      std::this_thread::sleep_for(milliseconds(5));
    }
    return absl::DeadlineExceededError(key);
  }

 private:
  static std::string Name(const std::string& key) {
    std::string s;
    for (char c : key) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return "k_" + s;
  }
  std::filesystem::path dir_;
};

TEST(GlooCollective, KilledPeerProcessFailsTheOperationAtOnce) {
  test_support::TempDir dir("gloo_kill");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // rank 1: joins, sums once, then waits to be killed
    DirectoryStore store(dir.path());
    GlooOptions o;
    o.rank = 1;
    o.world = 2;
    o.timeout = milliseconds(20000);
    auto c = GlooCollective::Create(o, store);
    if (!c.ok()) _exit(3);
    std::vector<float> data(8, 2.0f);
    if (!(*c)->AllReduceSum(data).ok()) _exit(4);
    pause();
    _exit(0);
  }
  DirectoryStore store(dir.path());
  GlooOptions o;
  o.rank = 0;
  o.world = 2;
  o.timeout = milliseconds(20000);  // long: the failure must come from the dead connection, not the clock
  absl::StatusOr<std::unique_ptr<GlooCollective>> c = GlooCollective::Create(o, store);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> data(8, 1.0f);
  ASSERT_TRUE((*c)->AllReduceSum(data).ok());
  EXPECT_EQ(data[0], 3.0f);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // 16 MB to the dead peer: writes past the first hit a reset socket (SIGPIPE would kill this
  // process; the collective ignores it, so the write fails and so does the operation).
  std::vector<float> big((16 << 20) / sizeof(float), 1.0f);
  const auto t0 = Clock::now();
  absl::Status st = (*c)->AllReduceSum(big);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_LT(Since(t0), 2.0);
}

// A peer stopped in the middle of a big all-reduce (SIGSTOP) wakes up after the others closed the
// group: its pending writes hit closed sockets, and its operation must fail with an error, not
// kill it with SIGPIPE.
TEST(GlooCollective, APeerThatWakesAfterTheGroupClosedGetsAnErrorNotSigpipe) {
  for (int round = 0; round < 3; ++round) {
    test_support::TempDir dir("gloo_stop");
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      DirectoryStore store(dir.path());
      GlooOptions o;
      o.rank = 1;
      o.world = 2;
      o.timeout = milliseconds(20000);
      auto c = GlooCollective::Create(o, store);
      if (!c.ok()) _exit(3);
      std::vector<float> big((16 << 20) / sizeof(float), 1.0f);
      while ((*c)->AllReduceSum(big).ok()) {
      }
      _exit(7);  // the operation failed: what must happen
    }
    {
      DirectoryStore store(dir.path());
      GlooOptions o;
      o.rank = 0;
      o.world = 2;
      o.timeout = milliseconds(300);
      absl::StatusOr<std::unique_ptr<GlooCollective>> c = GlooCollective::Create(o, store);
      ASSERT_TRUE(c.ok()) << c.status();
      std::vector<float> big((16 << 20) / sizeof(float), 1.0f);
      ASSERT_TRUE((*c)->AllReduceSum(big).ok());
      std::thread stopper([child] {
        std::this_thread::sleep_for(milliseconds(3));
        kill(child, SIGSTOP);
      });
      while ((*c)->AllReduceSum(big).ok()) {
      }
      stopper.join();
    }  // the group closes its sockets
    kill(child, SIGCONT);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_FALSE(WIFSIGNALED(status)) << "round " << round << ": the peer died of signal " << WTERMSIG(status);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << "round " << round;
  }
}

TEST(ReplaceableCollective, ForwardsToItsBackendAndFailsWithoutOne) {
  ReplaceableCollective c(0, 1);
  std::vector<float> data{1.0f};
  EXPECT_EQ(c.AllReduceSum(data).code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(c.transport(), HasSubstr("not joined"));
  EXPECT_TRUE(c.Replace(std::make_unique<SingleRankCollective>()).ok());
  EXPECT_TRUE(c.AllReduceSum(data).ok());
  std::vector<float> out;
  EXPECT_TRUE(c.AllGather(data, &out).ok());
  EXPECT_EQ(out, data);
  ReplaceableCollective two(1, 2);
  EXPECT_EQ(two.Replace(std::make_unique<SingleRankCollective>()).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sparkserve::core
