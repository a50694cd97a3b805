// The control-plane protocol's version and shared limits (head and node must agree).
#pragma once
#include <cstdint>

namespace sparkserve::proto {

// Bump on any change to node.proto or its semantics that an older peer cannot follow.
inline constexpr uint32_t kNodeProtocolVersion = 2;

// Largest gRPC message either side accepts (a LoadShard chunk's data is at most kMaxChunkBytes).
inline constexpr int kMaxMessageBytes = 64 << 20;
inline constexpr uint64_t kMaxChunkBytes = 16 << 20;
// LoadShard chunks the head sends (the node accepts up to kMaxChunkBytes).
inline constexpr uint64_t kShardChunkBytes = 4 << 20;

// A session whose head stops answering is released within this (gRPC keepalive on the session's
// stream; an authenticated session that never attaches expires after it too).
inline constexpr int kSessionKeepaliveMs = 1000;
inline constexpr int kSessionKeepaliveTimeoutMs = 2000;
inline constexpr int kUnattachedSessionMs = 4000;

}  // namespace sparkserve::proto
