// safetensors header validation, mmap'd files and sharded checkpoint directories.
#include "quant/safetensors_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace sparkserve::quant {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

absl::Status Invalid(std::string_view file, const std::string& what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", file, what));
}

// Strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF). Returns the offset of
// the first bad byte, or npos.
size_t FindInvalidUtf8(std::span<const uint8_t> s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t c = s[i];
    if (c < 0x80) { ++i; continue; }
    int len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
    else return i;
    if (i + len > s.size()) return i;
    for (int k = 1; k < len; ++k) {
      if ((s[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    const uint32_t min_cp = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min_cp || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string_view::npos;
}

// Thrown from the parse callback to stop at the first structural problem.
struct HeaderShapeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses the JSON text, rejecting duplicate keys and nesting deeper than a header can need.
json ParseHeaderJson(std::string_view text) {
  std::vector<std::set<std::string>> keys;
  auto callback = [&keys](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth > 2) throw HeaderShapeError("JSON nested deeper than a safetensors header allows");
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (!keys.empty() && !keys.back().insert(k).second) {
          throw HeaderShapeError(fmt::format("duplicate key '{}'", k));
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  return json::parse(text.begin(), text.end(), callback);
}

// Reads a JSON value as a non-negative integer that fits in u64.
bool AsU64(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) { *out = v.get<uint64_t>(); return true; }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) { *out = static_cast<uint64_t>(v.get<int64_t>()); return true; }
  return false;
}

absl::StatusOr<SafetensorsEntry> ParseEntry(std::string_view file, const std::string& name, const json& info,
                                            uint64_t data_size) {
  auto bad = [&](const std::string& what) { return Invalid(file, fmt::format("tensor '{}': {}", name, what)); };
  if (!info.is_object()) return bad("header entry is not an object");
  SafetensorsEntry e;
  e.name = name;
  const auto dt = info.find("dtype");
  if (dt == info.end() || !dt->is_string()) return bad("missing or non-string \"dtype\"");
  auto dtype = core::DTypeFromSafetensorsName(dt->get_ref<const std::string&>());
  if (!dtype.ok()) return bad(std::string(dtype.status().message()));
  e.dtype = *dtype;

  const auto sh = info.find("shape");
  if (sh == info.end() || !sh->is_array()) return bad("missing or non-array \"shape\"");
  uint64_t bytes = core::DTypeSize(e.dtype);
  bool overflow = false;
  for (const json& d : *sh) {
    uint64_t v;
    if (!AsU64(d, &v) || v > static_cast<uint64_t>(INT64_MAX)) {
      return bad(fmt::format("shape {} has an entry that is not a non-negative integer", sh->dump()));
    }
    e.shape.push_back(static_cast<int64_t>(v));
    if (v != 0 && bytes > UINT64_MAX / v) overflow = true;
    bytes *= v;
  }
  // A zero dimension makes the tensor empty whatever the other dimensions are.
  if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) { bytes = 0; overflow = false; }
  if (overflow) return bad(fmt::format("shape {} is too large", sh->dump()));

  const auto off = info.find("data_offsets");
  if (off == info.end() || !off->is_array() || off->size() != 2 || !AsU64((*off)[0], &e.begin) ||
      !AsU64((*off)[1], &e.end)) {
    return bad("\"data_offsets\" must be [begin, end] with non-negative integers");
  }
  if (e.end < e.begin) return bad(fmt::format("data_offsets [{}, {}] end before they begin", e.begin, e.end));
  if (e.end > data_size) {
    return bad(fmt::format("data_offsets [{}, {}] lie outside the data section of {} bytes", e.begin, e.end,
                           data_size));
  }
  if (e.end - e.begin != bytes) {
    return bad(fmt::format("data_offsets [{}, {}] hold {} bytes but {}{} needs {}", e.begin, e.end,
                           e.end - e.begin, core::DTypeName(e.dtype), core::ShapeToString(e.shape), bytes));
  }
  return e;  // other fields are ignored, as the reference implementation does
}

}  // namespace

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::span<const uint8_t> file, std::string_view file_name) {
  if (file.size() < 8) {
    return Invalid(file_name, fmt::format("file is {} bytes, shorter than the 8-byte header length", file.size()));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[i];
  if (n > kMaxSafetensorsHeaderBytes) {
    return Invalid(file_name, fmt::format("header length {} is absurd (limit {})", n, kMaxSafetensorsHeaderBytes));
  }
  if (n > file.size() - 8) {
    return Invalid(file_name,
                   fmt::format("header length {} runs past the end of the file ({} bytes)", n, file.size()));
  }
  const std::span<const uint8_t> text = file.subspan(8, n);
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return Invalid(file_name, fmt::format("header is not valid UTF-8 (byte {} of the header)", bad));
  }
  json root;
  try {
    root = ParseHeaderJson(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()));
  } catch (const HeaderShapeError& e) {
    return Invalid(file_name, fmt::format("invalid header: {}", e.what()));
  } catch (const json::exception& e) {
    return Invalid(file_name, fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (!root.is_object()) return Invalid(file_name, "header is not a JSON object");

  SafetensorsHeader h;
  h.data_start = 8 + n;
  h.data_size = file.size() - h.data_start;
  for (const auto& [name, info] : root.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) return Invalid(file_name, "\"__metadata__\" is not an object");
      for (const auto& [k, v] : info.items()) {
        if (!v.is_string()) return Invalid(file_name, fmt::format("\"__metadata__\" value for '{}' is not a string", k));
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    ASSIGN_OR_RETURN(SafetensorsEntry e, ParseEntry(file_name, name, info, h.data_size));
    h.tensors.push_back(std::move(e));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    const SafetensorsEntry& e = h.tensors[i];
    if (e.begin < expected) {
      return Invalid(file_name, fmt::format("tensor '{}': data_offsets [{}, {}] overlap tensor '{}' (ends at {})",
                                            e.name, e.begin, e.end, h.tensors[i - 1].name, expected));
    }
    if (e.begin > expected) {
      return Invalid(file_name, fmt::format("tensor '{}': data_offsets [{}, {}] leave a hole: bytes [{}, {}) belong "
                                            "to no tensor", e.name, e.begin, e.end, expected, e.begin));
    }
    expected = e.end;
  }
  if (expected != h.data_size) {
    return Invalid(file_name, fmt::format("the tensors cover {} bytes but the data section holds {} (bytes [{}, {}) "
                                          "belong to no tensor)", expected, h.data_size, expected, h.data_size));
  }
  return h;
}

// ---------------------------------------------------------------------------------- SafetensorsFile

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(fmt::format("{}: not a regular file", path));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  SafetensorsFile f;
  f.path_ = path;
  if (size < 8) {
    ::close(fd);
    return Invalid(path, fmt::format("file is {} bytes, shorter than the 8-byte header length", size));
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return absl::InternalError(fmt::format("{}: mmap failed: {}", path, std::strerror(errno)));
  f.mapping_ = std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, size); });
  f.base_ = static_cast<const uint8_t*>(p);
  f.mapped_bytes_ = size;
  ASSIGN_OR_RETURN(f.header_, ParseSafetensorsHeader({f.base_, size}, path));
  for (size_t i = 0; i < f.header_.tensors.size(); ++i) f.index_.emplace(f.header_.tensors[i].name, i);
  return f;
}

