// NodeServiceImpl: the node's side of proto/node.proto. One head at a time: Hello + Authenticate
// (HMAC challenge over the token) open a session; every later call names it; it ends when its
// Attach stream ends (head gone: noticed by gRPC keepalive within a few seconds), on Shutdown, or
// when an authenticated head never attaches. LoadShard fills the content-addressed cache and builds
// the rank's runner (kept for the next session of the same shard); InitCollective joins the group
// (Gloo through a rendezvous relayed by the head; NCCL with the head's unique id); Attach then
// carries the steps, each checked in lockstep with every rank.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "core/collective.h"
#include "core/nccl_groups.h"
#include "core/rendezvous_store.h"
#include "model/runner_factory.h"
#include "node/shard_cache.h"
#include "proto/node.grpc.pb.h"
#include "proto/protocol.h"
#include "sparkserve/version.h"

namespace sparkserve::node {

struct NodeOptions {
  std::string host = "127.0.0.1";   // listen address
  int port = 29500;                 // 0 picks a free port (NodeServer::port() tells which)
  std::optional<std::string> token; // shared auth token (trimmed); nullopt accepts any head
  std::filesystem::path cache_dir;  // content-addressed shard cache
  int32_t device = 0;               // the CUDA device runners use (--device)
  std::string tls_cert_file, tls_key_file;  // both: serve over TLS (gRPC's own)
  // An authenticated session that has not attached within this is released.
  std::chrono::milliseconds unattached_session_timeout{proto::kUnattachedSessionMs};
  // What this node insists on; defaults are this build's. Tests override them.
  uint32_t protocol_version = proto::kNodeProtocolVersion;
  std::string build_id = kBuildId;
  // NCCL groups (--collective nccl): null is core::RealNcclGroups(); tests pass a stand-in.
  std::shared_ptr<core::NcclGroups> nccl;
};

class NodeServiceImpl final : public proto::NodeService::Service {
 public:
  explicit NodeServiceImpl(NodeOptions options);
  ~NodeServiceImpl() override;

  grpc::Status Hello(grpc::ServerContext* ctx, const proto::HelloRequest* req, proto::HelloResponse* resp) override;
  grpc::Status Authenticate(grpc::ServerContext* ctx, const proto::AuthenticateRequest* req,
                            proto::AuthenticateResponse* resp) override;
  grpc::Status Attach(grpc::ServerContext* ctx,
                      grpc::ServerReaderWriter<proto::NodeMessage, proto::HeadMessage>* stream) override;
  grpc::Status LoadShard(grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<proto::LoadShardResponse, proto::LoadShardRequest>* stream) override;
  grpc::Status InitCollective(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<proto::RendezvousMessage, proto::RendezvousMessage>* stream) override;
  grpc::Status Health(grpc::ServerContext* ctx, const proto::HealthRequest* req, proto::HealthResponse* resp) override;
  grpc::Status Shutdown(grpc::ServerContext* ctx, const proto::ShutdownRequest* req,
                        proto::ShutdownResponse* resp) override;

  proto::NodeState state() const;
  const NodeOptions& options() const { return options_; }
  // Ends any session (the daemon is stopping); later calls are refused.
  void Stop();
  // Called (once) when a head asks the daemon to exit (Shutdown with exit_process).
  void set_exit_callback(std::function<void()> fn) { on_exit_ = std::move(fn); }

 private:
  struct Challenge {
    std::string head_nonce, node_nonce, head_name, peer;
    std::chrono::steady_clock::time_point created;
  };
  struct Session {
    std::string id, head_name, peer;
    int32_t rank = 0, world = 1;
    std::chrono::steady_clock::time_point since;
    bool attached = false;
    std::set<grpc::ServerContext*> calls;  // running calls of the session: cancelled when it ends
  };
  // The runner built from a shard, kept across sessions: a head that comes back with the same
  // shard, rank and options finds it loaded.
  struct Loaded {
    std::string key;  // shard digest + options + rank/world
    std::unique_ptr<core::ReplaceableCollective> group;
    model::LoadedRunner runner;
  };

  // The current session if `session_id` names it (and, when `attached`, it has attached); else an
  // error status to answer with. Adds `ctx` to the session's calls when given.
  grpc::Status CheckSession(const std::string& session_id, bool need_attached, grpc::ServerContext* ctx);
  void EndCall(const std::string& session_id, grpc::ServerContext* ctx);
  // Calls EndCall when a call that passed CheckSession(..., ctx) returns, on every path.
  struct CallScope {
    NodeServiceImpl* self;
    const std::string& session_id;
    grpc::ServerContext* ctx;
    ~CallScope() { self->EndCall(session_id, ctx); }
  };
  // Ends session `id` if it is still the current one, cancelling its calls.
  void ReleaseSession(const std::string& id, const std::string& reason);
  void SetState(const std::string& session_id, proto::NodeState state, const std::string& detail = "");
  void Watchdog();
  // Runs one step: decode, run, lockstep check. Caller holds runtime_mu_.
  absl::Status RunStep(const proto::StepMessage& step);
  // cluster-check's all-reduces on the session's group. Caller holds runtime_mu_.
  absl::Status RunCheck(const proto::CollectiveCheck& check);
  // Drops the group of `session_id` (a failed step, or its session ended). Caller holds runtime_mu_.
  void LeaveGroup(const std::string& session_id);
  // This rank's part of InitCollective's group (Gloo over `store`, or NCCL on options_.device).
  absl::StatusOr<std::unique_ptr<core::Collective>> JoinOwnRank(const proto::CollectiveSetup& setup,
                                                               core::RendezvousStore& store);

  const NodeOptions options_;
  const std::chrono::steady_clock::time_point started_;
  ShardCache cache_;
  absl::Status cache_status_;
  std::function<void()> on_exit_;
  std::atomic<uint64_t> bytes_received_total_{0}, bytes_reused_total_{0}, steps_total_{0};

  mutable std::mutex mu_;  // guards everything below up to runtime_mu_
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  proto::NodeState state_ = proto::NODE_STATE_WAITING_FOR_HEAD;
  std::string detail_;
  std::map<std::string, Challenge> challenges_;
  std::optional<Session> session_;
  std::thread watchdog_;

  std::mutex runtime_mu_;  // guards what follows; held while a runner is built or a step runs
  std::unique_ptr<Loaded> loaded_;
  // The group of session `joined_session_`: in loaded_->group (steps), or in check_group_ when no
  // runner of its rank is loaded (cluster-check).
  std::unique_ptr<core::ReplaceableCollective> check_group_;
  core::ReplaceableCollective* joined_ = nullptr;
  std::string joined_session_;
};

}  // namespace sparkserve::node
