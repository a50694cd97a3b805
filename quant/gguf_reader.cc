// GGUF header parsing with every length checked, and mmap'd GGUF files (see gguf_reader.h).
#include "quant/gguf_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "core/status.h"
#include "fmt/format.h"

namespace sparkserve::quant {
namespace {

// A cursor over the header bytes; every read checks what is left.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> b, std::string_view file) : b_(b), file_(file) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return b_.size() - pos_; }

  absl::Status Need(uint64_t n, std::string_view what) const {
    if (n > left()) {
      return absl::InvalidArgumentError(fmt::format("{}: truncated: {} needs {} bytes at offset {}, the file has {} left",
                                                    file_, what, n, pos_, left()));
    }
    return absl::OkStatus();
  }
  template <typename T>
  absl::StatusOr<T> Read(std::string_view what) {
    RETURN_IF_ERROR(Need(sizeof(T), what));
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  absl::StatusOr<std::string> String(std::string_view what) {
    ASSIGN_OR_RETURN(uint64_t n, Read<uint64_t>(what));
    if (n > kMaxGgufString) return absl::InvalidArgumentError(fmt::format("{}: {}: string of {} bytes is absurd (limit {})", file_, what, n, kMaxGgufString));
    RETURN_IF_ERROR(Need(n, what));
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  std::span<const uint8_t> b_;
  std::string_view file_;
  uint64_t pos_ = 0;
};

absl::StatusOr<GgufValue> ReadValue(Cursor& c, GgufValueType type, const std::string& key, std::string_view file, int depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufValueType::kU8: { ASSIGN_OR_RETURN(uint8_t x, c.Read<uint8_t>(key)); v.u = x; break; }
    case GgufValueType::kI8: { ASSIGN_OR_RETURN(int8_t x, c.Read<int8_t>(key)); v.i = x; break; }
    case GgufValueType::kU16: { ASSIGN_OR_RETURN(uint16_t x, c.Read<uint16_t>(key)); v.u = x; break; }
    case GgufValueType::kI16: { ASSIGN_OR_RETURN(int16_t x, c.Read<int16_t>(key)); v.i = x; break; }
    case GgufValueType::kU32: { ASSIGN_OR_RETURN(uint32_t x, c.Read<uint32_t>(key)); v.u = x; break; }
    case GgufValueType::kI32: { ASSIGN_OR_RETURN(int32_t x, c.Read<int32_t>(key)); v.i = x; break; }
    case GgufValueType::kU64: { ASSIGN_OR_RETURN(uint64_t x, c.Read<uint64_t>(key)); v.u = x; break; }
    case GgufValueType::kI64: { ASSIGN_OR_RETURN(int64_t x, c.Read<int64_t>(key)); v.i = x; break; }
    case GgufValueType::kF32: { ASSIGN_OR_RETURN(float x, c.Read<float>(key)); v.f = x; break; }
    case GgufValueType::kF64: { ASSIGN_OR_RETURN(double x, c.Read<double>(key)); v.f = x; break; }
    case GgufValueType::kBool: {
      ASSIGN_OR_RETURN(uint8_t x, c.Read<uint8_t>(key));
      if (x > 1) return absl::InvalidArgumentError(fmt::format("{}: {}: bool value {}", file, key, x));
      v.i = x;
      break;
    }
    case GgufValueType::kString: { ASSIGN_OR_RETURN(v.s, c.String(key)); break; }
    case GgufValueType::kArray: {
      if (depth >= 2) return absl::InvalidArgumentError(fmt::format("{}: {}: arrays nested too deep", file, key));
      ASSIGN_OR_RETURN(uint32_t et, c.Read<uint32_t>(key));
      if (et > static_cast<uint32_t>(GgufValueType::kF64)) {
        return absl::InvalidArgumentError(fmt::format("{}: {}: unknown array element type {}", file, key, et));
      }
      ASSIGN_OR_RETURN(uint64_t n, c.Read<uint64_t>(key));
      // Every element takes at least one byte: a count beyond the bytes left is a lie.
      if (n > kMaxGgufCount || n > c.left()) {
        return absl::InvalidArgumentError(fmt::format("{}: {}: array of {} elements cannot fit in the {} bytes left", file, key, n, c.left()));
      }
      v.elem_type = static_cast<GgufValueType>(et);
      v.array.reserve(n);
      for (uint64_t k = 0; k < n; ++k) {
        ASSIGN_OR_RETURN(GgufValue e, ReadValue(c, v.elem_type, key, file, depth + 1));
        v.array.push_back(std::move(e));
      }
      break;
    }
    default:
      return absl::InvalidArgumentError(fmt::format("{}: {}: unknown value type {}", file, key, static_cast<uint32_t>(type)));
  }
  return v;
}

}  // namespace

std::string GgmlTypeName(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return "F32";
    case GgmlType::kF16: return "F16";
    case GgmlType::kQ8_0: return "Q8_0";
    case GgmlType::kQ4_K: return "Q4_K";
    case GgmlType::kQ5_K: return "Q5_K";
    case GgmlType::kQ6_K: return "Q6_K";
    case GgmlType::kBF16: return "BF16";
  }
  return fmt::format("type {}", type);
}

