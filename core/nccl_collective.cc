// NcclCollective: NCCL loaded at run time, the non-blocking communicator, bounded waits and abort.
#include "core/nccl_collective.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/status.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace sparkserve::core {
namespace {

using Clock = std::chrono::steady_clock;

// The NCCL entry points sparkserve uses, from libnccl.so.2 opened at run time.
struct NcclApi {
  ncclResult_t (*GetVersion)(int*);
  ncclResult_t (*GetUniqueId)(ncclUniqueId*);
  ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommFinalize)(ncclComm_t);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  const char* (*GetErrorString)(ncclResult_t);
  const char* (*GetLastError)(ncclComm_t);
  int version = 0;
  std::string path;
};

absl::StatusOr<const NcclApi*> LoadNccl() {
  static const absl::StatusOr<NcclApi> api = []() -> absl::StatusOr<NcclApi> {
    const char* env = std::getenv("SPARKSERVE_NCCL_LIBRARY");
    std::string path = env != nullptr && *env != '\0' ? env : "libnccl.so.2";
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef SPARKSERVE_NCCL_FALLBACK
    if (lib == nullptr && (env == nullptr || *env == '\0')) {  // where the build found it
      dlerror();  // clears the first attempt's error
      path = SPARKSERVE_NCCL_FALLBACK;
      lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    }
#endif
    if (lib == nullptr) {
      const char* why = dlerror();
      return absl::FailedPreconditionError(fmt::format(
          "NCCL could not be loaded ({}): install NCCL (libnccl2), or set SPARKSERVE_NCCL_LIBRARY to the path of "
          "libnccl.so.2; --collective gloo needs no NCCL",
          why != nullptr ? why : path));
    }
    NcclApi a{};
    a.path = path;
    std::string missing;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr) missing += fmt::format(" {}", name);
    };
    sym(a.GetVersion, "ncclGetVersion");
    sym(a.GetUniqueId, "ncclGetUniqueId");
    sym(a.CommInitRankConfig, "ncclCommInitRankConfig");
    sym(a.CommGetAsyncError, "ncclCommGetAsyncError");
    sym(a.CommAbort, "ncclCommAbort");
    sym(a.CommFinalize, "ncclCommFinalize");
    sym(a.CommDestroy, "ncclCommDestroy");
    sym(a.AllReduce, "ncclAllReduce");
    sym(a.AllGather, "ncclAllGather");
    sym(a.GetErrorString, "ncclGetErrorString");
    sym(a.GetLastError, "ncclGetLastError");
    if (!missing.empty()) {
      return absl::FailedPreconditionError(
          fmt::format("{} lacks{} (NCCL 2.14 or newer is needed: non-blocking communicators)", path, missing));
    }
    a.GetVersion(&a.version);
    if (a.version < 21400) {
      return absl::FailedPreconditionError(
          fmt::format("{} is NCCL {}; 2.14 or newer is needed (non-blocking communicators)", path, a.version));
    }
    return a;
  }();
  if (!api.ok()) return api.status();
  return &*api;
}

