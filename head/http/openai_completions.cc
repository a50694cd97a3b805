// /v1/completions: parsing and the OpenAI text_completion response shapes.
#include "head/http/openai_completions.h"

#include "fmt/format.h"
#include "head/http/api_error.h"
#include "head/http/generation.h"
#include "head/http/openai_chat.h"
#include "head/http/sampling_fields.h"
#include "head/http/structured_output.h"

namespace sparkserve::head::http {

namespace {

std::vector<int32_t> IdsFromJson(const ServingContext& ctx, const Json& arr) {
  std::vector<int32_t> ids;
  for (const auto& v : arr) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= ctx.codec->vocab_size()) {
      throw RequestError(400, fmt::format("'prompt' token ids must be integers in [0, {})", ctx.codec->vocab_size()),
                         "prompt");
    }
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

}  // namespace

std::vector<CompletionPrompt> ReadCompletionPrompts(const ServingContext& ctx, const Json& body) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw RequestError(400, "'prompt' is required", "prompt");
  const bool add_special = OptBool(body, "add_special_tokens").value_or(true);
  auto read_one = [&](const Json& p) {
    CompletionPrompt out;
    if (p.is_string()) {
      out.text = p.get<std::string>();
      CheckPromptBytes(ctx, out.text.size(), "prompt");
      auto enc = ctx.codec->Encode(out.text, add_special);
      if (!enc.ok()) {
        throw RequestError(400, fmt::format("cannot tokenize 'prompt': {}", std::string(enc.status().message())),
                           "prompt");
      }
      out.ids = std::move(*enc);
    } else {
      if (static_cast<int64_t>(p.size()) > ctx.max_seq_len) {
        throw RequestError(400, fmt::format("This model's maximum context length is {} tokens. However, your prompt "
                                            "has {} tokens.", ctx.max_seq_len, p.size()), "prompt");
      }
      out.ids = IdsFromJson(ctx, p);
      out.text = ctx.codec->Decode(out.ids, /*skip_special_tokens=*/false);
    }
    if (out.ids.empty()) throw RequestError(400, "'prompt' must not be empty", "prompt");
    return out;
  };
  const Json& p = *it;
  const char* kShape = "'prompt' must be a string, an array of token ids, or an array of strings or of token-id arrays";
  if (p.is_string()) return {read_one(p)};
  if (!p.is_array() || p.empty()) throw RequestError(400, kShape, "prompt");
  if (p.front().is_number()) return {read_one(p)};  // one prompt of token ids
  if (p.size() > kMaxCompletionPrompts) {
    throw RequestError(400, fmt::format("{} prompts in one request; at most {} prompts are allowed", p.size(),
                                        kMaxCompletionPrompts), "prompt");
  }
  std::vector<CompletionPrompt> prompts;
  for (const Json& one : p) {
    // A list holds prompts of one kind: strings, or token-id lists (as the OpenAI API types it).
    const bool same_kind = p.front().is_string() ? one.is_string() : one.is_array();
    if (!same_kind || (one.is_array() && !one.empty() && !one.front().is_number())) {
      throw RequestError(400, kShape, "prompt");
    }
    prompts.push_back(read_one(one));
  }
  return prompts;
}

namespace {

const char* CompletionFinishReason(const SampleResult& r) {
  switch (r.finish) {
    case scheduler::FinishReason::kLength: return "length";
    case scheduler::FinishReason::kAbort: return "abort";
    case scheduler::FinishReason::kError: return "error";
    default: return "stop";
  }
}

class CompletionFormatter : public GenerationFormatter {
 public:
  // `echo`: per prompt, the text each of its choices starts with ("" without echo); `n` choices a prompt.
  CompletionFormatter(const ServingContext& ctx, std::shared_ptr<ResponseChannel> channel, std::string id,
                      bool stream, bool include_usage, int logprobs, std::vector<std::string> echo, int n)
      : ctx_(ctx),
        channel_(std::move(channel)),
        id_(std::move(id)),
        created_(UnixNow()),
        stream_(stream),
        include_usage_(include_usage),
        logprobs_(logprobs),
        echo_(std::move(echo)),
        n_(n),
        sent_logprobs_(echo_.size() * static_cast<size_t>(n), 0),
        text_offset_(echo_.size() * static_cast<size_t>(n), 0) {}

