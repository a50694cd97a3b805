// `sparkserve tokenize MODEL_DIR [--json] [--] TEXT`: prints TEXT's token ids (comma-separated, or
// {"ids": [...]} with --json). Bulk and decode modes for tests and debugging: --file F (JSONL in,
// JSONL out), --decode (ids -> text), --stream (decode through the streaming detokeniser).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "head/cli/model_path.h"
#include "head/cli/commands.h"
#include "text/tokenizer/incremental_detokenizer.h"
#include "text/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace sparkserve::head {
namespace {

using text::TokenId;
using Json = nlohmann::json;

struct TokenizeArgs {
  std::string model_dir;
  std::string text;
  std::string file;
  bool json = false;
  bool decode = false;
  bool stream = false;
  bool skip_special = false;
  bool no_add_special = false;
  bool has_text = false;
};

void WriteOut(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

std::string JoinIds(const std::vector<TokenId>& ids) { return fmt::format("{}", fmt::join(ids, ",")); }

// "1,2, 3" or "1 2 3" -> ids.
bool ParseIdList(const std::string& s, std::vector<TokenId>& ids) {
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ',' || s[i] == ' ' || s[i] == '\n')) ++i;
    if (i >= s.size()) break;
    size_t used = 0;
    try {
      const long v = std::stol(s.substr(i), &used);
      if (v < 0 || v > INT32_MAX) return false;
      ids.push_back(static_cast<TokenId>(v));
    } catch (...) {
      return false;
    }
    i += used;
  }
  return true;
}

std::string DecodeIds(const text::Tokenizer& tok, const std::vector<TokenId>& ids, const TokenizeArgs& a,
                      std::vector<std::string>* pieces) {
  if (!a.stream) return tok.Decode(ids, a.skip_special);
  text::IncrementalDetokenizer detok(tok, a.skip_special);
  std::string all;
  for (TokenId id : ids) {
    pieces->push_back(detok.Push(id));
    all += pieces->back();
  }
  pieces->push_back(detok.Finish());
  all += pieces->back();
  return all;
}

int RunFile(const text::Tokenizer& tok, const TokenizeArgs& a) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (a.file != "-") {
    file.open(a.file, std::ios::binary);
    if (!file) {
      spdlog::error("cannot open {}", a.file);
      return 1;
    }
    in = &file;
  }
  std::string line, out;
  size_t line_no = 0;
  while (std::getline(*in, line)) {
    ++line_no;
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (a.decode) {
      if (!j.is_array()) {
        spdlog::error("{}:{}: expected a JSON list of ids", a.file, line_no);
        return 1;
      }
      std::vector<TokenId> ids;
      for (const auto& v : j) {
        if (!v.is_number_integer()) {
          spdlog::error("{}:{}: ids must be integers", a.file, line_no);
          return 1;
        }
        ids.push_back(v.get<TokenId>());
      }
      std::vector<std::string> pieces;
      const std::string text = DecodeIds(tok, ids, a, &pieces);
      out += a.stream ? Json(pieces).dump() : Json(text).dump();
    } else {
      if (!j.is_string()) {
        spdlog::error("{}:{}: expected a JSON string", a.file, line_no);
        return 1;
      }
      auto ids = tok.Encode(j.get_ref<const std::string&>(), !a.no_add_special);
      if (!ids.ok()) {
        spdlog::error("{}:{}: {}", a.file, line_no, std::string(ids.status().message()));
        return 1;
      }
      out += Json(*ids).dump();
    }
    out += '\n';
    if (out.size() > (1u << 20)) {
      WriteOut(out);
      out.clear();
    }
  }
  WriteOut(out);
  return 0;
}

int RunTokenize(const TokenizeArgs& a) {
  // Subcommands run while main() parses, before it sets up logging: keep logs off stdout.
  if (!spdlog::get("sparkserve")) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "tokenize", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  }
  if (a.file.empty() && !a.has_text) {
    spdlog::error("tokenize: give TEXT (or --file F)");
    return 2;
  }
  auto tok = text::Tokenizer::Load(a.model_dir);
  if (!tok.ok()) {
    spdlog::error("{}", std::string(tok.status().message()));
    return 1;
  }
  if (!a.file.empty()) return RunFile(**tok, a);
  if (a.decode) {
    std::vector<TokenId> ids;
    if (!ParseIdList(a.text, ids)) {
      spdlog::error("--decode: TEXT must be token ids separated by commas");
      return 2;
    }
    std::vector<std::string> pieces;
    const std::string text = DecodeIds(**tok, ids, a, &pieces);
    if (a.stream) {
      WriteOut(Json(pieces).dump() + "\n");
    } else {
      WriteOut(a.json ? Json{{"text", text}}.dump() + "\n" : text);
    }
    return 0;
  }
  auto ids = (*tok)->Encode(a.text, !a.no_add_special);
  if (!ids.ok()) {
    spdlog::error("{}", std::string(ids.status().message()));
    return 1;
  }
  WriteOut(a.json ? Json{{"ids", *ids}}.dump() + "\n" : JoinIds(*ids) + "\n");
  return 0;
}

}  // namespace

void AddTokenizeCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* sub = app.add_subcommand("tokenize", "print the token ids of TEXT (tokenizer.json of MODEL_DIR)");
  AcceptModelPath(sub, sub->add_option("MODEL_DIR", args->model_dir, "directory with tokenizer.json (or the file itself, a packed model file or a GGUF file)")->required(),
                  &args->model_dir, {.any_file = true});
  CLI::Option* text =
      sub->add_option("TEXT", args->text, "text to encode (ids with --decode); put -- before text starting with -");
  sub->add_flag("--json", args->json, "print {\"ids\": [...]} (--decode: {\"text\": ...})");
  sub->add_option("--file", args->file,
                  "JSONL input, one JSON string per line (--decode: one list of ids per line); prints one "
                  "JSON list of ids (--decode: JSON string; --stream: list of streamed pieces) per line; - = stdin");
  sub->add_flag("--decode", args->decode, "decode ids to text instead of encoding");
  sub->add_flag("--stream", args->stream, "with --decode: decode through the streaming detokeniser, print its pieces");
  sub->add_flag("--skip-special-tokens", args->skip_special, "with --decode: leave special tokens out");
  sub->add_flag("--no-add-special-tokens", args->no_add_special,
                "do not apply the post-processor template (BOS/EOS) around the ids");
  sub->callback([args, exit_code, text] {
    args->has_text = text->count() > 0;
    *exit_code = RunTokenize(*args);
  });
}

}  // namespace sparkserve::head
