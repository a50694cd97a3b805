// safetensors file and shard-set writing (see safetensors_writer.h).
#include "quant/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace sparkserve::quant {
namespace {

using nlohmann::ordered_json;

absl::Status WriteFileAtomically(const std::string& path, const std::vector<std::span<const uint8_t>>& parts) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return absl::InternalError(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  bool ok = true;
  for (const auto& p : parts) {
    if (!p.empty() && std::fwrite(p.data(), 1, p.size(), f) != p.size()) ok = false;
  }
  if (std::fclose(f) != 0) ok = false;
  if (!ok) {
    std::remove(tmp.c_str());
    return absl::InternalError(fmt::format("{}: write failed: {}", tmp, std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::InternalError(fmt::format("{}: cannot rename into place: {}", path, std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status CheckTensors(const NamedTensors& tensors) {
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") return absl::InvalidArgumentError("a tensor cannot be named __metadata__");
    if (!seen.insert(name).second) return absl::InvalidArgumentError(fmt::format("tensor '{}' given twice", name));
    if (!t.defined()) return absl::InvalidArgumentError(fmt::format("tensor '{}' is undefined", name));
    if (!t.device().is_cpu()) return absl::InvalidArgumentError(fmt::format("tensor '{}' is not on the CPU", name));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata) {
  RETURN_IF_ERROR(CheckTensors(tensors));
  std::vector<const std::pair<std::string, core::Tensor>*> order;
  for (const auto& nt : tensors) order.push_back(&nt);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    const size_t sa = core::DTypeSize(a->second.dtype()), sb = core::DTypeSize(b->second.dtype());
    return sa != sb ? sa > sb : a->first < b->first;
  });
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  std::vector<std::span<const uint8_t>> parts(1);
  for (const auto* nt : order) {
    const core::Tensor& t = nt->second;
    header[nt->first] = {{"dtype", std::string(core::DTypeSafetensorsName(t.dtype()))},
                         {"shape", t.shape()},
                         {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
    parts.push_back(t.bytes());
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  prefix += text;
  parts[0] = {reinterpret_cast<const uint8_t*>(prefix.data()), prefix.size()};
  return WriteFileAtomically(path, parts);
}

absl::StatusOr<std::vector<std::string>> WriteShardedSafetensors(const std::string& dir, const NamedTensors& tensors,
                                                                  uint64_t max_shard_bytes,
                                                                  const std::map<std::string, std::string>& metadata) {
  RETURN_IF_ERROR(CheckTensors(tensors));
  if (max_shard_bytes == 0) return absl::InvalidArgumentError("max_shard_bytes must be positive");
  std::vector<NamedTensors> shards;
  uint64_t current = 0, total = 0;
  for (const auto& nt : tensors) {
    const uint64_t b = nt.second.nbytes();
    if (shards.empty() || (current > 0 && current + b > max_shard_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(nt);
    current += b;
    total += b;
  }
  if (shards.empty()) shards.emplace_back();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(fmt::format("{}: cannot create directory: {}", dir, ec.message()));
  ordered_json weight_map = ordered_json::object();
  std::vector<std::string> paths;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    const std::string path = (std::filesystem::path(dir) / name).string();
    RETURN_IF_ERROR(WriteSafetensors(path, shards[i], metadata));
    for (const auto& nt : shards[i]) weight_map[nt.first] = name;
    paths.push_back(path);
  }
  const ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", std::move(weight_map)}};
  const std::string text = index.dump(2) + "\n";
  RETURN_IF_ERROR(WriteFileAtomically((std::filesystem::path(dir) / "model.safetensors.index.json").string(),
                                      {{reinterpret_cast<const uint8_t*>(text.data()), text.size()}}));
  return paths;
}

}  // namespace sparkserve::quant
