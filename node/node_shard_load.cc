// NodeService::LoadShard: the head offers the shard's manifest; the node takes what its cache holds
// (each blob verified as it is read), asks for the rest, checks every chunk and every tensor against
// their SHA-256 as they arrive, stores them atomically in the cache, and builds the rank's runner.
// A runner already built from the same shard, rank and options is reused as it is.
#include <cstring>
#include <set>

#include "fmt/format.h"
#include "node/node_service.h"
#include "node/rank_runner.h"
#include "proto/sha256.h"
#include "proto/shard_wire.h"
#include "spdlog/spdlog.h"

namespace sparkserve::node {
namespace {

using Clock = std::chrono::steady_clock;

grpc::Status ToGrpc(const absl::Status& st, const std::string& context) {
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), fmt::format("{}: {}", context, std::string(st.message())));
}

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// The manifest's entries are well formed: names unique and non-empty, known dtypes, bytes equal to
// the shape's, 32-byte digests.
absl::Status CheckManifest(const proto::ShardOffer& offer) {
  std::set<std::string> names;
  for (int i = 0; i < offer.tensors_size(); ++i) {
    const proto::ShardTensor& t = offer.tensors(i);
    if (t.name().empty() || !names.insert(t.name()).second) {
      return absl::InvalidArgumentError(fmt::format("tensor {}: empty or repeated name '{}'", i, t.name()));
    }
    absl::StatusOr<core::DType> dtype = proto::DTypeFromWire(t.dtype());
    if (!dtype.ok()) return absl::InvalidArgumentError(fmt::format("{}: {}", t.name(), std::string(dtype.status().message())));
    int64_t n = 1;
    for (int64_t d : t.shape()) {
      if (d < 0) return absl::InvalidArgumentError(fmt::format("{}: negative dimension", t.name()));
      n *= d;
    }
    if (static_cast<uint64_t>(n) * core::DTypeSize(*dtype) != t.bytes()) {
      return absl::InvalidArgumentError(fmt::format("{}: {} bytes do not match its shape and dtype", t.name(), t.bytes()));
    }
    if (t.sha256().size() != 32) return absl::InvalidArgumentError(fmt::format("{}: sha256 is not 32 bytes", t.name()));
  }
  return absl::OkStatus();
}

core::Shape ShapeOf(const proto::ShardTensor& t) { return core::Shape(t.shape().begin(), t.shape().end()); }

}  // namespace

