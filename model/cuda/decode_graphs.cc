// CudaModelRunner's captured decode steps and its exchanges with the other tensor-parallel ranks:
// a decode step is captured once per batch size, whole when the collective's device path only
// enqueues (NCCL: its calls live inside the graph), else as the segments between the all-reduces,
// replayed with the collective called between them (host-staged paths: in-process, Gloo). The
// all-reduce of partial sums, the gather of whole logit rows and the bounded waits live here too.
#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "model/cuda/cuda_model_runner.h"

namespace sparkserve::model::cuda {

void CudaModelRunner::DestroyDecodeGraph(DecodeGraph& g) {
  for (cudaGraphExec_t exec : g.segments) cudaGraphExecDestroy(exec);
  g.segments.clear();
  g.reduces.clear();
}

absl::Status CudaModelRunner::BeginSegment() {
  CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  return absl::OkStatus();
}

absl::Status CudaModelRunner::EndSegment() {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream_, &capturing));
  if (capturing == cudaStreamCaptureStatusNone) return absl::OkStatus();
  cudaGraph_t graph = nullptr;
  CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_RETURN_IF_ERROR(inst);
  building_->segments.push_back(exec);
  return absl::OkStatus();
}

absl::StatusOr<CudaModelRunner::DecodeGraph> CudaModelRunner::CaptureDecodeStep(int S) {
  DecodeGraph g;
  g.epoch = tp() ? collective_->group_epoch() : 0;
  building_ = &g;
  absl::Status captured = BeginSegment();
  if (captured.ok()) captured = Mark("start");  // a no-op unless profiling
  if (captured.ok()) captured = EnqueueLayers(S, S, 1);
  if (captured.ok()) captured = EnqueueHead(normed_.data(), meta_device_.data() + meta_.logit_rows, S);
  const absl::Status ended = EndSegment();  // ends the capture in progress, whatever happened
  building_ = nullptr;
  if (!captured.ok() || !ended.ok()) {
    DestroyDecodeGraph(g);
    return !captured.ok() ? captured : ended;
  }
  return g;
}

absl::Status CudaModelRunner::LaunchDecodeGraph(const DecodeGraph& g) {
  for (size_t i = 0; i < g.segments.size(); ++i) {
    CUDA_RETURN_IF_ERROR(cudaGraphLaunch(g.segments[i], stream_));
    if (i < g.reduces.size()) {
      RETURN_IF_ERROR(collective_->AllReduceSumDevice(g.reduces[i].first, g.reduces[i].second, stream_));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaModelRunner::AllReduce(float* data, size_t count) {
  if (!tp()) return absl::OkStatus();
  if (building_ != nullptr && !collective_->device_capturable()) {
    // A segment boundary: the all-reduce runs between this segment and the next at replay.
    RETURN_IF_ERROR(EndSegment());
    building_->reduces.emplace_back(data, count);
    RETURN_IF_ERROR(BeginSegment());
  } else {
    RETURN_IF_ERROR(collective_->AllReduceSumDevice(data, count, stream_));
  }
  return Mark("all_reduce");
}

absl::Status CudaModelRunner::GatherLogits(int rows) {
  const int64_t V = config_.vocab_size;
  const int32_t W = plan_.world;
  const size_t per_rank = static_cast<size_t>(rows) * static_cast<size_t>(vocab_pad_);
  // Every rank sends rows * vocab_pad_ floats (its [rows, V_r] block first), rank-major.
  RETURN_IF_ERROR(collective_->AllGatherDevice(logits_.data(), per_rank, gathered_.data(), stream_));
  for (int32_t q = 0; q < W; ++q) {
    const Range vq = ShardPlan{q, W}.Part(V);
    const size_t width = static_cast<size_t>(vq.second - vq.first);
    if (width == 0) continue;
    CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(full_logits_.data() + vq.first, sizeof(float) * static_cast<size_t>(V),
                                           gathered_.data() + static_cast<size_t>(q) * per_rank, sizeof(float) * width,
                                           sizeof(float) * width, static_cast<size_t>(rows), cudaMemcpyDeviceToDevice,
                                           stream_));
  }
  return Mark("gather_logits");
}

absl::Status CudaModelRunner::Sync() {
  if (tp()) return collective_->WaitDevice(stream_);
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

}  // namespace sparkserve::model::cuda
