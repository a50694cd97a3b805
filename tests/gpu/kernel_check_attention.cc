// gpu_kernel_check's paged-attention decode lines: the 4B's attention shape (16 query heads, 4 kv
// heads, head_dim 256, 16-token pages with shuffled ids) at `seqs` seqs of one token each at
// position context - 1, bf16 or fp8 pools. Sampled seqs are checked against a double reference on
// the host pool, then the op is timed on pool copies rotated through more memory than the L2 holds
// (graph replay), reported as GB/s of the K/V bytes a step reads.
#include <numeric>

#include "kernels/cuda/attention.h"
#include "tests/gpu/kernel_check_util.h"

namespace kernel_check {
namespace {

constexpr int kHeads = 16, kKvHeads = 4, kHeadDim = 256, kPageSize = 16;
constexpr float kKScale = 0.05f, kVScale = 0.03f;  // fp8 pools

uint64_t NextRandom(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Random finite pool elements: bf16 and fp8 e4m3 codes in +-[1/8, 2) (never NaN).
std::vector<uint8_t> RandomPool(size_t elems, bool fp8, uint64_t seed) {
  std::vector<uint8_t> pool(elems * (fp8 ? 1 : 2));
  uint64_t s = seed | 1;
  for (size_t i = 0; i < elems; ++i) {
    const uint64_t r = NextRandom(s);
    if (fp8) {
      pool[i] = static_cast<uint8_t>((r & 0x80) | (((4 + (r >> 8) % 4) & 0xf) << 3) | ((r >> 16) & 7));
    } else {
      const uint16_t b = static_cast<uint16_t>((r & 0x8000) | ((124 + (r >> 20) % 4) << 7) | ((r >> 32) & 0x7f));
      pool[2 * i] = static_cast<uint8_t>(b & 0xff);
      pool[2 * i + 1] = static_cast<uint8_t>(b >> 8);
    }
  }
  return pool;
}

double PoolValue(const std::vector<uint8_t>& pool, size_t i, bool fp8, float scale) {
  if (fp8) return static_cast<double>(sq::E4M3ToF32(pool[i])) * scale;
  return sc::Bf16ToF32(static_cast<uint16_t>(pool[2 * i] | (pool[2 * i + 1] << 8)));
}

}  // namespace

void TimeAttentionDecode(int seqs, int context, bool fp8, std::mt19937& rng, bool time_it) {
  const int pages_per_seq = (context + kPageSize - 1) / kPageSize;
  const int num_pages = seqs * pages_per_seq;
  const size_t row = static_cast<size_t>(kKvHeads) * kHeadDim;  // elements of a pool slot
  const size_t elems = static_cast<size_t>(num_pages) * kPageSize * row;
  const std::vector<uint8_t> pool_k = RandomPool(elems, fp8, rng()), pool_v = RandomPool(elems, fp8, rng());
  std::vector<int32_t> ids(num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);  // no seq's pages are contiguous
  std::vector<int32_t> token_begin(seqs + 1), token_seq(seqs), positions(seqs, context - 1),
      start_pos(seqs, context - 1);
  std::iota(token_begin.begin(), token_begin.end(), 0);
  std::iota(token_seq.begin(), token_seq.end(), 0);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> q(static_cast<size_t>(seqs) * kHeads * kHeadDim), gate(q.size());
  for (float& x : q) x = normal(rng);
  for (float& x : gate) x = normal(rng);
  const float scale = 1.0f / 16.0f;

  uint8_t* d_k = DeviceCopy(pool_k);
  uint8_t* d_v = DeviceCopy(pool_v);
  int32_t* d_tb = DeviceCopy(token_begin);
  int32_t* d_seq = DeviceCopy(token_seq);
  int32_t* d_pos = DeviceCopy(positions);
  int32_t* d_start = DeviceCopy(start_pos);
  int32_t* d_pages = DeviceCopy(ids);  // row s = ids[s * pages_per_seq ...]
  float* d_q = DeviceCopy(q);
  float* d_gate = DeviceCopy(gate);
  __half* d_out = nullptr;
  CHECK_CUDA(cudaMalloc(&d_out, q.size() * sizeof(__half)));
  CHECK_CUDA(cudaMemset(d_out, 0xff, q.size() * sizeof(__half)));  // NaN poison
  void* d_ws = nullptr;
  CHECK_CUDA(cudaMalloc(&d_ws, std::max<size_t>(16, sk::PagedAttentionWorkspaceBytes(seqs, kHeads, kHeadDim))));

  sk::RaggedBatchDevice batch;
  batch.num_seqs = seqs;
  batch.num_tokens = seqs;
  batch.max_seq_tokens = 1;
  batch.token_begin = d_tb;
  batch.start_pos = d_start;
  batch.token_seq = d_seq;
  batch.positions = d_pos;
  batch.page_table = d_pages;
  batch.pages_stride = pages_per_seq;
  sk::KvPoolDevice kv;
  kv.k = d_k;
  kv.v = d_v;
  kv.num_pages = num_pages;
  kv.page_size = kPageSize;
  kv.kv_heads = kKvHeads;
  kv.head_dim = kHeadDim;
  kv.dtype = fp8 ? sk::KvDtype::kFp8E4M3 : sk::KvDtype::kBf16;
  kv.k_scale = fp8 ? kKScale : 1.0f;
  kv.v_scale = fp8 ? kVScale : 1.0f;
  auto run = [&](const sk::KvPoolDevice& pool, cudaStream_t st) {
    CHECK_OK(sk::PagedAttention(d_q, kHeads, scale, pool, batch, d_gate, kHeads * kHeadDim, kHeadDim, d_out, d_ws, st));
  };
  run(kv, nullptr);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<__half> out(q.size());
  CHECK_CUDA(cudaMemcpy(out.data(), d_out, out.size() * sizeof(__half), cudaMemcpyDeviceToHost));

  // Double reference for three seqs, every head.
  double worst = 0;
  bool nan = false;
  for (int s : {0, seqs / 2, seqs - 1}) {
    for (int h = 0; h < kHeads; ++h) {
      const int g = h / (kHeads / kKvHeads);
      const float* qh = &q[(static_cast<size_t>(s) * kHeads + h) * kHeadDim];
      std::vector<double> score(context), o(kHeadDim, 0.0);
      double mx = -1e300, l = 0;
      for (int pos = 0; pos < context; ++pos) {
        const size_t base =
            (static_cast<size_t>(ids[s * pages_per_seq + pos / kPageSize]) * kPageSize + pos % kPageSize) * row +
            static_cast<size_t>(g) * kHeadDim;
        double dot = 0;
        for (int d = 0; d < kHeadDim; ++d) dot += qh[d] * PoolValue(pool_k, base + d, fp8, kKScale);
        score[pos] = dot * scale;
        mx = std::max(mx, score[pos]);
      }
      for (int pos = 0; pos < context; ++pos) {
        const size_t base =
            (static_cast<size_t>(ids[s * pages_per_seq + pos / kPageSize]) * kPageSize + pos % kPageSize) * row +
            static_cast<size_t>(g) * kHeadDim;
        const double p = std::exp(score[pos] - mx);
        l += p;
        for (int d = 0; d < kHeadDim; ++d) o[d] += p * PoolValue(pool_v, base + d, fp8, kVScale);
      }
      double err = 0, ref = 1e-3;
      for (int d = 0; d < kHeadDim; ++d) {
        const size_t i = (static_cast<size_t>(s) * kHeads + h) * kHeadDim + d;
        const double want = o[d] / l / (1.0 + std::exp(-static_cast<double>(gate[i])));
        uint16_t bits;
        std::memcpy(&bits, &out[i], 2);
        const double got = sc::F16ToF32(bits);
        if (!std::isfinite(got)) nan = true;
        err = std::max(err, std::abs(got - want));
        ref = std::max(ref, std::abs(want));
      }
      worst = std::max(worst, err / ref);
    }
  }
  const std::string name =
      std::string("attn decode ") + (fp8 ? "fp8" : "bf16") + " " + std::to_string(seqs) + "x" + std::to_string(context);
  Report(name, worst, nan, 3e-3);

  if (time_it) {
    const size_t pool_bytes = pool_k.size();  // each of K and V
    const int copies = RotationCopies(2 * pool_bytes);
    std::vector<uint8_t*> ks(copies), vs(copies);
    for (int c = 0; c < copies; ++c) {
      CHECK_CUDA(cudaMalloc(&ks[c], pool_bytes));
      CHECK_CUDA(cudaMalloc(&vs[c], pool_bytes));
      CHECK_CUDA(cudaMemcpy(ks[c], d_k, pool_bytes, cudaMemcpyDeviceToDevice));
      CHECK_CUDA(cudaMemcpy(vs[c], d_v, pool_bytes, cudaMemcpyDeviceToDevice));
    }
    const double us = MedianMicros(
        [&](int i, cudaStream_t st) {
          sk::KvPoolDevice pool = kv;
          pool.k = ks[i % copies];
          pool.v = vs[i % copies];
          run(pool, st);
        },
        copies * 4);
    CHECK_CUDA(cudaGetLastError());
    const double bytes = 2.0 * seqs * context * row * (fp8 ? 1 : 2);  // the K/V the step reads
    const double gbps = bytes / (us * 1e-6) / 1e9;
    std::printf("time %-40s %8.2f us %8.1f GB/s (%.0f%% of copy bw, graph replay)\n", name.c_str(), us, gbps,
                100.0 * gbps * 1e9 / g_copy_bw);
    g_summary.push_back({name, gbps, gbps * 1e9 / g_copy_bw, us});
    for (int c = 0; c < copies; ++c) {
      cudaFree(ks[c]);
      cudaFree(vs[c]);
    }
  }
  for (void* p :
       std::initializer_list<void*>{d_k, d_v, d_tb, d_seq, d_pos, d_start, d_pages, d_q, d_gate, d_out, d_ws}) {
    cudaFree(p);
  }
}

}  // namespace kernel_check
