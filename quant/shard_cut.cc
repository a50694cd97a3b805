// CutCheckpoint: cutting rows and columns of stored tensors (see shard_cut.h).
#include "quant/shard_cut.h"

#include <cstring>

#include "core/status.h"
#include "fmt/format.h"

namespace sparkserve::quant {
namespace {

using Tensors = std::map<std::string, core::Tensor, std::less<>>;

int64_t Span(const std::vector<IndexRange>& ranges) {
  int64_t n = 0;
  for (const auto& r : ranges) n += r.second - r.first;
  return n;
}

absl::Status CheckRanges(const std::vector<IndexRange>& ranges, int64_t size, const std::string& what) {
  if (ranges.empty()) return absl::InvalidArgumentError(fmt::format("{}: a cut with no ranges", what));
  for (const auto& [b, e] : ranges) {
    if (b < 0 || e <= b || e > size) {
      return absl::InvalidArgumentError(fmt::format("{}: range [{}, {}) outside [0, {})", what, b, e, size));
    }
  }
  return absl::OkStatus();
}

// Rows `ranges` of the first dimension (one range: a view; several: a copy).
core::Tensor TakeRows(const core::Tensor& t, const std::vector<IndexRange>& ranges) {
  if (ranges.size() == 1) return t.Slice(ranges[0].first, ranges[0].second);
  core::Shape shape = t.shape();
  shape[0] = Span(ranges);
  core::Tensor out = core::Tensor::Empty(shape, t.dtype());
  const size_t row_bytes = t.dim(0) == 0 ? 0 : t.nbytes() / static_cast<size_t>(t.dim(0));
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (const auto& [b, e] : ranges) {
    const size_t n = static_cast<size_t>(e - b) * row_bytes;
    std::memcpy(dst, static_cast<const uint8_t*>(t.raw_data()) + static_cast<size_t>(b) * row_bytes, n);
    dst += n;
  }
  return out;
}

// Columns `ranges` (in elements of the last dimension) of a 2-d tensor, copied.
core::Tensor TakeCols(const core::Tensor& t, const std::vector<IndexRange>& ranges) {
  const int64_t rows = t.dim(0), cols = t.dim(1);
  const size_t elem = core::DTypeSize(t.dtype());
  core::Tensor out = core::Tensor::Empty({rows, Span(ranges)}, t.dtype());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  for (int64_t r = 0; r < rows; ++r) {
    for (const auto& [b, e] : ranges) {
      const size_t n = static_cast<size_t>(e - b) * elem;
      std::memcpy(dst, src + (static_cast<size_t>(r * cols + b)) * elem, n);
      dst += n;
    }
  }
  return out;
}

// `ranges` in units of `unit` elements (a packed byte, a scale group, a block), each endpoint a
// multiple of the unit except an end at `size`.
absl::StatusOr<std::vector<IndexRange>> InUnits(const std::vector<IndexRange>& ranges, int64_t unit, int64_t size,
                                                const std::string& what) {
  std::vector<IndexRange> out;
  for (const auto& [b, e] : ranges) {
    if (b % unit != 0 || (e % unit != 0 && e != size)) {
      return absl::InvalidArgumentError(
          fmt::format("{}: cannot cut at [{}, {}): the stored layout splits only at multiples of {}", what, b, e, unit));
    }
    out.emplace_back(b / unit, (e + unit - 1) / unit);
  }
  return out;
}

// The module's tensors under their checkpoint names, cut by `cut`.
absl::Status CutModule(const QuantizedLinear& m, const TensorCut& cut, Tensors* out) {
  const std::string what = fmt::format("module '{}' ({})", m.name, m.FormatName());
  const std::string weight_name = m.name + (m.format == WeightFormat::kNvfp4 ? ".weight_packed" : ".weight");
  auto put = [&](const char* param, const core::Tensor& t) {
    if (t.defined()) (*out)[m.name + param] = t;
  };
  core::Tensor weight = m.weight, scale = m.weight_scale, bias = m.bias;
  if (cut.axis == TensorCut::Axis::kRows) {
    RETURN_IF_ERROR(CheckRanges(cut.ranges, m.out, what));
    weight = TakeRows(m.weight, cut.ranges);
    if (bias.defined()) bias = TakeRows(m.bias, cut.ranges);
    if (m.format == WeightFormat::kNvfp4 ||
        (m.format == WeightFormat::kFp8 && m.fp8_scale_layout == Fp8ScaleLayout::kPerChannel)) {
      scale = TakeRows(m.weight_scale, cut.ranges);
    } else if (m.format == WeightFormat::kFp8 && m.fp8_scale_layout == Fp8ScaleLayout::kBlock) {
      ASSIGN_OR_RETURN(auto blocks, InUnits(cut.ranges, m.block_rows, m.out, what + " block scales"));
      scale = TakeRows(m.weight_scale, blocks);
    }
  } else if (cut.axis == TensorCut::Axis::kCols) {
    RETURN_IF_ERROR(CheckRanges(cut.ranges, m.in, what));
    if (m.format == WeightFormat::kNvfp4) {
      ASSIGN_OR_RETURN(auto groups, InUnits(cut.ranges, 16, m.in, what + " input groups"));
      ASSIGN_OR_RETURN(auto bytes, InUnits(cut.ranges, 2, m.in, what));
      weight = TakeCols(m.weight, bytes);
      scale = TakeCols(m.weight_scale, groups);
    } else {
      weight = TakeCols(m.weight, cut.ranges);
      if (m.format == WeightFormat::kFp8 && m.fp8_scale_layout == Fp8ScaleLayout::kBlock) {
        ASSIGN_OR_RETURN(auto blocks, InUnits(cut.ranges, m.block_cols, m.in, what + " block scales"));
        scale = TakeCols(m.weight_scale, blocks);
      }
    }
  }
  (*out)[weight_name] = weight;
  put(".weight_scale", scale);
  put(".weight_global_scale", m.weight_global_scale);
  put(".input_global_scale", m.input_global_scale);
  put(".input_scale", m.input_scale);
  put(".bias", bias);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Checkpoint> CutCheckpoint(const Checkpoint& full, const ShardCuts& cuts, const std::string& label) {
  Tensors tensors;
  for (const auto& [name, cut] : cuts) {
    if (const QuantizedLinear* m = full.FindModule(name)) {
      RETURN_IF_ERROR(CutModule(*m, cut, &tensors));
      continue;
    }
    auto t = full.Tensor(name);
    if (!t.ok()) {
      return absl::NotFoundError(fmt::format("{}: no module or tensor '{}' to cut", full.dir(), name));
    }
    switch (cut.axis) {
      case TensorCut::Axis::kWhole: tensors[name] = *t; break;
      case TensorCut::Axis::kRows:
        RETURN_IF_ERROR(CheckRanges(cut.ranges, t->rank() == 0 ? 0 : t->dim(0), fmt::format("tensor '{}'", name)));
        tensors[name] = TakeRows(*t, cut.ranges);
        break;
      case TensorCut::Axis::kCols:
        return absl::InvalidArgumentError(
            fmt::format("tensor '{}' is not a Linear module: only its first dimension can be cut", name));
    }
  }
  return Checkpoint::FromTensors(std::move(tensors), full.quantization_config(), label, full.files());
}

}  // namespace sparkserve::quant