  void Begin() override {
    channel_->StartStream(200, "text/event-stream");
    for (size_t i = 0; i < text_offset_.size(); ++i) {
      const std::string& echo = Echo(i);
      if (echo.empty()) continue;
      Send(Chunk(static_cast<int32_t>(i), echo, nullptr, nullptr));
      text_offset_[i] = echo.size();
    }
  }

  void Delta(int32_t index, const std::vector<OutputPiece>& pieces, const scheduler::TokenEvent&,
             const SampleResult& so_far) override {
    std::string text;
    for (const auto& p : pieces) text += p.text;
    Json lp = nullptr;
    if (logprobs_ >= 0 && so_far.logprobs.size() > sent_logprobs_[index]) {
      lp = Logprobs(so_far, sent_logprobs_[index], so_far.logprobs.size(), text_offset_[index]);
      sent_logprobs_[index] = so_far.logprobs.size();
    }
    if (text.empty() && lp.is_null()) return;
    text_offset_[index] += text.size();
    Send(Chunk(index, text, std::move(lp), nullptr));
  }

  void SampleFinished(int32_t index, const SampleResult& r) override {
    Json c = Chunk(index, "", nullptr, CompletionFinishReason(r));
    c["choices"][0]["stop_reason"] = r.stop_string ? Json(*r.stop_string) : Json(nullptr);
    Send(c);
  }