const SafetensorsEntry* SafetensorsFile::Find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

core::Tensor SafetensorsFile::View(const SafetensorsEntry& e) const {
  void* data = const_cast<uint8_t*>(base_ + header_.data_start + e.begin);  // private mapping: writes stay in memory
  return core::Tensor::Borrow(data, e.shape, e.dtype, core::Device::Cpu(), mapping_);
}

bool SafetensorsFile::Maps(const void* p, size_t bytes) const {
  const uint8_t* q = static_cast<const uint8_t*>(p);
  return q >= base_ && bytes <= mapped_bytes_ && q - base_ <= static_cast<ptrdiff_t>(mapped_bytes_ - bytes);
}

absl::StatusOr<core::Tensor> SafetensorsFile::Get(std::string_view name) const {
  const SafetensorsEntry* e = Find(name);
  if (e == nullptr) return absl::NotFoundError(fmt::format("{}: no tensor '{}'", path_, name));
  return View(*e);
}

// ---------------------------------------------------------------------------- SafetensorsCheckpoint

absl::Status SafetensorsCheckpoint::Add(SafetensorsFile file) {
  const size_t idx = files_.size();
  for (const SafetensorsEntry& e : file.header().tensors) {
    const auto [it, inserted] = where_.emplace(e.name, idx);
    if (!inserted) {
      return absl::InvalidArgumentError(fmt::format("tensor '{}' is in both {} and {}", e.name,
                                                    files_[it->second].path(), file.path()));
    }
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsCheckpoint> SafetensorsCheckpoint::OpenFiles(const std::vector<std::string>& paths) {
  SafetensorsCheckpoint c;
  for (const std::string& p : paths) {
    ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(p));
    RETURN_IF_ERROR(c.Add(std::move(f)));
  }
  return c;
}

absl::StatusOr<SafetensorsCheckpoint> SafetensorsCheckpoint::Open(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) return OpenFiles({single.string()});
  if (!fs::exists(index_path, ec)) {
    return absl::NotFoundError(
        fmt::format("{}: no model.safetensors and no model.safetensors.index.json", dir));
  }
  const std::string ipath = index_path.string();
  std::ifstream in(index_path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot read", ipath));
  json index;
  try {
    index = json::parse(buf.str());
  } catch (const json::exception& e) {
    return Invalid(ipath, fmt::format("not valid JSON: {}", e.what()));
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return Invalid(ipath, "no \"weight_map\" object");
  }
  // shard file -> the tensors the index places there, in first-mention order of the shards.
  std::vector<std::string> shards;
  std::map<std::string, std::vector<std::string>> expected;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) return Invalid(ipath, fmt::format("weight_map entry for '{}' is not a string", name));
    const std::string& f = file.get_ref<const std::string&>();
    const fs::path fp(f);
    if (f.empty() || fp.is_absolute() || std::any_of(fp.begin(), fp.end(), [](const fs::path& c) { return c == ".."; })) {
      return Invalid(ipath, fmt::format("weight_map entry for '{}' names '{}', not a file inside the directory", name, f));
    }
    auto& list = expected[f];
    if (list.empty()) shards.push_back(f);
    list.push_back(name);
  }
  SafetensorsCheckpoint c;
  for (const std::string& s : shards) {
    const fs::path sp = fs::path(dir) / s;
    if (!fs::exists(sp, ec)) {
      return absl::NotFoundError(fmt::format("{}: names shard '{}' (for tensor '{}'), which does not exist", ipath,
                                             s, expected[s].front()));
    }
    ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(sp.string()));
    for (const std::string& name : expected[s]) {
      if (f.Find(name) == nullptr) {
        return Invalid(ipath, fmt::format("tensor '{}' is mapped to {}, which does not contain it", name, sp.string()));
      }
    }
    for (const SafetensorsEntry& e : f.header().tensors) {
      const auto it = index["weight_map"].find(e.name);
      if (it == index["weight_map"].end()) {
        spdlog::warn("{}: tensor '{}' is not listed in {}; loading it anyway", sp.string(), e.name, ipath);
      } else if (it->get_ref<const std::string&>() != s) {
        return Invalid(ipath, fmt::format("tensor '{}' is mapped to {} but is also in {}", e.name,
                                          it->get_ref<const std::string&>(), sp.string()));
      }
    }
    RETURN_IF_ERROR(c.Add(std::move(f)));
  }
  return c;
}

