// Calibration corpus and tokenisation (see calibration_corpus.h).
#include "calib/calibration_corpus.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/status.h"
#include "fmt/format.h"
#include "text/chat/chat_template.h"
#include "text/tokenizer/tokenizer.h"

namespace sparkserve::calib {
namespace {

using nlohmann::ordered_json;

bool IsBlank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

CalibrationText Text(std::string t) { return {std::move(t), nullptr}; }

std::string ChatAsPlainText(const ordered_json& messages) {
  std::string s;
  for (const auto& m : messages) {
    const std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "user";
    std::string content;
    if (m.contains("content") && m["content"].is_string()) content = m["content"].get<std::string>();
    s += fmt::format("{}: {}\n", role, content);
  }
  return s;
}

}  // namespace

std::vector<CalibrationText> BuiltInCalibrationTexts() {
  std::vector<CalibrationText> t;
  t.push_back(Text(
      "The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps out of habit "
      "rather than necessity. There were one hundred and twelve of them, worn smooth in the middle by a century "
      "of boots. From the lamp room he could see the fishing boats returning across the bay, their wakes drawing "
      "pale lines on the dark water, and beyond them the first lights of the town coming on one window at a time. "
      "He trimmed the wick, polished the great lens with a soft cloth, and wrote the weather in the log: wind "
      "north-west, force four, visibility good, sea moderate."));
  t.push_back(Text(
      "Die Energiewende stellt Deutschland vor große Herausforderungen. Wind- und Solaranlagen liefern Strom, "
      "wenn das Wetter es erlaubt, nicht unbedingt dann, wenn er gebraucht wird. Deshalb werden Speicher, "
      "flexible Verbraucher und ein besser ausgebautes Übertragungsnetz immer wichtiger. Fachleute betonen, dass "
      "die Planungs- und Genehmigungsverfahren beschleunigt werden müssen, damit neue Leitungen rechtzeitig fertig "
      "werden und der Strom aus dem windreichen Norden die Industriezentren im Süden erreicht."));
  t.push_back(Text(
      "La boulangerie du coin ouvre à six heures du matin. Avant même l'aube, l'odeur du pain chaud se répand "
      "dans la rue et attire les premiers clients : un chauffeur de taxi qui termine sa nuit, une infirmière qui "
      "commence la sienne, quelques étudiants qui n'ont pas dormi. La boulangère connaît chacun par son prénom et "
      "sait, sans qu'on le lui demande, qui prendra une baguette bien cuite et qui préférera deux croissants."));
  t.push_back(Text(
      "El cambio climático afecta de manera desigual a las distintas regiones del planeta. En las zonas costeras, "
      "la subida del nivel del mar amenaza ciudades enteras, mientras que en el interior las sequías prolongadas "
      "ponen en riesgo la agricultura. Los científicos insisten en que reducir las emisiones es urgente, pero "
      "también lo es adaptarse: construir diques, cambiar los cultivos y gestionar mejor el agua."));
  t.push_back(Text(
      "人工智能的发展正在深刻地改变我们的生活方式。从智能手机中的语音助手，到医院里辅助医生诊断的影像分析系统，"
      "再到工厂中自动检测产品缺陷的机器视觉，人工智能技术已经渗透到社会的各个角落。与此同时，人们也越来越关注数据"
      "隐私、算法偏见以及就业结构变化等问题。如何在推动技术进步的同时保障公众利益，是各国政府面临的共同课题。"));
  t.push_back(Text(
      "東京の朝は早い。始発電車が動き出す頃には、駅前のコンビニエンスストアにはすでに出勤前の会社員が並んでいる。"
      "桜の季節になると、公園は花見客でにぎわい、夜になっても提灯の明かりの下で人々が語り合う。伝統と最新の技術が"
      "同じ通りに並んでいることが、この街の大きな魅力の一つだと言われている。"));
  t.push_back(Text(
      "Зимой в Санкт-Петербурге темнеет рано, и город погружается в мягкий свет фонарей. По набережным Невы "
      "медленно идут прохожие, кутаясь в шарфы, а над рекой поднимается лёгкий пар. В музеях в это время года "
      "меньше туристов, и можно спокойно рассмотреть картины, ради которых летом приходится стоять в очереди."));
  t.push_back(Text(
      "import heapq\n\n\ndef dijkstra(graph: dict[str, list[tuple[str, float]]], source: str) -> dict[str, float]:\n"
      "    \"\"\"Shortest distances from `source` in a graph with non-negative edge weights.\"\"\"\n"
      "    dist = {source: 0.0}\n    queue = [(0.0, source)]\n    while queue:\n"
      "        d, node = heapq.heappop(queue)\n        if d > dist.get(node, float(\"inf\")):\n            continue\n"
      "        for neighbour, weight in graph.get(node, []):\n            nd = d + weight\n"
      "            if nd < dist.get(neighbour, float(\"inf\")):\n                dist[neighbour] = nd\n"
      "                heapq.heappush(queue, (nd, neighbour))\n    return dist\n"));
  t.push_back(Text(
      "#include <algorithm>\n#include <vector>\n\n// Returns the k largest values of `v`, in descending order.\n"
      "template <typename T>\nstd::vector<T> TopK(std::vector<T> v, size_t k) {\n"
      "  k = std::min(k, v.size());\n"
      "  std::partial_sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end(), std::greater<T>());\n"
      "  v.resize(k);\n  return v;\n}\n"));
  t.push_back(Text(
      "{\"id\": \"order-20931\", \"customer\": {\"name\": \"Ana Souza\", \"country\": \"BR\"}, \"items\": "
      "[{\"sku\": \"KB-104\", \"qty\": 2, \"price\": 49.90}, {\"sku\": \"MS-220\", \"qty\": 1, \"price\": 24.50}], "
      "\"status\": \"shipped\", \"tracking\": null}"));
  t.push_back(Text(
      "Let f(x) = x^3 - 3x + 1. Its derivative is f'(x) = 3x^2 - 3, which vanishes at x = 1 and x = -1. Since "
      "f(-1) = 3 > 0 and f(1) = -1 < 0, and f tends to minus infinity as x goes to minus infinity, the cubic has "
      "three real roots, one in each of the intervals (-2, -1), (0, 1) and (1, 2). Newton's method starting from "
      "x0 = 1.5 converges quickly to the largest root, approximately 1.5321."));
  t.push_back({"", ordered_json::array({
                       {{"role", "system"}, {"content", "You are a helpful assistant."}},
                       {{"role", "user"}, {"content", "How do I reverse a list in Python without modifying it?"}},
                       {{"role", "assistant"},
                        {"content", "Use slicing: `reversed_list = my_list[::-1]` returns a new list. If you only "
                                    "need to iterate, `for x in reversed(my_list):` avoids the copy."}},
                       {{"role", "user"}, {"content", "And for a string?"}},
                       {{"role", "assistant"}, {"content", "Slicing works the same way: `s[::-1]`."}}})});
  t.push_back({"", ordered_json::array({
                       {{"role", "user"}, {"content", "Quelle est la capitale de l'Australie ?"}},
                       {{"role", "assistant"},
                        {"content", "La capitale de l'Australie est Canberra, et non Sydney comme on le croit "
                                    "souvent."}}})});
  return t;
}

absl::StatusOr<std::vector<CalibrationText>> LoadCalibrationFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("--calib {}: cannot open the file", path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  std::vector<CalibrationText> out;
  size_t first = 0;
  while (first < lines.size() && IsBlank(lines[first])) ++first;
  if (first == lines.size()) return absl::InvalidArgumentError(fmt::format("--calib {}: the file is empty", path));
  const bool jsonl = lines[first].find_first_not_of(" \t") != std::string::npos &&
                     lines[first][lines[first].find_first_not_of(" \t")] == '{';
  if (jsonl) {
    for (size_t i = first; i < lines.size(); ++i) {
      if (IsBlank(lines[i])) continue;
      const auto j = ordered_json::parse(lines[i], nullptr, false);
      if (j.is_discarded() || !j.is_object())
        return absl::InvalidArgumentError(fmt::format("--calib {}:{}: not a JSON object", path, i + 1));
      if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
        return absl::InvalidArgumentError(
            fmt::format("--calib {}:{}: expected {{\"messages\": [...]}} with at least one message", path, i + 1));
      out.push_back({"", j["messages"]});
    }
    return out;
  }
  std::string para;
  auto flush = [&]() {
    if (!IsBlank(para)) out.push_back(Text(para));
    para.clear();
  };
  for (size_t i = first; i < lines.size(); ++i) {
    if (IsBlank(lines[i])) {
      flush();
      continue;
    }
    if (!para.empty()) para += '\n';
    para += lines[i];
  }
  flush();
  return out;
}

absl::StatusOr<TokenizedSamples> TokenizeCalibrationTexts(const std::string& model_dir,
                                                          const std::vector<CalibrationText>& texts,
                                                          const TokenizeOptions& options) {
  namespace fs = std::filesystem;
  TokenizedSamples r;
  if (options.max_tokens < 1) return absl::InvalidArgumentError("calibration max tokens per sample must be >= 1");
  if (!fs::exists(fs::path(model_dir) / "tokenizer.json")) {
    if (options.vocab_size < 1) return absl::InvalidArgumentError("random calibration ids need a vocabulary size");
    const int32_t n = std::min(options.random_tokens, options.max_tokens);
    r.random_ids = true;
    r.warnings.push_back(fmt::format(
        "{} has no tokenizer.json: calibrating on {} samples of {} random token ids (activation ranges of random "
        "text are not those of real text; give a model directory with its tokenizer for meaningful scales)",
        model_dir, texts.size(), n));
    std::mt19937_64 rng(options.seed);
    std::uniform_int_distribution<int64_t> id(0, options.vocab_size - 1);
    for (size_t s = 0; s < texts.size(); ++s) {
      std::vector<int32_t> ids(static_cast<size_t>(n));
      for (auto& x : ids) x = static_cast<int32_t>(id(rng));
      r.samples.push_back(std::move(ids));
    }
    return r;
  }
  ASSIGN_OR_RETURN(auto tok, text::Tokenizer::Load(model_dir));
  std::optional<text::ChatTemplate> tmpl;
  bool any_chat = false;
  for (const auto& t : texts) any_chat |= t.is_chat();
  if (any_chat) {
    auto loaded = text::ChatTemplate::Load(model_dir);
    if (loaded.ok()) {
      tmpl = std::move(*loaded);
    } else {
      r.warnings.push_back(fmt::format("{} has no usable chat template ({}): chats are calibrated as plain "
                                       "\"role: content\" lines",
                                       model_dir, std::string(loaded.status().message())));
    }
  }
  for (size_t s = 0; s < texts.size(); ++s) {
    std::string text = texts[s].text;
    if (texts[s].is_chat()) {
      if (tmpl) {
        auto rendered = tmpl->Render(texts[s].messages, ordered_json::object());
        if (!rendered.ok())
          return core::Annotate(rendered.status(), fmt::format("calibration chat {}: chat template", s + 1));
        text = std::move(*rendered);
      } else {
        text = ChatAsPlainText(texts[s].messages);
      }
    }
    auto ids = tok->Encode(text, /*add_special_tokens=*/false);
    if (!ids.ok()) return core::Annotate(ids.status(), fmt::format("calibration sample {}", s + 1));
    if (ids->empty()) continue;
    if (static_cast<int64_t>(ids->size()) > options.max_tokens) ids->resize(static_cast<size_t>(options.max_tokens));
    r.samples.emplace_back(ids->begin(), ids->end());
  }
  if (r.samples.empty()) return absl::InvalidArgumentError("no calibration sample has any token");
  return r;
}

}  // namespace sparkserve::calib
