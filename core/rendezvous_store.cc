// InMemoryRendezvousStore (see rendezvous_store.h).
#include "core/rendezvous_store.h"

#include "fmt/format.h"

namespace sparkserve::core {

absl::Status InMemoryRendezvousStore::Set(const std::string& key, const std::string& value) {
  Put(key, value);
  return on_set_ ? on_set_(key, value) : absl::OkStatus();
}

void InMemoryRendezvousStore::Put(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
  }
  changed_.notify_all();
}

void InMemoryRendezvousStore::Fail(const absl::Status& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = error;
  }
  changed_.notify_all();
}

absl::StatusOr<std::string> InMemoryRendezvousStore::Get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool found = changed_.wait_for(lock, timeout, [&] { return !error_.ok() || values_.count(key) > 0; });
  if (auto it = values_.find(key); it != values_.end()) return it->second;
  if (!error_.ok()) return error_;
  (void)found;
  return absl::DeadlineExceededError(
      fmt::format("rendezvous: no rank published '{}' within {} ms", key, timeout.count()));
}

}  // namespace sparkserve::core
