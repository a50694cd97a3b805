// NodeServiceImpl: the node's side of proto/node.proto. Hello (version, build and token checks,
// session) and Health work; LoadShard, InitCollective and Shutdown answer UNIMPLEMENTED for now.
#pragma once
#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

#include "proto/node.grpc.pb.h"
#include "proto/protocol.h"
#include "sparkserve/version.h"

namespace sparkserve::node {

struct NodeOptions {
  std::string host = "0.0.0.0";     // listen address (use 127.0.0.1 for loopback only)
  int port = 29500;                 // 0 picks a free port (NodeServer::port() tells which)
  std::optional<std::string> token; // required auth token (trimmed); nullopt accepts any head
  std::filesystem::path cache_dir;  // content-addressed shard cache (reported; used by LoadShard)
  // What this node insists on; defaults are this build's. Tests override them.
  uint32_t protocol_version = proto::kNodeProtocolVersion;
  std::string build_id = kBuildId;
};

class NodeServiceImpl final : public proto::NodeService::Service {
 public:
  explicit NodeServiceImpl(NodeOptions options);

  grpc::Status Hello(grpc::ServerContext* ctx, const proto::HelloRequest* req, proto::HelloResponse* resp) override;
  grpc::Status Health(grpc::ServerContext* ctx, const proto::HealthRequest* req, proto::HealthResponse* resp) override;
  grpc::Status LoadShard(grpc::ServerContext* ctx, grpc::ServerReader<proto::LoadShardRequest>* reader,
                         proto::LoadShardResponse* resp) override;
  grpc::Status InitCollective(grpc::ServerContext* ctx, const proto::InitCollectiveRequest* req,
                              proto::InitCollectiveResponse* resp) override;
  grpc::Status Shutdown(grpc::ServerContext* ctx, const proto::ShutdownRequest* req,
                        proto::ShutdownResponse* resp) override;

  proto::NodeState state() const;
  const NodeOptions& options() const { return options_; }

 private:
  grpc::Status CheckHello(const proto::HelloRequest& req) const;

  const NodeOptions options_;
  const std::chrono::steady_clock::time_point started_;
  mutable std::mutex mu_;
  proto::NodeState state_ = proto::NODE_STATE_WAITING_FOR_HEAD;  // guarded by mu_
  std::string session_id_;                                       // guarded by mu_; empty = none
  std::string head_name_;                                        // guarded by mu_
};

}  // namespace sparkserve::node
