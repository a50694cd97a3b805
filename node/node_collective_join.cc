// NodeService::InitCollective: the node joins the session's group. Gloo: the rendezvous store is
// relayed by the head over this stream (the node's keys go up, the other ranks' come down), so the
// group needs no port beyond Gloo's own and no store server anywhere. NCCL: the setup carries the
// head's unique id, and the node joins on its own --device.
#include <thread>

#include "core/gloo_collective.h"
#include "core/nccl_groups.h"
#include "fmt/format.h"
#include "node/node_service.h"
#include "spdlog/spdlog.h"

namespace sparkserve::node {
namespace {

using Stream = grpc::ServerReaderWriter<proto::RendezvousMessage, proto::RendezvousMessage>;

// Keys this rank sets go to the head; keys the head relays are read by a thread into `local`.
class RelayStore : public core::RendezvousStore {
 public:
  explicit RelayStore(Stream* stream) : stream_(stream) {}
  absl::Status Set(const std::string& key, const std::string& value) override {
    local.Put(key, value);
    proto::RendezvousMessage m;
    m.mutable_key()->set_key(key);
    m.mutable_key()->set_value(value);
    std::lock_guard<std::mutex> lock(write_mu_);
    if (!stream_->Write(m)) return absl::UnavailableError("rendezvous: the head's stream closed");
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override {
    return local.Get(key, timeout);
  }
  bool Write(const proto::RendezvousMessage& m) {
    std::lock_guard<std::mutex> lock(write_mu_);
    return stream_->Write(m);
  }
  core::InMemoryRendezvousStore local;

 private:
  Stream* stream_;
  std::mutex write_mu_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<core::Collective>> NodeServiceImpl::JoinOwnRank(const proto::CollectiveSetup& setup,
                                                                              core::RendezvousStore& store) {
  if (setup.kind() == proto::COLLECTIVE_NCCL) {
    core::NcclOptions o;
    o.rank = setup.rank();
    o.world = setup.world_size();
    o.device = options_.device;
    o.unique_id = setup.nccl_unique_id();
    o.timeout = std::chrono::milliseconds(setup.join_timeout_ms() > 0 ? setup.join_timeout_ms() : setup.timeout_ms());
    return (options_.nccl ? options_.nccl : core::RealNcclGroups())->Join(o);
  }
  core::GlooOptions o;
  o.rank = setup.rank();
  o.world = setup.world_size();
  o.host = setup.host();
  o.timeout = std::chrono::milliseconds(setup.timeout_ms());
  absl::StatusOr<std::unique_ptr<core::GlooCollective>> group = core::GlooCollective::Create(o, store);
  if (!group.ok()) return group.status();
  return std::unique_ptr<core::Collective>(*std::move(group));
}

grpc::Status NodeServiceImpl::InitCollective(grpc::ServerContext* ctx, Stream* stream) {
  proto::RendezvousMessage msg;
  if (!stream->Read(&msg) || !msg.has_setup()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "InitCollective: the first message must be the setup");
  }
  const proto::CollectiveSetup setup = msg.setup();
  const std::string& sid = setup.session_id();
  if (grpc::Status st = CheckSession(sid, /*need_attached=*/true, ctx); !st.ok()) return st;
  CallScope end_call{this, sid, ctx};

  if (setup.kind() != proto::COLLECTIVE_GLOO && setup.kind() != proto::COLLECTIVE_NCCL) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "InitCollective: unknown collective kind");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!session_ || session_->rank != setup.rank() || session_->world != setup.world_size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          fmt::format("InitCollective: rank {} of {} is not this session's rank", setup.rank(),
                                      setup.world_size()));
    }
  }
  if (setup.timeout_ms() < 100 || setup.timeout_ms() > 600000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        fmt::format("InitCollective: timeout {} ms is outside 100..600000", setup.timeout_ms()));
  }
  if (setup.join_timeout_ms() > 600000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        fmt::format("InitCollective: join timeout {} ms is above 600000", setup.join_timeout_ms()));
  }

  RelayStore store(stream);
  std::thread reader([&] {
    proto::RendezvousMessage in;
    while (stream->Read(&in)) {
      if (in.has_key()) store.local.Put(in.key().key(), in.key().value());
    }
    store.local.Fail(absl::UnavailableError("rendezvous: the head closed the stream"));
  });
  const int32_t rank = setup.rank(), world = setup.world_size();
  absl::StatusOr<std::unique_ptr<core::Collective>> group = JoinOwnRank(setup, store);
  proto::RendezvousMessage ready;
  if (group.ok()) {
    const std::string transport = (*group)->transport();
    std::lock_guard<std::mutex> lock(runtime_mu_);
    if (CheckSession(sid, true, nullptr).error_code() != grpc::StatusCode::OK) {
      ready.mutable_ready()->set_error("the session ended while joining");
    } else {
      LeaveGroup(joined_session_);
      // The loaded runner's group when it is this rank's (steps); else a bare one (cluster-check).
      if (loaded_ && loaded_->group->rank() == rank && loaded_->group->world() == world) {
        joined_ = loaded_->group.get();
      } else {
        check_group_ = std::make_unique<core::ReplaceableCollective>(rank, world);
        joined_ = check_group_.get();
      }
      (void)joined_->Replace(*std::move(group));
      joined_session_ = sid;
      ready.mutable_ready()->set_transport(transport);
      spdlog::info("joined the group as rank {} of {} ({})", rank, world, transport);
    }
  } else {
    spdlog::error("joining the group as rank {} of {}: {}", rank, world, std::string(group.status().message()));
    ready.mutable_ready()->set_error(std::string(group.status().message()));
    ready.mutable_ready()->set_error_code(static_cast<int32_t>(group.status().code()));
  }
  if (ready.ready().error().empty()) SetState(sid, proto::NODE_STATE_COLLECTIVE_READY);
  if (!store.Write(ready)) ctx->TryCancel();
  reader.join();  // the head ends its side once it has every rank's answer (or the session ends)
  return grpc::Status::OK;
}

}  // namespace sparkserve::node
