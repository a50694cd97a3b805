// ShardCache: the node's content-addressed store of shard tensors under --cache-dir (default
// ~/.cache/sparkserve): one file per tensor, named by its SHA-256 (blobs/ab/abcd...). Writes are
// atomic (a temporary file, fsync, rename, fsync of the directory: a half-written blob never looks
// complete, even after a crash); reads verify the digest, so a corrupted blob is found, deleted,
// and fetched again. A second start of the same model reads everything from here.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace sparkserve::node {

// A verified blob, mapped read-only; `keep_alive` holds the mapping.
struct CachedBlob {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<void> keep_alive;
};

class ShardCache {
 public:
  explicit ShardCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  // Creates the directories and removes temporary files a crash left behind.
  absl::Status Init();
  const std::filesystem::path& dir() const { return dir_; }

  // The blob of `sha256` (32 raw bytes), checked against its size and digest. NotFound when
  // absent; DataLoss when it is there but wrong (it is deleted, so the next Write replaces it).
  absl::StatusOr<CachedBlob> Read(const std::string& sha256, uint64_t bytes) const;
  // Stores `data` as the blob of `sha256` (the caller has checked the digest).
  absl::Status Write(const std::string& sha256, std::span<const uint8_t> data) const;
  std::filesystem::path PathOf(const std::string& sha256) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace sparkserve::node
