// PlannedSafetensorsWriter: writes a (sharded) safetensors checkpoint whose tensor names, dtypes and
// shapes are known up front but whose data arrives one tensor at a time, in any order and from any
// thread: headers are written first, each tensor lands at its planned offset (pwrite), so memory
// stays at one tensor per writer thread. Layout as the reference writer: per shard, tensors ordered
// by element size (largest first) then name, so each is aligned to its element size.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace sparkserve::quant {

struct PlannedTensor {
  std::string name;
  core::DType dtype = core::DType::kF32;
  core::Shape shape;
  uint64_t nbytes() const;
};

class PlannedSafetensorsWriter {
 public:
  // `groups`: tensors that must share a shard (one source module's outputs), in output order. Groups
  // fill shards of at most `max_shard_bytes` of data greedily (a larger group gets a shard alone).
  // One shard is written as dir/model.safetensors; more as model-0000K-of-0000N.safetensors plus
  // model.safetensors.index.json. Creates the files (sized, headers written) in `dir`, which must exist.
  static absl::StatusOr<std::unique_ptr<PlannedSafetensorsWriter>> Create(
      const std::string& dir, const std::vector<std::vector<PlannedTensor>>& groups, uint64_t max_shard_bytes,
      const std::map<std::string, std::string>& metadata = {});
  ~PlannedSafetensorsWriter();

  // Writes tensor `name`'s data; its size must be the planned one. Thread-safe; each tensor once.
  absl::Status Write(std::string_view name, std::span<const uint8_t> bytes);
  absl::Status Write(std::string_view name, const core::Tensor& t);
  // Checks that every tensor was written, closes the files and writes the index. Call once.
  absl::Status Finish();

  size_t num_shards() const { return files_.size(); }
  uint64_t total_bytes() const { return total_; }

 private:
  struct Slot {
    int fd_index = 0;
    uint64_t offset = 0;  // absolute file offset
    uint64_t nbytes = 0;
    std::atomic<bool> written{false};
  };
  struct File {
    std::string path;
    int fd = -1;
  };
  PlannedSafetensorsWriter() = default;

  std::string dir_;
  std::vector<File> files_;
  std::map<std::string, std::unique_ptr<Slot>, std::less<>> slots_;
  std::vector<std::pair<std::string, std::string>> weight_map_;  // name -> shard file name, in plan order
  uint64_t total_ = 0;
  bool finished_ = false;
};

}  // namespace sparkserve::quant
