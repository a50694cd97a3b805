// ModelTextCodec: tokenizer + chat template behind TextCodec.
#include "head/http/model_text_codec.h"

#include <algorithm>

#include "core/status.h"
#include "text/tokenizer/incremental_detokenizer.h"

namespace sparkserve::head::http {

namespace {
class Detokenizer : public IncrementalTextDecoder {
 public:
  Detokenizer(const text::Tokenizer& t, bool skip) : detok_(t, skip) {}
  std::string Push(std::span<const int32_t> ids) override {
    std::string out;
    for (int32_t id : ids) out += detok_.Push(id);
    return out;
  }
  std::string Flush() override { return detok_.Finish(); }

 private:
  text::IncrementalDetokenizer detok_;
};
}  // namespace

ModelTextCodec::ModelTextCodec(std::unique_ptr<text::Tokenizer> tok, text::ChatTemplate tmpl)
    : tokenizer_(std::move(tok)), template_(std::move(tmpl)) {
  for (int32_t id = 0; id < static_cast<int32_t>(tokenizer_->id_space_size()); ++id) {
    max_token_bytes_ = std::max(max_token_bytes_, tokenizer_->Decode(std::span<const int32_t>(&id, 1), false).size());
  }
}

absl::StatusOr<std::unique_ptr<ModelTextCodec>> ModelTextCodec::Load(const std::string& model_dir) {
  auto tok = text::Tokenizer::Load(model_dir);
  if (!tok.ok()) return core::Annotate(tok.status(), "loading the tokenizer");
  auto tmpl = text::ChatTemplate::Load(model_dir);
  if (!tmpl.ok()) return core::Annotate(tmpl.status(), "loading the chat template");
  return std::make_unique<ModelTextCodec>(std::move(*tok), std::move(*tmpl));
}

absl::StatusOr<std::vector<int32_t>> ModelTextCodec::Encode(const std::string& text, bool add_special_tokens) const {
  return tokenizer_->Encode(text, add_special_tokens);
}

std::string ModelTextCodec::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return tokenizer_->Decode(ids, skip_special_tokens);
}

std::unique_ptr<IncrementalTextDecoder> ModelTextCodec::NewDecoder(bool skip_special_tokens) const {
  return std::make_unique<Detokenizer>(*tokenizer_, skip_special_tokens);
}

std::string ModelTextCodec::TokenString(int32_t id) const {
  return tokenizer_->Decode(std::span<const int32_t>(&id, 1), false);
}

int32_t ModelTextCodec::vocab_size() const { return static_cast<int32_t>(tokenizer_->id_space_size()); }

absl::StatusOr<std::string> ModelTextCodec::RenderChat(const Json& messages, const Json& tools,
                                                       bool add_generation_prompt, bool continue_final_message,
                                                       const Json& template_kwargs) const {
  Json kwargs = template_kwargs.is_object() ? template_kwargs : Json::object();
  kwargs["add_generation_prompt"] = add_generation_prompt;
  if (!tools.is_null()) kwargs["tools"] = tools;
  text::ChatRenderOptions options;
  options.continue_final_message = continue_final_message;
  return template_.Render(messages, kwargs, options);
}

}  // namespace sparkserve::head::http
