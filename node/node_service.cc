// NodeService: the handshake, sessions, the Attach stream with its steps, Health and Shutdown (see
// node_service.h; LoadShard is in node_shard_load.cc, InitCollective in node_collective_join.cc).
#include "node/node_service.h"

#include "fmt/format.h"
#include "node/node_info.h"
#include "proto/lockstep.h"
#include "proto/session_auth.h"
#include "proto/step_plan_codec.h"
#include "spdlog/spdlog.h"

namespace sparkserve::node {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxChallenges = 64;
constexpr std::chrono::seconds kChallengeLifetime{30};

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

NodeServiceImpl::NodeServiceImpl(NodeOptions options)
    : options_(std::move(options)), started_(Clock::now()), cache_(options_.cache_dir) {
  cache_status_ = cache_.Init();
  if (!cache_status_.ok()) spdlog::error("{}", std::string(cache_status_.message()));
  watchdog_ = std::thread([this] { Watchdog(); });
}

NodeServiceImpl::~NodeServiceImpl() {
  Stop();
  if (watchdog_.joinable()) watchdog_.join();
}

void NodeServiceImpl::Stop() {
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (session_) id = session_->id;
    state_ = proto::NODE_STATE_SHUTTING_DOWN;
  }
  stop_cv_.notify_all();
  if (!id.empty()) ReleaseSession(id, "the node is shutting down");
}

void NodeServiceImpl::Watchdog() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(200));
    const auto now = Clock::now();
    for (auto it = challenges_.begin(); it != challenges_.end();) {
      it = now - it->second.created > kChallengeLifetime ? challenges_.erase(it) : std::next(it);
    }
    if (session_ && !session_->attached && now - session_->since > options_.unattached_session_timeout) {
      const std::string id = session_->id;
      lock.unlock();
      ReleaseSession(id, fmt::format("the head did not attach within {} ms of authenticating",
                                     options_.unattached_session_timeout.count()));
      lock.lock();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Handshake

grpc::Status NodeServiceImpl::Hello(grpc::ServerContext* ctx, const proto::HelloRequest* req,
                                    proto::HelloResponse* resp) {
  resp->set_protocol_version(options_.protocol_version);
  if (req->protocol_version() != options_.protocol_version) {
    spdlog::warn("refused Hello from {} ({}): protocol {} (this node speaks {})", ctx->peer(), req->head_name(),
                 req->protocol_version(), options_.protocol_version);
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        fmt::format("protocol version mismatch: head speaks {}, node speaks {}; run the same "
                                    "sparkserve build on the head and every node",
                                    req->protocol_version(), options_.protocol_version));
  }
  if (req->head_nonce().size() != proto::kNonceBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        fmt::format("head_nonce must be {} bytes", proto::kNonceBytes));
  }
  Challenge c{req->head_nonce(), proto::NewNonce(), req->head_name(), ctx->peer(), Clock::now()};
  const std::string id = proto::NewRandomId();
  resp->set_challenge_id(id);
  resp->set_node_nonce(c.node_nonce);
  resp->set_token_required(options_.token.has_value());
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the node is shutting down");
  while (challenges_.size() >= kMaxChallenges) {  // forget the oldest
    auto oldest = challenges_.begin();
    for (auto it = challenges_.begin(); it != challenges_.end(); ++it) {
      if (it->second.created < oldest->second.created) oldest = it;
    }
    challenges_.erase(oldest);
  }
  challenges_.emplace(id, std::move(c));
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::Authenticate(grpc::ServerContext* ctx, const proto::AuthenticateRequest* req,
                                           proto::AuthenticateResponse* resp) {
  Challenge c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = challenges_.find(req->challenge_id());
    if (it == challenges_.end()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "unknown or expired challenge (answer Hello's challenge within 30 s, once)");
    }
    c = std::move(it->second);
    challenges_.erase(it);
  }
  // The token first: a head that cannot prove it learns nothing about this node.
  if (options_.token) {
    if (req->head_proof().empty()) {
      spdlog::warn("refused head {} ({}): it has no auth token and this node requires one", c.head_name, ctx->peer());
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this node requires an auth token (sparkserve-node --token-file) and the head sent "
                          "none; give the head the same token file (--token-file)");
    }
    if (!proto::ProofsEqual(req->head_proof(), proto::HeadProof(*options_.token, c.head_nonce, c.node_nonce))) {
      spdlog::warn("refused head {} ({}): auth token mismatch (its --token-file differs from this node's)",
                   c.head_name, ctx->peer());
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "auth token mismatch: the head's token differs from this node's --token-file");
    }
  }
  if (req->build_id() != options_.build_id) {
    spdlog::warn("refused head {} ({}): build {} (this node is {})", c.head_name, ctx->peer(), req->build_id(),
                 options_.build_id);
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        fmt::format("build id mismatch: head {}, node {}; run the same sparkserve build on the "
                                    "head and every node",
                                    req->build_id(), options_.build_id));
  }
  if (req->tp_world_size() < 2 || req->tp_rank() < 1 || req->tp_rank() >= req->tp_world_size()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        fmt::format("rank {} of {} is not a node's rank (1..world-1, world >= 2)", req->tp_rank(),
                                    req->tp_world_size()));
  }
  Session s;
  s.id = proto::NewRandomId();
  s.head_name = c.head_name;
  s.peer = ctx->peer();
  s.rank = req->tp_rank();
  s.world = req->tp_world_size();
  s.since = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the node is shutting down");
    if (session_) {
      spdlog::info("head {} ({}) is waiting: this node serves head {} ({}) since {:.1f} s", c.head_name, ctx->peer(),
                   session_->head_name, session_->peer, SecondsSince(session_->since));
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          fmt::format("busy: this node serves head {} ({}) since {:.1f} s; retry once that session "
                                      "ends (a dead head's session is released within 5 s)",
                                      session_->head_name, session_->peer, SecondsSince(session_->since)));
    }
    session_ = s;
    state_ = proto::NODE_STATE_CONNECTED;
    detail_.clear();
  }
  spdlog::info("session {} opened by head {} ({}) as rank {} of {}", s.id.substr(0, 8), s.head_name, s.peer, s.rank,
               s.world);
  resp->set_session_id(s.id);
  if (options_.token) resp->set_node_proof(proto::NodeProof(*options_.token, c.node_nonce, c.head_nonce));
  resp->set_protocol_version(options_.protocol_version);
  resp->set_build_id(options_.build_id);
  resp->set_cache_dir(options_.cache_dir.string());
  resp->set_device(options_.device);
  DescribeThisNode(resp);
  return grpc::Status::OK;
}

