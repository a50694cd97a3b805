// `sparkserve inspect MODEL_DIR [--json]`: a checkpoint's architecture, layer pattern, every
// weight-bearing module's format and bytes, totals per format, and the weight bytes one decode step
// reads (DESIGN.md §8). Results go to stdout; errors to stderr with a non-zero exit.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/status.h"
#include "fmt/format.h"
#include "head/cli/model_path.h"
#include "head/cli/commands.h"
#include "model/config.h"
#include "nlohmann/json.hpp"
#include "quant/checkpoint.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace sparkserve::head {
namespace {

using nlohmann::ordered_json;

// "layers.2" before "layers.10": compares digit runs as numbers.
bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      const std::string na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Where a tensor or module belongs in the decode-step accounting.
enum class Part { kLayers, kTextOther, kEmbed, kLmHead, kMtp, kVision, kUnknown };

Part Classify(std::string_view name, std::string_view prefix) {
  if (StartsWith(name, "mtp.")) return Part::kMtp;
  if (StartsWith(name, "model.visual.") || StartsWith(name, "visual.")) return Part::kVision;
  if (name == "lm_head" || StartsWith(name, "lm_head.")) return Part::kLmHead;
  const std::string embed = fmt::format("{}embed_tokens", prefix);
  if (name == embed || StartsWith(name, embed + ".")) return Part::kEmbed;
  if (StartsWith(name, fmt::format("{}layers.", prefix))) return Part::kLayers;
  if (StartsWith(name, prefix)) return Part::kTextOther;
  return Part::kUnknown;
}

// The rotary embedding: what text uses (rotary_dim) and the MRoPE split as given (null when
// absent), with the 3-D split images and video would use, or why there is none.
ordered_json RopeJson(const model::Qwen35Config& cfg) {
  ordered_json rope = {{"type", cfg.rope.rope_type},
                       {"theta", cfg.rope.theta},
                       {"partial_rotary_factor", cfg.rope.partial_rotary_factor},
                       {"rotary_dim", cfg.rotary_dim()},
                       {"mrope_section", cfg.rope.mrope_section.empty() ? ordered_json(nullptr)
                                                                       : ordered_json(cfg.rope.mrope_section)}};
  absl::StatusOr<std::vector<int64_t>> split = cfg.MropeSectionFor3dPositions();
  if (split.ok()) {
    rope["mrope_section_3d"] = *split;
  } else {
    rope["mrope_section_3d_error"] = std::string(split.status().message());
  }
  return rope;
}

absl::StatusOr<ordered_json> Inspect(const std::string& dir) {
  ASSIGN_OR_RETURN(model::Qwen35Config cfg, model::LoadQwen35Config(dir));
  ASSIGN_OR_RETURN(quant::Checkpoint ckpt, quant::Checkpoint::Open(dir));
  const std::string_view prefix = cfg.weight_prefix();

  ordered_json out;
  out["model_dir"] = dir;
  if (const quant::ModelSource* src = SourceOfView(dir); src != nullptr && src->kind() == quant::ModelSource::Kind::kGguf) {
    out["model_dir"] = src->path();
    out["gguf"] = {{"file", src->path()}, {"load", src->load_mode()}};
  }
  if (const quant::ModelSource* src = PackedSourceOf(dir); src != nullptr) {
    const quant::PackedModel& p = *src->pack();
    out["model_dir"] = src->path();
    ordered_json files = ordered_json::array();
    for (const auto& [name, contents] : p.files) files.push_back(name);
    ordered_json shards = ordered_json::array();
    for (const auto& s : p.shards) shards.push_back(s.file);
    out["packed"] = {{"file", src->path()}, {"bytes", p.file_bytes}, {"digest", p.digest},
                     {"digest_verified_seconds", p.verify_seconds}, {"embedded_files", files}, {"shards", shards}};
  }
  out["architecture"] = cfg.architecture;
  out["model_type"] = cfg.model_type;
  out["num_layers"] = cfg.num_hidden_layers;
  ordered_json types = ordered_json::array();
  for (model::LayerType t : cfg.layer_types) types.push_back(std::string(model::LayerTypeName(t)));
  out["layer_types"] = std::move(types);
  out["layer_pattern"] = cfg.LayerPattern();
  out["tie_word_embeddings"] = cfg.tie_word_embeddings;
  out["rope"] = RopeJson(cfg);
  if (const auto& q = ckpt.quantization_config()) {
    ordered_json groups = ordered_json::array();
    for (const quant::QuantScheme& s : q->groups) {
      groups.push_back({{"name", s.name}, {"format", q->FormatFor(s)}, {"targets", s.targets}});
    }
    out["quantization"] = {{"method", q->quant_method}, {"format", q->format}, {"groups", std::move(groups)},
                           {"ignore", q->ignore}, {"kv_cache_scheme", q->kv_cache_scheme.has_value()}};
  } else {
    out["quantization"] = nullptr;
  }

  std::vector<const quant::QuantizedLinear*> modules;
  for (const auto& [name, m] : ckpt.modules()) modules.push_back(&m);
  std::sort(modules.begin(), modules.end(), [](auto* a, auto* b) { return NaturalLess(a->name, b->name); });

  ordered_json list = ordered_json::array();
  std::map<std::string, std::pair<int64_t, uint64_t>> totals;  // format -> (modules, bytes)
  uint64_t layers = 0, text_other = 0, lm_head = 0, mtp = 0, vision = 0, unknown = 0, total = 0;
  const quant::QuantizedLinear* embed = nullptr;
  const quant::QuantizedLinear* head = nullptr;
  for (const quant::QuantizedLinear* m : modules) {
    const uint64_t b = m->bytes();
    list.push_back({{"name", m->name}, {"format", std::string(m->FormatName())}, {"shape", {m->out, m->in}}, {"bytes", b}});
    auto& t = totals[std::string(m->FormatName())];
    ++t.first;
    t.second += b;
    total += b;
    switch (Classify(m->name, prefix)) {
      case Part::kLayers: layers += b; break;
      case Part::kTextOther: text_other += b; break;
      case Part::kEmbed: embed = m; break;
      case Part::kLmHead: head = m; break;
      case Part::kMtp: mtp += b; break;
      case Part::kVision: vision += b; break;
      case Part::kUnknown: unknown += b; break;
    }
  }
  uint64_t other_tensors = 0;
  for (const std::string& name : ckpt.other_tensors()) {
    const uint64_t b = ckpt.files().Find(name)->end - ckpt.files().Find(name)->begin;
    other_tensors += b;
    total += b;
    switch (Classify(name, prefix)) {
      case Part::kLayers: case Part::kTextOther: text_other += b; break;
      case Part::kMtp: mtp += b; break;
      case Part::kVision: vision += b; break;
      default: unknown += b; break;
    }
  }
  // The lm_head read: the embedding table when tied (counted once), else lm_head itself. The
  // embedding gather reads one row per token; with tied weights that row is part of the table read.
  uint64_t embedding_row = 0;
  if (cfg.tie_word_embeddings) {
    if (embed == nullptr) return absl::InvalidArgumentError(fmt::format("{}: tied embeddings but no {}embed_tokens.weight", dir, prefix));
    lm_head = embed->bytes();
  } else {
    if (head == nullptr) return absl::InvalidArgumentError(fmt::format("{}: tie_word_embeddings is false but there is no lm_head.weight", dir));
    lm_head = head->bytes();
    if (embed != nullptr && embed->out > 0) embedding_row = embed->bytes() / static_cast<uint64_t>(embed->out);
  }
  ordered_json tot = ordered_json::object();
  for (const char* f : {"nvfp4", "fp8", "bf16", "f16", "f32"}) {
    if (totals.count(f)) tot[f] = {{"modules", totals[f].first}, {"bytes", totals[f].second}};
  }
  out["modules"] = std::move(list);
  out["totals"] = std::move(tot);
  out["other_tensor_bytes"] = other_tensors;
  out["weight_bytes"] = total;
  out["decode_bytes_per_token"] = layers + text_other + lm_head + embedding_row;
  out["decode_breakdown"] = {{"layers", layers}, {"norms_and_other", text_other}, {"lm_head", lm_head},
                             {"embedding_row", embedding_row}};
  // An MTP draft step reads the MTP weights and the shared lm_head (plus one embedding row).
  out["mtp"] = {{"bytes", mtp},
                {"bytes_per_draft_token", mtp == 0 ? 0 : mtp + lm_head + (embed && embed->out > 0 ? embed->bytes() / embed->out : 0)}};
  out["vision_bytes"] = vision;
  if (unknown > 0) out["unclassified_bytes"] = unknown;
  return out;
}

std::string Human(uint64_t b) {
  const double v = static_cast<double>(b);
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", v / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.2f} MiB", v / (1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", v / (1ull << 10));
  return fmt::format("{} B", b);
}

std::string RenderText(const ordered_json& j) {
  std::string s;
  s += fmt::format("model            {}\n", j["model_dir"].get<std::string>());
  if (j.contains("gguf")) s += fmt::format("gguf             {}\n", j["gguf"]["load"].get<std::string>());
  if (j.contains("packed")) {
    const auto& p = j["packed"];
    s += fmt::format("packed file      {} bytes, {} (verified), {} embedded files, from {} shard(s)\n",
                     p["bytes"].get<uint64_t>(), p["digest"].get<std::string>(), p["embedded_files"].size(),
                     p["shards"].size());
  }
  s += fmt::format("architecture     {} ({})\n", j["architecture"].get<std::string>(), j["model_type"].get<std::string>());
  s += fmt::format("layers           {} (pattern {}, L = linear_attention, F = full_attention)\n",
                   j["num_layers"].get<int64_t>(), j["layer_pattern"].get<std::string>());
  s += fmt::format("tied embeddings  {}\n", j["tie_word_embeddings"].get<bool>() ? "yes" : "no");
  const auto& rope = j["rope"];
  s += fmt::format("rope             {}, theta {}, rotary dim {} (partial_rotary_factor {}), mrope_section {}\n",
                   rope["type"].get<std::string>(), rope["theta"].get<double>(), rope["rotary_dim"].get<int64_t>(),
                   rope["partial_rotary_factor"].get<double>(),
                   rope["mrope_section"].is_null() ? std::string("absent") : rope["mrope_section"].dump());
  if (rope.contains("mrope_section_3d_error")) {
    s += fmt::format("                 text only: {}\n", rope["mrope_section_3d_error"].get<std::string>());
  }
  if (j["quantization"].is_null()) {
    s += "quantization     none\n";
  } else {
    s += fmt::format("quantization     {} {} ({} groups)\n", j["quantization"]["method"].get<std::string>(),
                     j["quantization"]["format"].get<std::string>(), j["quantization"]["groups"].size());
  }
  size_t width = 0;
  for (const auto& m : j["modules"]) width = std::max(width, m["name"].get<std::string>().size());
  s += "\nmodules\n";
  for (const auto& m : j["modules"]) {
    s += fmt::format("  {:<{}}  {:<5}  {:>16}  {:>12} B  {}\n", m["name"].get<std::string>(), width,
                     m["format"].get<std::string>(), fmt::format("[{}, {}]", m["shape"][0].get<int64_t>(), m["shape"][1].get<int64_t>()),
                     m["bytes"].get<uint64_t>(), Human(m["bytes"].get<uint64_t>()));
  }
  s += "\ntotals per format\n";
  for (const auto& [f, t] : j["totals"].items()) {
    s += fmt::format("  {:<5}  {:>5} modules  {:>14} B  {}\n", f, t["modules"].get<int64_t>(),
                     t["bytes"].get<uint64_t>(), Human(t["bytes"].get<uint64_t>()));
  }
  s += fmt::format("  other tensors        {:>14} B  {}\n", j["other_tensor_bytes"].get<uint64_t>(),
                   Human(j["other_tensor_bytes"].get<uint64_t>()));
  s += fmt::format("  all weights          {:>14} B  {}\n", j["weight_bytes"].get<uint64_t>(),
                   Human(j["weight_bytes"].get<uint64_t>()));
  const auto& d = j["decode_breakdown"];
  s += fmt::format("\ndecode bytes per token  {} B  {} (layers {}, norms/other {}, lm_head {}, embedding row {})\n",
                   j["decode_bytes_per_token"].get<uint64_t>(), Human(j["decode_bytes_per_token"].get<uint64_t>()),
                   Human(d["layers"].get<uint64_t>()), Human(d["norms_and_other"].get<uint64_t>()),
                   Human(d["lm_head"].get<uint64_t>()), Human(d["embedding_row"].get<uint64_t>()));
  s += fmt::format("MTP                     {} of weights, {} per draft token\n", Human(j["mtp"]["bytes"].get<uint64_t>()),
                   Human(j["mtp"]["bytes_per_draft_token"].get<uint64_t>()));
  if (j["vision_bytes"].get<uint64_t>() > 0) s += fmt::format("vision                  {}\n", Human(j["vision_bytes"].get<uint64_t>()));
  return s;
}

}  // namespace

void AddInspectCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string dir;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("inspect", "show a checkpoint's layers, module formats and bytes, and the "
                                                "weight bytes read per decoded token");
  AcceptModelPath(cmd, cmd->add_option("MODEL_DIR", opts->dir, "checkpoint directory (config.json + safetensors), packed model file or qwen35 GGUF file")->required(),
                  &opts->dir, {.requantize = true});
  cmd->add_flag("--json", opts->json, "print one JSON object");
  cmd->callback([opts, exit_code, &app] {
    // Subcommands run inside the parse, before main sets up logging: keep any log line off stdout.
    auto logger = std::make_shared<spdlog::logger>("inspect", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    const CLI::Option* level = app.get_option_no_throw("--log-level");
    const std::string lvl = level && level->count() ? level->as<std::string>() : "warn";
    logger->set_level(spdlog::level::from_str(lvl));
    spdlog::set_default_logger(logger);

    auto result = Inspect(opts->dir);
    if (!result.ok()) {
      std::fprintf(stderr, "sparkserve inspect: %s\n", std::string(result.status().message()).c_str());
      *exit_code = 1;
      return;
    }
    const std::string text = opts->json ? result->dump(2) + "\n" : RenderText(*result);
    std::fwrite(text.data(), 1, text.size(), stdout);
    *exit_code = 0;
  });
}

}  // namespace sparkserve::head
