// Generation: runs one generate request against the engine for any of the APIs. It submits the
// Request (or one per prompt of a batch), turns each sample's token events into text pieces
// (SampleText) on the connection's strand, hands them to the API's GenerationFormatter (streaming
// deltas, or the whole response at the end), cancels the engine requests when the client leaves or
// their samples hit stop strings, and records metrics and the request's log line.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "head/http/api_error.h"
#include "head/http/http_server.h"
#include "head/http/metrics.h"
#include "head/http/serving_backend.h"

namespace sparkserve::head::http {

struct ToolCallResult {
  std::string id;         // call_... / toolu_...
  std::string name;
  std::string arguments;  // JSON text as the model wrote it
};

// One sample's output so far (complete once `finish` is set).
struct SampleResult {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallResult> tool_calls;
  std::vector<OutputPiece> pieces;  // everything in output order (merged runs)
  std::vector<int32_t> ids;
  std::vector<scheduler::TokenLogprob> logprobs;                   // per id, when requested
  std::vector<std::vector<scheduler::TokenLogprob>> top_logprobs;  // per id, when requested
  scheduler::FinishReason finish = scheduler::FinishReason::kNone;
  std::optional<std::string> stop_string;  // the stop string that ended it
  std::string error;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // of prompt_tokens, taken from the prefix cache
};

// One API's response shape. Called on the connection's strand. A sample `index` counts over all
// of the setup's engine requests (see GenerationSetup::more_requests).
class GenerationFormatter {
 public:
  virtual ~GenerationFormatter() = default;
  // Streaming: the engine accepted the request (send the stream's opening events).
  virtual void Begin() {}
  // Streaming: new output of sample `index`: `pieces` plus the event's tokens; `so_far` includes them.
  virtual void Delta(int32_t index, const std::vector<OutputPiece>& pieces,
                     const scheduler::TokenEvent& event, const SampleResult& so_far) {}
  // Streaming: sample `index` finished.
  virtual void SampleFinished(int32_t index, const SampleResult& result) {}
  // Every sample finished: the closing events, or the whole response.
  virtual void Finished(const std::vector<SampleResult>& results, const Usage& usage) = 0;
  // The request failed after it was accepted (an engine error).
  virtual void Failed(const ApiError& error) = 0;
};

struct GenerationSetup {
  scheduler::Request request;
  // Further prompts answered in the same response (/v1/completions with a list of prompts), each
  // an engine request of its own with the same n: the samples of request p (request above is p = 0)
  // are numbered p * n + i, the choice index of the OpenAI API.
  std::vector<scheduler::Request> more_requests;
  std::vector<std::string> stop_strings;  // matched on the decoded text here
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  bool parse_output = true;               // false: text passes through as content
  PieceParserOptions parser_options;
  std::string tool_id_prefix = "call_";
  bool stream = false;
};

// What the log line and metrics need to know about the HTTP request.
struct RequestInfo {
  std::string method;
  std::string path;
  std::string remote;
  std::string response_id;  // chatcmpl-..., msg_...
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

// Starts the generation; answers through `formatter` (or `flavor`'s error JSON when the engine
// refuses the request). Callable from any thread: the run starts on `channel`'s strand.
void StartGeneration(const ServingContext& ctx, ServingMetrics* metrics,
                     std::shared_ptr<ResponseChannel> channel, ApiFlavor flavor,
                     GenerationSetup setup, std::unique_ptr<GenerationFormatter> formatter,
                     RequestInfo info);

// Random identifier suffix: `n` lowercase hex digits.
std::string RandomHex(int n);

// SSE framing: "data: JSON\n\n" and "event: NAME\ndata: JSON\n\n".
std::string SseData(const Json& j);
std::string SseEvent(const std::string& name, const Json& j);

// Seconds since the Unix epoch.
int64_t UnixNow();

}  // namespace sparkserve::head::http
