// libFuzzer target for the tokenizer (the Qwen3 tokenizer.json of ../shared/fixtures): bytes ->
// ids -> text. Encoding any bytes gives ids inside the vocabulary (or an error), decoding any ids
// gives text, and the streaming detokenizer gives the same text as the one-shot decode whenever
// that text is valid UTF-8. Never a crash or sanitizer report.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "text/tokenizer/incremental_detokenizer.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/utf8.h"

namespace {
const sparkserve::text::Tokenizer& Tok() {
  static std::unique_ptr<sparkserve::text::Tokenizer> tok = [] {
    auto t = sparkserve::text::Tokenizer::Load(SPARKSERVE_FIXTURES_DIR "/qwen3-tokenizer");
    if (!t.ok()) {
      std::fprintf(stderr, "cannot load the fixture tokenizer: %s\n", std::string(t.status().message()).c_str());
      std::abort();
    }
    return std::move(*t);
  }();
  return *tok;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sparkserve::text;
  const Tokenizer& tok = Tok();
  if (size == 0) return 0;
  const bool special = data[0] & 1;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto ids = tok.Encode(text, special);
  const auto space = static_cast<int64_t>(tok.id_space_size());
  if (ids.ok()) {
    for (auto id : *ids) {
      if (id < 0 || id >= space) std::abort();
    }
    (void)tok.Decode(*ids, false);
  }
  // The same bytes read as ids (two bytes each).
  std::vector<TokenId> raw;
  for (size_t i = 1; i + 1 < size; i += 2) raw.push_back(static_cast<TokenId>((data[i] | (data[i + 1] << 8)) % space));
  const std::string whole = tok.Decode(raw, data[0] & 2);
  IncrementalDetokenizer detok(tok, data[0] & 2);
  std::string streamed;
  for (TokenId id : raw) streamed += detok.Push(id);
  streamed += detok.Finish();
  if (IsValidUtf8(whole) && streamed != whole) {
    std::fprintf(stderr, "streamed detokenization differs from Decode\n");
    std::abort();
  }
  return 0;
}
