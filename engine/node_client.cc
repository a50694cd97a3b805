// NodeClient: channel set-up, Hello and Health (see node_client.h).
#include "engine/node_client.h"

#include <unistd.h>

#include "fmt/format.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "spdlog/spdlog.h"

namespace sparkserve::engine {
namespace {

std::string ThisHostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(proto::kMaxMessageBytes);
  args.SetMaxSendMessageSize(proto::kMaxMessageBytes);
  // Notice a dead node or link within seconds (the node's server permits these pings).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect quickly while waiting for a node that is still starting.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // The control plane runs on private cluster links; the auth token guards it (no TLS yet).
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view context) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      fmt::format("{}: {}", context, status.error_message()));
}

absl::StatusOr<std::unique_ptr<NodeClient>> NodeClient::Connect(const std::string& target, const std::string& token,
                                                                std::chrono::milliseconds timeout) {
  ConnectOptions options;
  options.token = token;
  options.timeout = timeout;
  return Connect(target, options);
}

absl::StatusOr<std::unique_ptr<NodeClient>> NodeClient::Connect(const std::string& target,
                                                                const ConnectOptions& options) {
  std::unique_ptr<NodeClient> c(new NodeClient());
  c->target_ = target;
  c->channel_ = MakeChannel(target);
  c->stub_ = proto::NodeService::NewStub(c->channel_);

  proto::HelloRequest req;
  req.set_protocol_version(options.protocol_version);
  req.set_build_id(options.build_id);
  req.set_auth_token(options.token);
  req.set_head_name(ThisHostname());
  req.set_tp_rank(options.tp_rank);
  req.set_tp_world_size(options.tp_world_size);

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options.timeout);
  ctx.set_wait_for_ready(true);  // wait (until the deadline) for a node that is not up yet
  grpc::Status st = c->stub_->Hello(&ctx, req, &c->hello_);
  if (!st.ok()) {
    switch (st.error_code()) {
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        return absl::DeadlineExceededError(fmt::format(
            "node {}: no answer to Hello within {:.1f} s (is sparkserve-node running there, and is the port reachable "
            "from this host?)",
            target, std::chrono::duration<double>(options.timeout).count()));
      case grpc::StatusCode::FAILED_PRECONDITION:
      case grpc::StatusCode::UNAUTHENTICATED:
        return FromGrpcStatus(st, fmt::format("node {} refused the head", target));
      default:
        return FromGrpcStatus(st, fmt::format("node {}: Hello failed", target));
    }
  }
  // The node echoes what it insists on; a node that accepted something else is not one we can drive.
  if (c->hello_.protocol_version() != options.protocol_version || c->hello_.build_id() != options.build_id)
    return absl::FailedPreconditionError(
        fmt::format("node {} accepted Hello but reports protocol {} build {} (head: protocol {} build {})", target,
                    c->hello_.protocol_version(), c->hello_.build_id(), options.protocol_version, options.build_id));
  spdlog::info("connected to node {} ({}, {} device(s))", target, c->hello_.node_name(), c->hello_.devices_size());
  return c;
}

absl::StatusOr<proto::HealthResponse> NodeClient::Health(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  proto::HealthResponse resp;
  grpc::Status st = stub_->Health(&ctx, proto::HealthRequest(), &resp);
  if (!st.ok()) return FromGrpcStatus(st, fmt::format("node {}: Health failed", target_));
  return resp;
}

}  // namespace sparkserve::engine
