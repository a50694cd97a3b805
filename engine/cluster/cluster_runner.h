// ClusterRunner: the head's ModelRunner for tensor parallelism across machines. It drives rank 0's
// own runner and the sparkserve-node daemons (ranks 1..N-1) so that the Engine sees one runner:
// each step's plan goes to every node on its session stream, all ranks run it, and all compare a
// digest of what they ran (proto/lockstep.h). A background thread syncs the nodes (handshake, shard
// from their caches, collective) at start-up and again, with backoff capped at max_backoff, after
// any failure; meanwhile Run answers Unavailable at once, so in-flight requests end with a clear
// error instead of waiting.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective.h"
#include "engine/cluster/cluster_status.h"
#include "engine/cluster/group_join.h"
#include "engine/node_client.h"
#include "model/model_runner.h"
#include "model/runner_factory.h"
#include "proto/shard_wire.h"

namespace sparkserve::engine::cluster {

struct ClusterOptions {
  std::vector<std::string> nodes;  // "host:port" of each node; node i is rank i + 1
  std::string token;               // shared auth token (empty: none)
  std::string tls_ca_pem;          // TLS to the nodes with these roots (empty: plain TCP)
  // Deadline of every collective operation: a hung node fails the step within it.
  std::chrono::milliseconds op_timeout{3000};
  std::chrono::milliseconds connect_timeout{5000};   // per node and attempt
  std::chrono::milliseconds load_timeout{1800000};   // one node's LoadShard, its runner's build included
  std::chrono::milliseconds max_backoff{5000};       // between failed sync attempts
  // The data plane: gloo (host buffers; device ones staged) or nccl (the CUDA backend).
  CollectiveKind collective = CollectiveKind::kGloo;
  int32_t device = 0;                        // nccl: this head's CUDA device
  std::shared_ptr<core::NcclGroups> nccl;    // nccl: null is core::RealNcclGroups(); tests substitute
};

// Rank r's shard for the nodes: its tensors, config.json and calibration.
class ShardSource {
 public:
  virtual ~ShardSource() = default;
  virtual absl::StatusOr<proto::RankShard> Shard(int32_t rank, int32_t world) = 0;
};

class ClusterRunner : public model::ModelRunner {
 public:
  // `local` is rank 0's runner built over `group` (rank 0 of 1 + options.nodes.size()); both are
  // owned from here on. `runner_options` are shipped to the nodes. Starts syncing at once.
  static absl::StatusOr<std::unique_ptr<ClusterRunner>> Create(std::unique_ptr<core::ReplaceableCollective> group,
                                                               std::unique_ptr<model::ModelRunner> local,
                                                               const model::RunnerOptions& runner_options,
                                                               std::unique_ptr<ShardSource> shards,
                                                               ClusterOptions options);
  // Ends every node's session (they wait for a head again) and stops syncing.
  ~ClusterRunner() override;

  model::ModelCapacity capacity() const override { return local_->capacity(); }
  absl::StatusOr<model::StepOutput> Run(const model::StepPlan& plan) override;
  bool samples_on_device() const override { return local_->samples_on_device(); }
  bool has_mtp() const override { return local_->has_mtp(); }

  ClusterStatus status() const;
  // Until every node is synced (OK), a sync failed for a reason retrying cannot fix (a token or
  // build mismatch, a node that cannot build the shard: that error), or `timeout` passes
  // (DeadlineExceeded with the last failure).
  absl::Status WaitUntilServing(std::chrono::milliseconds timeout);

 private:
  enum class State { kSyncing, kServing, kDegraded };
  ClusterRunner(std::unique_ptr<core::ReplaceableCollective> group, std::unique_ptr<model::ModelRunner> local,
                const model::RunnerOptions& runner_options, std::unique_ptr<ShardSource> shards,
                ClusterOptions options);

  void SyncLoop();
  // One attempt: connect + attach every node, load their shards, join the group, install.
  absl::Status SyncOnce();
  // Drops the group and the nodes' sessions (takes step_mu_).
  void TearDown();
  // The group stopped serving: records why and wakes the sync thread (any thread).
  void MarkLost(const std::string& why);
  // Run's failure: drops the group (step_mu_ held), marks the loss, the error to answer.
  absl::Status FailStep(uint64_t index, const std::string& what);
  // Rank r's manifest (hashed once, then kept), and its shard when this call had to cut it.
  absl::StatusOr<proto::ShardOffer> Manifest(int32_t rank, std::optional<proto::RankShard>* shard);
  int32_t world() const { return static_cast<int32_t>(options_.nodes.size()) + 1; }

  std::unique_ptr<core::ReplaceableCollective> group_;  // outlives local_, which points at it
  std::unique_ptr<model::ModelRunner> local_;
  const model::RunnerOptions runner_options_;
  std::unique_ptr<ShardSource> shards_;
  const ClusterOptions options_;

  std::mutex step_mu_;  // a step, or installing / tearing down the group and the links
  std::vector<std::unique_ptr<NodeClient>> links_;
  uint64_t step_index_ = 0;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  State state_ = State::kSyncing;
  std::string detail_ = "connecting to the nodes";
  std::string lost_;             // the first loss reported since the last sync
  absl::Status permanent_;       // a sync failure that retrying cannot fix (start-up only)
  bool stopping_ = false;
  std::string transport_;
  int64_t syncs_ = 0;
  std::atomic<uint64_t> bytes_sent_{0}, bytes_reused_{0};
  int64_t steps_ = 0;                     // guarded by mu_, as the two below
  double control_s_ = 0, lockstep_s_ = 0;

  std::mutex manifests_mu_;
  std::map<int32_t, proto::ShardOffer> manifests_;
  std::thread sync_thread_;
};

}  // namespace sparkserve::engine::cluster