grpc::Status NodeServiceImpl::LoadShard(
    grpc::ServerContext* ctx, grpc::ServerReaderWriter<proto::LoadShardResponse, proto::LoadShardRequest>* stream) {
  proto::LoadShardRequest req;
  if (!stream->Read(&req) || !req.has_offer()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "LoadShard: the first message must be the offer");
  }
  const proto::ShardOffer offer = std::move(*req.mutable_offer());
  const std::string& sid = offer.session_id();
  if (grpc::Status st = CheckSession(sid, /*need_attached=*/true, ctx); !st.ok()) return st;
  struct EndCallOnExit {
    NodeServiceImpl* self;
    const std::string& sid;
    grpc::ServerContext* ctx;
    ~EndCallOnExit() { self->EndCall(sid, ctx); }
  } end_call{this, sid, ctx};

  int32_t rank = 0, world = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rank = session_ ? session_->rank : 0;
    world = session_ ? session_->world : 0;
  }
  if (offer.tp_rank() != rank || offer.tp_world_size() != world) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        fmt::format("the shard is for rank {} of {}, but this session is rank {} of {}",
                                    offer.tp_rank(), offer.tp_world_size(), rank, world));
  }
  absl::StatusOr<model::RunnerOptions> settings = proto::RunnerSettingsFromWire(offer.runner());
  if (!settings.ok()) return ToGrpc(settings.status(), "LoadShard");
  settings->device = options_.device;
  if (absl::Status st = CheckManifest(offer); !st.ok()) return ToGrpc(st, "LoadShard: bad manifest");
  if (!cache_status_.ok()) return ToGrpc(cache_status_, "LoadShard: this node's shard cache is unusable");

  const std::string digest = proto::ShardDigest(offer);
  proto::RunnerSettings wire_settings = proto::RunnerSettingsToWire(*settings);
  const std::string key =
      fmt::format("{}|{}|{}/{}|dev{}", proto::HexOf(digest), wire_settings.SerializeAsString(), rank, world,
                  options_.device);
  uint64_t total_bytes = 0;
  for (const proto::ShardTensor& t : offer.tensors()) total_bytes += t.bytes();
  SetState(sid, proto::NODE_STATE_LOADING);
  const auto started = Clock::now();

  std::lock_guard<std::mutex> runtime(runtime_mu_);
  proto::LoadShardResponse resp;
  if (loaded_ && loaded_->key == key) {  // the same shard is loaded: nothing to send, nothing to build
    resp.mutable_wanted()->set_bytes_reused(total_bytes);
    stream->Write(resp);
    while (stream->Read(&req)) {
    }
    resp.Clear();
    proto::ShardLoaded* done = resp.mutable_loaded();
    done->set_tensors_reused(static_cast<uint32_t>(offer.tensors_size()));
    done->set_bytes_reused(total_bytes);
    done->set_shard_sha256(digest);
    done->set_backend_description(loaded_->runner.backend_description);
    bytes_reused_total_ += total_bytes;
    spdlog::info("shard for rank {} of {}: {} tensors, {:.1f} MiB: already loaded, reused as is", rank, world,
                 offer.tensors_size(), MiB(total_bytes));
    stream->Write(resp);
    SetState(sid, proto::NODE_STATE_LOADED);
    return grpc::Status::OK;
  }
  if (loaded_) {
    if (joined_ == loaded_->group.get()) LeaveGroup(joined_session_);
    loaded_.reset();  // another model or options: free it before building the new one
  }

  // What the cache holds (verified as read); the rest is wanted.
  std::vector<core::Tensor> tensors(static_cast<size_t>(offer.tensors_size()));
  std::vector<uint32_t> wanted;
  uint64_t bytes_wanted = 0, bytes_reused = 0;
  for (int i = 0; i < offer.tensors_size(); ++i) {
    const proto::ShardTensor& t = offer.tensors(i);
    const core::DType dtype = *proto::DTypeFromWire(t.dtype());
    if (t.bytes() == 0) {
      tensors[i] = core::Tensor::Empty(ShapeOf(t), dtype);
      continue;
    }
    absl::StatusOr<CachedBlob> blob = cache_.Read(t.sha256(), t.bytes());
    if (blob.ok()) {
      tensors[i] = core::Tensor::Borrow(const_cast<uint8_t*>(blob->data), ShapeOf(t), dtype, core::Device::Cpu(),
                                        blob->keep_alive);
      bytes_reused += t.bytes();
    } else if (absl::IsNotFound(blob.status()) || absl::IsDataLoss(blob.status())) {
      wanted.push_back(static_cast<uint32_t>(i));
      bytes_wanted += t.bytes();
    } else {
      return ToGrpc(blob.status(), fmt::format("LoadShard: reading the cache for {}", t.name()));
    }
  }
  proto::ShardWanted* w = resp.mutable_wanted();
  for (uint32_t i : wanted) w->add_tensors(i);
  w->set_bytes_wanted(bytes_wanted);
  w->set_bytes_reused(bytes_reused);
  if (!stream->Write(resp)) return grpc::Status(grpc::StatusCode::CANCELLED, "LoadShard: the head went away");

  // The wanted tensors' chunks, in order, each checked on arrival.
  size_t next = 0;  // index into `wanted`
  core::Tensor filling;
  uint64_t filled = 0, bytes_received = 0;
  while (stream->Read(&req)) {
    if (!req.has_chunk()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "LoadShard: a second offer");
    const proto::TensorChunk& c = req.chunk();
    if (next >= wanted.size() || c.tensor() != wanted[next]) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          fmt::format("LoadShard: a chunk of tensor {} arrived, expected {}", c.tensor(),
                                      next < wanted.size() ? std::to_string(wanted[next]) : std::string("none")));
    }
    const proto::ShardTensor& t = offer.tensors(static_cast<int>(c.tensor()));
    if (c.data().size() > proto::kMaxChunkBytes || c.offset() != filled || filled + c.data().size() > t.bytes()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          fmt::format("LoadShard: {}: a chunk at offset {} of {} bytes does not continue the {} bytes "
                                      "received of {}",
                                      t.name(), c.offset(), c.data().size(), filled, t.bytes()));
    }
    if (proto::Sha256(c.data()) != c.sha256()) {
      return grpc::Status(grpc::StatusCode::DATA_LOSS,
                          fmt::format("LoadShard: {}: the chunk at offset {} does not match its SHA-256", t.name(),
                                      c.offset()));
    }
    if (filled == 0) filling = core::Tensor::Empty(ShapeOf(t), *proto::DTypeFromWire(t.dtype()));
    std::memcpy(static_cast<uint8_t*>(filling.raw_data()) + filled, c.data().data(), c.data().size());
    filled += c.data().size();
    if (filled < t.bytes()) continue;
    if (proto::Sha256(filling.bytes()) != t.sha256()) {
      return grpc::Status(grpc::StatusCode::DATA_LOSS,
                          fmt::format("LoadShard: {}: the received bytes do not match the tensor's SHA-256", t.name()));
    }
    if (absl::Status st = cache_.Write(t.sha256(), filling.bytes()); !st.ok()) {
      return ToGrpc(st, fmt::format("LoadShard: caching {}", t.name()));
    }
    tensors[c.tensor()] = std::move(filling);
    bytes_received += t.bytes();
    filled = 0;
    ++next;
  }
  if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "LoadShard: the session ended");
  if (next != wanted.size()) {
    return grpc::Status(grpc::StatusCode::DATA_LOSS,
                        fmt::format("LoadShard: the stream ended with {} of {} wanted tensors received", next,
                                    wanted.size()));
  }
  bytes_received_total_ += bytes_received;
  bytes_reused_total_ += bytes_reused;

  const auto build_start = Clock::now();
  std::vector<proto::NamedTensor> named;
  named.reserve(tensors.size());
  for (int i = 0; i < offer.tensors_size(); ++i) named.push_back({offer.tensors(i).name(), std::move(tensors[i])});
  auto fresh = std::make_unique<Loaded>();
  fresh->key = key;
  fresh->group = std::make_unique<core::ReplaceableCollective>(rank, world);
  absl::StatusOr<model::LoadedRunner> runner =
      BuildRankRunner(offer.model_config_json(), std::move(named), *settings, rank, world, fresh->group.get());
  if (!runner.ok()) {
    const std::string what = fmt::format("building the rank {} runner: {}", rank, std::string(runner.status().message()));
    spdlog::error("{}", what);
    SetState(sid, proto::NODE_STATE_FAILED, what);
    return ToGrpc(runner.status(), fmt::format("LoadShard: building the rank {} runner", rank));
  }
  fresh->runner = *std::move(runner);
  const double build_s = std::chrono::duration<double>(Clock::now() - build_start).count();
  spdlog::info("shard for rank {} of {}: {} tensors, {:.1f} MiB received, {:.1f} MiB reused from the cache; runner "
               "({}) built in {:.2f} s, {:.2f} s in all",
               rank, world, offer.tensors_size(), MiB(bytes_received), MiB(bytes_reused),
               fresh->runner.backend_description, build_s,
               std::chrono::duration<double>(Clock::now() - started).count());
  loaded_ = std::move(fresh);

  resp.Clear();
  proto::ShardLoaded* done = resp.mutable_loaded();
  done->set_tensors_received(static_cast<uint32_t>(wanted.size()));
  done->set_tensors_reused(static_cast<uint32_t>(offer.tensors_size() - static_cast<int>(wanted.size())));
  done->set_bytes_received(bytes_received);
  done->set_bytes_reused(bytes_reused);
  done->set_shard_sha256(digest);
  done->set_backend_description(loaded_->runner.backend_description);
  done->set_build_seconds(build_s);
  stream->Write(resp);
  SetState(sid, proto::NODE_STATE_LOADED);
  return grpc::Status::OK;
}

}  // namespace sparkserve::node
