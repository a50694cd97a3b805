// ClusterRunner: steps in lockstep with the nodes, failure handling and the sync thread (see
// cluster_runner.h).
#include "engine/cluster/cluster_runner.h"

#include "engine/cluster/group_join.h"
#include "engine/cluster/net_address.h"
#include "fmt/format.h"
#include "proto/lockstep.h"
#include "proto/step_plan_codec.h"
#include "spdlog/spdlog.h"

namespace sparkserve::engine::cluster {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kFirstBackoff{250};

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// Runs fn(i) for i in [0, n) on n threads; the errors, by index.
std::vector<absl::Status> ForEachNode(size_t n, const std::function<absl::Status(size_t)>& fn) {
  std::vector<absl::Status> out(n);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back([&, i] { out[i] = fn(i); });
  for (auto& t : threads) t.join();
  return out;
}

absl::Status FirstError(const std::vector<absl::Status>& errors) {
  std::string all;
  absl::StatusCode code = absl::StatusCode::kOk;
  for (const absl::Status& e : errors) {
    if (e.ok()) continue;
    if (code == absl::StatusCode::kOk) code = e.code();
    all += fmt::format("{}{}", all.empty() ? "" : "; ", std::string(e.message()));
  }
  return code == absl::StatusCode::kOk ? absl::OkStatus() : absl::Status(code, all);
}

// A failure that retrying cannot fix: the token, the build, a shard the node cannot build.
bool IsPermanent(const absl::Status& st) {
  return absl::IsUnauthenticated(st) || absl::IsPermissionDenied(st) || absl::IsInvalidArgument(st) ||
         absl::IsUnimplemented(st) ||
         (absl::IsFailedPrecondition(st) && std::string(st.message()).find("mismatch") != std::string::npos);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterRunner>> ClusterRunner::Create(
    std::unique_ptr<core::ReplaceableCollective> group, std::unique_ptr<model::ModelRunner> local,
    const model::RunnerOptions& runner_options, std::unique_ptr<ShardSource> shards, ClusterOptions options) {
  if (options.nodes.empty()) return absl::InvalidArgumentError("a cluster needs at least one node");
  const int32_t world = static_cast<int32_t>(options.nodes.size()) + 1;
  if (!group || group->rank() != 0 || group->world() != world) {
    return absl::InvalidArgumentError(fmt::format("the head's group must be rank 0 of {}", world));
  }
  for (const std::string& n : options.nodes) {
    if (absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(n); !hp.ok()) {
      return absl::InvalidArgumentError(fmt::format("--nodes: {}", std::string(hp.status().message())));
    }
  }
  std::unique_ptr<ClusterRunner> r(
      new ClusterRunner(std::move(group), std::move(local), runner_options, std::move(shards), std::move(options)));
  r->sync_thread_ = std::thread([p = r.get()] { p->SyncLoop(); });
  return r;
}

ClusterRunner::ClusterRunner(std::unique_ptr<core::ReplaceableCollective> group,
                             std::unique_ptr<model::ModelRunner> local, const model::RunnerOptions& runner_options,
                             std::unique_ptr<ShardSource> shards, ClusterOptions options)
    : group_(std::move(group)),
      local_(std::move(local)),
      runner_options_(runner_options),
      shards_(std::move(shards)),
      options_(std::move(options)) {}

ClusterRunner::~ClusterRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (sync_thread_.joinable()) sync_thread_.join();
  std::lock_guard<std::mutex> step(step_mu_);
  (void)group_->Replace(nullptr);
  for (auto& link : links_) {
    (void)link->Shutdown("the head is exiting", /*exit_process=*/false, std::chrono::milliseconds(1000));
    link->Close();
  }
  links_.clear();
}

// ---------------------------------------------------------------------------------------------
// Steps

absl::StatusOr<model::StepOutput> ClusterRunner::Run(const model::StepPlan& plan) {
  std::lock_guard<std::mutex> step(step_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kServing) {
      return absl::UnavailableError(fmt::format("the tensor-parallel group is not serving: {}", detail_));
    }
  }
  const auto t0 = Clock::now();
  const std::string bytes = proto::EncodeStepPlan(plan);
  const uint64_t index = step_index_++;
  for (auto& link : links_) {
    if (absl::Status st = link->SendStep(index, bytes); !st.ok()) return FailStep(index, std::string(st.message()));
  }
  const auto t1 = Clock::now();
  absl::StatusOr<model::StepOutput> out = local_->Run(plan);
  if (!out.ok()) return FailStep(index, fmt::format("on the head: {}", std::string(out.status().message())));
  const auto t2 = Clock::now();
  if (absl::Status st = proto::CheckLockstep(*group_, index, proto::StepDigest(index, bytes, *out)); !st.ok()) {
    return FailStep(index, std::string(st.message()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++steps_;
  control_s_ += std::chrono::duration<double>(t1 - t0).count();
  lockstep_s_ += std::chrono::duration<double>(Clock::now() - t2).count();
  return out;
}

absl::Status ClusterRunner::FailStep(uint64_t index, const std::string& what) {
  (void)group_->Replace(nullptr);  // the other ranks' pending operations fail at once
  // A node that died usually tells us through its stream at the same moment: wait a little for it,
  // so that the error names the node rather than a socket.
  std::string lost;
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, std::chrono::milliseconds(300), [&] { return !lost_.empty(); });
    lost = lost_;
  }
  const std::string why =
      lost.empty() ? fmt::format("step {} failed {}", index, what) : fmt::format("{} (step {}: {})", lost, index, what);
  MarkLost(why);
  return absl::UnavailableError(fmt::format(
      "the tensor-parallel group failed: {}; the head is re-syncing its nodes and will serve again then", why));
}

void ClusterRunner::MarkLost(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;  // the head is ending the sessions itself
    if (lost_.empty()) lost_ = why;
    if (state_ != State::kServing) return;
    state_ = State::kDegraded;
    detail_ = fmt::format("degraded: {}", why);
    spdlog::error("cluster: {}", detail_);
  }
  changed_.notify_all();
}

