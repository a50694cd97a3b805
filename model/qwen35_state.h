// Qwen35State: one rank's sequence state, in slots owned by the scheduler (DESIGN.md §4):
// per GDN layer an fp32 recurrent state and a conv window per slot; per attention layer (and the
// MTP layer) a pool of KV pages shared by all slots through their page tables; per slot the
// per-column GDN/conv states of its last MTP verify (kept until CommitVerified).
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor.h"
#include "kernels/cpu/ops.h"
#include "model/config.h"
#include "model/shard_plan.h"

namespace sparkserve::model {

struct StateOptions {
  int32_t num_slots = 8;
  int32_t num_kv_pages = 64;
  int32_t kv_page_size = 16;
  int32_t max_verify_tokens = 8;  // 1 + k at most, for keep_column_states
};

struct GdnLayerState {
  core::Tensor recurrent;       // [num_slots, nv, dk, dv]
  core::Tensor conv;            // [num_slots, conv_channels, kernel - 1]
  core::Tensor column_recurrent;  // [num_slots, max_verify_tokens, nv, dk, dv]
  core::Tensor column_conv;       // [num_slots, max_verify_tokens, conv_channels, kernel - 1]
};

struct KvLayerState {
  core::Tensor k, v;  // [num_pages, page_size, kv_heads, head_dim]
  kernels::cpu::KvPool pool() const;
};

class Qwen35State {
 public:
  Qwen35State(const Qwen35Config& config, const RankShapes& shapes, const StateOptions& options,
              bool with_mtp);

  const StateOptions& options() const { return options_; }
  // Per decoder layer: index into gdn() or kv() by type (-1 when the layer is the other kind).
  int32_t gdn_index(int64_t layer) const { return gdn_index_[static_cast<size_t>(layer)]; }
  int32_t kv_index(int64_t layer) const { return kv_index_[static_cast<size_t>(layer)]; }
  GdnLayerState& gdn(int32_t i) { return gdn_[static_cast<size_t>(i)]; }
  const GdnLayerState& gdn(int32_t i) const { return gdn_[static_cast<size_t>(i)]; }
  KvLayerState& kv(int32_t i) { return kv_[static_cast<size_t>(i)]; }
  KvLayerState& mtp_kv() { return mtp_kv_; }
  int32_t num_gdn_layers() const { return static_cast<int32_t>(gdn_.size()); }

  // Pointers to one slot's state of GDN layer i.
  float* recurrent(int32_t i, int32_t slot);
  float* conv(int32_t i, int32_t slot);
  float* column_recurrent(int32_t i, int32_t slot);
  float* column_conv(int32_t i, int32_t slot);
  int64_t recurrent_size() const { return recurrent_size_; }
  int64_t conv_size() const { return conv_size_; }

  // Zeroes a slot's GDN states and conv windows (a new sequence).
  void ResetSlot(int32_t slot);
  void CopySlot(int32_t src, int32_t dst);
  // KV page `dst` takes page `src`'s K and V in every attention layer and the MTP layer.
  void CopyPage(int32_t src, int32_t dst);
  // Makes column `column` of the slot's last verify its live GDN/conv state.
  void KeepColumn(int32_t slot, int32_t column);

  // Columns recorded by the slot's last keep_column_states forward (0: none pending).
  std::vector<int32_t>& pending_columns() { return pending_columns_; }

 private:
  StateOptions options_;
  std::vector<int32_t> gdn_index_, kv_index_;
  std::vector<GdnLayerState> gdn_;
  std::vector<KvLayerState> kv_;
  KvLayerState mtp_kv_;
  int64_t recurrent_size_ = 0, conv_size_ = 0;
  std::vector<int32_t> pending_columns_;
};

}  // namespace sparkserve::model
