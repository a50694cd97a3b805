// Step digests and their comparison across ranks (see lockstep.h).
#include "proto/lockstep.h"

#include <cstring>
#include <vector>

#include "fmt/format.h"
#include "proto/sha256.h"

namespace sparkserve::proto {
namespace {

template <typename T>
void Add(Sha256Hasher& h, const T& v) {
  h.Update(std::string_view(reinterpret_cast<const char*>(&v), sizeof(v)));
}

}  // namespace

uint64_t StepDigest(uint64_t index, std::string_view plan_bytes, const model::StepOutput& out) {
  Sha256Hasher h;
  Add(h, index);
  Add(h, static_cast<uint64_t>(plan_bytes.size()));
  h.Update(plan_bytes);
  const core::Tensor& logits = out.logits;
  if (logits.defined() && logits.device().is_cpu() && logits.rank() == 2 && logits.dtype() == core::DType::kF32) {
    const int64_t rows = logits.dim(0), cols = logits.dim(1);
    Add(h, rows);
    Add(h, cols);
    const float* L = logits.data<float>();
    constexpr int64_t kSamples = 16;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < kSamples && cols > 0; ++i) {
        uint32_t bits = 0;
        std::memcpy(&bits, L + r * cols + (i * cols) / kSamples, sizeof(bits));
        Add(h, bits);
      }
    }
  }
  for (int32_t b : out.logit_row_begin) Add(h, b);
  for (const model::SampledRow& s : out.sampled) {
    Add(h, static_cast<int32_t>(s.status));
    Add(h, s.id);
  }
  for (const auto& drafts : out.drafts) {
    Add(h, static_cast<uint64_t>(drafts.size()));
    for (int32_t t : drafts) Add(h, t);
  }
  const std::string d = h.Final();
  uint64_t v = 0;
  std::memcpy(&v, d.data(), sizeof(v));
  return v;
}

absl::Status CheckLockstep(core::Collective& group, uint64_t index, uint64_t digest) {
  const int32_t world = group.world();
  if (world == 1) return absl::OkStatus();
  std::vector<float> slots(static_cast<size_t>(world) * 4, 0.0f);
  for (int i = 0; i < 4; ++i) {
    slots[static_cast<size_t>(group.rank()) * 4 + i] = static_cast<float>((digest >> (16 * i)) & 0xffff);
  }
  if (absl::Status st = group.AllReduceSum(slots); !st.ok()) return st;
  std::vector<uint64_t> digests(static_cast<size_t>(world), 0);
  for (int32_t r = 0; r < world; ++r) {
    for (int i = 0; i < 4; ++i) {
      digests[r] |= static_cast<uint64_t>(slots[static_cast<size_t>(r) * 4 + i]) << (16 * i);
    }
  }
  for (int32_t r = 1; r < world; ++r) {
    if (digests[r] != digests[0]) {
      std::string all;
      for (int32_t q = 0; q < world; ++q) all += fmt::format("{}rank {}: {:016x}", q ? ", " : "", q, digests[q]);
      return absl::AbortedError(fmt::format(
          "lockstep check failed at step {}: the ranks ran different steps or computed different outputs ({}); "
          "the group is stopped",
          index, all));
    }
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::proto
