// Sampling/stop field parsing and validation for the generate endpoints.
#include "head/http/sampling_fields.h"

#include <limits>

#include "absl/strings/numbers.h"
#include "fmt/format.h"
#include "head/http/api_error.h"

namespace sparkserve::head::http {

std::vector<std::string> ReadStopStrings(const Json& body, const char* key, const ServingContext& ctx) {
  std::vector<std::string> out;
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return out;
  if (it->is_string()) {
    out.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const auto& s : *it) {
      if (!s.is_string()) {
        throw RequestError(400, fmt::format("'{}' must be a string or an array of strings", key), key);
      }
      out.push_back(s.get<std::string>());
    }
  } else {
    throw RequestError(400, fmt::format("'{}' must be a string or an array of strings", key), key);
  }
  if (static_cast<int64_t>(out.size()) > ctx.max_stop_strings) {
    throw RequestError(400, fmt::format("'{}' may hold at most {} strings, got {} (the server's --max-stop-strings)",
                                        key, ctx.max_stop_strings, out.size()), key);
  }
  for (const auto& s : out) {
    if (s.empty()) throw RequestError(400, fmt::format("'{}' must not contain empty strings", key), key);
    if (static_cast<int64_t>(s.size()) > ctx.max_stop_string_bytes) {
      throw RequestError(400, fmt::format("each of '{}' may have at most {} bytes, got one of {} bytes (the server's "
                                          "--max-stop-string-bytes)", key, ctx.max_stop_string_bytes, s.size()), key);
    }
  }
  return out;
}

SamplingFields ReadSamplingFields(const Json& body, const ServingContext& ctx,
                                  const std::vector<const char*>& max_tokens_keys) {
  SamplingFields f;
  f.sampling = ctx.default_sampling;
  auto& s = f.sampling;
  if (auto v = OptNumberIn(body, "temperature", 0.0, 2.0)) s.temperature = static_cast<float>(*v);
  if (auto v = OptNumber(body, "top_p")) {
    if (!(*v > 0.0 && *v <= 1.0)) throw RequestError(400, fmt::format("'top_p' must be in (0, 1], got {}", *v), "top_p");
    s.top_p = static_cast<float>(*v);
  }
  if (auto v = OptIntIn(body, "top_k", -1, std::numeric_limits<int32_t>::max())) {
    s.top_k = static_cast<int32_t>(*v);
  }
  if (auto v = OptNumberIn(body, "min_p", 0.0, 1.0)) s.min_p = static_cast<float>(*v);
  if (auto v = OptNumberIn(body, "presence_penalty", -2.0, 2.0)) s.presence_penalty = static_cast<float>(*v);
  if (auto v = OptNumberIn(body, "frequency_penalty", -2.0, 2.0)) s.frequency_penalty = static_cast<float>(*v);
  if (auto v = OptNumber(body, "repetition_penalty")) {
    if (!(*v > 0.0 && *v <= 2.0)) {
      throw RequestError(400, fmt::format("'repetition_penalty' must be in (0, 2], got {}", *v), "repetition_penalty");
    }
    s.repetition_penalty = static_cast<float>(*v);
  }
  if (auto v = OptInt(body, "seed")) s.seed = static_cast<uint64_t>(*v);
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) throw RequestError(400, "'logit_bias' must be an object of token id -> bias", "logit_bias");
    for (auto& [key, val] : it->items()) {
      int32_t id = 0;
      if (!absl::SimpleAtoi(key, &id) || id < 0 || id >= ctx.codec->vocab_size()) {
        throw RequestError(400, fmt::format("'logit_bias' key '{}' is not a token id in [0, {})", key,
                                            ctx.codec->vocab_size()), "logit_bias");
      }
      if (!val.is_number() || val.get<double>() < -100.0 || val.get<double>() > 100.0) {
        throw RequestError(400, fmt::format("'logit_bias' value for {} must be a number in [-100, 100]", key),
                           "logit_bias");
      }
      s.logit_bias[id] = static_cast<float>(val.get<double>());
    }
  }
  f.stop_strings = ReadStopStrings(body, "stop", ctx);
  if (auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) throw RequestError(400, "'stop_token_ids' must be an array of integers", "stop_token_ids");
    for (const auto& v : *it) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= ctx.codec->vocab_size()) {
        throw RequestError(400, "'stop_token_ids' must hold token ids of this model", "stop_token_ids");
      }
      f.stop_token_ids.push_back(v.get<int32_t>());
    }
  }
  f.ignore_eos = OptBool(body, "ignore_eos").value_or(false);
  f.include_stop_str_in_output = OptBool(body, "include_stop_str_in_output").value_or(false);
  f.skip_special_tokens = OptBool(body, "skip_special_tokens").value_or(true);
  f.n = static_cast<int32_t>(OptIntIn(body, "n", 1, 64).value_or(1));
  for (const char* key : max_tokens_keys) {
    if (auto v = OptInt(body, key)) {
      if (*v < 1) throw RequestError(400, fmt::format("'{}' must be at least 1, got {}", key, *v), key);
      f.max_tokens = *v;
      break;
    }
  }
  f.min_tokens = static_cast<int32_t>(OptIntIn(body, "min_tokens", 0, std::numeric_limits<int32_t>::max()).value_or(0));
  if (f.max_tokens && f.min_tokens > *f.max_tokens) {
    throw RequestError(400, "'min_tokens' must not exceed max_tokens", "min_tokens");
  }
  return f;
}

