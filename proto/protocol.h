// The control-plane protocol's version and shared limits (head and node must agree).
#pragma once
#include <cstdint>

namespace sparkserve::proto {

// Bump on any change to node.proto or its semantics that an older peer cannot follow.
inline constexpr uint32_t kNodeProtocolVersion = 1;

// Largest gRPC message either side accepts (a LoadShard chunk's data is at most kMaxChunkBytes).
inline constexpr int kMaxMessageBytes = 64 << 20;
inline constexpr uint64_t kMaxChunkBytes = 16 << 20;

}  // namespace sparkserve::proto