bool GgmlBlockLayout(uint32_t type, int64_t* block_elems, int64_t* block_bytes) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: *block_elems = 1, *block_bytes = 4; return true;
    case GgmlType::kF16: *block_elems = 1, *block_bytes = 2; return true;
    case GgmlType::kBF16: *block_elems = 1, *block_bytes = 2; return true;
    case GgmlType::kQ8_0: *block_elems = 32, *block_bytes = 34; return true;
    case GgmlType::kQ4_K: *block_elems = 256, *block_bytes = 144; return true;
    case GgmlType::kQ5_K: *block_elems = 256, *block_bytes = 176; return true;
    case GgmlType::kQ6_K: *block_elems = 256, *block_bytes = 210; return true;
  }
  return false;
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kU16: case GgufValueType::kI16:
    case GgufValueType::kU32: case GgufValueType::kI32: case GgufValueType::kU64: case GgufValueType::kI64:
    case GgufValueType::kBool:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<int64_t> GgufValue::AsInt() const {
  switch (type) {
    case GgufValueType::kU8: case GgufValueType::kU16: case GgufValueType::kU32: case GgufValueType::kU64:
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return absl::OutOfRangeError("integer too large");
      return static_cast<int64_t>(u);
    case GgufValueType::kI8: case GgufValueType::kI16: case GgufValueType::kI32: case GgufValueType::kI64:
    case GgufValueType::kBool:
      return i;
    default:
      return absl::InvalidArgumentError("not an integer");
  }
}

absl::StatusOr<double> GgufValue::AsFloat() const {
  if (is_float()) return f;
  ASSIGN_OR_RETURN(int64_t x, AsInt());
  return static_cast<double>(x);
}