namespace {
// a + b (both >= 0) in decimal: their int64 sum may overflow, their uint64 sum cannot.
std::string FormatSum(int64_t a, int64_t b) {
  return std::to_string(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
}  // namespace

void CheckPromptBytes(const ServingContext& ctx, size_t bytes, const char* param) {
  const size_t per_token = ctx.codec ? ctx.codec->max_token_bytes() : 0;
  if (per_token == 0) return;
  // x4: a normaliser (NFC) may shrink text before it is tokenized.
  const uint64_t most = static_cast<uint64_t>(ctx.max_seq_len) * per_token * 4;
  if (bytes > most) {
    throw RequestError(400, fmt::format("This model's maximum context length is {} tokens. However, your prompt has "
                                        "{} bytes, more than that many tokens can hold. Please reduce the length of "
                                        "the input.", ctx.max_seq_len, bytes), param);
  }
}

int32_t ResolveMaxTokens(const ServingContext& ctx, size_t prompt_tokens,
                         std::optional<int64_t> requested, const char* param) {
  const int64_t limit = ctx.max_seq_len;
  const int64_t prompt = static_cast<int64_t>(prompt_tokens);
  if (prompt >= limit) {
    throw RequestError(400, fmt::format("This model's maximum context length is {} tokens. However, your "
                                        "request has {} input tokens. Please reduce the length of the "
                                        "input messages.", limit, prompt), "messages");
  }
  if (requested) {
    if (*requested > limit - prompt) {  // never prompt + requested: that overflows for huge values
      throw RequestError(400, fmt::format("This model's maximum context length is {} tokens. However, you "
                                          "requested {} tokens ({} in the messages, {} in the completion). "
                                          "Please reduce the length of the messages or completion ('{}').",
                                          limit, FormatSum(prompt, *requested), prompt, *requested, param), param);
    }
    return static_cast<int32_t>(*requested);
  }
  int64_t room = limit - prompt;
  if (ctx.default_max_tokens > 0) room = std::min<int64_t>(room, ctx.default_max_tokens);
  return static_cast<int32_t>(room);
}

scheduler::Request MakeEngineRequest(const SamplingFields& f, std::vector<int32_t> prompt_ids,
                                     int32_t max_tokens) {
  scheduler::Request r;
  r.prompt_ids = std::move(prompt_ids);
  r.sampling = f.sampling;
  r.stop.stop_token_ids = f.stop_token_ids;
  r.stop.ignore_eos = f.ignore_eos;
  r.max_tokens = max_tokens;
  r.min_tokens = f.min_tokens;
  r.n = f.n;
  return r;
}

void CheckModelName(const Json& body, const ServingContext& ctx) {
  auto model = OptString(body, "model");
  if (model && *model != ctx.model_name) {
    throw RequestError(404, fmt::format("The model `{}` does not exist.", *model), "model");
  }
}

}  // namespace sparkserve::head::http
