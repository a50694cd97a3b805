// Token sampling on the GPU: one block per logits row reproduces engine::Sampler::Sample (vLLM order)
// with several passes over the row (it stays in L2):
//   1. raw stats (max, argmax, NaN) of the row, copying it to the workspace when logits are processed;
//      then banned -> -inf, + logit_bias, penalties on the copy and the stats of the processed row;
//   2. raw log-sum-exp and the top raw logprobs (exact top-k selection, below);
//   3. greedy: the processed argmax (lowest id on ties); else the distribution of sampler.cc:
//      - no top_k/top_p: the draw walks the eligible tokens in id order: per-chunk sums (a warp a
//        chunk, coalesced), a block scan, then one warp narrows the chunk down to the token;
//      - top_k and/or top_p: the candidates (top_k, or the best kMaxGpuCandidates for top_p alone)
//        are selected exactly by a radix search on (logit, -id) keys (11-bit digits, histogram in
//        shared memory, stopping once <= kSortCap keys qualify), bitonic-sorted in shared memory,
//        weighted in double-rounded precision, and truncated/drawn with block scans in double.
// A token is eligible (sampler.cc keeps it) when its logit is finite, >= the min_p threshold and its
// weight exp((l - max) / T) does not underflow. Eligibility only depends on the logit and grows with
// it, so the best-first candidates hold every eligible token before the first ineligible one.
#include "kernels/cuda/sampling_block_ops.cuh"
#include "kernels/cuda/sampling_kernels.h"

#include <climits>

