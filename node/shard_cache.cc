// ShardCache: mapped, verified reads and atomic writes of content-addressed blobs (see shard_cache.h).
#include "node/shard_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "fmt/format.h"
#include "proto/sha256.h"
#include "spdlog/spdlog.h"

namespace sparkserve::node {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::InternalError(fmt::format("{}: {}", what, std::strerror(errno)));
}

absl::Status FsyncPath(const std::filesystem::path& p, int flags) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Errno(fmt::format("open {}", p.string()));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Errno(fmt::format("fsync {}", p.string()));
  return absl::OkStatus();
}

}  // namespace

absl::Status ShardCache::Init() {
  std::error_code ec;
  std::filesystem::create_directories(dir_ / "blobs", ec);
  if (ec) return absl::InternalError(fmt::format("shard cache {}: cannot create it: {}", dir_.string(), ec.message()));
  std::filesystem::create_directories(dir_ / "tmp", ec);
  if (ec) return absl::InternalError(fmt::format("shard cache {}: cannot create tmp/: {}", dir_.string(), ec.message()));
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "tmp", ec)) std::filesystem::remove(e.path(), ec);
  return absl::OkStatus();
}

std::filesystem::path ShardCache::PathOf(const std::string& sha256) const {
  const std::string hex = proto::HexOf(sha256);
  return dir_ / "blobs" / hex.substr(0, 2) / hex;
}

absl::StatusOr<CachedBlob> ShardCache::Read(const std::string& sha256, uint64_t bytes) const {
  const std::filesystem::path path = PathOf(sha256);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(fmt::format("no cached blob {}", path.filename().string()));
    return Errno(fmt::format("open {}", path.string()));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Errno(fmt::format("stat {}", path.string()));
  }
  auto corrupted = [&](const std::string& why) -> absl::Status {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    spdlog::warn("shard cache: blob {} is corrupted ({}); removed it, it will be fetched again", path.string(), why);
    return absl::DataLossError(fmt::format("cached blob {} is corrupted ({})", path.filename().string(), why));
  };
  if (static_cast<uint64_t>(st.st_size) != bytes) {
    ::close(fd);
    return corrupted(fmt::format("{} bytes, expected {}", st.st_size, bytes));
  }
  CachedBlob blob;
  blob.size = bytes;
  if (bytes == 0) {
    ::close(fd);
    static const uint8_t kEmpty = 0;
    blob.data = &kEmpty;
    if (proto::Sha256(std::span<const uint8_t>()) != sha256) return corrupted("digest differs");
    return blob;
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Errno(fmt::format("mmap {}", path.string()));
  blob.keep_alive = std::shared_ptr<void>(map, [bytes](void* p) { ::munmap(p, bytes); });
  blob.data = static_cast<const uint8_t*>(map);
  if (proto::Sha256(std::span<const uint8_t>(blob.data, blob.size)) != sha256) {
    blob.keep_alive.reset();
    return corrupted("its SHA-256 differs from its name");
  }
  return blob;
}

absl::Status ShardCache::Write(const std::string& sha256, std::span<const uint8_t> data) const {
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path final_path = PathOf(sha256);
  std::error_code ec;
  std::filesystem::create_directories(final_path.parent_path(), ec);
  if (ec) return absl::InternalError(fmt::format("shard cache: mkdir {}: {}", final_path.parent_path().string(), ec.message()));
  const std::filesystem::path tmp =
      dir_ / "tmp" / fmt::format("{}.{}.{}", final_path.filename().string(), ::getpid(), counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(fmt::format("shard cache: create {}", tmp.string()));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status st = Errno(fmt::format("shard cache: write {}", tmp.string()));
      ::close(fd);
      std::filesystem::remove(tmp, ec);
      return st;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    absl::Status st = Errno(fmt::format("shard cache: fsync {}", tmp.string()));
    ::close(fd);
    std::filesystem::remove(tmp, ec);
    return st;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    absl::Status st = Errno(fmt::format("shard cache: rename to {}", final_path.string()));
    std::filesystem::remove(tmp, ec);
    return st;
  }
  return FsyncPath(final_path.parent_path(), O_RDONLY | O_DIRECTORY);
}

}  // namespace sparkserve::node
