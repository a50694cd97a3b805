// GlooCollective: rendezvous through a RendezvousStore, Gloo TCP operations under deadlines, and the
// host-staged device path (see gloo_collective.h).
#include "core/gloo_collective.h"

#include <signal.h>

#include <exception>
#include <mutex>

#include "core/status.h"
#include "fmt/format.h"
#include "gloo/allgather.h"
#include "gloo/allgatherv.h"
#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"
#include "spdlog/spdlog.h"
#ifdef SPARKSERVE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sparkserve::core {
namespace {

// Gloo's store interface over ours. Gloo reports failures by exceptions; these carry our message.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(RendezvousStore& store, std::chrono::milliseconds timeout) : store_(store), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    absl::Status st = store_.Set(key, std::string(data.begin(), data.end()));
    if (!st.ok()) throw gloo::IoException(std::string(st.message()));
  }
  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> v = store_.Get(key, timeout_);
    if (!v.ok()) throw gloo::IoException(std::string(v.status().message()));
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const std::string& key : keys) {
      absl::StatusOr<std::string> v = store_.Get(key, timeout);
      if (!v.ok()) throw gloo::IoException(std::string(v.status().message()));
    }
  }

 private:
  RendezvousStore& store_;
  std::chrono::milliseconds timeout_;
};

// Gloo's TCP transport writes to its sockets without MSG_NOSIGNAL: a write to a peer that just died
// would raise SIGPIPE and kill this process (the head must outlive its nodes, a node its head).
// Write errors come back as EPIPE instead, which Gloo reports as an operation failure.
void IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooCollective>> GlooCollective::Create(const GlooOptions& options,
                                                                       RendezvousStore& store) {
  if (options.world < 1 || options.rank < 0 || options.rank >= options.world) {
    return absl::InvalidArgumentError(fmt::format("gloo: rank {} of {} is out of range", options.rank, options.world));
  }
  if (options.host.empty() || options.host == "0.0.0.0" || options.host == "::") {
    return absl::InvalidArgumentError(fmt::format(
        "gloo: '{}' is not an address the other ranks can connect to; give one of this machine's addresses",
        options.host));
  }
  IgnoreSigpipe();
  const std::chrono::milliseconds connect_timeout = std::max(options.timeout, options.connect_timeout);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.host;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world);
    context->setTimeout(connect_timeout);
    StoreAdapter adapter(store, connect_timeout);
    context->connectFullMesh(adapter, device);
    context->setTimeout(options.timeout);
    return std::unique_ptr<GlooCollective>(new GlooCollective(options, std::move(context)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(fmt::format("gloo: rank {} of {} could not join the group on {}: {}", options.rank,
                                              options.world, options.host, e.what()));
  }
}

GlooCollective::GlooCollective(const GlooOptions& options, std::shared_ptr<gloo::Context> context)
    : options_(options), context_(std::move(context)) {}

GlooCollective::~GlooCollective() {
#ifdef SPARKSERVE_WITH_CUDA
  staging_.reset();
#endif
  context_.reset();
}

template <typename Fn>
absl::Status GlooCollective::Guard(const char* what, size_t bytes, Fn&& fn) {
  if (!error_.ok()) return error_;
  try {
    fn();
    ++ops_;
    return absl::OkStatus();
  } catch (const std::exception& e) {
    error_ = absl::UnavailableError(fmt::format(
        "gloo {} of {} bytes failed on rank {} of {} (operation {}; a peer died, hung past {} ms, or its link "
        "broke): {}",
        what, bytes, options_.rank, options_.world, ops_, options_.timeout.count(), e.what()));
    spdlog::error("{}", std::string(error_.message()));
    return error_;
  }
}

absl::Status GlooCollective::AllReduceSum(std::span<float> data) {
  if (options_.world == 1 || data.empty()) return error_;
  return Guard("all-reduce", data.size_bytes(), [&] {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data.data(), data.size());
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTimeout(options_.timeout);
    gloo::allreduce(opts);
  });
}

absl::Status GlooCollective::AllGatherFixed(const float* local, size_t count, float* out) {
  if (options_.world == 1) {
    std::copy(local, local + count, out);
    return error_;
  }
  return Guard("all-gather", count * sizeof(float), [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<float*>(local), count);
    opts.setOutput(out, count * static_cast<size_t>(options_.world));
    opts.setTimeout(options_.timeout);
    gloo::allgather(opts);
  });
}