  void Finished(const std::vector<SampleResult>& results, const Usage& usage) override {
    Json u = {{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
    if (stream_) {
      if (include_usage_) {
        Json c = Base();
        c["choices"] = Json::array();
        c["usage"] = u;
        Send(c);
      }
      channel_->Write("data: [DONE]\n\n");
      channel_->End();
      return;
    }
    Json body = Base();
    Json choices = Json::array();
    for (size_t i = 0; i < results.size(); ++i) {
      const SampleResult& r = results[i];
      Json choice = {{"index", i}, {"text", Echo(i) + r.content}};
      choice["logprobs"] = logprobs_ >= 0 ? Logprobs(r, 0, r.logprobs.size(), Echo(i).size()) : Json(nullptr);
      choice["finish_reason"] = CompletionFinishReason(r);
      choice["stop_reason"] = r.stop_string ? Json(*r.stop_string) : Json(nullptr);
      choices.push_back(std::move(choice));
    }
    body["choices"] = std::move(choices);
    body["usage"] = u;
    channel_->Respond(HttpResponse{200, "application/json", {}, DumpJson(body)});
  }

  void Failed(const ApiError& e) override { SendOpenAiFailure(*channel_, stream_, e); }

 private:
  // Legacy completions logprobs for tokens [begin, end): tokens, token_logprobs, top_logprobs
  // (token -> logprob maps) and text_offset (character offsets approximated by bytes of token text).
  Json Logprobs(const SampleResult& r, size_t begin, size_t end, size_t offset) const {
    Json tokens = Json::array(), token_lps = Json::array(), tops = Json::array(), offsets = Json::array();
    for (size_t i = begin; i < end && i < r.logprobs.size(); ++i) {
      std::string tok = ctx_.codec->TokenString(r.logprobs[i].id);
      tokens.push_back(tok);
      token_lps.push_back(JsonLogprob(r.logprobs[i].logprob));
      Json top = Json::object();
      if (i < r.top_logprobs.size()) {
        for (size_t k = 0; k < r.top_logprobs[i].size() && static_cast<int>(k) < logprobs_; ++k) {
          top[ctx_.codec->TokenString(r.top_logprobs[i][k].id)] = JsonLogprob(r.top_logprobs[i][k].logprob);
        }
      }
      tops.push_back(std::move(top));
      offsets.push_back(offset);
      offset += tok.size();
    }
    return Json{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
  }
  const std::string& Echo(size_t choice) const { return echo_.at(choice / static_cast<size_t>(n_)); }
  Json Base() const {
    return Json{{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", ctx_.model_name}};
  }
  Json Chunk(int32_t index, const std::string& text, Json logprobs, const char* finish) const {
    Json c = Base();
    Json choice = {{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)}};
    choice["finish_reason"] = finish ? Json(finish) : Json(nullptr);
    c["choices"] = Json::array({std::move(choice)});
    if (include_usage_) c["usage"] = nullptr;
    return c;
  }
  void Send(const Json& j) { channel_->Write(SseData(j)); }

  const ServingContext& ctx_;
  std::shared_ptr<ResponseChannel> channel_;
  std::string id_;
  int64_t created_;
  bool stream_;
  bool include_usage_;
  int logprobs_;
  std::vector<std::string> echo_;  // per prompt
  int n_;
  std::vector<size_t> sent_logprobs_;  // per choice
  std::vector<size_t> text_offset_;    // per choice
};

}  // namespace

void HandleCompletions(const ServingContext& ctx, ServingMetrics* metrics, const HttpRequest& req,
                       std::shared_ptr<ResponseChannel> channel) {
  Json body = ParseJsonObject(req.body);
  CheckModelName(body, ctx);
  std::vector<CompletionPrompt> prompts = ReadCompletionPrompts(ctx, body);
  if (auto s = OptString(body, "suffix"); s && !s->empty()) {
    throw RequestError(400, "'suffix' is not supported", "suffix");
  }
  bool echo = OptBool(body, "echo").value_or(false);
  int logprobs = static_cast<int>(OptIntIn(body, "logprobs", 0, 20).value_or(-1));
  if (echo && logprobs >= 0) {
    throw RequestError(400, "'echo' together with 'logprobs' (prompt logprobs) is not supported yet", "echo");
  }
  bool stream = OptBool(body, "stream").value_or(false);
  bool include_usage = false;
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) throw RequestError(400, "'stream_options' must be an object", "stream_options");
    if (!stream) throw RequestError(400, "'stream_options' is only allowed with 'stream': true", "stream_options");
    include_usage = OptBool(*so, "include_usage").value_or(false);
  }
  if (auto best_of = OptInt(body, "best_of"); best_of && *best_of != OptInt(body, "n").value_or(1)) {
    throw RequestError(400, "'best_of' other than n is not supported", "best_of");
  }
  SamplingFields fields = ReadSamplingFields(body, ctx, {"max_tokens"});
  fields.sampling.logprobs = logprobs;
  if (prompts.size() * static_cast<size_t>(fields.n) > kMaxCompletionPrompts) {
    throw RequestError(400, fmt::format("{} prompts times n = {} asks for {} sequences; at most {} are allowed",
                                        prompts.size(), fields.n, prompts.size() * fields.n, kMaxCompletionPrompts),
                       "n");
  }
  // The legacy API defaults max_tokens to 16.
  if (!fields.max_tokens && !body.contains("max_tokens")) fields.max_tokens = 16;

  GenerationSetup setup;
  std::shared_ptr<const scheduler::OutputConstraint> constraint =
      ReadOutputConstraint(ctx, body, /*starts_in_reasoning=*/false);
  std::vector<std::string> echo_texts;
  for (size_t p = 0; p < prompts.size(); ++p) {
    int32_t max_tokens = ResolveMaxTokens(ctx, prompts[p].ids.size(), fields.max_tokens, "max_tokens");
    scheduler::Request r = MakeEngineRequest(fields, std::move(prompts[p].ids), max_tokens);
    r.constraint = constraint;
    if (p == 0) {
      setup.request = std::move(r);
    } else {
      setup.more_requests.push_back(std::move(r));
    }
    echo_texts.push_back(echo ? std::move(prompts[p].text) : std::string());
  }
  setup.stop_strings = fields.stop_strings;
  setup.include_stop_str_in_output = fields.include_stop_str_in_output;
  setup.skip_special_tokens = fields.skip_special_tokens;
  setup.parse_output = false;
  setup.stream = stream;
  RequestInfo info{req.method, req.path, req.remote, "cmpl-" + RandomHex(32), std::chrono::steady_clock::now()};
  auto formatter = std::make_unique<CompletionFormatter>(ctx, channel, info.response_id, stream, include_usage,
                                                         logprobs, std::move(echo_texts), fields.n);
  StartGeneration(ctx, metrics, std::move(channel), ApiFlavor::kOpenAi, std::move(setup), std::move(formatter),
                  std::move(info));
}

}  // namespace sparkserve::head::http
