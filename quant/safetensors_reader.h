// safetensors reading: header parsing and validation (from a byte span, so the fuzzer needs no
// files), one mmap'd file with zero-copy tensor views, and a checkpoint directory (one
// model.safetensors, or shards listed by model.safetensors.index.json) exposed as one name->tensor map.
//
// File layout: u64 little-endian N | N bytes of UTF-8 JSON header | data section. The header maps
// each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data
// section) plus an optional "__metadata__" object of string -> string. Valid files cover the data
// section exactly: ranges sorted by begin are contiguous, start at 0 and end at its size.
#pragma once
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

// One tensor's header entry.
struct SafetensorsEntry {
  std::string name;
  core::DType dtype = core::DType::kF32;
  core::Shape shape;
  uint64_t begin = 0;  // byte offsets into the data section, [begin, end)
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;        // sorted by begin offset (file order)
  std::map<std::string, std::string> metadata;  // "__metadata__"
  uint64_t data_start = 0;                      // file offset of the data section (8 + N)
  uint64_t data_size = 0;                       // bytes in the data section
};

// Headers longer than this are rejected as absurd (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Parses and validates the header of the safetensors file whose complete contents are `file`.
// Every error names `file_name` and, where there is one, the tensor and what is wrong.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::span<const uint8_t> file,
                                                         std::string_view file_name);

// One safetensors file, mmap'd read-only (copy-on-write: writing into a view never reaches the
// file). Tensor views borrow the mapping and keep it alive after the SafetensorsFile is gone.
// Views point into the file: their data is aligned only as far as the file aligns it (files we
// write align every tensor to its element size; others may not), so read through memcpy or Clone.
class SafetensorsFile {
 public:
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  // The entry for `name`, or null.
  const SafetensorsEntry* Find(std::string_view name) const;
  // A zero-copy CPU view of tensor `name`; NotFound names the file.
  absl::StatusOr<core::Tensor> Get(std::string_view name) const;
  // The view of an entry of this file's header.
  core::Tensor View(const SafetensorsEntry& entry) const;
  // True when [p, p + bytes) lies inside this file's mapping.
  bool Maps(const void* p, size_t bytes) const;

 private:
  std::string path_;
  std::shared_ptr<void> mapping_;  // keeps the mmap alive
  const uint8_t* base_ = nullptr;
  size_t mapped_bytes_ = 0;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> header_.tensors position
};

// Every tensor of a checkpoint directory under one name -> tensor map. Opens `dir/model.safetensors`
// when present, else `dir/model.safetensors.index.json` and every shard its weight_map names.
// Errors: no weights file, an index naming a missing shard or a tensor absent from its shard, a
// tensor name present in two shards, and every per-file header error.
class SafetensorsCheckpoint {
 public:
  static absl::StatusOr<SafetensorsCheckpoint> Open(const std::string& dir);
  // The same over an explicit list of files (no index): names must be unique across them.
  static absl::StatusOr<SafetensorsCheckpoint> OpenFiles(const std::vector<std::string>& paths);

  bool Contains(std::string_view name) const { return where_.find(name) != where_.end(); }
  // The entry (dtype, shape, offsets) for `name` without touching its data, or null.
  const SafetensorsEntry* Find(std::string_view name) const;
  // A zero-copy view; NotFound when absent.
  absl::StatusOr<core::Tensor> Get(std::string_view name) const;
  // The path of the file holding `name` (empty when absent).
  std::string FileOf(std::string_view name) const;
  // All tensor names, sorted.
  std::vector<std::string> Names() const;
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // Drops this process's copies of the whole pages inside `view`, a view of one of these files
  // (madvise MADV_DONTNEED: the pages are re-read from the unchanged file if touched again).
  // Loaders call it once a tensor is converted, so that a model widened at load does not also
  // keep its source pages resident. Views of other memory are left alone.
  void ReleasePages(const core::Tensor& view) const;
  // Metadata of the first file (the index has none of its own worth keeping).
  const std::map<std::string, std::string>& metadata() const;

 private:
  absl::Status Add(SafetensorsFile file);

  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t, std::less<>> where_;  // name -> files_ position
};

}  // namespace sparkserve::quant
