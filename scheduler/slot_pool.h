// SlotPool: the free list of state slots (one per running sequence: GDN recurrent state + conv
// window in the ModelRunner). Slot ids only; the state memory belongs to the ModelRunner.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "model/step_plan.h"

namespace sparkserve::scheduler {

class SlotPool {
 public:
  explicit SlotPool(int32_t num_slots);

  int32_t num_slots() const { return static_cast<int32_t>(in_use_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  // A free slot, or nullopt when all are taken.
  std::optional<model::SlotId> Acquire();
  void Release(model::SlotId slot);

 private:
  std::vector<model::SlotId> free_;  // stack, lowest id on top
  std::vector<uint8_t> in_use_;      // [num_slots]: catches double frees
};

}  // namespace sparkserve::scheduler
