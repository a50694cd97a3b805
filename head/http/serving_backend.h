// What the HTTP layer needs from the rest of the head, as small interfaces: text <-> token ids and
// chat rendering (TextCodec), the model-output parser (reasoning / tool-call markup), and the engine
// (engine/engine_api.h). `sparkserve serve` plugs the real tokenizer, chat template, parsers
// and engine in; tests plug doubles.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cluster/cluster_status.h"
#include "engine/engine_api.h"
#include "head/http/json_io.h"
#include "scheduler/request.h"

namespace sparkserve::text::constraint {
class GrammarCompiler;
}

namespace sparkserve::head::http {

// Turns a growing list of generated ids into text pieces that are complete UTF-8.
class IncrementalTextDecoder {
 public:
  virtual ~IncrementalTextDecoder() = default;
  // Adds `ids`; returns the text that became final.
  virtual std::string Push(std::span<const int32_t> ids) = 0;
  // At the end of the output: whatever is still held back (an incomplete UTF-8 tail, as U+FFFD).
  virtual std::string Flush() = 0;
};

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text,
                                                      bool add_special_tokens) const = 0;
  virtual std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const = 0;
  virtual std::unique_ptr<IncrementalTextDecoder> NewDecoder(bool skip_special_tokens) const = 0;
  // One token's own text (logprobs' "token" field, /tokenize's token_strs).
  virtual std::string TokenString(int32_t id) const = 0;
  virtual int32_t vocab_size() const = 0;
  // The most bytes one token stands for (0: unknown). With it, text too long for the context is
  // refused by its size, before tokenizing it.
  virtual size_t max_token_bytes() const { return 0; }
  // Renders OpenAI-shaped `messages` (content already plain strings, tool-call arguments as
  // objects) and `tools` (array, or null) with the model's chat template. `template_kwargs` are
  // extra template variables (enable_thinking, ...). InvalidArgument for a chat the template
  // rejects (raise_exception).
  virtual absl::StatusOr<std::string> RenderChat(const Json& messages, const Json& tools,
                                                 bool add_generation_prompt,
                                                 bool continue_final_message,
                                                 const Json& template_kwargs) const = 0;
};

// One piece of parsed model output, in output order. Concatenating the kContent and kReasoning
// texts and the markup the parser removed gives back the decoded text exactly.
struct OutputPiece {
  enum class Kind { kContent, kReasoning, kToolCallName, kToolCallArguments };
  Kind kind = Kind::kContent;
  int32_t tool_index = 0;  // which tool call (kToolCall*), counting from 0 within a sample
  std::string text;        // content/reasoning text, the tool's name, or a fragment of its JSON arguments
};

// Splits one sample's decoded text, fed incrementally, into content, reasoning and tool calls.
class PieceParser {
 public:
  virtual ~PieceParser() = default;
  virtual std::vector<OutputPiece> Feed(std::string_view text) = 0;
  // End of output: releases anything held back (an unfinished tag is content/reasoning text).
  virtual std::vector<OutputPiece> Finish() = 0;
};

struct PieceParserOptions {
  bool starts_in_reasoning = false;  // the prompt ended inside <think>
  bool parse_reasoning = true;
  bool parse_tool_calls = false;     // tools were given and tool_choice != none
  Json tools;                        // the request's tools, OpenAI-shaped (null when none)
  // Text appended to the prompt that the parser reads first as if generated (a forced tool-call
  // start, head/http/tool_choice.h); its pieces come out with the first output, never as content
  // unless the call turns out malformed.
  std::string forced_output;
};

// Makes the parsers of one request's samples: the factory sees the request's options once (tool
// schemas are read once), the maker it returns is called per sample.
using PieceParserMaker = std::function<std::unique_ptr<PieceParser>()>;
using PieceParserFactory = std::function<PieceParserMaker(const PieceParserOptions&)>;

// Passes everything through as content (completions, or a model without markup).
class PlainPieceParser : public PieceParser {
 public:
  std::vector<OutputPiece> Feed(std::string_view text) override {
    if (text.empty()) return {};
    return {OutputPiece{OutputPiece::Kind::kContent, 0, std::string(text)}};
  }
  std::vector<OutputPiece> Finish() override { return {}; }
};

// How the served model writes tool calls (what a forced tool_choice appends to the prompt).
enum class ToolCallMarkup {
  kNone,      // no tool-call parsing: tool_choice cannot force a call
  kQwenXml,   // Qwen3.5: <tool_call>\n<function=NAME>\n<parameter=...
  kQwenJson,  // Qwen3:   <tool_call>\n{"name": NAME, "arguments": ...}
};

// Everything a request handler needs; owned by `sparkserve serve` (or a test).
struct ServingContext {
  engine::EngineApi* engine = nullptr;
  const TextCodec* codec = nullptr;
  PieceParserFactory parser_factory;        // null: PlainPieceParser
  ToolCallMarkup tool_call_markup = ToolCallMarkup::kNone;  // matches parser_factory's family
  std::string model_name = "sparkserve";    // --served-model-name
  int64_t created_unix = 0;                 // /v1/models "created"
  int32_t max_seq_len = 4096;               // prompt + output limit
  bool prefix_cache = false;  // the engine caches prefixes: chat requests name their message ends
  int32_t default_max_tokens = 0;           // cap when a request gives none (0: context limit)
  scheduler::SamplingParams default_sampling;  // from generation_config.json
  std::string api_key;                      // empty: no auth
  std::atomic<bool>* ready = nullptr;       // /health is 503 until *ready (null: ready); `engine`
                                            // and `codec` are read only once it is true
  // Tensor parallelism across machines (null: one machine): while the nodes are not all synced
  // (start-up, or a node lost and re-syncing), /health is 503 and so are requests for the model.
  std::function<engine::cluster::ClusterStatus()> cluster;
  // Structured outputs: grammars compiled against the model's vocabulary (null: not offered).
  std::shared_ptr<text::constraint::GrammarCompiler> grammars;
  std::string reasoning_end;                // the text closing a reasoning block ("</think>"); "": none
  int32_t max_stop_strings = 16;            // stop / stop_sequences entries per request (--max-stop-strings)
  int32_t max_stop_string_bytes = 256;      // bytes per stop string (--max-stop-string-bytes)
};

}  // namespace sparkserve::head::http
