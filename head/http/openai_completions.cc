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

std::vector<int32_t> ReadCompletionPrompt(const ServingContext& ctx, const Json& body, std::string* text) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw RequestError(400, "'prompt' is required", "prompt");
  const Json* p = &*it;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  bool add_special = OptBool(body, "add_special_tokens").value_or(true);
  std::vector<int32_t> ids;
  if (p->is_string()) {
    *text = p->get<std::string>();
    auto enc = ctx.codec->Encode(*text, add_special);
    if (!enc.ok()) throw RequestError(400, fmt::format("cannot tokenize 'prompt': {}", std::string(enc.status().message())), "prompt");
    ids = std::move(*enc);
  } else if (p->is_array() && !p->empty() && p->front().is_number_integer()) {
    ids = IdsFromJson(ctx, *p);
    *text = ctx.codec->Decode(ids, /*skip_special_tokens=*/false);
  } else if (p->is_array() && p->size() > 1) {
    throw RequestError(400, "several prompts in one request are not supported; send one request per prompt", "prompt");
  } else {
    throw RequestError(400, "'prompt' must be a string, an array of token ids, or a one-element array of either",
                       "prompt");
  }
  if (ids.empty()) throw RequestError(400, "'prompt' must not be empty", "prompt");
  return ids;
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
  CompletionFormatter(const ServingContext& ctx, std::shared_ptr<ResponseChannel> channel, std::string id,
                      bool stream, bool include_usage, int logprobs, std::string echo_text, int n)
      : ctx_(ctx),
        channel_(std::move(channel)),
        id_(std::move(id)),
        created_(UnixNow()),
        stream_(stream),
        include_usage_(include_usage),
        logprobs_(logprobs),
        echo_(std::move(echo_text)),
        sent_logprobs_(static_cast<size_t>(n), 0),
        text_offset_(static_cast<size_t>(n), 0),
        n_(n) {}

  void Begin() override {
    channel_->StartStream(200, "text/event-stream");
    if (!echo_.empty()) {
      for (int i = 0; i < n_; ++i) {
        Send(Chunk(i, echo_, nullptr, nullptr));
        text_offset_[i] = echo_.size();
      }
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
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
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
      Json choice = {{"index", i}, {"text", echo_ + r.content}};
      choice["logprobs"] = logprobs_ >= 0 ? Logprobs(r, 0, r.logprobs.size(), echo_.size()) : Json(nullptr);
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
  std::string echo_;
  std::vector<size_t> sent_logprobs_;
  std::vector<size_t> text_offset_;
  int n_;
};

}  // namespace

void HandleCompletions(const ServingContext& ctx, ServingMetrics* metrics, const HttpRequest& req,
                       std::shared_ptr<ResponseChannel> channel) {
  Json body = ParseJsonObject(req.body);
  CheckModelName(body, ctx);
  std::string prompt_text;
  std::vector<int32_t> ids = ReadCompletionPrompt(ctx, body, &prompt_text);
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
  // The legacy API defaults max_tokens to 16.
  if (!fields.max_tokens && !body.contains("max_tokens")) fields.max_tokens = 16;
  int32_t max_tokens = ResolveMaxTokens(ctx, ids.size(), fields.max_tokens, "max_tokens");

  GenerationSetup setup;
  setup.request = MakeEngineRequest(fields, std::move(ids), max_tokens);
  setup.request.constraint = ReadOutputConstraint(ctx, body, /*starts_in_reasoning=*/false);
  setup.stop_strings = fields.stop_strings;
  setup.include_stop_str_in_output = fields.include_stop_str_in_output;
  setup.skip_special_tokens = fields.skip_special_tokens;
  setup.parse_output = false;
  setup.stream = stream;
  RequestInfo info{req.method, req.path, req.remote, "cmpl-" + RandomHex(32), std::chrono::steady_clock::now()};
  auto formatter = std::make_unique<CompletionFormatter>(ctx, channel, info.response_id, stream, include_usage,
                                                         logprobs, echo ? prompt_text : std::string(), fields.n);
  StartGeneration(ctx, metrics, std::move(channel), ApiFlavor::kOpenAi, std::move(setup), std::move(formatter),
                  std::move(info));
}

}  // namespace sparkserve::head::http
