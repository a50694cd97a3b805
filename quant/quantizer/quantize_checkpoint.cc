// Checkpoint-directory quantisation (see quantize_checkpoint.h).
#include "quant/quantizer/quantize_checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace sparkserve::quant {
namespace fs = std::filesystem;

absl::StatusOr<OutputDirectory> OutputDirectory::Begin(const std::string& out_dir) {
  std::error_code ec;
  fs::path out = fs::absolute(fs::path(out_dir), ec).lexically_normal();
  if (out.has_filename() == false) out = out.parent_path();
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec))
      return absl::AlreadyExistsError(fmt::format("{}: exists and is not a directory", out_dir));
    if (!fs::is_empty(out, ec))
      return absl::AlreadyExistsError(fmt::format("{}: exists and is not empty (refusing to overwrite)", out_dir));
  }
  const fs::path parent = out.parent_path();
  fs::create_directories(parent, ec);
  if (ec || !fs::is_directory(parent))
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot create the parent directory {}: {}", out_dir, parent.string(), ec.message()));
  const fs::path temp = parent / fmt::format("{}.partial-{}", out.filename().string(), ::getpid());
  fs::remove_all(temp, ec);
  if (!fs::create_directory(temp, ec) || ec)
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot create {} (is the directory writable?): {}", out_dir, temp.string(),
                    ec ? ec.message() : std::string("already exists")));
  return OutputDirectory(out.string(), temp.string());
}

OutputDirectory::OutputDirectory(OutputDirectory&& o) noexcept
    : out_(std::move(o.out_)), temp_(std::move(o.temp_)), done_(o.done_) {
  o.done_ = true;
}

OutputDirectory::~OutputDirectory() {
  if (done_) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

absl::Status OutputDirectory::Commit() {
  if (done_) return absl::FailedPreconditionError("output directory already committed");
  std::error_code ec;
  if (fs::exists(out_, ec)) fs::remove(out_, ec);  // an empty directory (checked at Begin)
  fs::rename(temp_, out_, ec);
  if (ec) return absl::InternalError(fmt::format("cannot rename {} to {}: {}", temp_, out_, ec.message()));
  done_ = true;
  return absl::OkStatus();
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return absl::InternalError(fmt::format("{}: write failed", path));
  return absl::OkStatus();
}

absl::StatusOr<QuantizeReport> QuantizeCheckpoint(const std::string& in_dir, const std::string& out_dir,
                                                  const Recipe& recipe, const QuantizeOptions& options) {
  const fs::path in(in_dir);
  std::ifstream cf(in / "config.json");
  if (!cf) return absl::NotFoundError(fmt::format("{}: no config.json (not a Hugging Face model directory)", in_dir));
  std::stringstream ss;
  ss << cf.rdbuf();
  const std::string config_text = ss.str();
  const auto cj = nlohmann::json::parse(config_text, nullptr, false);
  if (cj.is_discarded() || !cj.is_object())
    return absl::InvalidArgumentError(fmt::format("{}/config.json: not a JSON object", in_dir));
  if (cj.contains("quantization_config") ||
      (cj.contains("text_config") && cj["text_config"].is_object() && cj["text_config"].contains("quantization_config")))
    return absl::InvalidArgumentError(fmt::format(
        "{}: the checkpoint is already quantised (config.json has a quantization_config); quantize needs a "
        "bf16/f16/f32 checkpoint",
        in_dir));
  ASSIGN_OR_RETURN(auto source, SafetensorsTensorSource::Open(in_dir));
  ASSIGN_OR_RETURN(OutputDirectory out, OutputDirectory::Begin(out_dir));
  ASSIGN_OR_RETURN(QuantizeReport report, QuantizeTensors(*source, recipe, options, out.path()));
  ASSIGN_OR_RETURN(std::string config_out, QuantizedConfigJson(config_text, report));
  // Other files first, config.json last (a reader looking for config.json sees a finished directory
  // even without the rename).
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(in, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "config.json" || name == "model.safetensors.index.json" ||
        entry.path().extension() == ".safetensors" || !entry.is_regular_file())
      continue;
    fs::copy_file(entry.path(), fs::path(out.path()) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::InternalError(fmt::format("copying {}: {}", entry.path().string(), ec.message()));
  }
  if (ec) return absl::InternalError(fmt::format("{}: cannot list: {}", in_dir, ec.message()));
  RETURN_IF_ERROR(WriteTextFile((fs::path(out.path()) / "config.json").string(), config_out));
  RETURN_IF_ERROR(out.Commit());
  return report;
}

}  // namespace sparkserve::quant
