// The demo tokenizer files: BPE trained on a built-in text (text/tokenizer/bpe_trainer.h) (see demo_model_tokenizer.h).
#include "head/demo/demo_model_tokenizer.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "text/tokenizer/bpe_trainer.h"

namespace sparkserve::head {
namespace {

using nlohmann::ordered_json;

// Mixed English prose, chat-like answers, code and a little non-ASCII text.
constexpr std::string_view kCorpus = R"TEXT(
The quick brown fox jumps over the lazy dog. The dog was not amused, and the fox ran into the forest.
Hello! How can I help you today? I would like to know the weather in Paris and in Berlin tomorrow.
Sure. Here is a short answer: the weather is mild, with a chance of rain in the afternoon.
A model reads tokens, predicts the next token, and repeats until it reaches the end of the text.
Inference servers batch requests together so that the weights are read once for many sequences.
The server streams tokens to the client as soon as they are generated, one event at a time.
Questions and answers: What is the capital of France? The capital of France is Paris.
What is two plus two? Two plus two is four. What is ten times ten? Ten times ten is one hundred.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 1024 2048 4096 3.14159 2.71828 1e-6 -1 +1
Let me think step by step. First, we read the question. Then, we reason about it. Finally, we answer.
The function returns the sum of the values in the list, or zero when the list is empty.
def add(a, b):
    return a + b

for i in range(10):
    print(i, add(i, i))

int main(int argc, char** argv) {
  std::printf("hello, world\n");
  return 0;
}

{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
{"role": "user", "content": "What time is it?"}
The user asked for the time; the assistant called a tool and then answered with the result.
Tools can search the web, read files, run code, and call other services on behalf of the user.
In the beginning the text was short, and then it grew longer with every line that was written.
She said that they would meet at the station at seven o'clock, and that she'd bring the tickets.
It's a good day to learn something new: we're reading, you're writing, they've finished.
Café, naïve, résumé, jalapeño, Zürich, São Paulo, Kraków. 日本語のテキスト。中文文本。Русский текст.
Emoji and symbols: ✓ ✗ → ← ★ € £ ¥ © ® ° ± × ÷ …
The end of the text is near; the end of the text is here; this is the end of the text.
)TEXT";

}  // namespace

const std::string& DemoChatTemplate() {
  static const std::string kTemplate = R"JINJA({#- sparkserve demo chat template (written by the project): ChatML turns, tools listed in the system turn, XML tool calls, tool results in <tool_response> user turns, thinking on unless enable_thinking is false. -#}
{%- macro text(content) -%}
{%- if content is string -%}{{ content }}
{%- elif content is iterable and content is not mapping -%}{%- for part in content -%}{%- if part.text is defined -%}{{ part.text }}{%- endif -%}{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- if not messages -%}{{ raise_exception('No messages provided.') }}{%- endif -%}
{%- set system = text(messages[0].content) | trim if messages[0].role == 'system' else none -%}
{%- if tools -%}
{{- '<|im_start|>system\n' -}}
{%- if system -%}{{- system + '\n\n' -}}{%- endif -%}
{{- '# Tools\n\nYou may call these functions:\n<tools>' -}}
{%- for tool in tools -%}{{- '\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\n</tools>\n\nTo call a function, reply with:\n<tool_call>\n<function=NAME>\n<parameter=ARGUMENT>\nVALUE\n</parameter>\n</function>\n</tool_call><|im_end|>\n' -}}
{%- elif system is not none -%}
{{- '<|im_start|>system\n' + system + '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' -%}
{%- if not loop.first -%}{{ raise_exception('System message must be at the beginning.') }}{%- endif -%}
{%- elif message.role == 'user' -%}
{{- '<|im_start|>user\n' + text(message.content) + '<|im_end|>\n' -}}
{%- elif message.role == 'assistant' -%}
{%- set content = text(message.content) -%}
{{- '<|im_start|>assistant\n' -}}
{%- if message.reasoning_content is string and message.reasoning_content | trim -%}
{{- '<think>\n' + message.reasoning_content | trim + '\n</think>\n\n' -}}
{%- endif -%}
{{- content -}}
{%- if message.tool_calls -%}
{%- for call in message.tool_calls -%}
{%- set f = call.function if call.function is defined else call -%}
{%- if content or not loop.first -%}{{- '\n' -}}{%- endif -%}
{{- '<tool_call>\n<function=' + f.name + '>\n' -}}
{%- if f.arguments is mapping -%}
{%- for key, value in f.arguments | items -%}
{{- '<parameter=' + key + '>\n' -}}
{%- if value is string -%}{{- value -}}{%- else -%}{{- value | tojson -}}{%- endif -%}
{{- '\n</parameter>\n' -}}
{%- endfor -%}
{%- endif -%}
{{- '</function>\n</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- elif message.role == 'tool' -%}
{%- if loop.first or loop.previtem.role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
{{- '\n<tool_response>\n' + text(message.content) + '\n</tool_response>' -}}
{%- if loop.last or loop.nextitem.role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
{%- else -%}
{{ raise_exception('Unexpected message role: ' + message.role) }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\n\n</think>\n\n' -}}{%- else -%}{{- '<think>\n' -}}{%- endif -%}
{%- endif -%})JINJA";
  return kTemplate;
}

DemoTokenizer BuildDemoTokenizer(int max_merges) {
  const text::TrainedBpe bpe = text::TrainByteLevelBpe(kCorpus, max_merges);
  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < bpe.vocab.size(); ++id) vocab[bpe.vocab[id]] = static_cast<int>(id);
  ordered_json merges = ordered_json::array();
  for (const auto& [a, b] : bpe.merges) merges.push_back({a, b});
  int next_id = static_cast<int>(bpe.vocab.size());
  DemoTokenizer tok;
  struct Added {
    const char* content;
    bool special;
  };
  static constexpr Added kAdded[] = {{"<|endoftext|>", true}, {"<|im_start|>", true},    {"<|im_end|>", true},
                                     {"<think>", false},      {"</think>", false},       {"<tool_call>", false},
                                     {"</tool_call>", false}, {"<tool_response>", false}, {"</tool_response>", false}};
  ordered_json added = ordered_json::array();
  ordered_json decoder = ordered_json::object();
  for (const Added& a : kAdded) {
    const int id = next_id++;
    added.push_back({{"id", id}, {"content", a.content}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", a.special}});
    decoder[std::to_string(id)] = {{"content", a.content}, {"lstrip", false}, {"normalized", false},
                                   {"rstrip", false},      {"single_word", false}, {"special", a.special}};
    if (std::string_view(a.content) == "<|endoftext|>") tok.endoftext_id = id;
    if (std::string_view(a.content) == "<|im_start|>") tok.im_start_id = id;
    if (std::string_view(a.content) == "<|im_end|>") tok.im_end_id = id;
  }
  tok.num_tokens = next_id;
  const ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  const ordered_json tj = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex",
              R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          byte_level}}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", merges}}}};
  tok.tokenizer_json = tj.dump(2) + "\n";
  const ordered_json cfg = {{"add_bos_token", false},
                            {"add_prefix_space", false},
                            {"added_tokens_decoder", decoder},
                            {"additional_special_tokens", {"<|im_start|>", "<|im_end|>"}},
                            {"bos_token", nullptr},
                            {"chat_template", DemoChatTemplate()},
                            {"clean_up_tokenization_spaces", false},
                            {"eos_token", "<|im_end|>"},
                            {"errors", "replace"},
                            {"model_max_length", 262144},
                            {"pad_token", "<|endoftext|>"},
                            {"split_special_tokens", false},
                            {"tokenizer_class", "Qwen2Tokenizer"},
                            {"unk_token", nullptr}};
  tok.tokenizer_config_json = cfg.dump(2) + "\n";
  return tok;
}

}  // namespace sparkserve::head
