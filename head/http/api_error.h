// ApiError: one failed request (HTTP status, message, offending parameter) and its rendering in
// each API's own error JSON: OpenAI {"error": {message, type, param, code}} and Anthropic
// {"type": "error", "error": {type, message}}.
#pragma once
#include <stdexcept>
#include <string>

#include "absl/status/status.h"
#include "head/http/http_server.h"

namespace sparkserve::head::http {

enum class ApiFlavor { kOpenAi, kAnthropic };

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;        // the request field at fault, "" when none
  int retry_after_s = 0;    // > 0: sent as Retry-After (429, 503)
};

// Thrown by request parsers inside head/http (caught by the router, never crosses the module).
class RequestError : public std::runtime_error {
 public:
  explicit RequestError(ApiError e) : std::runtime_error(e.message), error(std::move(e)) {}
  RequestError(int status, std::string message, std::string param = "")
      : RequestError(ApiError{status, std::move(message), std::move(param), 0}) {}
  ApiError error;
};

// The OpenAI error body for `e`.
std::string OpenAiErrorJson(const ApiError& e);
// The Anthropic error body for `e`.
std::string AnthropicErrorJson(const ApiError& e);
// A complete HTTP response carrying `e` in `flavor`'s JSON.
HttpResponse ErrorResponse(ApiFlavor flavor, const ApiError& e);
// Ends an OpenAI generation that failed: an error event and [DONE] on a stream, else the error
// response.
void SendOpenAiFailure(ResponseChannel& channel, bool stream, const ApiError& e);
// The API a path belongs to (its error shape): /v1/messages... is Anthropic, the rest OpenAI.
ApiFlavor FlavorOfPath(const std::string& path);
// Maps an engine status to the HTTP error: ResourceExhausted -> 429 (Retry-After),
// InvalidArgument/OutOfRange -> 400, Unavailable -> 503, anything else -> 500.
ApiError ApiErrorFromStatus(const absl::Status& status);

}  // namespace sparkserve::head::http
