// SHA-256 (OpenSSL libcrypto): the content address of a shard tensor and the check of each chunk.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace sparkserve::proto {

// The 32-byte digest of `data`.
std::string Sha256(std::span<const uint8_t> data);
std::string Sha256(std::string_view data);
// 64 lower-case hex chars of a 32-byte digest (or of any bytes).
std::string HexOf(std::string_view bytes);

// Incremental: Update any number of times, then Final once.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;
  void Update(std::span<const uint8_t> data);
  void Update(std::string_view data);
  std::string Final();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sparkserve::proto
