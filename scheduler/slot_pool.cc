// SlotPool: free-list bookkeeping of state slot ids.
#include "scheduler/slot_pool.h"

#include <cstdlib>

#include "spdlog/spdlog.h"

namespace sparkserve::scheduler {

SlotPool::SlotPool(int32_t num_slots) : in_use_(static_cast<size_t>(num_slots), 0) {
  free_.reserve(static_cast<size_t>(num_slots));
  for (model::SlotId s = num_slots - 1; s >= 0; --s) free_.push_back(s);
}

std::optional<model::SlotId> SlotPool::Acquire() {
  if (free_.empty()) return std::nullopt;
  model::SlotId s = free_.back();
  free_.pop_back();
  in_use_[static_cast<size_t>(s)] = 1;
  return s;
}

void SlotPool::Release(model::SlotId slot) {
  if (slot < 0 || slot >= num_slots() || !in_use_[static_cast<size_t>(slot)]) {
    spdlog::critical("SlotPool: slot {} released twice or never acquired", slot);
    std::abort();
  }
  in_use_[static_cast<size_t>(slot)] = 0;
  free_.push_back(slot);
}

}  // namespace sparkserve::scheduler
