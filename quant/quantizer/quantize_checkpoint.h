// Quantising a checkpoint directory end to end: an output directory that appears only when complete
// (written as OUT.partial-PID next to it, renamed at the end), the streaming pipeline, config.json
// with quantization_config, and every other input file (tokenizer, templates, generation config) copied.
#pragma once
#include <string>

#include "absl/status/statusor.h"
#include "quant/quantizer/quantize_pipeline.h"
#include "quant/quantizer/recipe.h"

namespace sparkserve::quant {

// A directory built under a temporary name and renamed into place by Commit(); removed when
// destroyed uncommitted. `out_dir` must not exist or be an empty directory; its parent must be writable.
class OutputDirectory {
 public:
  static absl::StatusOr<OutputDirectory> Begin(const std::string& out_dir);
  OutputDirectory(OutputDirectory&& o) noexcept;
  OutputDirectory& operator=(OutputDirectory&&) = delete;
  ~OutputDirectory();

  const std::string& path() const { return temp_; }  // where to write until Commit
  absl::Status Commit();

 private:
  OutputDirectory(std::string out, std::string temp) : out_(std::move(out)), temp_(std::move(temp)) {}
  std::string out_, temp_;
  bool done_ = false;
};

// Writes `text` to `path` (error names the path).
absl::Status WriteTextFile(const std::string& path, const std::string& text);

// Quantises the unquantised checkpoint in `in_dir` into `out_dir`. `options.tie_word_embeddings` and
// `options.text_prefix` must describe the input (the caller parses its config). Errors: input with a
// quantization_config or quantised tensors, unreadable input, unwritable or non-empty output.
absl::StatusOr<QuantizeReport> QuantizeCheckpoint(const std::string& in_dir, const std::string& out_dir,
                                                  const Recipe& recipe, const QuantizeOptions& options);

}  // namespace sparkserve::quant
