// JoinGlooGroup: one InitCollective stream per node, a reader thread each, the head's own join on
// the calling thread (see group_join.h).
#include "engine/cluster/group_join.h"

#include <mutex>
#include <thread>

#include "core/gloo_collective.h"
#include "core/rendezvous_store.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace sparkserve::engine::cluster {
namespace {

struct NodeStream {
  GroupMember member;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<proto::RendezvousMessage, proto::RendezvousMessage>> stream;
  std::mutex write_mu;
  bool write_failed = false;
  proto::CollectiveReady ready;  // the node's answer
  bool answered = false;
  std::thread reader;

  void Write(const proto::RendezvousMessage& m) {
    std::lock_guard<std::mutex> lock(write_mu);
    if (!write_failed && !stream->Write(m)) write_failed = true;
  }
};

proto::RendezvousMessage KeyMessage(const std::string& key, const std::string& value) {
  proto::RendezvousMessage m;
  m.mutable_key()->set_key(key);
  m.mutable_key()->set_value(value);
  return m;
}

}  // namespace

absl::StatusOr<std::unique_ptr<core::Collective>> JoinGlooGroup(const std::vector<GroupMember>& members,
                                                               const GroupOptions& o) {
  const int32_t world = static_cast<int32_t>(members.size()) + 1;
  std::vector<std::unique_ptr<NodeStream>> nodes;
  // The hub: keys this process publishes go to every node.
  core::InMemoryRendezvousStore hub([&nodes](const std::string& key, const std::string& value) {
    for (auto& n : nodes) n->Write(KeyMessage(key, value));
    return absl::OkStatus();
  });
  const auto deadline = std::chrono::system_clock::now() + o.join_timeout;
  for (const GroupMember& m : members) {
    auto n = std::make_unique<NodeStream>();
    n->member = m;
    n->ctx.set_deadline(deadline);
    n->stream = m.node->stub().InitCollective(&n->ctx);
    proto::RendezvousMessage setup;
    proto::CollectiveSetup* s = setup.mutable_setup();
    s->set_session_id(m.node->session_id());
    s->set_kind(proto::COLLECTIVE_GLOO);
    s->set_rank(m.rank);
    s->set_world_size(world);
    s->set_host(m.host);
    s->set_timeout_ms(static_cast<uint32_t>(o.op_timeout.count()));
    n->Write(setup);
    nodes.push_back(std::move(n));
  }
  // Each node's keys go to the hub and to every other node, until it answers.
  for (auto& n : nodes) {
    NodeStream* self = n.get();
    n->reader = std::thread([self, &nodes, &hub] {
      proto::RendezvousMessage in;
      while (self->stream->Read(&in)) {
        if (in.has_key()) {
          hub.Put(in.key().key(), in.key().value());
          for (auto& other : nodes) {
            if (other.get() != self) other->Write(in);
          }
        } else if (in.has_ready()) {
          self->ready = in.ready();
          self->answered = true;
          return;
        }
      }
    });
  }
  core::GlooOptions go;
  go.rank = 0;
  go.world = world;
  go.host = o.head_host;
  go.timeout = o.op_timeout;
  absl::StatusOr<std::unique_ptr<core::GlooCollective>> mine = core::GlooCollective::Create(go, hub);
  if (!mine.ok()) {
    for (auto& n : nodes) n->ctx.TryCancel();  // the nodes' own joins fail with it
  }
  for (auto& n : nodes) n->reader.join();
  // Collect every node's answer, then end the streams.
  std::string failures;
  for (auto& n : nodes) {
    n->stream->WritesDone();
    grpc::Status st = n->stream->Finish();
    const std::string target = n->member.node->target();
    if (n->answered && !n->ready.error().empty()) {
      failures += fmt::format("{}node {} could not join: {}", failures.empty() ? "" : "; ", target, n->ready.error());
    } else if (!n->answered && mine.ok()) {
      failures += fmt::format("{}node {}: InitCollective ended without an answer: {}", failures.empty() ? "" : "; ",
                              target, st.ok() ? std::string("closed") : st.error_message());
    } else if (n->answered) {
      spdlog::info("node {} joined the group as rank {} ({})", target, n->member.rank, n->ready.transport());
    }
  }
  if (!failures.empty()) return absl::UnavailableError(failures);
  if (!mine.ok()) return mine.status();
  return std::unique_ptr<core::Collective>(*std::move(mine));
}

}  // namespace sparkserve::engine::cluster