absl::StatusOr<GgufHeader> ParseGgufHeader(std::span<const uint8_t> file, std::string_view file_name) {
  Cursor c(file, file_name);
  ASSIGN_OR_RETURN(uint32_t magic, c.Read<uint32_t>("the magic"));
  if (magic != 0x46554747u) return absl::InvalidArgumentError(fmt::format("{}: not a GGUF file (no \"GGUF\" magic)", file_name));
  GgufHeader h;
  ASSIGN_OR_RETURN(h.version, c.Read<uint32_t>("the version"));
  if (h.version != 2 && h.version != 3) {
    return absl::InvalidArgumentError(fmt::format("{}: GGUF version {} (this reader takes 2 and 3)", file_name, h.version));
  }
  ASSIGN_OR_RETURN(uint64_t n_tensors, c.Read<uint64_t>("the tensor count"));
  ASSIGN_OR_RETURN(uint64_t n_kv, c.Read<uint64_t>("the metadata count"));
  if (n_tensors > kMaxGgufCount || n_kv > kMaxGgufCount || n_tensors > c.left() || n_kv > c.left()) {
    return absl::InvalidArgumentError(fmt::format("{}: {} tensors and {} metadata entries cannot fit in {} bytes", file_name,
                                                  n_tensors, n_kv, file.size()));
  }
  for (uint64_t k = 0; k < n_kv; ++k) {
    ASSIGN_OR_RETURN(std::string key, c.String(fmt::format("metadata key {}", k)));
    ASSIGN_OR_RETURN(uint32_t type, c.Read<uint32_t>(key));
    if (type > static_cast<uint32_t>(GgufValueType::kF64)) {
      return absl::InvalidArgumentError(fmt::format("{}: {}: unknown value type {}", file_name, key, type));
    }
    ASSIGN_OR_RETURN(GgufValue v, ReadValue(c, static_cast<GgufValueType>(type), key, file_name, 0));
    if (!h.metadata.emplace(key, std::move(v)).second) {
      return absl::InvalidArgumentError(fmt::format("{}: metadata key '{}' appears twice", file_name, key));
    }
  }
  if (auto it = h.metadata.find("general.alignment"); it != h.metadata.end()) {
    absl::StatusOr<int64_t> a = it->second.AsInt();
    if (!a.ok() || *a <= 0 || (*a & (*a - 1)) != 0 || *a > 65536) {
      return absl::InvalidArgumentError(fmt::format("{}: general.alignment must be a power of two up to 65536", file_name));
    }
    h.alignment = static_cast<uint64_t>(*a);
  }
  std::set<std::string> names;
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    ASSIGN_OR_RETURN(t.name, c.String(fmt::format("tensor {} name", k)));
    if (!names.insert(t.name).second) return absl::InvalidArgumentError(fmt::format("{}: tensor '{}' appears twice", file_name, t.name));
    ASSIGN_OR_RETURN(uint32_t n_dims, c.Read<uint32_t>(t.name));
    if (n_dims < 1 || n_dims > kMaxGgufDims) {
      return absl::InvalidArgumentError(fmt::format("{}: tensor '{}': {} dimensions (1 to {})", file_name, t.name, n_dims, kMaxGgufDims));
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      ASSIGN_OR_RETURN(uint64_t ne, c.Read<uint64_t>(t.name));
      if (ne == 0 || ne > (1ull << 40) || static_cast<uint64_t>(elements) > (1ull << 42) / ne) {
        return absl::InvalidArgumentError(fmt::format("{}: tensor '{}': dimension {} is {} (absurd)", file_name, t.name, d, ne));
      }
      t.ne.push_back(static_cast<int64_t>(ne));
      elements *= static_cast<int64_t>(ne);
    }
    t.elements = elements;
    ASSIGN_OR_RETURN(t.type, c.Read<uint32_t>(t.name));
    ASSIGN_OR_RETURN(t.offset, c.Read<uint64_t>(t.name));
    int64_t be = 0, bb = 0;
    if (!GgmlBlockLayout(t.type, &be, &bb)) {
      return absl::UnimplementedError(fmt::format("{}: tensor '{}': ggml type {} is not read here (BF16, F16, F32, Q8_0, "
                                                  "Q4_K, Q5_K, Q6_K are)", file_name, t.name, GgmlTypeName(t.type)));
    }
    if (t.ne[0] % be != 0) {
      return absl::InvalidArgumentError(fmt::format("{}: tensor '{}': row of {} elements is not a whole number of {} blocks of {}",
                                                    file_name, t.name, t.ne[0], GgmlTypeName(t.type), be));
    }
    t.bytes = static_cast<uint64_t>(elements / be) * static_cast<uint64_t>(bb);
    if (t.offset % h.alignment != 0) {
      return absl::InvalidArgumentError(fmt::format("{}: tensor '{}': offset {} is not aligned to {}", file_name, t.name, t.offset, h.alignment));
    }
    h.tensors.push_back(std::move(t));
  }
  h.data_start = (c.pos() + h.alignment - 1) / h.alignment * h.alignment;
  const uint64_t data_size = file.size() >= h.data_start ? file.size() - h.data_start : 0;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const GgufTensorInfo& t : h.tensors) {
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      return absl::InvalidArgumentError(fmt::format("{}: tensor '{}': bytes [{}, {}) of the data section run past its end "
                                                    "({} bytes; the file is truncated?)", file_name, t.name, t.offset,
                                                    t.offset + t.bytes, data_size));
    }
    ranges.emplace_back(t.offset, t.offset + t.bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t k = 1; k < ranges.size(); ++k) {
    if (ranges[k].first < ranges[k - 1].second) {
      return absl::InvalidArgumentError(fmt::format("{}: two tensors overlap at data offset {}", file_name, ranges[k].first));
    }
  }
  return h;
}

bool LooksLikeGguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char m[4] = {};
  return in.read(m, 4) && std::memcmp(m, "GGUF", 4) == 0;
}

absl::StatusOr<GgufFile> GgufFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    ::close(fd);
    return absl::InvalidArgumentError(fmt::format("{}: not a regular, non-empty file", path));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return absl::InternalError(fmt::format("{}: mmap failed: {}", path, std::strerror(errno)));
  GgufFile f;
  f.path_ = path;
  f.mapping_ = std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, size); });
  f.base_ = static_cast<const uint8_t*>(p);
  f.size_ = size;
  ASSIGN_OR_RETURN(f.header_, ParseGgufHeader({f.base_, size}, path));
  for (size_t k = 0; k < f.header_.tensors.size(); ++k) f.index_.emplace(f.header_.tensors[k].name, k);
  return f;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = header_.metadata.find(std::string(key));
  return it == header_.metadata.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const uint8_t> GgufFile::Data(const GgufTensorInfo& t) const {
  return {base_ + header_.data_start + t.offset, static_cast<size_t>(t.bytes)};
}

}  // namespace sparkserve::quant
