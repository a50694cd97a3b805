// Checkpoint: module discovery, format decisions and validation (see checkpoint.h).
#include "quant/checkpoint.h"

#include <filesystem>
#include <set>

#include "core/status.h"
#include "fmt/format.h"

namespace sparkserve::quant {
namespace {

// Parameter names a Linear module may carry (compressed-tensors names).
const std::set<std::string, std::less<>> kModuleParams = {
    "weight", "weight_packed", "weight_scale", "weight_global_scale", "input_global_scale", "input_scale",
    "weight_zero_point", "input_zero_point", "weight_g_idx", "weight_shape", "bias"};
// Those that only make sense next to a quantized weight.
const std::set<std::string, std::less<>> kQParams = {
    "weight_packed", "weight_scale", "weight_global_scale", "input_global_scale", "input_scale",
    "weight_zero_point", "input_zero_point", "weight_g_idx", "weight_shape"};

// Formats we load; anything else is a clear error.
bool SupportedFormat(const std::string& f) {
  return f == kFormatDense || f == kFormatNvfp4 || f == kFormatFloatQuantized || f == kFormatNaiveQuantized;
}

// The torch class a module's weight belongs to, for class-name targets such as "Linear".
std::string_view ClassOf(std::string_view module) {
  const size_t dot = module.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? module : module.substr(dot + 1);
  return last.find("embed") != std::string_view::npos ? "Embedding" : "Linear";
}

std::string Describe(const QuantizedLinear& m) {
  switch (m.format) {
    case WeightFormat::kNvfp4: return "NVFP4 tensors (weight_packed)";
    case WeightFormat::kFp8: return "an FP8 weight";
    case WeightFormat::kDense: return fmt::format("a dense {} weight", m.FormatName());
  }
  return "?";
}

absl::Status CheckConfigFormats(const QuantizationConfig& c, const std::string& source) {
  for (const QuantScheme& s : c.groups) {
    const std::string f = c.FormatFor(s);
    if (!SupportedFormat(f)) {
      return absl::UnimplementedError(fmt::format(
          "{}: config_groups.{} uses format '{}', which is not supported (supported: {}, {}, {} with fp8 weights, "
          "dense)", source, s.name, f, kFormatNvfp4, kFormatFloatQuantized, kFormatNaiveQuantized));
    }
    if ((f == kFormatFloatQuantized || f == kFormatNaiveQuantized) && !(s.weights && s.weights->is_float(8))) {
      return absl::UnimplementedError(fmt::format(
          "{}: config_groups.{}: format '{}' is supported only for 8-bit float weights", source, s.name, f));
    }
    if (f == kFormatNvfp4 && !(s.weights && s.weights->is_float(4) && s.weights->group_size == 16)) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: config_groups.{}: format '{}' needs 4-bit float weights with group_size 16", source, s.name, f));
    }
  }
  return absl::OkStatus();
}

// Cross-checks a module's stored format against the group that targets it.
absl::Status CheckAgainstScheme(const QuantizedLinear& m, const QuantizationConfig& c, const QuantScheme* s) {
  const std::string expected = s ? c.FormatFor(*s) : std::string(kFormatDense);
  const std::string why = s ? fmt::format("config group '{}' ({})", s->name, expected)
                            : std::string("the quantization_config (it is ignored or matches no target)");
  const bool want_fp8 = expected == kFormatFloatQuantized || expected == kFormatNaiveQuantized;
  const bool ok = (expected == kFormatNvfp4 && m.format == WeightFormat::kNvfp4) ||
                  (want_fp8 && m.format == WeightFormat::kFp8) ||
                  (expected == kFormatDense && m.format == WeightFormat::kDense);
  if (!ok) {
    return absl::InvalidArgumentError(fmt::format("module '{}': stores {} but {} says it is {}", m.name, Describe(m),
                                                  why, s ? expected : "unquantized"));
  }
  if (m.format == WeightFormat::kFp8 && s && s->weights) {
    const std::string& st = s->weights->strategy;
    const Fp8ScaleLayout want = st == "channel" ? Fp8ScaleLayout::kPerChannel
                                : st == "block" ? Fp8ScaleLayout::kBlock
                                                : Fp8ScaleLayout::kPerTensor;
    // A [1]-element scale is the same thing whatever the strategy (one block, one channel).
    if (m.fp8_scale_layout != want && m.weight_scale.numel() != 1) {
      return absl::InvalidArgumentError(fmt::format("module '{}': weight_scale {} does not fit the '{}' strategy of "
                                                    "config group '{}'", m.name, m.weight_scale.ToString(), st, s->name));
    }
    if (st != "tensor" && st != "channel" && st != "block") {
      return absl::UnimplementedError(
          fmt::format("module '{}': FP8 weight strategy '{}' is not supported", m.name, st));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Checkpoint> Checkpoint::Open(const std::string& dir) {
  namespace fs = std::filesystem;
  Checkpoint c;
  c.dir_ = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return absl::NotFoundError(fmt::format("{}: not a directory", dir));
  const std::string config_path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(config_path, ec)) return absl::NotFoundError(fmt::format("{}: no config.json", dir));
  ASSIGN_OR_RETURN(c.qconfig_, ReadQuantizationConfig(config_path));
  if (c.qconfig_) RETURN_IF_ERROR(CheckConfigFormats(*c.qconfig_, config_path));
  ASSIGN_OR_RETURN(c.files_, SafetensorsCheckpoint::Open(dir));
  for (const std::string& n : c.files_.Names()) {
    ASSIGN_OR_RETURN(core::Tensor t, c.files_.Get(n));
    c.tensors_.emplace(n, std::move(t));
  }
  RETURN_IF_ERROR(c.Build());
  return c;
}

absl::StatusOr<Checkpoint> Checkpoint::FromTensors(std::map<std::string, core::Tensor, std::less<>> tensors,
                                                   std::optional<QuantizationConfig> qconfig, std::string label,
                                                   SafetensorsCheckpoint backing) {
  Checkpoint c;
  c.dir_ = std::move(label);
  c.files_ = std::move(backing);
  c.qconfig_ = std::move(qconfig);
  if (c.qconfig_) RETURN_IF_ERROR(CheckConfigFormats(*c.qconfig_, c.dir_));
  c.tensors_ = std::move(tensors);
  RETURN_IF_ERROR(c.Build());
  return c;
}

std::string Checkpoint::SourceOf(std::string_view name) const {
  const std::string file = files_.FileOf(name);
  return file.empty() ? dir_ : file;
}

absl::StatusOr<core::Tensor> Checkpoint::Tensor(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(fmt::format("{}: no tensor '{}'", dir_, name));
  return it->second;
}

absl::Status Checkpoint::Build() {
  Checkpoint& c = *this;
  // Group tensors by module prefix.
  std::map<std::string, std::map<std::string, std::string>> params;  // prefix -> param -> full name
  for (const auto& [n, t] : c.tensors_) {
    const size_t dot = n.rfind('.');
    if (dot == std::string::npos) continue;
    const std::string param = n.substr(dot + 1);
    if (kModuleParams.count(param)) params[n.substr(0, dot)][param] = n;
  }
  std::set<std::string> owned;
  for (const auto& [prefix, p] : params) {
    const core::Tensor* w = p.count("weight") ? &c.tensors_.at(p.at("weight")) : nullptr;
    const bool is_module = p.count("weight_packed") || (w != nullptr && w->rank() == 2);
    if (!is_module) {
      for (const auto& [param, full] : p) {
        if (kQParams.count(param)) {
          return absl::InvalidArgumentError(fmt::format(
              "tensor '{}' ({}): a quantization parameter with no 2-D weight or weight_packed beside it", full,
              c.SourceOf(full)));
        }
      }
      continue;
    }
    for (const char* unsupported : {"weight_zero_point", "weight_g_idx", "weight_shape", "input_zero_point"}) {
      if (p.count(unsupported)) {
        return absl::UnimplementedError(fmt::format(
            "module '{}': has '{}', which belongs to a format that is not supported (asymmetric, GPTQ or "
            "pack-quantized int weights)", prefix, unsupported));
      }
    }
    QuantizedLinear m;
    m.name = prefix;
    auto get = [&c, &p = p](const char* param) -> absl::StatusOr<core::Tensor> {  // (clang 14: no capture of a binding)
      if (!p.count(param)) return core::Tensor();
      return c.tensors_.at(p.at(param));
    };
    if (p.count("weight_packed")) {
      if (p.count("weight")) {
        return absl::InvalidArgumentError(fmt::format("module '{}': has both weight and weight_packed", prefix));
      }
      ASSIGN_OR_RETURN(m.weight, get("weight_packed"));
      if (m.weight.dtype() != core::DType::kU8) {
        return absl::UnimplementedError(fmt::format(
            "module '{}': weight_packed is {} (int-packed weights, e.g. pack-quantized int4, are not supported; "
            "NVFP4 packs into u8)", prefix, m.weight.ToString()));
      }
      m.format = WeightFormat::kNvfp4;
    } else {
      ASSIGN_OR_RETURN(m.weight, get("weight"));
      m.format = m.weight.dtype() == core::DType::kF8E4M3 ? WeightFormat::kFp8 : WeightFormat::kDense;
    }
    ASSIGN_OR_RETURN(m.weight_scale, get("weight_scale"));
    ASSIGN_OR_RETURN(m.weight_global_scale, get("weight_global_scale"));
    ASSIGN_OR_RETURN(m.input_global_scale, get("input_global_scale"));
    ASSIGN_OR_RETURN(m.input_scale, get("input_scale"));
    ASSIGN_OR_RETURN(m.bias, get("bias"));

    const QuantScheme* scheme = c.qconfig_ ? c.qconfig_->SchemeFor(prefix, ClassOf(prefix)) : nullptr;
    if (scheme && scheme->weights && scheme->weights->block_structure.size() == 2) {
      m.block_rows = scheme->weights->block_structure[0];
      m.block_cols = scheme->weights->block_structure[1];
    }
    RETURN_IF_ERROR(m.Validate());
    if (c.qconfig_) RETURN_IF_ERROR(CheckAgainstScheme(m, *c.qconfig_, scheme));
    for (const auto& [param, full] : p) owned.insert(full);
    c.modules_.emplace(prefix, std::move(m));
  }
  for (const auto& [n, t] : c.tensors_) {
    if (!owned.count(n)) c.others_.push_back(n);
  }
  return absl::OkStatus();
}

const QuantizedLinear* Checkpoint::FindModule(std::string_view name) const {
  const auto it = modules_.find(name);
  return it == modules_.end() ? nullptr : &it->second;
}

absl::StatusOr<core::Tensor> Checkpoint::DenseF32(std::string_view name) const {
  ASSIGN_OR_RETURN(core::Tensor t, Tensor(name));
  if (t.dtype() != core::DType::kF32 && t.dtype() != core::DType::kBF16 && t.dtype() != core::DType::kF16) {
    return absl::InvalidArgumentError(fmt::format("tensor '{}' is {}, not a dense float tensor", name, t.ToString()));
  }
  // Copy first: the view may be unaligned for its element type.
  return core::ToF32(t.Clone());
}

}  // namespace sparkserve::quant