// ---------------------------------------------------------------------------------------------
// Syncing

void ClusterRunner::SyncLoop() {
  std::chrono::milliseconds backoff = kFirstBackoff;
  std::string last_logged;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    changed_.wait(lock, [&] { return stopping_ || state_ != State::kServing; });
    if (stopping_) break;
    const bool recovering = state_ == State::kDegraded;
    lock.unlock();
    TearDown();
    const auto started = Clock::now();
    absl::Status st = SyncOnce();
    lock.lock();
    if (stopping_) break;
    if (st.ok()) {
      state_ = State::kServing;
      detail_ = "serving";
      lost_.clear();
      ++syncs_;
      backoff = kFirstBackoff;
      last_logged.clear();
      spdlog::info("cluster: {} ranks serving ({}) after {:.2f} s of syncing{}", world(), transport_,
                   std::chrono::duration<double>(Clock::now() - started).count(),
                   recovering ? " (recovered)" : "");
      changed_.notify_all();
      continue;
    }
    const std::string message(st.message());
    detail_ = fmt::format("{}: {}", recovering ? "degraded, re-syncing" : "waiting for the nodes", message);
    if (syncs_ == 0 && IsPermanent(st)) permanent_ = st;
    if (message != last_logged) spdlog::warn("cluster: sync failed (retrying in {} ms): {}", backoff.count(), message);
    last_logged = message;
    changed_.notify_all();
    changed_.wait_for(lock, backoff, [&] { return stopping_; });
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void ClusterRunner::TearDown() {
  std::vector<std::unique_ptr<NodeClient>> old;
  {
    std::lock_guard<std::mutex> step(step_mu_);
    (void)group_->Replace(nullptr);
    old = std::move(links_);
    links_.clear();
  }
  for (auto& link : old) link->Close();  // each node releases the session at once
}

absl::StatusOr<proto::ShardOffer> ClusterRunner::Manifest(int32_t rank, std::optional<proto::RankShard>* shard) {
  {
    std::lock_guard<std::mutex> lock(manifests_mu_);
    if (auto it = manifests_.find(rank); it != manifests_.end()) return it->second;
  }
  absl::StatusOr<proto::RankShard> cut = shards_->Shard(rank, world());
  if (!cut.ok()) return cut.status();
  proto::ShardOffer offer;
  offer.set_tp_rank(rank);
  offer.set_tp_world_size(world());
  offer.set_model_config_json(cut->config_json);
  offer.set_calibration(cut->calibration);
  *offer.mutable_runner() = proto::RunnerSettingsToWire(runner_options_);
  for (const proto::NamedTensor& t : cut->tensors) *offer.add_tensors() = proto::DescribeTensor(t);
  *shard = *std::move(cut);
  std::lock_guard<std::mutex> lock(manifests_mu_);
  manifests_[rank] = offer;
  return offer;
}

absl::Status ClusterRunner::SyncOnce() {
  const size_t n = options_.nodes.size();
  auto attempt_lost = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::unique_ptr<NodeClient>> links(n);
  auto close_all = [&] {
    for (auto& l : links) {
      if (l) l->Close();
    }
  };

  // 1. Handshake and attach every node.
  absl::Status st = FirstError(ForEachNode(n, [&](size_t i) -> absl::Status {
    ConnectOptions co;
    co.token = options_.token;
    co.tls_ca_pem = options_.tls_ca_pem;
    co.timeout = options_.connect_timeout;
    co.tp_rank = static_cast<int32_t>(i) + 1;
    co.tp_world_size = world();
    absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(options_.nodes[i], co);
    if (!c.ok()) return c.status();
    links[i] = *std::move(c);
    return links[i]->Attach([this, attempt_lost](const std::string& why) {
      attempt_lost->store(true);
      MarkLost(why);
    });
  }));
  if (!st.ok()) {
    close_all();
    return st;
  }

  // 2. Every node's shard: offered by digest, only what it lacks is sent.
  st = FirstError(ForEachNode(n, [&](size_t i) -> absl::Status {
    const int32_t rank = static_cast<int32_t>(i) + 1;
    std::optional<proto::RankShard> shard;
    absl::StatusOr<proto::ShardOffer> offer = Manifest(rank, &shard);
    if (!offer.ok()) return offer.status();
    auto fetch = [&](uint32_t index) -> absl::StatusOr<core::Tensor> {
      if (!shard) {
        absl::StatusOr<proto::RankShard> cut = shards_->Shard(rank, world());
        if (!cut.ok()) return cut.status();
        shard = *std::move(cut);
      }
      if (index >= shard->tensors.size()) return absl::InternalError("the shard changed between two cuts");
      return shard->tensors[index].tensor;
    };
    const auto t0 = Clock::now();
    absl::StatusOr<ShardTransfer> moved = links[i]->LoadShard(*offer, fetch, options_.load_timeout);
    if (!moved.ok()) return moved.status();
    bytes_sent_ += moved->bytes_sent;
    bytes_reused_ += moved->bytes_reused;
    spdlog::info("cluster: node {} (rank {}) has its shard: {:.1f} MiB sent, {:.1f} MiB reused, runner {} built in "
                 "{:.2f} s ({:.2f} s in all)",
                 options_.nodes[i], rank, MiB(moved->bytes_sent), MiB(moved->bytes_reused),
                 moved->loaded.backend_description(), moved->loaded.build_seconds(),
                 std::chrono::duration<double>(Clock::now() - t0).count());
    return absl::OkStatus();
  }));
  if (!st.ok()) {
    close_all();
    return st;
  }

  // 3. The group: every node binds the address the head reached it at; the head, its own address
  // on the route to the first node.
  std::vector<GroupMember> members;
  GroupOptions go;
  go.kind = options_.collective;
  go.head_device = options_.device;
  go.nccl = options_.nccl;
  go.op_timeout = options_.op_timeout;
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(options_.nodes[i]);
    absl::StatusOr<std::string> ip = hp.ok() ? ResolveHost(hp->first) : hp.status();
    if (!ip.ok()) {
      close_all();
      return absl::UnavailableError(fmt::format("node {}: {}", options_.nodes[i], std::string(ip.status().message())));
    }
    members.push_back({links[i].get(), static_cast<int32_t>(i) + 1, *ip});
  }
  absl::StatusOr<std::string> head_host = LocalAddressFacing(members.front().host);
  if (!head_host.ok()) {
    close_all();
    return head_host.status();
  }
  go.head_host = *head_host;
  absl::StatusOr<std::unique_ptr<core::Collective>> joined = JoinGroup(members, go);
  if (!joined.ok()) {
    close_all();
    return joined.status();
  }
  // 4. Install, unless a node was lost meanwhile.
  std::lock_guard<std::mutex> step(step_mu_);
  if (attempt_lost->load()) {
    close_all();
    return absl::UnavailableError("a node was lost while syncing");
  }
  const std::string transport = (*joined)->transport();
  if (absl::Status r = group_->Replace(*std::move(joined)); !r.ok()) {
    close_all();
    return r;
  }
  links_ = std::move(links);
  std::lock_guard<std::mutex> lock(mu_);
  transport_ = transport;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Status

ClusterStatus ClusterRunner::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  ClusterStatus s;
  s.serving = state_ == State::kServing;
  s.detail = s.serving ? fmt::format("serving: {} ranks ({})", world(), transport_) : detail_;
  s.world = world();
  s.transport = transport_;
  s.shard_bytes_sent_total = bytes_sent_.load();
  s.shard_bytes_reused_total = bytes_reused_.load();
  s.syncs_total = syncs_;
  s.steps_total = steps_;
  s.control_seconds_total = control_s_;
  s.lockstep_seconds_total = lockstep_s_;
  return s;
}

absl::Status ClusterRunner::WaitUntilServing(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool done = changed_.wait_for(lock, timeout, [&] { return state_ == State::kServing || !permanent_.ok(); });
  if (state_ == State::kServing) return absl::OkStatus();
  if (!permanent_.ok()) return permanent_;
  (void)done;
  return absl::DeadlineExceededError(
      fmt::format("the nodes did not sync within {:.0f} s: {}", std::chrono::duration<double>(timeout).count(), detail_));
}

}  // namespace sparkserve::engine::cluster