const SafetensorsEntry* SafetensorsCheckpoint::Find(std::string_view name) const {
  const auto it = where_.find(name);
  return it == where_.end() ? nullptr : files_[it->second].Find(name);
}

absl::StatusOr<core::Tensor> SafetensorsCheckpoint::Get(std::string_view name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) return absl::NotFoundError(fmt::format("no tensor '{}' in the checkpoint", name));
  return files_[it->second].Get(name);
}

std::string SafetensorsCheckpoint::FileOf(std::string_view name) const {
  const auto it = where_.find(name);
  return it == where_.end() ? std::string() : files_[it->second].path();
}

std::vector<std::string> SafetensorsCheckpoint::Names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, _] : where_) out.push_back(name);
  return out;
}

const std::map<std::string, std::string>& SafetensorsCheckpoint::metadata() const {
  static const std::map<std::string, std::string> kEmpty;
  return files_.empty() ? kEmpty : files_.front().metadata();
}

void SafetensorsCheckpoint::ReleasePages(const core::Tensor& view) const {
  if (!view.defined() || !view.device().is_cpu()) return;
  const bool mapped = std::any_of(files_.begin(), files_.end(),
                                  [&](const SafetensorsFile& f) { return f.Maps(view.raw_data(), view.nbytes()); });
  if (!mapped) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(view.raw_data());
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + view.nbytes()) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace sparkserve::quant
