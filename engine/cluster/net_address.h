// Addresses for the data plane: the numeric address of a node as this head reaches it (the node's
// Gloo listener binds it), and this machine's address on the route towards it (the head's).
#pragma once
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace sparkserve::engine::cluster {

// "host:port" or "[v6]:port" -> (host, port). InvalidArgument naming the text.
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& target);
// The first numeric address `host` resolves to (IPv4 preferred).
absl::StatusOr<std::string> ResolveHost(const std::string& host);
// This machine's address that packets to `peer` (numeric) leave from (a UDP socket connected to
// it: nothing is sent).
absl::StatusOr<std::string> LocalAddressFacing(const std::string& peer);

}  // namespace sparkserve::engine::cluster