// ---------------------------------------------------------------------------------------------
// Sessions

grpc::Status NodeServiceImpl::CheckSession(const std::string& session_id, bool need_attached,
                                           grpc::ServerContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!session_ || session_id.empty() || session_->id != session_id) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "no such session (it ended, or another head holds this node): start again with Hello");
  }
  if (need_attached && !session_->attached) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "attach the session (Attach) before this call");
  }
  if (ctx != nullptr) session_->calls.insert(ctx);
  return grpc::Status::OK;
}

void NodeServiceImpl::EndCall(const std::string& session_id, grpc::ServerContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (session_ && session_->id == session_id) session_->calls.erase(ctx);
}

void NodeServiceImpl::ReleaseSession(const std::string& id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!session_ || session_->id != id) return;
  spdlog::info("session {} of head {} ended: {}", id.substr(0, 8), session_->head_name, reason);
  for (grpc::ServerContext* call : session_->calls) call->TryCancel();
  session_.reset();
  if (state_ != proto::NODE_STATE_SHUTTING_DOWN) state_ = proto::NODE_STATE_WAITING_FOR_HEAD;
}

void NodeServiceImpl::SetState(const std::string& session_id, proto::NodeState state, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!session_ || session_->id != session_id) return;
  state_ = state;
  if (!detail.empty()) detail_ = detail;
}

proto::NodeState NodeServiceImpl::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

// ---------------------------------------------------------------------------------------------
// Attach: the session's stream, and the steps

void NodeServiceImpl::LeaveGroup(const std::string& session_id) {
  if (joined_ == nullptr || joined_session_ != session_id) return;
  (void)joined_->Replace(nullptr);  // closes the connections: the peers' next operation fails at once
  joined_ = nullptr;
  joined_session_.clear();
}

absl::Status NodeServiceImpl::RunCheck(const proto::CollectiveCheck& check) {
  const int32_t world = joined_->world();
  const float expected = static_cast<float>(world * (world + 1) / 2);
  for (uint64_t n : check.floats()) {
    if (n == 0 || n > (uint64_t{1} << 28)) return absl::InvalidArgumentError(fmt::format("check size {} floats", n));
    std::vector<float> data(static_cast<size_t>(n));
    for (uint32_t it = 0; it < check.iterations(); ++it) {
      std::fill(data.begin(), data.end(), static_cast<float>(joined_->rank() + 1));
      if (absl::Status st = joined_->AllReduceSum(data); !st.ok()) return st;
    }
    if (check.iterations() > 0 && (data.front() != expected || data.back() != expected)) {
      return absl::DataLossError(fmt::format("all-reduce of {} floats summed to {}, expected {}", n, data.front(),
                                             expected));
    }
  }
  return absl::OkStatus();
}

