// The streaming quantisation pipeline (see quantize_pipeline.h).
#include "quant/quantizer/quantize_pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "quant/compressed_tensors.h"
#include "quant/e4m3.h"
#include "quant/quantizer/planned_safetensors_writer.h"

namespace sparkserve::quant {
namespace {

using nlohmann::ordered_json;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool IsVision(std::string_view name) { return StartsWith(name, "model.visual.") || StartsWith(name, "visual."); }

// One unit of work: a source tensor (or a set of constants) and the tensors it becomes.
struct Item {
  std::string source;  // source tensor name ("" for constants)
  std::string module;  // Linear module name ("" for other tensors)
  WeightScheme scheme = WeightScheme::kDense;
  std::string fallback;
  int64_t out = 0, in = 0;
  uint64_t source_bytes = 0;
  bool input_global_scale = false;                       // W4A4: write input_global_scale
  float input_amax = 0;
  std::vector<std::pair<std::string, float>> constants;  // f32 [1] tensors (k_scale / v_scale)
  std::vector<PlannedTensor> outputs;
};

// Stderr progress bar over source bytes.
class ProgressBar {
 public:
  ProgressBar(uint64_t total, bool enabled) : total_(std::max<uint64_t>(total, 1)), enabled_(enabled),
                                              tty_(::isatty(2) != 0), start_(Clock::now()) {}
  void Advance(uint64_t bytes) {
    const uint64_t done = done_ += bytes;
    if (!enabled_) return;
    std::lock_guard<std::mutex> lock(mu_);
    const int pct = static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total_));
    const auto now = Clock::now();
    const bool due = tty_ ? (pct != last_pct_ && now - last_ >= std::chrono::milliseconds(100)) || done == total_
                          : pct / 10 != last_pct_ / 10;
    if (!due) return;
    last_pct_ = pct;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const int width = 30, fill = pct * width / 100;
    std::fprintf(stderr, "%squantize [%s%s] %3d%% %.2f/%.2f GB %.1fs%s", tty_ ? "\r" : "",
                 std::string(static_cast<size_t>(fill), '#').c_str(),
                 std::string(static_cast<size_t>(width - fill), '.').c_str(), pct, static_cast<double>(done) / 1e9,
                 static_cast<double>(total_) / 1e9, secs, tty_ ? "" : "\n");
    std::fflush(stderr);
  }
  void Done() {
    if (enabled_ && tty_) std::fputc('\n', stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  const uint64_t total_;
  const bool enabled_, tty_;
  const Clock::time_point start_;
  std::atomic<uint64_t> done_{0};
  std::mutex mu_;
  int last_pct_ = -1;
  Clock::time_point last_{};
};

std::string RegexEscape(std::string_view s) {
  std::string r;
  for (char c : s) {
    if (std::string_view(".^$*+?()[]{}|\\").find(c) != std::string_view::npos) r += '\\';
    r += c;
  }
  return r;
}

// "model.layers.12.mlp.up_proj" -> {"model.layers.", ".mlp.up_proj"}; no layer index -> nullopt.
std::optional<std::pair<std::string, std::string>> SplitLayerIndex(const std::string& name) {
  const size_t p = name.find("layers.");
  if (p == std::string::npos) return std::nullopt;
  size_t q = p + 7;
  const size_t digits = q;
  while (q < name.size() && std::isdigit(static_cast<unsigned char>(name[q]))) ++q;
  if (q == digits || q >= name.size() || name[q] != '.') return std::nullopt;
  return std::make_pair(name.substr(0, digits), name.substr(q));
}

// Compact compressed-tensors targets naming exactly `chosen` among `all` modules: modules that differ
// only in their layer index collapse into one anchored regex when every such module is chosen.
std::vector<std::string> CollapseTargets(const std::vector<std::string>& chosen, const std::vector<std::string>& all) {
  std::map<std::pair<std::string, std::string>, std::pair<int, int>> counts;  // key -> {chosen, all}
  const std::set<std::string> chosen_set(chosen.begin(), chosen.end());
  for (const std::string& m : all) {
    if (auto k = SplitLayerIndex(m)) {
      auto& c = counts[*k];
      ++c.second;
      if (chosen_set.count(m)) ++c.first;
    }
  }
  std::vector<std::string> targets;
  std::set<std::pair<std::string, std::string>> emitted;
  for (const std::string& m : chosen) {
    auto k = SplitLayerIndex(m);
    if (k && counts[*k].first == counts[*k].second && counts[*k].second > 1) {
      if (emitted.insert(*k).second)
        targets.push_back(fmt::format("re:^{}\\d+{}$", RegexEscape(k->first), RegexEscape(k->second)));
    } else {
      targets.push_back(m);
    }
  }
  return targets;
}

ordered_json Nvfp4Args() {
  return {{"dynamic", false},        {"group_size", 16},     {"num_bits", 4}, {"scale_dtype", "torch.float8_e4m3fn"},
          {"strategy", "tensor_group"}, {"symmetric", true}, {"type", "float"}};
}

// Builds quantization_config and checks with our parser that it assigns every module its scheme.
absl::StatusOr<std::string> BuildQuantizationConfig(const std::vector<ModuleReport>& modules, bool w4a4, bool kv) {
  std::vector<std::string> all, nvfp4, fp8, dense;
  for (const ModuleReport& m : modules) {
    all.push_back(m.name);
    (m.scheme == WeightScheme::kNvfp4 ? nvfp4 : m.scheme == WeightScheme::kFp8 ? fp8 : dense).push_back(m.name);
  }
  if (nvfp4.empty() && fp8.empty() && !kv) return std::string();
  ordered_json groups = ordered_json::object();
  std::vector<std::string> formats;
  if (!nvfp4.empty()) {
    ordered_json in = nullptr;
    if (w4a4) {
      in = Nvfp4Args();
      in["dynamic"] = "local";
    }
    groups[fmt::format("group_{}", groups.size())] = {
        {"format", kFormatNvfp4}, {"input_activations", in}, {"output_activations", nullptr},
        {"targets", CollapseTargets(nvfp4, all)}, {"weights", Nvfp4Args()}};
    formats.emplace_back(kFormatNvfp4);
  }
  if (!fp8.empty()) {
    groups[fmt::format("group_{}", groups.size())] = {
        {"format", kFormatFloatQuantized},
        {"input_activations",
         {{"dynamic", true}, {"group_size", nullptr}, {"num_bits", 8}, {"strategy", "token"}, {"symmetric", true},
          {"type", "float"}}},
        {"output_activations", nullptr},
        {"targets", CollapseTargets(fp8, all)},
        {"weights",
         {{"dynamic", false}, {"group_size", nullptr}, {"num_bits", 8}, {"strategy", "channel"}, {"symmetric", true},
          {"type", "float"}}}};
    formats.emplace_back(kFormatFloatQuantized);
  }
  ordered_json kv_scheme = nullptr;
  if (kv) {
    kv_scheme = {{"dynamic", false}, {"group_size", nullptr}, {"num_bits", 8}, {"strategy", "tensor"},
                 {"symmetric", true}, {"type", "float"}};
  }
  ordered_json qc = {
      {"config_groups", groups},
      {"format", formats.size() == 1 ? formats[0] : formats.empty() ? std::string(kFormatDense)
                                                                     : std::string(kFormatMixedPrecision)},
      {"global_compression_ratio", nullptr},
      {"ignore", CollapseTargets(dense, all)},
      {"kv_cache_scheme", kv_scheme},
      {"quant_method", "compressed-tensors"},
      {"quantization_status", "compressed"},
      {"sparsity_config", ordered_json::object()},
      {"transform_config", ordered_json::object()},
      {"version", "0.20.1"}};
  const std::string text = qc.dump();
  // Self-check: the config must give each module the intended format, as the library would.
  ASSIGN_OR_RETURN(QuantizationConfig parsed, ParseQuantizationConfig(text, "generated quantization_config"));
  for (const ModuleReport& m : modules) {
    const QuantScheme* s = parsed.SchemeFor(m.name, "Linear");
    const std::string got = s ? parsed.FormatFor(*s) : std::string(kFormatDense);
    const std::string_view want = m.scheme == WeightScheme::kNvfp4 ? kFormatNvfp4
                                  : m.scheme == WeightScheme::kFp8 ? kFormatFloatQuantized
                                                                   : kFormatDense;
    if (got != want)
      return absl::InternalError(fmt::format("generated quantization_config gives {} format {}, intended {}", m.name,
                                             got, std::string(want)));
  }
  return text;
}

std::string DenseFormatName(core::DType t) { return std::string(core::DTypeName(t)); }

absl::Status CheckUnquantised(const SourceTensorInfo& t) {
  static constexpr std::string_view kQuantSuffixes[] = {".weight_packed", ".weight_scale", ".weight_global_scale",
                                                        ".input_global_scale", ".input_scale", ".weight_zero_point"};
  for (std::string_view s : kQuantSuffixes) {
    if (EndsWith(t.name, s))
      return absl::InvalidArgumentError(fmt::format(
          "the input is already quantised (tensor {}): quantize needs a bf16/f16/f32 checkpoint", t.name));
  }
  if (!core::IsFloating(t.dtype) || t.dtype == core::DType::kF8E4M3)
    return absl::InvalidArgumentError(
        fmt::format("tensor {} is {}: quantize needs a bf16/f16/f32 checkpoint (already quantised input?)", t.name,
                    core::DTypeName(t.dtype)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsTensorSource>> SafetensorsTensorSource::Open(const std::string& dir) {
  ASSIGN_OR_RETURN(SafetensorsCheckpoint ckpt, SafetensorsCheckpoint::Open(dir));
  return std::unique_ptr<SafetensorsTensorSource>(new SafetensorsTensorSource(std::move(ckpt)));
}

std::vector<SourceTensorInfo> SafetensorsTensorSource::List() const {
  std::vector<SourceTensorInfo> r;
  for (const std::string& n : ckpt_.Names()) {
    const SafetensorsEntry* e = ckpt_.Find(n);
    r.push_back({n, e->dtype, e->shape});
  }
  return r;
}

absl::StatusOr<core::Tensor> SafetensorsTensorSource::Load(const std::string& name) const { return ckpt_.Get(name); }

absl::StatusOr<QuantizeReport> QuantizeTensors(const TensorSource& source, const Recipe& recipe,
                                               const QuantizeOptions& options, const std::string& out_dir) {
  const std::vector<SourceTensorInfo> infos = source.List();
  std::map<std::string, const SourceTensorInfo*> by_name;
  for (const auto& t : infos) {
    RETURN_IF_ERROR(CheckUnquantised(t));
    by_name[t.name] = &t;
  }
  const std::string embed_name = options.text_prefix + "embed_tokens.weight";
  const auto& cal = options.calibration;

  // ---- plan ----
  std::vector<Item> items;
  auto make_linear = [&](const SourceTensorInfo& t, const std::string& module, WeightScheme scheme) {
    Item it;
    it.source = t.name;
    it.module = module;
    it.scheme = scheme;
    it.out = t.shape[0];
    it.in = t.shape[1];
    it.source_bytes = static_cast<uint64_t>(t.shape[0] * t.shape[1]) * core::DTypeSize(t.dtype);
    if (scheme == WeightScheme::kNvfp4 && it.in % kNvfp4GroupSize != 0) {
      it.scheme = WeightScheme::kFp8;
      it.fallback = fmt::format("input dim {} is not a multiple of 16: NVFP4 -> FP8 per channel", it.in);
    }
    return it;
  };
  for (const SourceTensorInfo& t : infos) {
    const bool linear = t.shape.size() == 2 && EndsWith(t.name, ".weight") && !EndsWith(t.name, "embed_tokens.weight") &&
                        !IsVision(t.name);
    if (linear) {
      const std::string module = t.name.substr(0, t.name.size() - 7);
      items.push_back(make_linear(t, module, recipe.SchemeFor(module)));
    } else {
      Item it;
      it.source = t.name;
      it.source_bytes = static_cast<uint64_t>(core::NumElements(t.shape)) * core::DTypeSize(t.dtype);
      it.outputs.push_back({t.name, t.dtype, t.shape});
      items.push_back(std::move(it));
    }
  }
  bool untied = false;
  if (options.tie_word_embeddings && !by_name.count("lm_head.weight") &&
      recipe.SchemeFor("lm_head") != WeightScheme::kDense) {
    auto e = by_name.find(embed_name);
    if (e == by_name.end() || e->second->shape.size() != 2)
      return absl::InvalidArgumentError(
          fmt::format("the recipe quantises the tied lm_head but the checkpoint has no 2-D {}", embed_name));
    items.push_back(make_linear(*e->second, "lm_head", recipe.SchemeFor("lm_head")));
    untied = true;
  }
  size_t nvfp4_modules = 0, nvfp4_with_amax = 0;
  for (const Item& it : items) {
    if (it.scheme == WeightScheme::kNvfp4) {
      ++nvfp4_modules;
      nvfp4_with_amax += cal.input_amax.count(it.module);
    }
  }
  const bool w4a4 = nvfp4_modules > 0 && nvfp4_with_amax == nvfp4_modules;
  for (Item& it : items) {
    if (it.module.empty()) continue;
    const std::string& m = it.module;
    if (it.scheme == WeightScheme::kNvfp4) {
      it.outputs = {{m + ".weight_packed", core::DType::kU8, {it.out, it.in / 2}},
                    {m + ".weight_scale", core::DType::kF8E4M3, {it.out, it.in / kNvfp4GroupSize}},
                    {m + ".weight_global_scale", core::DType::kF32, {1}}};
      if (w4a4) {
        it.input_global_scale = true;
        it.input_amax = cal.input_amax.at(m);
        it.outputs.push_back({m + ".input_global_scale", core::DType::kF32, {1}});
      }
    } else if (it.scheme == WeightScheme::kFp8) {
      it.outputs = {{m + ".weight", core::DType::kF8E4M3, {it.out, it.in}},
                    {m + ".weight_scale", core::DType::kF32, {it.out, 1}}};
    } else {
      const SourceTensorInfo& t = *by_name.at(it.source);
      it.outputs = {{m + ".weight", t.dtype, t.shape}};
    }
  }
  for (const auto& [prefix, amax] : cal.kv_amax) {
    Item it;
    it.constants = {{prefix + ".k_scale", amax.first > 0 ? amax.first / kE4M3Max : 1.0f},
                    {prefix + ".v_scale", amax.second > 0 ? amax.second / kE4M3Max : 1.0f}};
    for (const auto& [name, v] : it.constants) {
      if (by_name.count(name)) return absl::InvalidArgumentError(fmt::format("the input already has {}", name));
      it.outputs.push_back({name, core::DType::kF32, {1}});
    }
    items.push_back(std::move(it));
  }

  QuantizeReport report;
  report.untied_lm_head = untied;
  for (const Item& it : items) {
    if (!it.module.empty()) report.modules.push_back({it.module, it.scheme, it.fallback, {}});
  }
  ASSIGN_OR_RETURN(report.quantization_config_json,
                   BuildQuantizationConfig(report.modules, w4a4, !cal.kv_amax.empty()));

  std::vector<std::vector<PlannedTensor>> groups;
  for (const Item& it : items) groups.push_back(it.outputs);
  ASSIGN_OR_RETURN(std::unique_ptr<PlannedSafetensorsWriter> writer,
                   PlannedSafetensorsWriter::Create(out_dir, groups, options.max_shard_bytes, {{"format", "pt"}}));

  // ---- run ----
  for (const Item& it : items) report.source_bytes += it.source_bytes;
  ProgressBar bar(report.source_bytes, options.progress);
  std::vector<QuantError> errors(items.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex err_mu;
  absl::Status first_error;
  auto work = [&]() {
    std::vector<float> f32;
    for (size_t i; !failed && (i = next++) < items.size();) {
      const Item& it = items[i];
      absl::Status st = [&]() -> absl::Status {
        if (!it.constants.empty()) {
          for (const auto& [name, v] : it.constants) {
            RETURN_IF_ERROR(writer->Write(name, {reinterpret_cast<const uint8_t*>(&v), sizeof v}));
          }
          return absl::OkStatus();
        }
        ASSIGN_OR_RETURN(core::Tensor t, source.Load(it.source));
        if (it.scheme == WeightScheme::kDense) return writer->Write(it.outputs[0].name, t);
        f32.resize(static_cast<size_t>(t.numel()));
        WidenToF32(t, f32);
        if (it.scheme == WeightScheme::kNvfp4) {
          Nvfp4Weight q = QuantizeNvfp4(f32, it.out, it.in, options.search_scales);
          RETURN_IF_ERROR(writer->Write(it.module + ".weight_packed", q.packed));
          RETURN_IF_ERROR(writer->Write(it.module + ".weight_scale", q.scale));
          RETURN_IF_ERROR(writer->Write(it.module + ".weight_global_scale", q.global_scale));
          if (it.input_global_scale) {
            const float gs = Nvfp4GlobalScale(it.input_amax);
            RETURN_IF_ERROR(
                writer->Write(it.module + ".input_global_scale", {reinterpret_cast<const uint8_t*>(&gs), sizeof gs}));
          }
          errors[i] = q.error;
        } else {
          Fp8Weight q = QuantizeFp8PerChannel(f32, it.out, it.in);
          RETURN_IF_ERROR(writer->Write(it.module + ".weight", q.weight));
          RETURN_IF_ERROR(writer->Write(it.module + ".weight_scale", q.scale));
          errors[i] = q.error;
        }
        return absl::OkStatus();
      }();
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (first_error.ok()) first_error = core::Annotate(st, it.source.empty() ? "kv scales" : it.source);
        failed = true;
        return;
      }
      bar.Advance(it.source_bytes);
    }
  };
  int threads = options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::clamp(threads, 1, std::max<int>(1, static_cast<int>(items.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  bar.Done();
  if (!first_error.ok()) return first_error;
  RETURN_IF_ERROR(writer->Finish());

  // ---- report ----
  size_t m = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    std::string fmt_name;
    if (it.scheme == WeightScheme::kNvfp4) fmt_name = "nvfp4";
    else if (it.scheme == WeightScheme::kFp8) fmt_name = "fp8";
    else fmt_name = it.constants.empty() ? DenseFormatName(it.outputs[0].dtype) : "f32";
    FormatTotals& ft = report.formats[fmt_name];
    for (const PlannedTensor& o : it.outputs) {
      ++ft.tensors;
      ft.bytes += o.nbytes();
      report.output_bytes += o.nbytes();
    }
    if (!it.module.empty()) {
      ++ft.modules;
      report.modules[m].error = errors[i];
      if (it.scheme == WeightScheme::kNvfp4) report.nvfp4.Add(errors[i]);
      if (it.scheme == WeightScheme::kFp8) report.fp8.Add(errors[i]);
      ++m;
    }
  }
  report.shards = writer->num_shards();
  return report;
}

absl::StatusOr<std::string> QuantizedConfigJson(const std::string& input_config, const QuantizeReport& report) {
  ordered_json j = ordered_json::parse(input_config, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("config.json: not a JSON object");
  if (report.quantization_config_json.empty()) {
    j.erase("quantization_config");
  } else {
    j["quantization_config"] = ordered_json::parse(report.quantization_config_json);
  }
  if (report.untied_lm_head) {
    j["tie_word_embeddings"] = false;
    if (j.contains("text_config") && j["text_config"].is_object()) j["text_config"]["tie_word_embeddings"] = false;
  }
  return j.dump(2) + "\n";
}

std::string FormatReportTable(const QuantizeReport& r) {
  std::string s = fmt::format("{:<8} {:>8} {:>8} {:>14}\n", "format", "modules", "tensors", "bytes");
  for (const auto& [name, t] : r.formats) {
    s += fmt::format("{:<8} {:>8} {:>8} {:>14}\n", name, t.modules, t.tensors, t.bytes);
  }
  s += fmt::format("{:<8} {:>8} {:>8} {:>14}\n", "total", r.modules.size(), "", r.output_bytes);
  s += fmt::format("source bytes {}, output bytes {} ({:.1f}%), {} shard(s){}\n", r.source_bytes, r.output_bytes,
                   r.source_bytes ? 100.0 * static_cast<double>(r.output_bytes) / static_cast<double>(r.source_bytes) : 0.0,
                   r.shards, r.untied_lm_head ? ", lm_head untied from embed_tokens" : "");
  if (r.nvfp4.signal > 0) {
    const double gain = r.nvfp4.rtn_error > 0 ? 100.0 * (1.0 - r.nvfp4.error / r.nvfp4.rtn_error) : 0.0;
    s += fmt::format("nvfp4 weight error (relative Frobenius): {:.4f} with scale search, {:.4f} round-to-nearest "
                     "(squared error {:.1f}% lower)\n",
                     r.nvfp4.relative(), r.nvfp4.relative_rtn(), gain);
  }
  if (r.fp8.signal > 0) s += fmt::format("fp8 weight error (relative Frobenius): {:.4f}\n", r.fp8.relative());
  for (const ModuleReport& m : r.modules) {
    if (!m.fallback.empty()) s += fmt::format("fallback: {}: {}\n", m.name, m.fallback);
  }
  return s;
}

}  // namespace sparkserve::quant
