// ModelSource: directories as they are, packed files through a verified directory view, GGUF files
// through a dequantised (or requantised) directory.
#include "quant/model_source.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "quant/gguf_model.h"
#include "quant/gguf_reader.h"
#include "quant/quantizer/quantize_checkpoint.h"
#include "spdlog/spdlog.h"

namespace sparkserve::quant {

namespace fs = std::filesystem;

namespace {

absl::StatusOr<std::string> MakeTempDir() {
  std::string tmpl = (fs::temp_directory_path() / "sparkserve-model-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return absl::InternalError(fmt::format("{}: cannot create a temporary directory", tmpl));
  return tmpl;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelSource>> ModelSource::Open(const std::string& path, const ModelSourceOptions& options) {
  std::unique_ptr<ModelSource> s(new ModelSource());
  s->path_ = path;
  std::error_code ec;
  const bool gguf = !fs::is_directory(path, ec) && LooksLikeGguf(path);
  if (!options.requantize.empty() && !gguf) {
    return absl::InvalidArgumentError(fmt::format("{}: --requantize applies to GGUF files only (quantize a checkpoint with "
                                                  "`sparkserve quantize`)", path));
  }
  if (fs::is_directory(path, ec)) {
    s->dir_ = path;
    return s;
  }
  if (!fs::exists(path, ec)) return absl::NotFoundError(fmt::format("{}: no such file or directory", path));
  if (gguf) {
    ASSIGN_OR_RETURN(s->owned_root_, MakeTempDir());
    s->kind_ = Kind::kGguf;
    const std::string bf16_dir = (fs::path(s->owned_root_) / "bf16").string();
    RETURN_IF_ERROR(WriteGgufModelDirectory(path, bf16_dir));
    s->dir_ = bf16_dir;
    s->load_mode_ = "dequantised to bf16";
    if (!options.requantize.empty()) {
      ASSIGN_OR_RETURN(Recipe recipe, Recipe::Load(options.requantize));
      QuantizeOptions q;
      std::ifstream cf(fs::path(bf16_dir) / "config.json");
      q.tie_word_embeddings = nlohmann::json::parse(cf).value("tie_word_embeddings", false);
      q.progress = false;
      const std::string out = (fs::path(s->owned_root_) / "requantized").string();
      ASSIGN_OR_RETURN(QuantizeReport report, QuantizeCheckpoint(bf16_dir, out, recipe, q));
      (void)report;
      fs::remove_all(bf16_dir, ec);
      s->dir_ = out;
      s->load_mode_ = fmt::format("requantised {} at load (weights only, no calibration)", recipe.name());
    }
    spdlog::info("{}: GGUF {}, read through {}", path, s->load_mode_, s->dir_);
    return s;
  }
  ASSIGN_OR_RETURN(PackedModel p, ReadPackedModel(path));
  ASSIGN_OR_RETURN(s->owned_root_, MakeTempDir());
  s->dir_ = s->owned_root_;
  s->kind_ = Kind::kPacked;
  for (const auto& [rel, contents] : p.files) {
    if (rel == "model.safetensors.index.json") continue;  // the view's weights are the one packed file
    const fs::path out = fs::path(s->dir_) / rel;
    fs::create_directories(out.parent_path(), ec);
    std::ofstream f(out, std::ios::binary);
    f.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (!f) return absl::InternalError(fmt::format("{}: write failed", out.string()));
  }
  fs::create_symlink(fs::absolute(path), fs::path(s->dir_) / "model.safetensors", ec);
  if (ec) return absl::InternalError(fmt::format("{}: symlink failed: {}", s->dir_, ec.message()));
  spdlog::info("{}: packed model {} ({} embedded files), read through {}", path, p.digest, p.files.size(), s->dir_);
  s->packed_ = std::move(p);
  return s;
}

ModelSource::~ModelSource() {
  if (owned_root_.empty()) return;
  std::error_code ec;
  fs::remove_all(owned_root_, ec);
}

}  // namespace sparkserve::quant