absl::Status GlooCollective::AllGather(std::span<const float> local, std::vector<float>* out) {
  if (options_.world == 1) {
    out->assign(local.begin(), local.end());
    return error_;
  }
  // Lengths first (one float each holds it exactly up to 2^24; a length past that is refused).
  if (local.size() >= (size_t{1} << 24)) {
    return absl::InvalidArgumentError(fmt::format("gloo all-gather: {} floats from one rank is over the 2^24 limit",
                                                  local.size()));
  }
  const float mine = static_cast<float>(local.size());
  std::vector<float> lengths(static_cast<size_t>(options_.world));
  if (absl::Status st = AllGatherFixed(&mine, 1, lengths.data()); !st.ok()) return st;
  std::vector<size_t> counts(lengths.size());
  size_t total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) total += counts[r] = static_cast<size_t>(lengths[r]);
  out->resize(total);
  if (total == 0) return absl::OkStatus();
  return Guard("all-gather", total * sizeof(float), [&] {
    gloo::AllgathervOptions opts(context_);
    opts.setInput(const_cast<float*>(local.data()), local.size());
    opts.setOutput(out->data(), counts);
    opts.setTimeout(options_.timeout);
    gloo::allgatherv(opts);
  });
}

std::string GlooCollective::transport() const {
  std::string device = "gloo tcp";
  try {
    if (context_) device = fmt::format("gloo {}", context_->getDevice()->str());
  } catch (const std::exception&) {
  }
#ifdef SPARKSERVE_WITH_CUDA
  return fmt::format("{} on {}, {} ranks; device tensors staged through host memory", device, options_.host,
                     options_.world);
#else
  return fmt::format("{} on {}, {} ranks", device, options_.host, options_.world);
#endif
}

#ifdef SPARKSERVE_WITH_CUDA
// Pinned host buffers the device path copies through, and the event after the last copy up (the
// buffers are reused only once it has passed, whatever stream the next operation is on).
struct GlooCollective::Staging {
  float* host = nullptr;
  size_t capacity = 0;  // floats
  cudaEvent_t copied_up = nullptr;
  ~Staging() {
    if (copied_up) cudaEventDestroy(copied_up);
    if (host) cudaFreeHost(host);
  }
};

namespace {
absl::Status CudaCheck(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(fmt::format("gloo device staging: {}: {}", what, cudaGetErrorString(err)));
}
}  // namespace

absl::StatusOr<float*> GlooCollective::HostStaging(size_t floats) {
  if (!staging_) staging_ = std::make_unique<Staging>();
  Staging& st = *staging_;
  if (st.copied_up) {
    RETURN_IF_ERROR(CudaCheck(cudaEventSynchronize(st.copied_up), "cudaEventSynchronize"));
  } else {
    RETURN_IF_ERROR(CudaCheck(cudaEventCreateWithFlags(&st.copied_up, cudaEventDisableTiming), "cudaEventCreate"));
  }
  if (st.capacity < floats) {
    if (st.host) cudaFreeHost(st.host);
    st.host = nullptr;
    st.capacity = 0;
    void* p = nullptr;
    RETURN_IF_ERROR(CudaCheck(cudaMallocHost(&p, floats * sizeof(float)), "cudaMallocHost"));
    st.host = static_cast<float*>(p);
    st.capacity = floats;
  }
  return st.host;
}

absl::Status GlooCollective::AllReduceSumDevice(float* data, size_t count, void* stream) {
  if (options_.world == 1 || count == 0) return error_;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  ASSIGN_OR_RETURN(float* host, HostStaging(count));
  const size_t bytes = count * sizeof(float);
  RETURN_IF_ERROR(CudaCheck(cudaMemcpyAsync(host, data, bytes, cudaMemcpyDeviceToHost, s), "copy down"));
  RETURN_IF_ERROR(CudaCheck(cudaStreamSynchronize(s), "cudaStreamSynchronize"));
  RETURN_IF_ERROR(AllReduceSum(std::span<float>(host, count)));
  RETURN_IF_ERROR(CudaCheck(cudaMemcpyAsync(data, host, bytes, cudaMemcpyHostToDevice, s), "copy up"));
  return CudaCheck(cudaEventRecord(staging_->copied_up, s), "cudaEventRecord");
}

absl::Status GlooCollective::AllGatherDevice(const float* local, size_t count, float* out, void* stream) {
  if (count == 0) return error_;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const size_t world = static_cast<size_t>(options_.world);
  ASSIGN_OR_RETURN(float* host, HostStaging(count * (world + 1)));  // [local | gathered]
  float* all = host + count;
  RETURN_IF_ERROR(CudaCheck(cudaMemcpyAsync(host, local, count * sizeof(float), cudaMemcpyDeviceToHost, s), "copy down"));
  RETURN_IF_ERROR(CudaCheck(cudaStreamSynchronize(s), "cudaStreamSynchronize"));
  RETURN_IF_ERROR(AllGatherFixed(host, count, all));
  RETURN_IF_ERROR(
      CudaCheck(cudaMemcpyAsync(out, all, world * count * sizeof(float), cudaMemcpyHostToDevice, s), "copy up"));
  return CudaCheck(cudaEventRecord(staging_->copied_up, s), "cudaEventRecord");
}
#endif

}  // namespace sparkserve::core
