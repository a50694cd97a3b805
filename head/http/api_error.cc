// Error JSON of the OpenAI and Anthropic APIs, and the engine-status -> HTTP mapping.
#include "head/http/api_error.h"

#include "fmt/format.h"
#include "head/http/json_io.h"

namespace sparkserve::head::http {

namespace {

const char* OpenAiType(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

const char* OpenAiCode(int status) {
  switch (status) {
    case 401: return "invalid_api_key";
    case 404: return "not_found";
    case 413: return "request_too_large";
    case 429: return "rate_limit_exceeded";
    default: return nullptr;
  }
}

const char* AnthropicType(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

}  // namespace

std::string OpenAiErrorJson(const ApiError& e) {
  Json err = {{"message", e.message}, {"type", OpenAiType(e.status)}};
  err["param"] = e.param.empty() ? Json(nullptr) : Json(e.param);
  const char* code = OpenAiCode(e.status);
  err["code"] = code ? Json(code) : Json(nullptr);
  return DumpJson(Json{{"error", err}});
}

std::string AnthropicErrorJson(const ApiError& e) {
  return DumpJson(Json{{"type", "error"},
                       {"error", {{"type", AnthropicType(e.status)}, {"message", e.message}}}});
}

HttpResponse ErrorResponse(ApiFlavor flavor, const ApiError& e) {
  HttpResponse r;
  r.status = e.status;
  r.body = flavor == ApiFlavor::kAnthropic ? AnthropicErrorJson(e) : OpenAiErrorJson(e);
  if (e.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_s));
  return r;
}

ApiFlavor FlavorOfPath(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAi;
}

ApiError ApiErrorFromStatus(const absl::Status& status) {
  std::string msg(status.message());
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
      return ApiError{429, fmt::format("the server is busy ({}); retry later", msg), "", 1};
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return ApiError{400, msg, "", 0};
    case absl::StatusCode::kUnavailable:
      return ApiError{503, msg, "", 1};
    default:
      return ApiError{500, fmt::format("internal error: {}", msg), "", 0};
  }
}

void SendOpenAiFailure(ResponseChannel& channel, bool stream, const ApiError& e) {
  if (stream) {
    channel.Write(fmt::format("data: {}\n\n", OpenAiErrorJson(e)));
    channel.Write("data: [DONE]\n\n");
    channel.End();
  } else {
    channel.Respond(ErrorResponse(ApiFlavor::kOpenAi, e));
  }
}

}  // namespace sparkserve::head::http