std::string VersionString(int v) {  // 22809 -> 2.28.9 (NCCL_VERSION: major * 10000 + minor * 100 + patch)
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

absl::Status CudaCheck(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(fmt::format("NCCL group: {}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

// Polls until `done` or `deadline`: yields for the first millisecond, then sleeps briefly.
template <typename Done>
bool PollUntil(Clock::time_point deadline, Done&& done) {
  const Clock::time_point spin_until = Clock::now() + std::chrono::milliseconds(1);
  for (;;) {
    if (done()) return true;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return false;
    if (now < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

double Seconds(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace

struct NcclCollective::Impl {
  const NcclApi* api = nullptr;
  ncclComm_t comm = nullptr;
  bool aborted = false;
  cudaStream_t own_stream = nullptr;  // host-buffer operations
  cudaEvent_t done = nullptr;         // WaitDevice's marker
  float* staging = nullptr;           // device copy of host buffers (host operations)
  size_t staging_floats = 0;

  std::string Describe(ncclResult_t r) const {
    const char* last = comm != nullptr ? api->GetLastError(comm) : nullptr;
    return fmt::format("{}{}{}", api->GetErrorString(r), last != nullptr && *last != '\0' ? ": " : "",
                       last != nullptr ? last : "");
  }
};

absl::StatusOr<std::string> NcclCollective::NewUniqueId() {
  ASSIGN_OR_RETURN(const NcclApi* api, LoadNccl());
  ncclUniqueId id;
  const ncclResult_t r = api->GetUniqueId(&id);
  if (r != ncclSuccess) {
    return absl::InternalError(fmt::format("ncclGetUniqueId: {} (is a network interface up? NCCL_SOCKET_IFNAME)",
                                           api->GetErrorString(r)));
  }
  return std::string(id.internal, sizeof(id.internal));
}

absl::Status NcclCollective::ValidateOptions(const NcclOptions& o) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world) {
    return absl::InvalidArgumentError(fmt::format("NCCL group: bad rank {} of {}", o.rank, o.world));
  }
  if (o.device < 0) return absl::InvalidArgumentError(fmt::format("NCCL group: bad CUDA device {}", o.device));
  if (o.unique_id.size() != NCCL_UNIQUE_ID_BYTES) {
    return absl::InvalidArgumentError(fmt::format(
        "NCCL group: the unique id has {} bytes, NCCL's has {} (make it with NcclCollective::NewUniqueId)",
        o.unique_id.size(), NCCL_UNIQUE_ID_BYTES));
  }
  if (o.timeout.count() <= 0 || o.step_timeout.count() <= 0) {
    return absl::InvalidArgumentError(fmt::format("NCCL group: timeouts must be positive (got {} ms and {} ms)",
                                                  o.timeout.count(), o.step_timeout.count()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NcclCollective>> NcclCollective::Create(int32_t rank, int32_t world,
                                                                      std::string_view unique_id, int32_t device,
                                                                      std::chrono::milliseconds timeout) {
  NcclOptions o;
  o.rank = rank;
  o.world = world;
  o.device = device;
  o.unique_id = std::string(unique_id);
  o.timeout = timeout;
  o.step_timeout = std::max(o.step_timeout, timeout);
  return Create(o);
}

absl::StatusOr<std::unique_ptr<NcclCollective>> NcclCollective::Create(const NcclOptions& o) {
  RETURN_IF_ERROR(ValidateOptions(o));
  ASSIGN_OR_RETURN(const NcclApi* api, LoadNccl());
  int devices = 0;
  RETURN_IF_ERROR(CudaCheck(cudaGetDeviceCount(&devices), "cudaGetDeviceCount"));
  if (o.device >= devices) {
    return absl::InvalidArgumentError(fmt::format("NCCL group: CUDA device {} does not exist ({} found)", o.device, devices));
  }
  RETURN_IF_ERROR(CudaCheck(cudaSetDevice(o.device), "cudaSetDevice"));
  // NVLink multicast stays off unless the environment asks for it (see the header).
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  auto impl = std::make_unique<Impl>();
  impl->api = api;
  RETURN_IF_ERROR(CudaCheck(cudaStreamCreateWithFlags(&impl->own_stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  RETURN_IF_ERROR(CudaCheck(cudaEventCreateWithFlags(&impl->done, cudaEventDisableTiming), "cudaEventCreate"));
  std::unique_ptr<NcclCollective> c(new NcclCollective(o, std::move(impl)));
  Impl& m = *c->impl_;
  ncclUniqueId id;
  std::memcpy(id.internal, o.unique_id.data(), sizeof(id.internal));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "sparkserve tensor parallel";
  const Clock::time_point deadline = Clock::now() + o.timeout;
  ncclResult_t r = api->CommInitRankConfig(&m.comm, o.world, id, o.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (m.comm != nullptr) api->CommAbort(m.comm);
    m.comm = nullptr;
    return absl::InternalError(fmt::format("NCCL group: rank {} of {} on cuda:{}: ncclCommInitRankConfig: {}", o.rank,
                                           o.world, o.device, api->GetErrorString(r)));
  }
  ncclResult_t state = ncclInProgress;
  const bool settled = PollUntil(deadline, [&] {
    if (api->CommGetAsyncError(m.comm, &state) != ncclSuccess) state = ncclInternalError;
    return state != ncclInProgress;
  });
  if (!settled || state != ncclSuccess) {
    const std::string detail = settled ? m.Describe(state) : "";
    api->CommAbort(m.comm);
    m.comm = nullptr;
    if (!settled) {
      return absl::DeadlineExceededError(fmt::format(
          "NCCL group: not all {} ranks joined within {:.1f} s (this is rank {} on cuda:{}): a peer is not running or "
          "was given another unique id, or cannot reach this machine (NCCL_SOCKET_IFNAME / NCCL_IB_HCA, a firewall, "
          "ports); the communicator was aborted",
          o.world, Seconds(o.timeout), o.rank, o.device));
    }
    // ncclInvalidUsage: a set-up no retry can fix (two ranks on one GPU: "Duplicate GPU detected").
    const std::string message =
        fmt::format("NCCL group: rank {} of {} on cuda:{} could not join: {}", o.rank, o.world, o.device, detail);
    return state == ncclInvalidUsage ? absl::InvalidArgumentError(message) : absl::UnavailableError(message);
  }
  spdlog::info("NCCL {} group joined: rank {} of {} on cuda:{} ({})", VersionString(api->version), o.rank, o.world,
               o.device, api->path);
  return c;
}

NcclCollective::NcclCollective(const NcclOptions& options, std::unique_ptr<Impl> impl)
    : options_(options), impl_(std::move(impl)) {}

NcclCollective::~NcclCollective() {
  Impl& m = *impl_;
  cudaSetDevice(options_.device);
  if (m.comm != nullptr && !m.aborted) {
    // Flush and free; a peer that is gone makes the finalize hang: abort after the timeout.
    ncclResult_t state = m.api->CommFinalize(m.comm);
    const bool clean = (state == ncclSuccess || state == ncclInProgress) &&
                       PollUntil(Clock::now() + options_.timeout,
                                 [&] {
                                   if (m.api->CommGetAsyncError(m.comm, &state) != ncclSuccess) state = ncclInternalError;
                                   return state != ncclInProgress;
                                 }) &&
                       state == ncclSuccess;
    if (clean) {
      m.api->CommDestroy(m.comm);
    } else {
      m.api->CommAbort(m.comm);
    }
  }  // an aborted communicator was freed by ncclCommAbort
  if (m.staging != nullptr) cudaFree(m.staging);
  if (m.done != nullptr) cudaEventDestroy(m.done);
  if (m.own_stream != nullptr) cudaStreamDestroy(m.own_stream);
}

void NcclCollective::RequestAbort(std::string reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (abort_reason_.empty()) abort_reason_ = std::move(reason);
  }
  abort_requested_.store(true);
}

bool NcclCollective::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !error_.ok() || abort_requested_.load();
}

absl::Status NcclCollective::Abort(absl::Status why) {
  Impl& m = *impl_;
  if (m.comm != nullptr && !m.aborted) {
    m.aborted = true;
    m.api->CommAbort(m.comm);
    spdlog::error("NCCL group aborted (rank {} of {}): {}", options_.rank, options_.world, std::string(why.message()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = why;
  return error_;
}

absl::Status NcclCollective::CheckUsable() {
  if (abort_requested_.load()) {
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reason = abort_reason_;
    }
    return Abort(absl::UnavailableError(fmt::format("NCCL group aborted: {}", reason)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

absl::Status NcclCollective::FinishEnqueue(int result, const char* what) {
  Impl& m = *impl_;
  const auto r = static_cast<ncclResult_t>(result);
  if (r != ncclSuccess && r != ncclInProgress) {
    return Abort(absl::UnavailableError(fmt::format("NCCL {}: {}", what, m.Describe(r))));
  }
  ncclResult_t state = r;
  const bool settled = PollUntil(Clock::now() + options_.timeout, [&] {
    if (state == ncclSuccess) return true;
    if (m.api->CommGetAsyncError(m.comm, &state) != ncclSuccess) state = ncclInternalError;
    return state != ncclInProgress || abort_requested_.load();
  });
  if (abort_requested_.load()) return CheckUsable();
  if (!settled) {
    return Abort(absl::DeadlineExceededError(fmt::format(
        "NCCL {}: not enqueued within {:.1f} s (group of {} ranks): a peer is gone or hangs; the communicator was "
        "aborted",
        what, Seconds(options_.timeout), options_.world)));
  }
  if (state != ncclSuccess) return Abort(absl::UnavailableError(fmt::format("NCCL {}: {}", what, m.Describe(state))));
  return absl::OkStatus();
}

absl::Status NcclCollective::AllReduceSumDevice(float* data, size_t count, void* stream) {
  RETURN_IF_ERROR(CheckUsable());
  if (count == 0) return absl::OkStatus();
  const ncclResult_t r = impl_->api->AllReduce(data, data, count, ncclFloat32, ncclSum, impl_->comm,
                                               static_cast<cudaStream_t>(stream));
  return FinishEnqueue(r, "all-reduce");
}

absl::Status NcclCollective::AllGatherDevice(const float* local, size_t count, float* out, void* stream) {
  RETURN_IF_ERROR(CheckUsable());
  if (count == 0) return absl::OkStatus();
  const ncclResult_t r =
      impl_->api->AllGather(local, out, count, ncclFloat32, impl_->comm, static_cast<cudaStream_t>(stream));
  return FinishEnqueue(r, "all-gather");
}

absl::Status NcclCollective::WaitDevice(void* stream) {
  RETURN_IF_ERROR(CheckUsable());
  Impl& m = *impl_;
  RETURN_IF_ERROR(CudaCheck(cudaEventRecord(m.done, static_cast<cudaStream_t>(stream)), "cudaEventRecord"));
  cudaError_t query = cudaErrorNotReady;
  ncclResult_t async = ncclSuccess;
  int polls = 0;
  const bool finished = PollUntil(Clock::now() + options_.step_timeout, [&] {
    query = cudaEventQuery(m.done);
    if (query != cudaErrorNotReady) return true;
    if (abort_requested_.load()) return true;
    if (++polls % 64 == 0 && m.api->CommGetAsyncError(m.comm, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress) {
      return true;
    }
    return false;
  });
  if (query == cudaSuccess) return absl::OkStatus();
  if (abort_requested_.load()) return CheckUsable();
  if (async != ncclSuccess && async != ncclInProgress) {
    return Abort(absl::UnavailableError(fmt::format(
        "NCCL group of {} ranks failed during a step: {} (a peer process died or its link went down)", options_.world,
        m.Describe(async))));
  }
  if (!finished) {
    return Abort(absl::DeadlineExceededError(fmt::format(
        "NCCL group of {} ranks: a step's device work did not finish within {:.1f} s: a peer died, hangs or lost its "
        "link (check the node's log and NCCL_SOCKET_IFNAME / NCCL_IB_HCA); the communicator was aborted",
        options_.world, Seconds(options_.step_timeout))));
  }
  return CudaCheck(query, "waiting for the stream");
}

absl::Status NcclCollective::AllReduceSum(std::span<float> data) {
  RETURN_IF_ERROR(CheckUsable());
  Impl& m = *impl_;
  RETURN_IF_ERROR(CudaCheck(cudaSetDevice(options_.device), "cudaSetDevice"));
  if (m.staging_floats < data.size()) {
    if (m.staging != nullptr) cudaFree(m.staging);
    m.staging = nullptr;
    m.staging_floats = 0;
    RETURN_IF_ERROR(CudaCheck(cudaMalloc(reinterpret_cast<void**>(&m.staging), data.size() * sizeof(float)), "cudaMalloc"));
    m.staging_floats = data.size();
  }
  RETURN_IF_ERROR(CudaCheck(
      cudaMemcpyAsync(m.staging, data.data(), data.size_bytes(), cudaMemcpyHostToDevice, m.own_stream), "copy up"));
  RETURN_IF_ERROR(AllReduceSumDevice(m.staging, data.size(), m.own_stream));
  RETURN_IF_ERROR(CudaCheck(
      cudaMemcpyAsync(data.data(), m.staging, data.size_bytes(), cudaMemcpyDeviceToHost, m.own_stream), "copy down"));
  return WaitDevice(m.own_stream);
}

absl::Status NcclCollective::AllGather(std::span<const float> local, std::vector<float>* out) {
  RETURN_IF_ERROR(CheckUsable());
  Impl& m = *impl_;
  RETURN_IF_ERROR(CudaCheck(cudaSetDevice(options_.device), "cudaSetDevice"));
  // Lengths may differ: gather them first, then every rank's part padded to the longest.
  const auto W = static_cast<size_t>(options_.world);
  // Each rank's length at its own index, summed: a length as a float is exact below 2^24 (longer
  // host gathers are not what this path is for).
  if (local.size() >= (size_t{1} << 24)) {
    return absl::InvalidArgumentError("NCCL host all-gather: a part of 2^24 floats or more");
  }
  std::vector<float> lengths(W, 0.0f);
  lengths[static_cast<size_t>(options_.rank)] = static_cast<float>(local.size());
  RETURN_IF_ERROR(AllReduceSum(lengths));
  size_t longest = 0;
  for (const float l : lengths) longest = std::max(longest, static_cast<size_t>(l));
  out->clear();
  if (longest == 0) return absl::OkStatus();
  const size_t need = longest * (W + 1);  // [longest] local part, then [W * longest] gathered
  if (m.staging_floats < need) {
    if (m.staging != nullptr) cudaFree(m.staging);
    m.staging = nullptr;
    m.staging_floats = 0;
    RETURN_IF_ERROR(CudaCheck(cudaMalloc(reinterpret_cast<void**>(&m.staging), need * sizeof(float)), "cudaMalloc"));
    m.staging_floats = need;
  }
  std::vector<float> padded(longest, 0.0f);
  std::copy(local.begin(), local.end(), padded.begin());
  RETURN_IF_ERROR(CudaCheck(
      cudaMemcpyAsync(m.staging, padded.data(), longest * sizeof(float), cudaMemcpyHostToDevice, m.own_stream), "copy up"));
  RETURN_IF_ERROR(AllGatherDevice(m.staging, longest, m.staging + longest, m.own_stream));
  std::vector<float> all(W * longest);
  RETURN_IF_ERROR(CudaCheck(cudaMemcpyAsync(all.data(), m.staging + longest, all.size() * sizeof(float),
                                            cudaMemcpyDeviceToHost, m.own_stream),
                            "copy down"));
  RETURN_IF_ERROR(WaitDevice(m.own_stream));
  for (size_t q = 0; q < W; ++q) {
    out->insert(out->end(), all.begin() + static_cast<std::ptrdiff_t>(q * longest),
                all.begin() + static_cast<std::ptrdiff_t>(q * longest + static_cast<size_t>(lengths[q])));
  }
  return absl::OkStatus();
}

std::string NcclCollective::transport() const {
  return fmt::format("nccl {} ({} ranks, this rank on cuda:{}; NCCL_DEBUG=INFO names the transport)",
                     VersionString(impl_->api->version), options_.world, options_.device);
}

}  // namespace sparkserve::core
