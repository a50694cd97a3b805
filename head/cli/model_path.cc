// Packed single-file models behind MODEL_DIR arguments, and `sparkserve pack` / `unpack`.
#include "head/cli/model_path.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "head/cli/commands.h"
#include "head/cli/model_command_args.h"
#include "quant/gguf_reader.h"
#include "quant/model_pack.h"

namespace sparkserve::head {
namespace {

std::mutex g_mu;
std::vector<std::unique_ptr<quant::ModelSource>>& Sources() {
  static auto* v = new std::vector<std::unique_ptr<quant::ModelSource>>();
  return *v;
}
// Views are removed at exit (the vector itself is leaked so no static-destruction order applies).
void RemoveViews() {
  std::lock_guard<std::mutex> lock(g_mu);
  Sources().clear();
}

}  // namespace

void AcceptModelPath(CLI::App* cmd, CLI::Option* opt, std::string* target, ModelPathOptions options) {
  auto requantize = std::make_shared<std::string>();
  if (options.requantize) {
    cmd->add_option("--requantize", *requantize,
                    "GGUF input: quantise the weights at load with this recipe (nvfp4-mixed, nvfp4, fp8; weights only) "
                    "instead of dequantising them to bf16");
  }
  cmd->parse_complete_callback([opt, target, options, requantize] {
    std::error_code ec;
    if (!std::filesystem::exists(*target, ec)) return;  // the command's own loader says what is missing
    if (std::filesystem::is_directory(*target, ec)) {
      if (!requantize->empty()) throw CLI::ValidationError("--requantize", "applies to GGUF files only");
      return;
    }
    if (options.any_file && !quant::LooksLikePackedModel(*target) && !quant::LooksLikeGguf(*target)) return;
    quant::ModelSourceOptions o;
    o.requantize = *requantize;
    auto source = quant::ModelSource::Open(*target, o);
    if (!source.ok()) throw CLI::ValidationError(opt->get_name(), std::string(source.status().message()));
    *target = (*source)->dir();
    std::lock_guard<std::mutex> lock(g_mu);
    if (Sources().empty()) std::atexit(RemoveViews);
    Sources().push_back(std::move(*source));
  });
}

const quant::ModelSource* SourceOfView(const std::string& dir) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto& s : Sources()) {
    if (s->dir() == dir) return s.get();
  }
  return nullptr;
}

const quant::ModelSource* PackedSourceOf(const std::string& dir) {
  const quant::ModelSource* s = SourceOfView(dir);
  return s != nullptr && s->packed() ? s : nullptr;
}

void AddPackCommands(CLI::App& app, int* exit_code) {
  struct Args {
    std::string in, out;
  };
  auto pack = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "pack", "pack a model directory into one file (a valid safetensors file whose metadata carries config, "
              "tokenizer, chat template and every other file, and a SHA-256 content digest)");
  cmd->add_option("MODEL_DIR", pack->in, "model directory (config.json, safetensors (+ index), tokenizer, ...)")->required();
  cmd->add_option("OUT_FILE", pack->out, "the packed file to write (e.g. model.sparkserve)")->required();
  cmd->callback([cmd, pack, exit_code] {
    UseStderrLogging(cmd);
    const absl::Status s = quant::PackModelDirectory(pack->in, pack->out);
    if (!s.ok()) std::fprintf(stderr, "pack: %s\n", std::string(s.message()).c_str());
    *exit_code = s.ok() ? 0 : 1;
  });
  auto unpack = std::make_shared<Args>();
  CLI::App* ucmd = app.add_subcommand(
      "unpack", "verify a packed model file and write back the directory it was packed from, byte-identical");
  ucmd->add_option("FILE", unpack->in, "packed model file")->required();
  ucmd->add_option("OUT_DIR", unpack->out, "output directory (must not exist, or be empty)")->required();
  ucmd->callback([ucmd, unpack, exit_code] {
    UseStderrLogging(ucmd);
    const absl::Status s = quant::UnpackModelFile(unpack->in, unpack->out);
    if (!s.ok()) std::fprintf(stderr, "unpack: %s\n", std::string(s.message()).c_str());
    *exit_code = s.ok() ? 0 : 1;
  });
}

}  // namespace sparkserve::head
