// ModelTextCodec: the HTTP layer's TextCodec over a model directory's tokenizer.json
// (text/tokenizer) and chat template (text/chat).
#pragma once
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "text/chat/chat_template.h"
#include "head/http/serving_backend.h"
#include "text/tokenizer/tokenizer.h"

namespace sparkserve::head::http {

class ModelTextCodec : public TextCodec {
 public:
  // Loads MODEL_DIR/tokenizer.json and the chat template (chat_template.jinja or
  // tokenizer_config.json).
  static absl::StatusOr<std::unique_ptr<ModelTextCodec>> Load(const std::string& model_dir);
  ModelTextCodec(std::unique_ptr<text::Tokenizer> tok, text::ChatTemplate tmpl);

  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text, bool add_special_tokens) const override;
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  std::unique_ptr<IncrementalTextDecoder> NewDecoder(bool skip_special_tokens) const override;
  std::string TokenString(int32_t id) const override;
  int32_t vocab_size() const override;
  size_t max_token_bytes() const override { return max_token_bytes_; }
  absl::StatusOr<std::string> RenderChat(const Json& messages, const Json& tools, bool add_generation_prompt,
                                         bool continue_final_message, const Json& template_kwargs) const override;
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  std::unique_ptr<text::Tokenizer> tokenizer_;
  text::ChatTemplate template_;
  size_t max_token_bytes_ = 0;
};

}  // namespace sparkserve::head::http
