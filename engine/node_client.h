// NodeClient: the head's session with one sparkserve-node: the handshake (Hello, then the HMAC
// proofs of Authenticate, both ways), the session's Attach stream (steps go down; a reader thread
// hears failures and notices the stream's end: the node died, or its link did), the shard's load
// (offer by SHA-256, then only the wanted tensors in hashed chunks), Health and Shutdown.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "proto/node.grpc.pb.h"
#include "proto/protocol.h"
#include "proto/shard_wire.h"
#include "sparkserve/version.h"

namespace sparkserve::engine {

struct ConnectOptions {
  std::string token;  // shared auth token (trimmed content of --token-file); empty: none
  // PEM root certificates: connect over TLS and check the node's certificate (--tls-ca); empty:
  // plain TCP.
  std::string tls_ca_pem;
  // How long Connect waits for the node to become reachable and answer. A node that starts within
  // this window is picked up (the channel retries every <= 1 s).
  std::chrono::milliseconds timeout{10000};
  int32_t tp_rank = 1;        // the rank the node will hold
  int32_t tp_world_size = 2;  // ranks in the group
  // What the head announces; this build's by default (tests override to check the node's refusals).
  uint32_t protocol_version = proto::kNodeProtocolVersion;
  std::string build_id = kBuildId;
};

// What one LoadShard moved.
struct ShardTransfer {
  uint64_t bytes_sent = 0;    // tensor bytes the node lacked and got
  uint64_t bytes_reused = 0;  // tensor bytes it had (cache, or its loaded runner)
  uint32_t tensors_sent = 0;
  proto::ShardLoaded loaded;  // the node's report
};

class NodeClient {
 public:
  // Opens a channel to `target` ("host:port") and runs Hello + Authenticate. Errors keep gRPC's
  // code and name the node: DeadlineExceeded (no answer within the timeout: not running, port
  // closed or filtered), Unavailable (busy with another head, or unreachable), FailedPrecondition
  // (protocol/build mismatch), Unauthenticated (token: either side's proof failed).
  static absl::StatusOr<std::unique_ptr<NodeClient>> Connect(const std::string& target, const ConnectOptions& options);
  static absl::StatusOr<std::unique_ptr<NodeClient>> Connect(const std::string& target, const std::string& token,
                                                             std::chrono::milliseconds timeout);
  ~NodeClient();  // Close()

  const std::string& target() const { return target_; }
  const proto::AuthenticateResponse& node() const { return node_; }
  const std::string& session_id() const { return node_.session_id(); }

  // Opens the session's stream. `on_lost` is called once, from the reader thread, when the stream
  // ends without Close (the node died, its link broke, or it cancelled the session), or when the
  // node reports a failed step; it gets a message naming the node.
  absl::Status Attach(std::function<void(const std::string& why)> on_lost);
  // Sends one step's encoded plan on the session's stream.
  absl::Status SendStep(uint64_t index, const std::string& plan);
  // Asks the node to run `iterations` all-reduces of each size (floats) on its group (cluster-check).
  absl::Status SendCollectiveCheck(const std::vector<uint64_t>& floats, uint32_t iterations);

  // Offers `offer` (the manifest, config and options; session and rank filled in here), then sends
  // the tensors the node wants, taking their bytes from `fetch` (index into offer.tensors ->
  // tensor). The deadline covers the whole transfer and the node's runner build.
  absl::StatusOr<ShardTransfer> LoadShard(proto::ShardOffer offer,
                                          const std::function<absl::StatusOr<core::Tensor>(uint32_t)>& fetch,
                                          std::chrono::milliseconds timeout);

  absl::StatusOr<proto::HealthResponse> Health(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  // Ends the session on the node (it waits for a head again; or exits, when asked).
  absl::Status Shutdown(const std::string& reason, bool exit_process = false,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  // Cancels the session's stream (the node releases the session at once) and joins the reader.
  void Close();

  proto::NodeService::Stub& stub() { return *stub_; }

 private:
  NodeClient() = default;
  std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::NodeService::Stub> stub_;
  proto::AuthenticateResponse node_;

  std::unique_ptr<grpc::ClientContext> attach_ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<proto::HeadMessage, proto::NodeMessage>> attach_;
  std::mutex write_mu_;
  std::thread reader_;
  std::atomic<bool> closing_{false};
};

// A gRPC status as an absl::Status (same code), its message prefixed with `context`.
absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view context);

// The channel to a node: keepalive every second, fast reconnects, message limits, TLS when
// `tls_ca_pem` is given.
std::shared_ptr<grpc::Channel> MakeNodeChannel(const std::string& target, const std::string& tls_ca_pem);

}  // namespace sparkserve::engine