namespace sparkserve::kernels::cuda {
namespace {

using namespace sampling_detail;  // NOLINT(google-build-using-namespace): this file's own helpers

constexpr float kGreedyTemperature = 1e-5f;  // engine::kGreedyTemperature
constexpr float kInf = __builtin_huge_valf();

enum RowStatus : int32_t { kDone = 0, kNeedsHost = 1, kNoFiniteLogit = 2 };

struct SelectState {
  uint64_t prefix, prefix_mask;  // the bits of the K-th key found so far
  int need;                      // rank of the K-th key among the keys matching the prefix
  int count_gt;                  // keys whose known bits beat the prefix
  int bin_count;                 // keys matching the prefix
  int counter;
  int sel_digit, sel_above, sel_count;
};

struct SampleShared {
  uint64_t keys[kSortCap];  // sort buffer; reused as double[kThreads] by the id-order draw
  int hist[kHistBins];
  BlockScratch scratch;
  SelectState sel;
  double total;
  float bcast[2];
  int pick;
};

struct RowStats {
  float max;   // -inf when nothing beats -inf
  int argmax;  // lowest id of the max; INT_MAX when nothing beats -inf
  bool nan;
};

// One coalesced pass: max, argmax and NaN of src[0, n); copies the row to copy_to when not null.
__device__ RowStats ScanRow(const float* src, int n, float* copy_to, SampleShared& sh) {
  float best = -kInf;
  int best_id = INT_MAX;
  bool nan = false;
#pragma unroll 4
  for (int i = static_cast<int>(threadIdx.x); i < n; i += kThreads) {
    const float v = src[i];
    if (copy_to != nullptr) copy_to[i] = v;
    if (IsNan(v)) {
      nan = true;
    } else if (v > best) {  // i grows: the first of equal values stays
      best = v;
      best_id = i;
    }
  }
  __syncwarp();  // lanes left the loop after different trip counts: reconverge before the warp reductions
  nan = BlockArgmaxAnyNan(best, best_id, nan, sh.scratch) != 0;
  return {best, best_id, nan};
}

// sampler.cc ProcessLogits on the workspace copy: banned -> -inf, then + bias, then repetition (HF)
// and frequency/presence per distinct history id. Each step is a separate phase (an id may be in
// several lists); within a phase ids are distinct (the host's lists), so threads never collide.
__device__ void ApplyLogitsProcessing(const SamplingInputs& in, const SamplingRow& p, float* work, int n) {
  const int t = static_cast<int>(threadIdx.x);
  __syncthreads();  // the copy is complete
  for (int i = p.banned_begin + t; i < p.banned_end; i += kThreads) {
    const int id = in.banned_ids[i];
    if (id >= 0 && id < n) work[id] = -kInf;
  }
  __syncthreads();
  for (int i = p.bias_begin + t; i < p.bias_end; i += kThreads) {
    const int id = in.bias_ids[i];
    if (id >= 0 && id < n) work[id] = __fadd_rn(work[id], in.bias_values[i]);
  }
  __syncthreads();
  const float r = p.repetition_penalty;
  const bool repetition = r != 1.0f;
  const bool counted = p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (repetition || counted) {
    for (int i = p.history_begin + t; i < p.history_end; i += kThreads) {
      const int id = in.history_ids[i];
      if (id < 0 || id >= n) continue;
      float l = work[id];
      if (repetition) l = l > 0.0f ? __fdiv_rn(l, r) : __fmul_rn(l, r);
      const int c = in.history_output_counts[i];
      if (counted && c > 0) {
        l = __fsub_rn(l, __fadd_rn(__fmul_rn(p.frequency_penalty, __int2float_rn(c)), p.presence_penalty));
      }
      work[id] = l;
    }
  }
  __syncthreads();
}

// sampler.cc's lse of the raw logprobs: max + log(sum exp(v - max)).
__device__ float RawLogSumExp(const float* raw, int n, float raw_max, SampleShared& sh) {
  FloatFloat acc;
#pragma unroll 4
  for (int i = static_cast<int>(threadIdx.x); i < n; i += kThreads) acc.Add(ExpRow(__fsub_rn(raw[i], raw_max)));
  const double sum = BlockSum(acc.Value(), sh.scratch);
  return __fadd_rn(raw_max, __double2float_rn(log(sum)));
}

// Leaves in sh.keys[0, K) the RankKeys of the K best elements of src[0, n) (value descending, lower
// id first on equal values), best first. 1 <= K <= min(n, kThreads); src holds no NaN.
// Radix search for the K-th key from the top bits down: each pass histograms the next digit of the
// keys matching the bits found so far; it stops once <= kSortCap keys are at or above the prefix
// (at the latest when all 64 bits are known: then exactly K are), gathers those and sorts them.
__device__ void SelectTop(const float* src, int n, int K, SampleShared& sh) {
  SelectState& st = sh.sel;
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) {
    st.prefix = 0;
    st.prefix_mask = 0;
    st.need = K;
    st.count_gt = 0;
    st.bin_count = n;
  }
  __syncthreads();
  for (int pass = 0; pass < 6; ++pass) {
    if (st.count_gt + st.bin_count <= kSortCap) break;  // uniform: read after a barrier
    // Digits: bits 53-63, 42-52, 32-41 (value key), then 21-31, 10-20, 0-9 (inverted id).
    const int sub = pass % 3;
    const int shift = (pass < 3 ? 32 : 0) + (sub == 0 ? 21 : sub == 1 ? 10 : 0);
    const uint32_t dmask = sub == 2 ? 0x3ffu : 0x7ffu;
    for (int b = t; b < kHistBins; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    const uint64_t pm = st.prefix_mask, pf = st.prefix;
    for (int base = 0; base < n; base += kThreads) {
      const int i = base + t;
      bool in = false;
      uint32_t digit = 0;
      if (i < n) {
        const uint64_t key = RankKey(src[i], i);
        in = (key & pm) == pf;
        digit = static_cast<uint32_t>(key >> shift) & dmask;
      }
      const unsigned active = __ballot_sync(kFullMask, in);
      if (active == 0) continue;
      const int leader = __ffs(active) - 1;
      const uint32_t d0 = __shfl_sync(kFullMask, digit, leader);
      if (__all_sync(kFullMask, !in || digit == d0)) {  // one bin for the whole warp: one atomic
        if (LaneId() == leader) atomicAdd(&sh.hist[d0], __popc(active));
      } else if (in) {
        atomicAdd(&sh.hist[digit], 1);
      }
    }
    __syncthreads();
    // Thread t owns digits d_hi = 2047 - 2t and d_lo = d_hi - 1; `above` counts the keys of higher digits.
    const int d_hi = kHistBins - 1 - 2 * t, d_lo = d_hi - 1;
    const int c_hi = sh.hist[d_hi], c_lo = sh.hist[d_lo];
    const int above = BlockExclusiveScan(c_hi + c_lo, sh.scratch);
    const int need = st.need;
    if (above < need && need <= above + c_hi) {
      st.sel_digit = d_hi;
      st.sel_above = above;
      st.sel_count = c_hi;
    } else if (above + c_hi < need && need <= above + c_hi + c_lo) {
      st.sel_digit = d_lo;
      st.sel_above = above + c_hi;
      st.sel_count = c_lo;
    }
    __syncthreads();
    if (t == 0) {
      st.prefix |= static_cast<uint64_t>(st.sel_digit) << shift;
      st.prefix_mask |= static_cast<uint64_t>(dmask) << shift;
      st.count_gt += st.sel_above;
      st.need -= st.sel_above;
      st.bin_count = st.sel_count;
    }
    __syncthreads();
  }
  // Gather every key whose known bits are >= the prefix: count_gt + bin_count <= kSortCap of them.
  if (t == 0) st.counter = 0;
  __syncthreads();
  const uint64_t pm = st.prefix_mask, pf = st.prefix;
  for (int base = 0; base < n; base += kThreads) {
    const int i = base + t;
    bool take = false;
    uint64_t key = 0;
    if (i < n) {
      key = RankKey(src[i], i);
      take = (key & pm) >= pf;
    }
    const unsigned ballot = __ballot_sync(kFullMask, take);
    if (ballot == 0) continue;
    const int leader = __ffs(ballot) - 1;
    int first = 0;
    if (LaneId() == leader) first = atomicAdd(&st.counter, __popc(ballot));
    first = __shfl_sync(kFullMask, first, leader);
    const int slot = first + __popc(ballot & ((1u << LaneId()) - 1u));
    if (take && slot < kSortCap) sh.keys[slot] = key;
  }
  __syncthreads();
  BlockSortDescending(sh.keys, min(st.counter, kSortCap));
}

// The sampling distribution of one row: x = (l - max) / T as sampler.cc computes it in float.
struct Distribution {
  float max, inv_t, min_logit;
  __device__ float X(float v) const { return __fmul_rn(__fsub_rn(v, max), inv_t); }
  __device__ bool Eligible(float v) const { return v != -kInf && v >= min_logit && X(v) >= kMinExpArg; }
  __device__ float RowWeight(float v) const { return Eligible(v) ? ExpRow(X(v)) : 0.0f; }
};

// No truncation: the first eligible token in id order whose cumulative weight passes u * total
// (sampler.cc's cumulative sum of w / total), else the last token with weight. Three levels: <= 1024
// contiguous chunks of a multiple of 32 elements (each summed by one warp with coalesced loads),
// 32 sub-chunks of the chosen chunk (warp 0), the elements of the chosen sub-chunk (one lane). Sums
// differ from the CPU's sequential ones only by rounding; where the levels disagree by rounding, the
// last token with weight of the chosen range is taken.
// Returns -1 only if no token has weight (not possible when the max is eligible).
__device__ int DrawInIdOrder(const float* w_row, int n, const Distribution& d, double u, SampleShared& sh) {
  const int t = static_cast<int>(threadIdx.x);
  const int chunk = 32 * ((n + 32 * kThreads - 1) / (32 * kThreads));  // chunks * chunk >= n, chunks <= kThreads
  double* prefix = reinterpret_cast<double*>(sh.keys);                 // [kThreads]: chunk sums, then prefixes
  for (int c = WarpId(); c < kThreads; c += kWarps) {
    const int cb = min(n, c * chunk), ce = min(n, cb + chunk);
    FloatFloat a;
    for (int i = cb + LaneId(); i < ce; i += 32) a.Add(d.RowWeight(w_row[i]));
    a.WarpReduce();
    if (LaneId() == 0) prefix[c] = a.Value();
  }
  __syncthreads();
  const double s = prefix[t];
  const double incl = BlockInclusiveScan(s, sh.scratch);  // every thread has read its sum: reuse
  prefix[t] = incl;
  if (t == kThreads - 1) sh.total = incl;
  __syncthreads();
  const double target = u * sh.total;
  int owner = BlockMin(incl > target ? t : INT_MAX, sh.scratch);
  if (owner == INT_MAX) owner = BlockMaxInt(s > 0.0 ? t : -1, sh.scratch);
  if (owner < 0) return -1;
  const double base = owner > 0 ? prefix[owner - 1] : 0.0;
  if (WarpId() == 0) {
    const int cb = min(n, owner * chunk), ce = min(n, cb + chunk);
    const int sub = chunk / 32;
    const int lb = min(ce, cb + LaneId() * sub), le = min(ce, lb + sub);
    FloatFloat a;
    for (int i = lb; i < le; ++i) a.Add(d.RowWeight(w_row[i]));
    const double q = a.Value();
    const double incl_q = WarpInclusiveScan(q);
    double excl_q = __shfl_up_sync(kFullMask, incl_q, 1);
    if (LaneId() == 0) excl_q = 0.0;
    const unsigned over = __ballot_sync(kFullMask, base + incl_q > target);
    const unsigned positive = __ballot_sync(kFullMask, q > 0.0);
    const int lane = over != 0 ? __ffs(over) - 1 : (positive != 0 ? 31 - __clz(positive) : -1);
    if (lane < 0 && LaneId() == 0) sh.pick = -1;
    if (LaneId() == lane) {
      double cum = base + excl_q;
      int last = -1;
      for (int i = lb; i < le; ++i) {
        const float w = d.RowWeight(w_row[i]);
        if (w > 0.0f) {
          cum += w;
          last = i;
          if (cum > target) break;
        }
      }
      sh.pick = last;
    }
  }
  __syncthreads();
  const int pick = sh.pick;
  __syncthreads();
  return pick;
}

// top_k and/or top_p: select, weight, truncate and draw among <= kMaxGpuCandidates best tokens.
// Returns the row status; sets id when kDone.
__device__ int DrawFromCandidates(const float* w_row, int n, const SamplingRow& p, const Distribution& d,
                                  bool top_k_active, SampleShared& sh, int& id_out) {
  const int t = static_cast<int>(threadIdx.x);
  const bool top_p_active = p.top_p < 1.0f;
  int n_eligible = 0;
  double row_total = 0.0;  // sum of all eligible weights (top_p alone)
  if (!top_k_active || p.top_k > kMaxGpuCandidates) {
    FloatFloat acc;
    int count = 0;
#pragma unroll 4
    for (int i = t; i < n; i += kThreads) {
      const float v = w_row[i];
      if (d.Eligible(v)) {
        ++count;
        acc.Add(ExpRow(d.X(v)));
      }
    }
    n_eligible = BlockSum(count, sh.scratch);
    row_total = BlockSum(acc.Value(), sh.scratch);
  }
  int k;
  if (!top_k_active) {
    k = min(kMaxGpuCandidates, n_eligible);
  } else if (p.top_k <= kMaxGpuCandidates) {
    k = p.top_k;  // < n
  } else if (n_eligible <= kMaxGpuCandidates) {
    k = n_eligible;  // the top_k holds every eligible token
  } else {
    return kNeedsHost;
  }
  if (k < 1) return kNoFiniteLogit;
  SelectTop(w_row, n, k, sh);
  const uint64_t key = t < k ? sh.keys[t] : 0;
  __syncthreads();  // sh.keys is reused below
  int id = RankKeyId(key);
  const bool eligible = t < k && d.Eligible(FromOrderedKey(static_cast<uint32_t>(key >> 32)));
  const int m = BlockSum(eligible ? 1 : 0, sh.scratch);  // the eligible ones lead the best-first list
  if (m < 1) return kNoFiniteLogit;
  // sampler.cc's weight: expf of the float x, kept as a float.
  float w = eligible ? ExpExact(d.X(FromOrderedKey(static_cast<uint32_t>(key >> 32)))) : 0.0f;
  if (!top_k_active) {
    // top_p alone: sampler.cc orders by weight, then id (distinct logits can share a weight).
    sh.keys[t] = eligible ? ((static_cast<uint64_t>(__float_as_uint(w)) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(id)))
                          : 0;
    BlockSortDescending(sh.keys, m);
    const uint64_t wkey = t < m ? sh.keys[t] : 0;
    w = t < m ? __uint_as_float(static_cast<uint32_t>(wkey >> 32)) : 0.0f;
    id = RankKeyId(wkey);
    __syncthreads();
  }
  const double wd = t < m ? static_cast<double>(w) : 0.0;
  int keep = m;
  if (top_p_active) {
    const double total = top_k_active ? BlockSum(wd, sh.scratch) : row_total;
    const double limit = (static_cast<double>(p.top_p) - 1e-6) * total;
    // A token stays while the mass before it is < limit: keep = the first j >= 1 whose first j
    // tokens reach it (thread t: j = t + 1).
    const double incl = BlockInclusiveScan(wd, sh.scratch);
    const int cut = BlockMin(t < m && incl >= limit ? t + 1 : INT_MAX, sh.scratch);
    const bool complete = top_k_active || m == n_eligible;  // the list holds every candidate
    if (cut != INT_MAX) {
      keep = cut;
    } else if (!complete) {
      return kNeedsHost;  // the top_p set goes past kMaxGpuCandidates
    }
    if (!complete) {
      // Tokens outside the list weigh <= its last weight; those of equal weight could rank before
      // some of the list's (lower id), so the cut is exact only before that last weight group.
      if (t == m - 1) sh.bcast[0] = w;
      if (t == keep - 1) sh.bcast[1] = w;
      __syncthreads();
      const bool tie = sh.bcast[0] == sh.bcast[1];
      __syncthreads();
      if (tie) return kNeedsHost;
    }
  }
  // Renormalise over the kept tokens and draw: the first whose cumulative probability passes u.
  const double kept_w = t < keep ? wd : 0.0;
  const double total = BlockSum(kept_w, sh.scratch);
  const double cum = BlockInclusiveScan(t < keep ? kept_w / total : 0.0, sh.scratch);
  int pick = BlockMin(t < keep && p.uniform < cum ? t : INT_MAX, sh.scratch);
  if (pick == INT_MAX) pick = keep - 1;  // rounding: the last kept token
  if (t == pick) sh.pick = id;
  __syncthreads();
  id_out = sh.pick;
  __syncthreads();
  return kDone;
}

// Temperature sampling of the processed row (max = its max): sampler.cc BuildDistribution + draw.
__device__ int SampleFromDistribution(const float* w_row, int n, const SamplingRow& p, float max, SampleShared& sh,
                                      int& id) {
  if (!IsFinite(max)) return kNoFiniteLogit;
  Distribution d;
  d.max = max;
  d.inv_t = __frcp_rn(p.temperature);
  d.min_logit = p.min_p > 0.0f
                    ? __fadd_rn(max, __fmul_rn(__double2float_rn(log(static_cast<double>(p.min_p))), p.temperature))
                    : -kInf;
  if (!d.Eligible(max)) return kNoFiniteLogit;  // min_p > 1: nothing is left
  const bool top_k_active = p.top_k > 0 && p.top_k < n;
  if (!top_k_active && !(p.top_p < 1.0f)) {
    id = DrawInIdOrder(w_row, n, d, p.uniform, sh);
    return id < 0 ? kNoFiniteLogit : kDone;
  }
  return DrawFromCandidates(w_row, n, p, d, top_k_active, sh, id);
}

__global__ void __launch_bounds__(kThreads) SampleKernel(SamplingInputs in, SamplingOutputs out, float* workspace) {
  __shared__ SampleShared sh;
  const int row = static_cast<int>(blockIdx.x);
  const int n = in.vocab;
  const int t = static_cast<int>(threadIdx.x);
  const SamplingRow& p = in.params[row];  // read field by field where used: fewer live registers
  const float* raw = in.logits + static_cast<size_t>(row) * n;
  const bool has_history = p.history_end > p.history_begin &&
                           (p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f);
  const bool processing = p.banned_end > p.banned_begin || p.bias_end > p.bias_begin || has_history;
  float* work = processing ? workspace + static_cast<size_t>(row) * n : nullptr;
  const float* w_row = processing ? work : raw;
  const bool want_logprobs = p.num_logprobs >= 0;

  const RowStats raw_stats = ScanRow(raw, n, work, sh);
  RowStats stats = raw_stats;
  if (processing) {
    ApplyLogitsProcessing(in, p, work, n);
    stats = ScanRow(work, n, nullptr, sh);
  }

  int status = kDone, id = -1, top_written = 0;
  float lse = 0.0f;
  if (stats.nan || (want_logprobs && raw_stats.nan)) {
    status = kNoFiniteLogit;
  } else {
    if (want_logprobs) {
      lse = RawLogSumExp(raw, n, raw_stats.max, sh);
      const int k = min(min(p.num_logprobs, kMaxGpuLogprobs), n);
      if (k > 0) {
        SelectTop(raw, n, k, sh);
        if (t < k) {
          const int top_id = RankKeyId(sh.keys[t]);
          out.top_ids[static_cast<size_t>(row) * kMaxGpuLogprobs + t] =
              in.id_map != nullptr ? in.id_map[static_cast<size_t>(row) * n + top_id] : top_id;
          out.top_logprobs[static_cast<size_t>(row) * kMaxGpuLogprobs + t] = __fsub_rn(raw[top_id], lse);
        }
        __syncthreads();
        top_written = k;
      }
    }
    if (p.temperature < kGreedyTemperature) {
      if (stats.argmax == INT_MAX) {
        status = kNoFiniteLogit;
      } else {
        id = stats.argmax;
      }
    } else {
      status = SampleFromDistribution(w_row, n, p, stats.max, sh, id);
    }
  }
  for (int j = top_written + t; j < kMaxGpuLogprobs; j += kThreads) {
    out.top_ids[static_cast<size_t>(row) * kMaxGpuLogprobs + j] = -1;
    out.top_logprobs[static_cast<size_t>(row) * kMaxGpuLogprobs + j] = -kInf;
  }
  if (t == 0) {
    const bool done = status == kDone;
    out.status[row] = status;
    out.ids[row] = !done ? -1 : in.id_map != nullptr ? in.id_map[static_cast<size_t>(row) * n + id] : id;
    out.logprobs[row] = done && want_logprobs ? __fsub_rn(raw[id], lse) : __int_as_float(0x7fc00000);
  }
}

// One rank's candidates of a split vocabulary (sampling.h SelectCandidates): the processed slice's
// best min(want, k) (value, global id) pairs, best first.
__global__ void __launch_bounds__(kThreads)
    CandidatesKernel(SamplingInputs in, int id_begin, int k, float* candidates, float* workspace) {
  __shared__ SampleShared sh;
  const int row = static_cast<int>(blockIdx.x);
  const int n = in.vocab;
  const int t = static_cast<int>(threadIdx.x);
  const SamplingRow& p = in.params[row];
  const float* raw = in.logits + static_cast<size_t>(row) * n;
  const bool has_history = p.history_end > p.history_begin &&
                           (p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f);
  const bool processing = p.banned_end > p.banned_begin || p.bias_end > p.bias_begin || has_history;
  float* work = processing ? workspace + static_cast<size_t>(row) * n : nullptr;
  const float* w_row = processing ? work : raw;
  RowStats stats = ScanRow(raw, n, work, sh);
  if (processing) {
    ApplyLogitsProcessing(in, p, work, n);
    stats = ScanRow(work, n, nullptr, sh);
  }
  float* values = candidates + static_cast<size_t>(row) * 2 * k;
  int32_t* ids = reinterpret_cast<int32_t*>(values + k);
  const int want = p.temperature < kGreedyTemperature ? 1 : max(1, min(p.top_k, k));
  const int kr = min(want, n);
  int written;
  if (stats.nan) {  // the full row would fail: so must the candidate row
    if (t == 0) {
      values[0] = __int_as_float(0x7fc00000);
      ids[0] = -1;
    }
    written = 1;
  } else if (kr == 1) {
    if (t == 0) {
      values[0] = stats.max;
      ids[0] = stats.argmax == INT_MAX ? -1 : id_begin + stats.argmax;
    }
    written = 1;
  } else {
    SelectTop(w_row, n, kr, sh);
    if (t < kr) {
      const int id = RankKeyId(sh.keys[t]);
      values[t] = w_row[id];
      ids[t] = id_begin + id;
    }
    written = kr;
  }
  for (int j = written + t; j < k; j += kThreads) {
    values[j] = -kInf;
    ids[j] = -1;
  }
}

}  // namespace

cudaError_t LaunchSelectCandidates(const SamplingInputs& in, int id_begin, int k, float* candidates, float* workspace,
                                   cudaStream_t stream) {
  CandidatesKernel<<<in.rows, kThreads, 0, stream>>>(in, id_begin, k, candidates, workspace);
  return cudaGetLastError();
}

cudaError_t LaunchSample(const SamplingInputs& in, const SamplingOutputs& out, float* workspace, cudaStream_t stream) {
  SampleKernel<<<in.rows, kThreads, 0, stream>>>(in, out, workspace);
  return cudaGetLastError();
}

}  // namespace sparkserve::kernels::cuda
