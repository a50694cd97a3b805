// RendezvousStore: the key-value meeting point where the ranks of one collective group publish
// their connection addresses and read the others' (Gloo's rendezvous). The head serves it to its
// nodes over their gRPC session (engine/cluster, node/); InMemoryRendezvousStore is the local one.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"

namespace sparkserve::core {

class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  // Publishes `value` under `key` for every rank of the group.
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting until some rank sets it; DeadlineExceeded after `timeout`, or the
  // store's own error (Unavailable: the relay to the head broke).
  virtual absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

// A store in this process. `on_set` (optional) sees every Set, e.g. to forward it to remote ranks;
// Put adds a value that came from elsewhere without calling it. Fail() wakes every waiter with
// `error` (and fails later Gets).
class InMemoryRendezvousStore : public RendezvousStore {
 public:
  using SetHook = std::function<absl::Status(const std::string& key, const std::string& value)>;
  InMemoryRendezvousStore() = default;
  explicit InMemoryRendezvousStore(SetHook on_set) : on_set_(std::move(on_set)) {}

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override;
  void Put(const std::string& key, const std::string& value);
  void Fail(const absl::Status& error);

 private:
  SetHook on_set_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
  absl::Status error_;
};

}  // namespace sparkserve::core
