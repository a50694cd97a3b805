// NodeClient: channel set-up, the handshake, the session's stream, LoadShard, Health and Shutdown
// (see node_client.h).
#include "engine/node_client.h"

#include <unistd.h>

#include "fmt/format.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/session_auth.h"
#include "proto/sha256.h"
#include "spdlog/spdlog.h"

namespace sparkserve::engine {
namespace {

std::string ThisHostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::chrono::system_clock::time_point Deadline(std::chrono::milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeNodeChannel(const std::string& target, const std::string& tls_ca_pem) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(proto::kMaxMessageBytes);
  args.SetMaxSendMessageSize(proto::kMaxMessageBytes);
  // Notice a dead node or link within ~3 s, even between steps (the node's server permits these).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, proto::kSessionKeepaliveMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, proto::kSessionKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect quickly while waiting for a node that is still starting.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A fresh connection per client: a node restarted on the same port is a new session anyway.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = tls_ca_pem;
    credentials = grpc::SslCredentials(tls);
  }
  return grpc::CreateCustomChannel(target, credentials, args);
}

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
  c->channel_ = MakeNodeChannel(target, options.tls_ca_pem);
  c->stub_ = proto::NodeService::NewStub(c->channel_);
  const auto deadline = Deadline(options.timeout);

  proto::HelloRequest hello;
  hello.set_protocol_version(options.protocol_version);
  hello.set_head_name(ThisHostname());
  hello.set_head_nonce(proto::NewNonce());
  proto::HelloResponse challenge;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline);
    ctx.set_wait_for_ready(true);  // wait (until the deadline) for a node that is not up yet
    grpc::Status st = c->stub_->Hello(&ctx, hello, &challenge);
    if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::DeadlineExceededError(fmt::format(
          "node {}: no answer to Hello within {:.1f} s (is sparkserve-node running there, and is the port reachable "
          "from this host?{})",
          target, std::chrono::duration<double>(options.timeout).count(),
          options.tls_ca_pem.empty() ? "" : " With --tls-ca the node must serve TLS (--tls-cert/--tls-key)"));
    }
    if (!st.ok()) {
      return FromGrpcStatus(st, fmt::format("node {} {}", target,
                                            st.error_code() == grpc::StatusCode::FAILED_PRECONDITION
                                                ? "refused the head"
                                                : "did not answer Hello"));
    }
  }
  // A node that requires a token and gets no proof refuses with its own message (and logs it).
  proto::AuthenticateRequest auth;
  auth.set_challenge_id(challenge.challenge_id());
  if (!options.token.empty()) {
    auth.set_head_proof(proto::HeadProof(options.token, hello.head_nonce(), challenge.node_nonce()));
  }
  auth.set_build_id(options.build_id);
  auth.set_tp_rank(options.tp_rank);
  auth.set_tp_world_size(options.tp_world_size);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline);
    grpc::Status st = c->stub_->Authenticate(&ctx, auth, &c->node_);
    if (!st.ok()) {
      const bool refused = st.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
                           st.error_code() == grpc::StatusCode::UNAUTHENTICATED;
      return FromGrpcStatus(st, fmt::format("node {} {}", target, refused ? "refused the head" : "did not accept the head"));
    }
  }
  // The node proves it holds the token too: a head with a token never drives a node without it.
  if (!options.token.empty()) {
    const std::string expected = proto::NodeProof(options.token, challenge.node_nonce(), hello.head_nonce());
    if (c->node_.node_proof().empty()) {
      spdlog::error("node {} has no auth token but this head has one: refusing it", target);
      return absl::UnauthenticatedError(fmt::format(
          "node {} has no auth token (sparkserve-node --token-file) but the head has one; give the node the same "
          "token file",
          target));
    }
    if (!proto::ProofsEqual(c->node_.node_proof(), expected)) {
      spdlog::error("node {} answered with a wrong token proof: refusing it", target);
      return absl::UnauthenticatedError(
          fmt::format("node {}: auth token mismatch: the node's proof does not match this head's token", target));
    }
  }
  if (c->node_.protocol_version() != options.protocol_version || c->node_.build_id() != options.build_id) {
    return absl::FailedPreconditionError(
        fmt::format("node {} accepted the head but reports protocol {} build {} (head: protocol {} build {})", target,
                    c->node_.protocol_version(), c->node_.build_id(), options.protocol_version, options.build_id));
  }
  spdlog::info("connected to node {} ({}, {} device(s)) as rank {} of {}", target, c->node_.node_name(),
               c->node_.devices_size(), options.tp_rank, options.tp_world_size);
  return c;
}

NodeClient::~NodeClient() { Close(); }

absl::Status NodeClient::Attach(std::function<void(const std::string& why)> on_lost) {
  attach_ctx_ = std::make_unique<grpc::ClientContext>();
  attach_ = stub_->Attach(attach_ctx_.get());
  proto::HeadMessage first;
  first.mutable_attach()->set_session_id(session_id());
  proto::NodeMessage answer;
  if (!attach_->Write(first) || !attach_->Read(&answer) || !answer.has_attached()) {
    grpc::Status st = attach_->Finish();
    attach_.reset();
    return FromGrpcStatus(st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream ended") : st,
                          fmt::format("node {}: Attach failed", target_));
  }
  reader_ = std::thread([this, on_lost = std::move(on_lost)] {
    proto::NodeMessage m;
    bool reported = false;
    while (attach_->Read(&m)) {
      if (m.has_failed() && !reported) {
        reported = true;
        on_lost(fmt::format("node {}: step {} failed there: {}", target_, m.failed().index(), m.failed().message()));
      }
    }
    grpc::Status st = attach_->Finish();
    if (!closing_.load() && !reported) {
      on_lost(fmt::format("node {}: the session's stream ended ({}): the node died, restarted or its link broke",
                          target_, st.ok() ? std::string("closed by the node") : st.error_message()));
    }
  });
  return absl::OkStatus();
}

