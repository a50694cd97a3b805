// Sharded safetensors writing with planned offsets (see planned_safetensors_writer.h).
#include "quant/quantizer/planned_safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace sparkserve::quant {
namespace {

absl::Status PWriteAll(int fd, const uint8_t* data, uint64_t n, uint64_t offset, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, std::min<uint64_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
    }
    data += w;
    n -= static_cast<uint64_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t PlannedTensor::nbytes() const {
  return static_cast<uint64_t>(core::NumElements(shape)) * core::DTypeSize(dtype);
}

absl::StatusOr<std::unique_ptr<PlannedSafetensorsWriter>> PlannedSafetensorsWriter::Create(
    const std::string& dir, const std::vector<std::vector<PlannedTensor>>& groups, uint64_t max_shard_bytes,
    const std::map<std::string, std::string>& metadata) {
  using nlohmann::ordered_json;
  if (max_shard_bytes == 0) return absl::InvalidArgumentError("max_shard_bytes must be positive");
  std::set<std::string> seen;
  std::vector<std::vector<const PlannedTensor*>> shards;
  uint64_t current = 0;
  std::unique_ptr<PlannedSafetensorsWriter> w(new PlannedSafetensorsWriter());
  w->dir_ = dir;
  for (const auto& g : groups) {
    uint64_t b = 0;
    for (const PlannedTensor& t : g) {
      if (t.name == "__metadata__" || t.name.empty())
        return absl::InvalidArgumentError(fmt::format("invalid tensor name '{}'", t.name));
      if (!seen.insert(t.name).second) return absl::InvalidArgumentError(fmt::format("tensor '{}' planned twice", t.name));
      b += t.nbytes();
    }
    if (g.empty()) continue;
    if (shards.empty() || (current > 0 && current + b > max_shard_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    for (const PlannedTensor& t : g) shards.back().push_back(&t);
    current += b;
    w->total_ += b;
  }
  if (shards.empty()) shards.emplace_back();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file_name = shards.size() == 1
                                      ? std::string("model.safetensors")
                                      : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    for (const PlannedTensor* t : shards[s]) w->weight_map_.emplace_back(t->name, file_name);
    std::vector<const PlannedTensor*> order = shards[s];
    std::stable_sort(order.begin(), order.end(), [](const PlannedTensor* a, const PlannedTensor* b) {
      const size_t sa = core::DTypeSize(a->dtype), sb = core::DTypeSize(b->dtype);
      return sa != sb ? sa > sb : a->name < b->name;
    });
    ordered_json header = ordered_json::object();
    if (!metadata.empty()) {
      ordered_json m = ordered_json::object();
      for (const auto& [k, v] : metadata) m[k] = v;
      header["__metadata__"] = std::move(m);
    }
    uint64_t offset = 0;
    for (const PlannedTensor* t : order) {
      header[t->name] = {{"dtype", std::string(core::DTypeSafetensorsName(t->dtype))},
                         {"shape", t->shape},
                         {"data_offsets", {offset, offset + t->nbytes()}}};
      offset += t->nbytes();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string prefix(8, '\0');
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xff);
    prefix += text;
    File f;
    f.path = (std::filesystem::path(dir) / file_name).string();
    f.fd = ::open(f.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f.fd < 0) return absl::InternalError(fmt::format("{}: cannot create: {}", f.path, std::strerror(errno)));
    w->files_.push_back(f);
    RETURN_IF_ERROR(PWriteAll(f.fd, reinterpret_cast<const uint8_t*>(prefix.data()), prefix.size(), 0, f.path));
    if (::ftruncate(f.fd, static_cast<off_t>(prefix.size() + offset)) != 0)
      return absl::InternalError(fmt::format("{}: cannot size the file: {}", f.path, std::strerror(errno)));
    uint64_t at = prefix.size();
    for (const PlannedTensor* t : order) {
      auto slot = std::make_unique<Slot>();
      slot->fd_index = static_cast<int>(s);
      slot->offset = at;
      slot->nbytes = t->nbytes();
      at += t->nbytes();
      w->slots_.emplace(t->name, std::move(slot));
    }
  }
  return w;
}

PlannedSafetensorsWriter::~PlannedSafetensorsWriter() {
  for (File& f : files_) {
    if (f.fd >= 0) ::close(f.fd);
  }
}

absl::Status PlannedSafetensorsWriter::Write(std::string_view name, std::span<const uint8_t> bytes) {
  auto it = slots_.find(name);
  if (it == slots_.end()) return absl::InvalidArgumentError(fmt::format("tensor '{}' is not in the plan", name));
  Slot& slot = *it->second;
  if (bytes.size() != slot.nbytes)
    return absl::InvalidArgumentError(
        fmt::format("tensor '{}': {} bytes given, {} planned", name, bytes.size(), slot.nbytes));
  if (slot.written.exchange(true)) return absl::InvalidArgumentError(fmt::format("tensor '{}' written twice", name));
  const File& f = files_[static_cast<size_t>(slot.fd_index)];
  return PWriteAll(f.fd, bytes.data(), bytes.size(), slot.offset, f.path);
}

absl::Status PlannedSafetensorsWriter::Write(std::string_view name, const core::Tensor& t) {
  return Write(name, t.bytes());
}

absl::Status PlannedSafetensorsWriter::Finish() {
  if (finished_) return absl::FailedPreconditionError("Finish called twice");
  finished_ = true;
  for (const auto& [name, slot] : slots_) {
    if (!slot->written) return absl::InternalError(fmt::format("tensor '{}' was planned but never written", name));
  }
  for (File& f : files_) {
    const int rc = ::close(f.fd);
    f.fd = -1;
    if (rc != 0) return absl::InternalError(fmt::format("{}: close failed: {}", f.path, std::strerror(errno)));
  }
  if (files_.size() > 1) {
    nlohmann::ordered_json map = nlohmann::ordered_json::object();
    for (const auto& [name, file] : weight_map_) map[name] = file;
    const nlohmann::ordered_json index = {{"metadata", {{"total_size", total_}}}, {"weight_map", std::move(map)}};
    const std::string path = (std::filesystem::path(dir_) / "model.safetensors.index.json").string();
    std::ofstream out(path);
    out << index.dump(2) << "\n";
    out.close();
    if (!out) return absl::InternalError(fmt::format("{}: write failed", path));
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::quant
