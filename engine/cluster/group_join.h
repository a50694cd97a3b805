// JoinGroup: builds the data-plane group of the head (rank 0) and its nodes. Each node gets its
// setup over an InitCollective stream; the rendezvous keys every rank publishes are relayed by the
// head to all the others (the head's own store is the hub), so the group needs no store server
// and no port beyond the collective's own.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective.h"
#include "engine/node_client.h"

namespace sparkserve::engine::cluster {

struct GroupMember {
  NodeClient* node = nullptr;
  int32_t rank = 1;
  std::string host;  // the node's address the other ranks connect to
};

struct GroupOptions {
  std::string head_host;                          // this machine's address the nodes connect to
  std::chrono::milliseconds op_timeout{3000};     // every collective operation's deadline
  std::chrono::milliseconds join_timeout{30000};  // the whole set-up
};

// Every node of `members` and this process join one Gloo group of 1 + members.size() ranks. The
// errors name the node that failed (its own message when it could not join).
absl::StatusOr<std::unique_ptr<core::Collective>> JoinGlooGroup(const std::vector<GroupMember>& members,
                                                               const GroupOptions& options);

}  // namespace sparkserve::engine::cluster