absl::Status NodeServiceImpl::RunStep(const proto::StepMessage& step) {
  absl::StatusOr<model::StepPlan> plan = proto::DecodeStepPlan(step.plan());
  if (!plan.ok()) return plan.status();
  absl::StatusOr<model::StepOutput> out = loaded_->runner.runner->Run(*plan);
  if (!out.ok()) return out.status();
  return proto::CheckLockstep(*joined_, step.index(), proto::StepDigest(step.index(), step.plan(), *out));
}

grpc::Status NodeServiceImpl::Attach(grpc::ServerContext* ctx,
                                     grpc::ServerReaderWriter<proto::NodeMessage, proto::HeadMessage>* stream) {
  proto::HeadMessage msg;
  if (!stream->Read(&msg) || !msg.has_attach()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "Attach: the first message must be `attach`");
  }
  const std::string id = msg.attach().session_id();
  int32_t rank = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!session_ || session_->id != id) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "no such session (it ended, or another head holds this node): start again with Hello");
    }
    if (session_->attached) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this session is already attached");
    }
    session_->attached = true;
    session_->calls.insert(ctx);
    rank = session_->rank;
  }
  proto::NodeMessage attached;
  attached.mutable_attached();
  stream->Write(attached);

  std::string end_reason = "the head closed the session";
  bool running = false;
  while (stream->Read(&msg)) {
    if (!msg.has_step() && !msg.has_check()) continue;
    absl::Status st;
    {
      std::lock_guard<std::mutex> lock(runtime_mu_);
      if (joined_ == nullptr || joined_session_ != id) {
        st = absl::FailedPreconditionError("this node has not joined the session's group (InitCollective)");
      } else if (msg.has_check()) {
        st = RunCheck(msg.check());
      } else if (!loaded_ || joined_ != loaded_->group.get()) {
        st = absl::FailedPreconditionError("a step arrived before this node loaded its shard");
      } else {
        st = RunStep(msg.step());
      }
      if (!st.ok()) LeaveGroup(id);
    }
    if (st.ok() && msg.has_check()) continue;
    if (st.ok()) {
      steps_total_.fetch_add(1);
      if (!running) SetState(id, proto::NODE_STATE_RUNNING);
      running = true;
      continue;
    }
    const std::string what =
        msg.has_check() ? fmt::format("cluster-check failed on this node (rank {}): {}", rank, std::string(st.message()))
                        : fmt::format("step {} failed on this node (rank {}): {}", msg.step().index(), rank,
                                      std::string(st.message()));
    spdlog::error("{}", what);
    SetState(id, proto::NODE_STATE_FAILED, what);
    proto::NodeMessage failed;
    failed.mutable_failed()->set_index(msg.step().index());
    failed.mutable_failed()->set_message(std::string(st.message()));
    stream->Write(failed);
  }
  if (ctx->IsCancelled()) end_reason = "the head's connection was lost or the session was cancelled";
  {
    std::lock_guard<std::mutex> lock(runtime_mu_);
    LeaveGroup(id);
  }
  ReleaseSession(id, end_reason);
  return grpc::Status::OK;
}

// ---------------------------------------------------------------------------------------------
// Health, Shutdown

grpc::Status NodeServiceImpl::Health(grpc::ServerContext*, const proto::HealthRequest* req,
                                     proto::HealthResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  resp->set_state(state_);
  resp->set_uptime_seconds(SecondsSince(started_));
  if (!session_ || req->session_id().empty() || req->session_id() != session_->id) return grpc::Status::OK;
  resp->set_protocol_version(options_.protocol_version);
  resp->set_build_id(options_.build_id);
  resp->set_head_name(session_->head_name);
  resp->set_detail(detail_);
  resp->set_shard_bytes_received_total(bytes_received_total_.load());
  resp->set_shard_bytes_reused_total(bytes_reused_total_.load());
  resp->set_steps_total(steps_total_.load());
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::Shutdown(grpc::ServerContext*, const proto::ShutdownRequest* req,
                                       proto::ShutdownResponse*) {
  if (grpc::Status st = CheckSession(req->session_id(), /*need_attached=*/false, nullptr); !st.ok()) return st;
  ReleaseSession(req->session_id(), req->reason().empty() ? "the head ended it" : fmt::format("the head ended it: {}",
                                                                                             req->reason()));
  if (req->exit_process() && on_exit_) {
    spdlog::info("the head asked this node to exit");
    on_exit_();
  }
  return grpc::Status::OK;
}

}  // namespace sparkserve::node