absl::Status NodeClient::SendStep(uint64_t index, const std::string& plan) {
  proto::HeadMessage m;
  m.mutable_step()->set_index(index);
  m.mutable_step()->set_plan(plan);
  std::lock_guard<std::mutex> lock(write_mu_);
  if (!attach_ || !attach_->Write(m)) {
    return absl::UnavailableError(fmt::format("node {}: cannot send step {}: the session's stream is closed", target_,
                                              index));
  }
  return absl::OkStatus();
}

absl::Status NodeClient::SendCollectiveCheck(const std::vector<uint64_t>& floats, uint32_t iterations) {
  proto::HeadMessage m;
  for (uint64_t n : floats) m.mutable_check()->add_floats(n);
  m.mutable_check()->set_iterations(iterations);
  std::lock_guard<std::mutex> lock(write_mu_);
  if (!attach_ || !attach_->Write(m)) {
    return absl::UnavailableError(fmt::format("node {}: the session's stream is closed", target_));
  }
  return absl::OkStatus();
}

void NodeClient::Close() {
  closing_.store(true);
  if (attach_ctx_) attach_ctx_->TryCancel();
  if (reader_.joinable()) reader_.join();
}

absl::StatusOr<ShardTransfer> NodeClient::LoadShard(
    proto::ShardOffer offer, const std::function<absl::StatusOr<core::Tensor>(uint32_t)>& fetch,
    std::chrono::milliseconds timeout) {
  offer.set_session_id(session_id());
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout));
  auto stream = stub_->LoadShard(&ctx);
  const std::string context = fmt::format("node {}: LoadShard", target_);
  auto fail = [&](const std::string& what) -> absl::Status {
    ctx.TryCancel();
    grpc::Status st = stream->Finish();
    if (!st.ok() && st.error_code() != grpc::StatusCode::CANCELLED) return FromGrpcStatus(st, context);
    return absl::UnavailableError(fmt::format("{}: {}", context, what));
  };
  proto::LoadShardRequest req;
  *req.mutable_offer() = offer;
  proto::LoadShardResponse resp;
  if (!stream->Write(req) || !stream->Read(&resp) || !resp.has_wanted()) {
    grpc::Status st = stream->Finish();
    return FromGrpcStatus(st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "no answer to the offer") : st, context);
  }
  ShardTransfer out;
  const proto::ShardWanted wanted = resp.wanted();
  for (uint32_t index : wanted.tensors()) {
    if (index >= static_cast<uint32_t>(offer.tensors_size())) return fail(fmt::format("it wants tensor {}: no such", index));
    absl::StatusOr<core::Tensor> t = fetch(index);
    if (!t.ok()) return fail(fmt::format("cutting {}: {}", offer.tensors(index).name(), std::string(t.status().message())));
    std::span<const uint8_t> bytes = t->bytes();
    if (bytes.size() != offer.tensors(index).bytes()) return fail(fmt::format("{} changed size", offer.tensors(index).name()));
    for (uint64_t off = 0; off < bytes.size(); off += proto::kShardChunkBytes) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(proto::kShardChunkBytes, bytes.size() - off));
      req.Clear();
      proto::TensorChunk* c = req.mutable_chunk();
      c->set_tensor(index);
      c->set_offset(off);
      c->set_data(bytes.data() + off, n);
      c->set_sha256(proto::Sha256(bytes.subspan(off, n)));
      if (!stream->Write(req)) return fail("the stream broke while sending");
    }
    out.bytes_sent += bytes.size();
    ++out.tensors_sent;
  }
  stream->WritesDone();
  if (!stream->Read(&resp) || !resp.has_loaded()) {
    grpc::Status st = stream->Finish();
    return FromGrpcStatus(st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "no answer after the tensors") : st,
                          context);
  }
  out.loaded = resp.loaded();
  out.bytes_reused = out.loaded.bytes_reused();
  grpc::Status st = stream->Finish();
  if (!st.ok()) return FromGrpcStatus(st, context);
  return out;
}

absl::StatusOr<proto::HealthResponse> NodeClient::Health(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout));
  proto::HealthRequest req;
  req.set_session_id(session_id());
  proto::HealthResponse resp;
  grpc::Status st = stub_->Health(&ctx, req, &resp);
  if (!st.ok()) return FromGrpcStatus(st, fmt::format("node {}: Health failed", target_));
  return resp;
}

absl::Status NodeClient::Shutdown(const std::string& reason, bool exit_process, std::chrono::milliseconds timeout) {
  closing_.store(true);  // the session's stream ends next: that is not a loss
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout));
  proto::ShutdownRequest req;
  req.set_session_id(session_id());
  req.set_reason(reason);
  req.set_exit_process(exit_process);
  proto::ShutdownResponse resp;
  grpc::Status st = stub_->Shutdown(&ctx, req, &resp);
  return FromGrpcStatus(st, fmt::format("node {}: Shutdown failed", target_));
}

}  // namespace sparkserve::engine
