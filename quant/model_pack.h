// Single-file models (`.sparkserve`): packing a model directory into one valid safetensors file,
// verifying it (size, header, SHA-256 content digest) and unpacking it back, byte-identical.
//
// Layout: a plain safetensors file. Its data section is the data sections of the directory's
// safetensors files (model.safetensors, or the shards its index names, in name order), one after
// the other; each tensor keeps its dtype and shape, its offsets shifted by its shard's base. Its
// `__metadata__` holds (all values strings):
//   "sparkserve.pack"        "1" (the layout version)
//   "sparkserve.shards"      JSON [{"file": NAME, "header": base64 of the shard's 8-byte length and
//                            header bytes as found, "data_bytes": N}] in data-section order: unpack
//                            rewrites each shard from its own header bytes and its slice of the data
//   "sparkserve.file:PATH"   the contents of every other file of the directory (PATH relative,
//                            '/'-separated; files and folders whose name starts with '.' are left
//                            out), as text when it is valid UTF-8 ...
//   "sparkserve.file.base64:PATH"  ... else base64
//   "sparkserve.digest"      "sha256:" + 64 hex: SHA-256 of DigestPreamble (every metadata entry
//                            but this one, every tensor's name/dtype/shape/offsets) then the data
//                            section: it covers tensors and embedded files
//   and the first shard's own metadata entries (e.g. "format": "pt") unchanged.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "quant/safetensors_reader.h"

namespace sparkserve::quant {

inline constexpr char kPackVersionKey[] = "sparkserve.pack";
inline constexpr char kPackShardsKey[] = "sparkserve.shards";
inline constexpr char kPackDigestKey[] = "sparkserve.digest";
inline constexpr char kPackFilePrefix[] = "sparkserve.file:";
inline constexpr char kPackFileBase64Prefix[] = "sparkserve.file.base64:";
// Embedded files larger than this are refused (the header, which holds them, is capped at 100 MB).
inline constexpr uint64_t kMaxPackedFileBytes = 64ull << 20;

// What a packed file holds, verified.
struct PackedModel {
  std::string path;
  uint64_t file_bytes = 0;
  std::string digest;                         // "sha256:<hex>"
  std::map<std::string, std::string> files;   // relative path -> contents
  struct Shard {
    std::string file;
    std::string header;  // the shard's first 8 + N bytes, as found
    uint64_t data_begin = 0;  // offset in the packed data section
    uint64_t data_bytes = 0;
  };
  std::vector<Shard> shards;
  double verify_seconds = 0;  // time spent hashing
};

// Packs `model_dir` into `out_path` (written to a temporary file beside it and renamed into place).
// Refuses: no weights, a tensor name in two shards, an embedded file over kMaxPackedFileBytes.
absl::Status PackModelDirectory(const std::string& model_dir, const std::string& out_path);

// Checks a packed file: its size against its header (errors "truncated at N of M bytes" and "N bytes
// appended after the last tensor"), the safetensors header, the pack metadata, and (when
// `verify_digest`) the content digest, streamed ("digest mismatch: ..."). Errors name the file.
absl::StatusOr<PackedModel> ReadPackedModel(const std::string& path, bool verify_digest = true);

// True when `path` is a regular file that starts like a safetensors file carrying "sparkserve.pack"
// (a cheap check of the header only; ReadPackedModel does the real one).
bool LooksLikePackedModel(const std::string& path);

// Writes the directory `path` was packed from into `out_dir` (which must not exist or be empty):
// the shard files byte for byte, then the embedded files. Verifies the file first.
absl::Status UnpackModelFile(const std::string& path, const std::string& out_dir);

// The bytes hashed before the data section (see the layout above).
std::string DigestPreamble(const std::map<std::string, std::string>& metadata,
                           const std::vector<SafetensorsEntry>& tensors);

}  // namespace sparkserve::quant
