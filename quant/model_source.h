// ModelSource: a model given as a directory, a packed single file (model_pack.h) or a llama.cpp
// qwen35 GGUF file (gguf_model.h), opened the same way for every loader. A directory is used as it
// is. A packed file is verified (digest) and shown to the loaders as a private directory view: its
// embedded files written out, and model.safetensors a symlink to the packed file itself (a valid
// safetensors file, so the tensors are mmap'd from it with no copy). A GGUF file is dequantised to
// bf16 into a private directory (and, with `requantize`, quantised from there by our quantizer,
// weights only). Views are removed when the ModelSource is destroyed.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "quant/model_pack.h"

namespace sparkserve::quant {

struct ModelSourceOptions {
  // GGUF only: "" (dequantise to bf16) or a quantize recipe ("nvfp4-mixed", ...).
  std::string requantize;
};

class ModelSource {
 public:
  enum class Kind { kDirectory, kPacked, kGguf };
  // `path`: a model directory, a packed file or a GGUF file. Errors name it (missing, a packed file
  // that is truncated, appended to or whose digest differs, a safetensors file that is not packed,
  // a GGUF file that is damaged or not qwen35).
  static absl::StatusOr<std::unique_ptr<ModelSource>> Open(const std::string& path, const ModelSourceOptions& options = {});
  ~ModelSource();
  ModelSource(const ModelSource&) = delete;
  ModelSource& operator=(const ModelSource&) = delete;

  const std::string& path() const { return path_; }  // as given
  const std::string& dir() const { return dir_; }    // the directory the loaders read
  Kind kind() const { return kind_; }
  bool packed() const { return packed_.has_value(); }
  // The packed file's facts (digest, embedded files, shard layout); null otherwise.
  const PackedModel* pack() const { return packed_ ? &*packed_ : nullptr; }
  // GGUF: how its weights were loaded ("dequantised to bf16", "requantised nvfp4-mixed").
  const std::string& load_mode() const { return load_mode_; }

 private:
  ModelSource() = default;
  std::string path_;
  std::string dir_;
  std::string owned_root_;  // removed on destruction
  Kind kind_ = Kind::kDirectory;
  std::optional<PackedModel> packed_;
  std::string load_mode_;
};

}  // namespace sparkserve::quant
