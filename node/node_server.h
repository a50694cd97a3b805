// NodeServer: a gRPC server running NodeServiceImpl on host:port (keepalive and message limits set).
#pragma once
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "node/node_service.h"

namespace sparkserve::node {

class NodeServer {
 public:
  // Listens and serves on background threads. Fails (Unavailable) when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<NodeServer>> Start(NodeOptions options);
  ~NodeServer();

  int port() const { return port_; }  // the bound port (the chosen one when options.port was 0)
  std::string address() const;        // "host:port"
  NodeServiceImpl& service() { return *service_; }

  // Stops accepting calls; calls still running after `grace` are cancelled. Idempotent.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  // Blocks until Shutdown has completed.
  void Wait();

 private:
  NodeServer() = default;
  std::unique_ptr<NodeServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string host_;
  int port_ = 0;
  std::once_flag shutdown_once_;
};

// "host:port", bracketing IPv6 literals ("[::1]:29500").
std::string JoinHostPort(const std::string& host, int port);

}  // namespace sparkserve::node
