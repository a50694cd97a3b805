// Allocation and slot operations of Qwen35State.
#include "model/qwen35_state.h"

#include <algorithm>
#include <cstring>

namespace sparkserve::model {

kernels::cpu::KvPool KvLayerState::pool() const {
  return {k.data<float>(), v.data<float>(), k.dim(0), k.dim(1), k.dim(2), k.dim(3)};
}

Qwen35State::Qwen35State(const Qwen35Config& c, const RankShapes& rs, const StateOptions& o, bool with_mtp)
    : options_(o), pending_columns_(static_cast<size_t>(o.num_slots), 0) {
  const int64_t W = c.linear_conv_kernel_dim - 1;
  recurrent_size_ = rs.nv * rs.dk * rs.dv;
  conv_size_ = rs.conv_channels() * W;
  const core::Shape kv_shape = {o.num_kv_pages, o.kv_page_size, rs.kv_heads, c.head_dim};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.is_full_attention(i)) {
      gdn_index_.push_back(-1);
      kv_index_.push_back(static_cast<int32_t>(kv_.size()));
      kv_.push_back({core::Tensor::Zeros(kv_shape, core::DType::kF32), core::Tensor::Zeros(kv_shape, core::DType::kF32)});
    } else {
      kv_index_.push_back(-1);
      gdn_index_.push_back(static_cast<int32_t>(gdn_.size()));
      GdnLayerState g;
      g.recurrent = core::Tensor::Zeros({o.num_slots, rs.nv, rs.dk, rs.dv}, core::DType::kF32);
      g.conv = core::Tensor::Zeros({o.num_slots, rs.conv_channels(), W}, core::DType::kF32);
      g.column_recurrent =
          core::Tensor::Zeros({o.num_slots, o.max_verify_tokens, rs.nv, rs.dk, rs.dv}, core::DType::kF32);
      g.column_conv = core::Tensor::Zeros({o.num_slots, o.max_verify_tokens, rs.conv_channels(), W}, core::DType::kF32);
      gdn_.push_back(std::move(g));
    }
  }
  if (with_mtp) {
    mtp_kv_ = {core::Tensor::Zeros(kv_shape, core::DType::kF32), core::Tensor::Zeros(kv_shape, core::DType::kF32)};
  }
}

float* Qwen35State::recurrent(int32_t i, int32_t slot) {
  return gdn(i).recurrent.data<float>() + slot * recurrent_size_;
}
float* Qwen35State::conv(int32_t i, int32_t slot) { return gdn(i).conv.data<float>() + slot * conv_size_; }
float* Qwen35State::column_recurrent(int32_t i, int32_t slot) {
  return gdn(i).column_recurrent.data<float>() + slot * options_.max_verify_tokens * recurrent_size_;
}
float* Qwen35State::column_conv(int32_t i, int32_t slot) {
  return gdn(i).column_conv.data<float>() + slot * options_.max_verify_tokens * conv_size_;
}

void Qwen35State::ResetSlot(int32_t slot) {
  for (int32_t i = 0; i < num_gdn_layers(); ++i) {
    std::fill_n(recurrent(i, slot), recurrent_size_, 0.0f);
    std::fill_n(conv(i, slot), conv_size_, 0.0f);
  }
  pending_columns_[static_cast<size_t>(slot)] = 0;
}

void Qwen35State::CopySlot(int32_t src, int32_t dst) {
  if (src == dst) return;
  for (int32_t i = 0; i < num_gdn_layers(); ++i) {
    std::memcpy(recurrent(i, dst), recurrent(i, src), sizeof(float) * recurrent_size_);
    std::memcpy(conv(i, dst), conv(i, src), sizeof(float) * conv_size_);
  }
  pending_columns_[static_cast<size_t>(dst)] = 0;
}

void Qwen35State::CopyPage(int32_t src, int32_t dst) {
  if (src == dst) return;
  auto copy = [&](core::Tensor& t) {
    if (!t.defined()) return;
    const int64_t per_page = t.numel() / t.dim(0);
    float* base = t.data<float>();
    std::memcpy(base + dst * per_page, base + src * per_page, sizeof(float) * per_page);
  };
  for (KvLayerState& l : kv_) {
    copy(l.k);
    copy(l.v);
  }
  copy(mtp_kv_.k);
  copy(mtp_kv_.v);
}

void Qwen35State::KeepColumn(int32_t slot, int32_t column) {
  for (int32_t i = 0; i < num_gdn_layers(); ++i) {
    std::memcpy(recurrent(i, slot), column_recurrent(i, slot) + column * recurrent_size_,
                sizeof(float) * recurrent_size_);
    std::memcpy(conv(i, slot), column_conv(i, slot) + column * conv_size_, sizeof(float) * conv_size_);
  }
  pending_columns_[static_cast<size_t>(slot)] = 0;
}

}  // namespace sparkserve::model
