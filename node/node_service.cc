// NodeService handlers (see node_service.h).
#include "node/node_service.h"

#include <random>

#include "fmt/format.h"
#include "node/node_info.h"
#include "proto/auth_token.h"
#include "spdlog/spdlog.h"

namespace sparkserve::node {
namespace {

std::string NewSessionId() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += fmt::format("{:08x}", rd());
  return id;
}

grpc::Status NotYet(std::string_view rpc) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      fmt::format("{} is not implemented by this sparkserve-node build yet (it comes with "
                                  "tensor-parallel serving); only Hello and Health are available",
                                  rpc));
}

}  // namespace

NodeServiceImpl::NodeServiceImpl(NodeOptions options)
    : options_(std::move(options)), started_(std::chrono::steady_clock::now()) {}

grpc::Status NodeServiceImpl::CheckHello(const proto::HelloRequest& req) const {
  // The token first: a head that cannot authenticate learns nothing about this node's build.
  if (options_.token) {
    if (req.auth_token().empty())
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this node requires an auth token (sparkserve-node --token-file) and the head sent "
                          "none; give the head the same token file");
    if (!proto::TokensEqual(req.auth_token(), *options_.token))
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "auth token mismatch: the head's token differs from this node's --token-file");
  }
  if (req.protocol_version() != options_.protocol_version)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        fmt::format("protocol version mismatch: head speaks {} (build {}), node speaks {} (build {}); "
                                    "run the same sparkserve build on the head and every node",
                                    req.protocol_version(), req.build_id(), options_.protocol_version,
                                    options_.build_id));
  if (req.build_id() != options_.build_id)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        fmt::format("build id mismatch: head {}, node {}; run the same sparkserve build on the head "
                                    "and every node",
                                    req.build_id(), options_.build_id));
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::Hello(grpc::ServerContext* ctx, const proto::HelloRequest* req,
                                    proto::HelloResponse* resp) {
  grpc::Status st = CheckHello(*req);
  if (!st.ok()) {
    spdlog::warn("refused Hello from {} ({}): {}", ctx->peer(), req->head_name(), st.error_message());
    return st;
  }
  const std::string session = NewSessionId();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!session_id_.empty())
      spdlog::warn("head {} replaces the session of head {}", req->head_name(), head_name_);
    session_id_ = session;
    head_name_ = req->head_name();
    state_ = proto::NODE_STATE_CONNECTED;
  }
  spdlog::info("accepted Hello from {} ({}) as rank {} of {}", ctx->peer(), req->head_name(), req->tp_rank(),
               req->tp_world_size());
  resp->set_protocol_version(options_.protocol_version);
  resp->set_build_id(options_.build_id);
  resp->set_session_id(session);
  resp->set_cache_dir(options_.cache_dir.string());
  DescribeThisNode(resp);
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::Health(grpc::ServerContext*, const proto::HealthRequest*, proto::HealthResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  resp->set_state(state_);
  resp->set_uptime_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  resp->set_protocol_version(options_.protocol_version);
  resp->set_build_id(options_.build_id);
  resp->set_has_session(!session_id_.empty());
  resp->set_head_name(head_name_);
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::LoadShard(grpc::ServerContext*, grpc::ServerReader<proto::LoadShardRequest>*,
                                        proto::LoadShardResponse*) {
  return NotYet("LoadShard");
}

grpc::Status NodeServiceImpl::InitCollective(grpc::ServerContext*, const proto::InitCollectiveRequest*,
                                             proto::InitCollectiveResponse*) {
  return NotYet("InitCollective");
}

grpc::Status NodeServiceImpl::Shutdown(grpc::ServerContext*, const proto::ShutdownRequest*, proto::ShutdownResponse*) {
  return NotYet("Shutdown");
}

proto::NodeState NodeServiceImpl::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

}  // namespace sparkserve::node
