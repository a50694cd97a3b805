// NodeClient: the head's connection to one sparkserve-node (gRPC stub + the accepted Hello).
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/node.grpc.pb.h"
#include "proto/protocol.h"
#include "sparkserve/version.h"

namespace sparkserve::engine {

struct ConnectOptions {
  std::string token;  // shared auth token (trimmed content of --token-file); empty sends none
  // How long Connect waits for the node to become reachable and answer Hello. A node that starts
  // within this window is picked up (the channel retries every <= 1 s).
  std::chrono::milliseconds timeout{10000};
  int32_t tp_rank = 0;        // the rank the node will hold
  int32_t tp_world_size = 0;  // ranks in the group
  // What the head announces; this build's by default (tests override to check the node's refusals).
  uint32_t protocol_version = proto::kNodeProtocolVersion;
  std::string build_id = kBuildId;
};

class NodeClient {
 public:
  // Opens a channel to `target` ("host:port") and runs Hello. Errors keep gRPC's code and name the
  // node: DeadlineExceeded (no answer within the timeout: not running, port closed or filtered),
  // Unavailable, FailedPrecondition (protocol/build mismatch), Unauthenticated (token).
  static absl::StatusOr<std::unique_ptr<NodeClient>> Connect(const std::string& target, const ConnectOptions& options);
  static absl::StatusOr<std::unique_ptr<NodeClient>> Connect(const std::string& target, const std::string& token,
                                                             std::chrono::milliseconds timeout);

  const std::string& target() const { return target_; }
  const proto::HelloResponse& hello() const { return hello_; }
  const std::string& session_id() const { return hello_.session_id(); }

  absl::StatusOr<proto::HealthResponse> Health(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

  proto::NodeService::Stub& stub() { return *stub_; }

 private:
  NodeClient() = default;
  std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::NodeService::Stub> stub_;
  proto::HelloResponse hello_;
};

// A gRPC status as an absl::Status (same code), its message prefixed with `context`.
absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view context);

}  // namespace sparkserve::engine
