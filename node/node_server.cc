// NodeServer set-up and shutdown (see node_server.h).
#include "node/node_server.h"

#include "fmt/format.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "proto/protocol.h"

namespace sparkserve::node {

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

absl::StatusOr<std::unique_ptr<NodeServer>> NodeServer::Start(NodeOptions options) {
  if (options.port < 0 || options.port > 65535)
    return absl::InvalidArgumentError(fmt::format("port {} is outside 0..65535", options.port));
  std::unique_ptr<NodeServer> s(new NodeServer());
  s->host_ = options.host;
  const std::string listen = JoinHostPort(options.host, options.port);
  s->service_ = std::make_unique<NodeServiceImpl>(std::move(options));

  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(s->service_.get());
  builder.SetMaxReceiveMessageSize(proto::kMaxMessageBytes);
  builder.SetMaxSendMessageSize(proto::kMaxMessageBytes);
  // Heads ping every 10 s to notice a dead node (or network) within seconds; allow it.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0)
    return absl::UnavailableError(fmt::format("cannot listen on {} (address in use, or not an address of this host?)",
                                              listen));
  return s;
}

NodeServer::~NodeServer() {
  Shutdown();
  Wait();
}

std::string NodeServer::address() const { return JoinHostPort(host_, port_); }

void NodeServer::Shutdown(std::chrono::milliseconds grace) {
  std::call_once(shutdown_once_, [&] {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + grace);
  });
}

void NodeServer::Wait() {
  if (server_) server_->Wait();
}

}  // namespace sparkserve::node
