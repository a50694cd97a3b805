// NodeServer set-up and shutdown (see node_server.h).
#include "node/node_server.h"

#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "proto/protocol.h"

namespace sparkserve::node {

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{} {}: cannot open it", what, path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(fmt::format("{} {}: not a PEM file", what, path));
  }
  return ss.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeServer>> NodeServer::Start(NodeOptions options) {
  if (options.port < 0 || options.port > 65535)
    return absl::InvalidArgumentError(fmt::format("port {} is outside 0..65535", options.port));
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options.tls_cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(options.tls_cert_file, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(options.tls_key_file, "--tls-key");
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({*key, *cert});
    credentials = grpc::SslServerCredentials(tls);
  }
  std::unique_ptr<NodeServer> s(new NodeServer());
  s->host_ = options.host;
  const std::string listen = JoinHostPort(options.host, options.port);
  s->service_ = std::make_unique<NodeServiceImpl>(std::move(options));

  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, credentials, &s->port_);
  builder.RegisterService(s->service_.get());
  builder.SetMaxReceiveMessageSize(proto::kMaxMessageBytes);
  builder.SetMaxSendMessageSize(proto::kMaxMessageBytes);
  // Both sides ping every second: a dead or unplugged head is noticed within ~3 s (its session's
  // Attach stream breaks and the session is released), and heads notice a dead node alike.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, proto::kSessionKeepaliveMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, proto::kSessionKeepaliveTimeoutMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, proto::kSessionKeepaliveMs / 2);
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
    if (service_) service_->Stop();  // ends the session: its streams are cancelled
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + grace);
  });
}

void NodeServer::Wait() {
  if (server_) server_->Wait();
}

}  // namespace sparkserve::node
