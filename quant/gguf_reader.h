// GGUF reading (llama.cpp's model files, versions 2 and 3): a bounds-checked parser of the header
// (metadata key/values and tensor infos; from a byte span, so the fuzzer needs no files), and an
// mmap'd file with its tensors' raw bytes. Hostile files give errors naming the file, the key or
// tensor and what is wrong, never a crash: every length and count is checked against the bytes
// left, dims against overflow, every tensor's bytes against the data section.
//
// Layout: "GGUF" | u32 version | u64 n_tensors | u64 n_kv | n_kv x (string key, u32 type, value) |
// n_tensors x (string name, u32 n_dims, n_dims x u64 ne, u32 ggml_type, u64 offset) | padding to
// general.alignment (default 32) | data. Strings are u64 length + bytes; arrays u32 type + u64 n +
// elements. ne[0] is the fastest-varying dimension (a row), so our shape is ne reversed.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sparkserve::quant {

// ggml tensor types this project reads (others are named in errors by number).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};
// "F32", "Q4_K", ..., or "type N" for one we do not read.
std::string GgmlTypeName(uint32_t type);
// Elements per block and bytes per block; false for a type we do not read.
bool GgmlBlockLayout(uint32_t type, int64_t* block_elems, int64_t* block_bytes);

// GGUF metadata value types.
enum class GgufValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8,
  kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  GgufValueType elem_type = GgufValueType::kU8;  // arrays
  int64_t i = 0;        // signed ints and bools
  uint64_t u = 0;       // unsigned ints
  double f = 0;         // floats
  std::string s;        // strings
  std::vector<GgufValue> array;

  bool is_integer() const;
  bool is_float() const { return type == GgufValueType::kF32 || type == GgufValueType::kF64; }
  // The value as a signed integer (any integer type; u64 above INT64_MAX fails), or as a float.
  absl::StatusOr<int64_t> AsInt() const;
  absl::StatusOr<double> AsFloat() const;
};

struct GgufTensorInfo {
  std::string name;
  uint32_t type = 0;                 // ggml type number
  std::vector<int64_t> ne;           // ggml order: ne[0] is a row
  uint64_t offset = 0;               // from the data section start
  uint64_t bytes = 0;                // stored bytes
  int64_t elements = 0;
  // Our (row-major) shape: ne reversed.
  std::vector<int64_t> shape() const { return {ne.rbegin(), ne.rend()}; }
};

struct GgufHeader {
  uint32_t version = 0;
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensorInfo> tensors;  // file order
  uint64_t alignment = 32;
  uint64_t data_start = 0;  // file offset of the data section
};

// Limits against absurd headers: a string, an array, the metadata and tensor counts.
inline constexpr uint64_t kMaxGgufString = 64ull << 20;
inline constexpr uint64_t kMaxGgufCount = 1ull << 26;
inline constexpr int kMaxGgufDims = 4;

// Parses and validates the header of the GGUF file whose complete contents are `file`.
absl::StatusOr<GgufHeader> ParseGgufHeader(std::span<const uint8_t> file, std::string_view file_name);

// True when `path` starts with the GGUF magic.
bool LooksLikeGguf(const std::string& path);

// One GGUF file, mmap'd read-only.
class GgufFile {
 public:
  static absl::StatusOr<GgufFile> Open(const std::string& path);
  const std::string& path() const { return path_; }
  const GgufHeader& header() const { return header_; }
  const GgufValue* Find(std::string_view key) const;
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  // The stored bytes of a tensor.
  std::span<const uint8_t> Data(const GgufTensorInfo& t) const;

 private:
  std::string path_;
  std::shared_ptr<void> mapping_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  GgufHeader header_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace sparkserve::quant
