// Shard manifest and runner options on the wire (see shard_wire.h).
#include "proto/shard_wire.h"

#include <algorithm>

#include "fmt/format.h"
#include "proto/sha256.h"

namespace sparkserve::proto {

DType DTypeToWire(core::DType d) {
  switch (d) {
    case core::DType::kF32: return DTYPE_F32;
    case core::DType::kBF16: return DTYPE_BF16;
    case core::DType::kF16: return DTYPE_F16;
    case core::DType::kF8E4M3: return DTYPE_F8_E4M3;
    case core::DType::kU8: return DTYPE_U8;
    case core::DType::kI32: return DTYPE_I32;
    case core::DType::kI64: return DTYPE_I64;
  }
  return DTYPE_UNSPECIFIED;
}

absl::StatusOr<core::DType> DTypeFromWire(DType d) {
  switch (d) {
    case DTYPE_F32: return core::DType::kF32;
    case DTYPE_BF16: return core::DType::kBF16;
    case DTYPE_F16: return core::DType::kF16;
    case DTYPE_F8_E4M3: return core::DType::kF8E4M3;
    case DTYPE_U8: return core::DType::kU8;
    case DTYPE_I32: return core::DType::kI32;
    case DTYPE_I64: return core::DType::kI64;
    default: break;
  }
  return absl::InvalidArgumentError(fmt::format("unknown tensor dtype {} on the wire", static_cast<int>(d)));
}

namespace {

// The wire's names (the CLI's, as model/runner_factory.h spells them).
const char* BackendWireName(model::Backend b) {
  switch (b) {
    case model::Backend::kCpu: return "cpu";
    case model::Backend::kCuda: return "cuda";
    case model::Backend::kAuto: return "auto";
  }
  return "?";
}

}  // namespace

RunnerSettings RunnerSettingsToWire(const model::RunnerOptions& o) {
  RunnerSettings s;
  s.set_backend(BackendWireName(o.backend));
  s.set_max_batch(o.max_batch);
  s.set_max_seq_len(o.max_seq_len);
  s.set_max_step_tokens(o.max_step_tokens);
  s.set_kv_page_size(o.kv_page_size);
  s.set_cuda_graphs(o.cuda_graphs);
  s.set_gpu_memory_utilization(o.gpu_memory_utilization);
  s.set_kv_dtype(o.kv_dtype == model::KvCacheDtype::kFp8 ? "fp8" : "bf16");
  s.set_state_dtype(o.state_dtype == model::StateDtype::kBf16 ? "bf16" : "fp32");
  s.set_w4a4_prefill(o.w4a4_prefill);
  s.set_max_verify_tokens(o.max_verify_tokens);
  s.set_extra_slots(o.extra_slots);
  s.set_cuda_mtp(o.cuda_mtp);
  s.set_draft_vocab(o.draft_vocab);
  return s;
}

absl::StatusOr<model::RunnerOptions> RunnerSettingsFromWire(const RunnerSettings& s) {
  model::RunnerOptions o;
  if (s.backend() == "cpu") {
    o.backend = model::Backend::kCpu;
  } else if (s.backend() == "cuda") {
    o.backend = model::Backend::kCuda;
  } else if (s.backend() == "auto") {
    o.backend = model::Backend::kAuto;
  } else {
    return absl::InvalidArgumentError(fmt::format("runner settings: unknown backend '{}'", s.backend()));
  }
  if (s.kv_dtype() == "bf16") {
    o.kv_dtype = model::KvCacheDtype::kBf16;
  } else if (s.kv_dtype() == "fp8") {
    o.kv_dtype = model::KvCacheDtype::kFp8;
  } else {
    return absl::InvalidArgumentError(fmt::format("runner settings: unknown kv_dtype '{}'", s.kv_dtype()));
  }
  if (s.state_dtype() == "fp32") {
    o.state_dtype = model::StateDtype::kF32;
  } else if (s.state_dtype() == "bf16") {
    o.state_dtype = model::StateDtype::kBf16;
  } else {
    return absl::InvalidArgumentError(fmt::format("runner settings: unknown state_dtype '{}'", s.state_dtype()));
  }
  o.max_batch = s.max_batch();
  o.max_seq_len = s.max_seq_len();
  o.max_step_tokens = s.max_step_tokens();
  o.kv_page_size = s.kv_page_size();
  o.cuda_graphs = s.cuda_graphs();
  o.gpu_memory_utilization = s.gpu_memory_utilization();
  o.w4a4_prefill = s.w4a4_prefill();
  o.max_verify_tokens = std::max(1, s.max_verify_tokens());  // 0: a head from before speculation
  o.extra_slots = std::max(0, s.extra_slots());
  o.cuda_mtp = s.cuda_mtp();
  o.draft_vocab = std::max(0, s.draft_vocab());
  return o;
}

ShardTensor DescribeTensor(const NamedTensor& t) {
  ShardTensor d;
  d.set_name(t.name);
  d.set_dtype(DTypeToWire(t.tensor.dtype()));
  for (int64_t n : t.tensor.shape()) d.add_shape(n);
  d.set_bytes(t.tensor.nbytes());
  d.set_sha256(Sha256(t.tensor.bytes()));
  return d;
}

std::string ShardDigest(const ShardOffer& offer) {
  Sha256Hasher h;
  for (const ShardTensor& t : offer.tensors()) {
    h.Update(t.name());
    h.Update(std::string_view("\0", 1));
    h.Update(t.sha256());
  }
  return h.Final();
}

}  // namespace sparkserve::proto
