// Streaming detokenisation with maximal-subpart U+FFFD handling (see incremental_detokenizer.h).
#include "text/tokenizer/incremental_detokenizer.h"

#include "text/tokenizer/utf8.h"

namespace sparkserve::text {

std::string IncrementalDetokenizer::Push(TokenId id) {
  const std::string* bytes = tokenizer_.TokenBytes(id);
  if (bytes == nullptr || (skip_special_tokens_ && tokenizer_.IsSpecial(id)) || bytes->empty()) return {};
  std::string out;
  if (pending_.empty()) {
    const size_t used = AppendUtf8Lossy(*bytes, out, /*stop_at_truncated_tail=*/true);
    pending_.assign(*bytes, used, std::string::npos);
    return out;
  }
  // Lossy decoding only ever looks forward from a sequence's lead byte, so decoding the held bytes
  // together with the new ones and keeping back a new truncated tail gives the same text as
  // decoding the whole sequence at once.
  pending_.append(*bytes);
  const size_t used = AppendUtf8Lossy(pending_, out, /*stop_at_truncated_tail=*/true);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDetokenizer::Finish() {
  std::string out;
  AppendUtf8Lossy(pending_, out);
  pending_.clear();
  return out;
}

}  // namespace sparkserve::text
