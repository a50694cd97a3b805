// JoinGroup: one InitCollective stream per node, a reader thread each, the head's own join (Gloo or
// NCCL) on the calling thread (see group_join.h).
#include "engine/cluster/group_join.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
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
  std::atomic<bool> answered{false};
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

// How long a failed head waits for the nodes' own answers before cancelling their joins.
constexpr std::chrono::milliseconds kAnswerGrace{2000};

bool IsSetupError(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kFailedPrecondition ||
         code == absl::StatusCode::kUnimplemented;
}

}  // namespace

const char* CollectiveName(CollectiveKind kind) { return kind == CollectiveKind::kNccl ? "nccl" : "gloo"; }

absl::StatusOr<std::unique_ptr<core::Collective>> JoinGroup(const std::vector<GroupMember>& members,
                                                           const GroupOptions& o) {
  const int32_t world = static_cast<int32_t>(members.size()) + 1;
  const std::shared_ptr<core::NcclGroups> nccl =
      o.kind != CollectiveKind::kNccl ? nullptr : o.nccl ? o.nccl : core::RealNcclGroups();
  std::string nccl_id;
  if (nccl) {
    absl::StatusOr<std::string> id = nccl->NewUniqueId();
    if (!id.ok()) return id.status();
    nccl_id = *std::move(id);
  }
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
    s->set_kind(nccl ? proto::COLLECTIVE_NCCL : proto::COLLECTIVE_GLOO);
    s->set_rank(m.rank);
    s->set_world_size(world);
    s->set_host(m.host);
    s->set_timeout_ms(static_cast<uint32_t>(o.op_timeout.count()));
    s->set_join_timeout_ms(static_cast<uint32_t>(o.join_timeout.count()));
    if (nccl) s->set_nccl_unique_id(nccl_id);
    n->Write(setup);
    nodes.push_back(std::move(n));
  }
  // Each node's keys go to the hub and to every other node, until it answers.
  auto answers_mu = std::make_shared<std::mutex>();
  auto answers_cv = std::make_shared<std::condition_variable>();
  for (auto& n : nodes) {
    NodeStream* self = n.get();
    n->reader = std::thread([self, &nodes, &hub, answers_mu, answers_cv] {
      proto::RendezvousMessage in;
      while (self->stream->Read(&in)) {
        if (in.has_key()) {
          hub.Put(in.key().key(), in.key().value());
          for (auto& other : nodes) {
            if (other.get() != self) other->Write(in);
          }
        } else if (in.has_ready()) {
          self->ready = in.ready();
          {
            std::lock_guard<std::mutex> lock(*answers_mu);
            self->answered = true;
          }
          answers_cv->notify_all();
          return;
        }
      }
    });
  }
  absl::StatusOr<std::unique_ptr<core::Collective>> mine = absl::UnknownError("not joined");
  if (nccl) {
    core::NcclOptions no;
    no.rank = 0;
    no.world = world;
    no.device = o.head_device;
    no.unique_id = nccl_id;
    no.timeout = o.join_timeout;
    mine = nccl->Join(no);
  } else {
    core::GlooOptions go;
    go.rank = 0;
    go.world = world;
    go.host = o.head_host;
    go.timeout = o.op_timeout;
    absl::StatusOr<std::unique_ptr<core::GlooCollective>> gloo = core::GlooCollective::Create(go, hub);
    if (gloo.ok()) {
      mine = std::unique_ptr<core::Collective>(*std::move(gloo));
    } else {
      mine = gloo.status();
    }
  }
  if (!mine.ok()) {
    // The nodes that already know why (a peer's NCCL failure is seen by every rank) answer at once:
    // their messages name the cause. Then the rest are cancelled (their own joins fail with it).
    std::unique_lock<std::mutex> lock(*answers_mu);
    answers_cv->wait_for(lock, kAnswerGrace, [&] {
      return std::all_of(nodes.begin(), nodes.end(), [](const auto& n) { return n->answered.load(); });
    });
    lock.unlock();
    for (auto& n : nodes) n->ctx.TryCancel();
  }
  for (auto& n : nodes) n->reader.join();
  // Collect every node's answer, then end the streams.
  std::string failures;
  absl::StatusCode code = absl::StatusCode::kUnavailable;
  for (auto& n : nodes) {
    n->stream->WritesDone();
    grpc::Status st = n->stream->Finish();
    const std::string target = n->member.node->target();
    if (n->answered && !n->ready.error().empty()) {
      failures += fmt::format("{}node {} could not join: {}", failures.empty() ? "" : "; ", target, n->ready.error());
      const auto node_code = static_cast<absl::StatusCode>(n->ready.error_code());
      if (IsSetupError(node_code)) code = node_code;
    } else if (!n->answered && mine.ok()) {
      failures += fmt::format("{}node {}: InitCollective ended without an answer: {}", failures.empty() ? "" : "; ",
                              target, st.ok() ? std::string("closed") : st.error_message());
    } else if (n->answered) {
      spdlog::info("node {} joined the group as rank {} ({})", target, n->member.rank, n->ready.transport());
    }
  }
  if (!mine.ok() && IsSetupError(mine.status().code())) {
    return absl::Status(mine.status().code(), fmt::format("this head could not join the {} group: {}{}{}",
                                                          CollectiveName(o.kind), std::string(mine.status().message()),
                                                          failures.empty() ? "" : "; ", failures));
  }
  if (!failures.empty()) return absl::Status(code, failures);
  if (!mine.ok()) return mine.status();
  return mine;
}

}  // namespace sparkserve::engine::cluster
