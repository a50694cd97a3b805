// grammar_bench TOKENIZER_JSON_OR_DIR [VOCAB] [WALKS]: the host cost of structured outputs at a
// model's vocabulary size. The tokenizer's token bytes are padded to VOCAB ids (default 248,320,
// Qwen3.5's) with tokens made of two of its own tokens, so that a 151k tokenizer stands in for the
// real vocabulary. For a large JSON schema (and json_object, a regex and a GBNF grammar) it prints:
// compile time (schema -> grammar -> automaton), the time to precompute every position's token
// sets, and the per-token mask cost (FillMask) along random walks through the grammar (cold: first
// walk, positions computed on first use; warm: later walks), plus AcceptToken's cost.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "text/constraint/compiled_grammar.h"
#include "text/constraint/gbnf_parser.h"
#include "text/constraint/grammar_matcher.h"
#include "text/constraint/json_schema_grammar.h"
#include "text/constraint/regex_parser.h"
#include "text/constraint/token_vocabulary.h"
#include "text/tokenizer/tokenizer.h"

namespace {

namespace tc = sparkserve::text::constraint;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double Us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

// An order-processing schema: nested objects, arrays of objects, enums, bounded strings and
// numbers, formats, patterns, optional properties, a recursive $ref and extra properties.
Json LargeSchema() {
  Json countries = Json::array();
  for (const char* c : {"US", "CA", "MX", "GB", "FR", "DE", "ES", "IT", "NL", "BE", "SE", "NO", "FI", "DK", "PL", "JP",
                        "KR", "CN", "IN", "BR"}) {
    countries.push_back(c);
  }
  Json address = {{"type", "object"},
                  {"properties",
                   {{"street", {{"type", "string"}, {"maxLength", 60}}},
                    {"city", {{"type", "string"}, {"maxLength", 30}}},
                    {"zip", {{"type", "string"}, {"pattern", "^[0-9]{5}(-[0-9]{4})?$"}}},
                    {"country", {{"enum", countries}}}}},
                  {"required", {"street", "city", "country"}},
                  {"additionalProperties", false}};
  Json item = {{"type", "object"},
               {"properties",
                {{"sku", {{"type", "string"}, {"pattern", "^[A-Z]{3}-[0-9]{4}$"}}},
                 {"name", {{"type", "string"}, {"maxLength", 80}}},
                 {"quantity", {{"type", "integer"}, {"minimum", 1}, {"maximum", 100}}},
                 {"unit_price", {{"type", "number"}, {"minimum", 0}, {"maximum", 10000}}},
                 {"discount", {{"anyOf", {{{"type", "number"}, {"minimum", 0}, {"exclusiveMaximum", 1}}, {{"type", "null"}}}}}},
                 {"tags", {{"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 12}}}, {"maxItems", 5}}},
                 {"gift", {{"type", "boolean"}}}}},
               {"required", {"sku", "name", "quantity", "unit_price"}},
               {"additionalProperties", false}};
  Json event = {{"type", "object"},
                {"properties",
                 {{"at", {{"type", "string"}, {"format", "date-time"}}},
                  {"kind", {{"enum", {"created", "paid", "packed", "shipped", "delivered", "returned"}}}},
                  {"note", {{"type", "string"}, {"maxLength", 120}}},
                  {"follow_up", {{"$ref", "#/$defs/event"}}}}},
                {"required", {"at", "kind"}}};
  Json flags = {{"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
  for (const char* f : {"express", "fragile", "insured", "signature", "weekend", "eco"}) {
    flags["properties"][f] = {{"type", "boolean"}};
  }
  return {{"$defs", {{"event", event}}},
          {"type", "object"},
          {"properties",
           {{"order_id", {{"type", "string"}, {"format", "uuid"}}},
            {"status", {{"enum", {"draft", "open", "paid", "shipped", "closed", "cancelled"}}}},
            {"created", {{"type", "string"}, {"format", "date-time"}}},
            {"customer",
             {{"type", "object"},
              {"properties",
               {{"name", {{"type", "string"}, {"maxLength", 40}}},
                {"email", {{"type", "string"}, {"format", "email"}}},
                {"phone", {{"type", "string"}, {"pattern", "^\\+[0-9]{7,14}$"}}},
                {"vip", {{"type", "boolean"}}},
                {"billing", address},
                {"shipping", address}}},
              {"required", {"name", "email", "billing"}},
              {"additionalProperties", false}}},
            {"items", {{"type", "array"}, {"items", item}, {"minItems", 1}, {"maxItems", 20}}},
            {"currency", {{"enum", {"USD", "EUR", "GBP", "JPY"}}}},
            {"total", {{"type", "number"}, {"minimum", 0}, {"maximum", 1000000}}},
            {"flags", flags},
            {"notes", {{"type", "string"}, {"maxLength", 500}}},
            {"history", {{"type", "array"}, {"items", {{"$ref", "#/$defs/event"}}}, {"maxItems", 10}}},
            {"metadata", {{"type", "object"}, {"additionalProperties", {{"type", "string"}, {"maxLength", 30}}}}}}},
          {"required", {"order_id", "status", "customer", "items", "currency", "total"}},
          {"additionalProperties", false}};
}

struct Stats {
  std::vector<double> mask_us, accept_us;
  int64_t allowed_sum = 0;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// Random walks: at every step the mask, then a random allowed token (or the end).
Stats Walk(const std::shared_ptr<const tc::CompiledGrammar>& g, int walks, int max_steps, uint64_t seed) {
  Stats st;
  std::mt19937_64 rng(seed);
  const tc::TokenVocabulary& v = g->vocab();
  std::vector<uint32_t> mask(static_cast<size_t>(v.mask_words()));
  std::vector<int32_t> allowed;
  for (int w = 0; w < walks; ++w) {
    tc::GrammarMatcher m(g);
    for (int step = 0; step < max_steps && !m.IsTerminated(); ++step) {
      auto a = Clock::now();
      m.FillMask(mask);
      st.mask_us.push_back(Us(a, Clock::now()));
      allowed.clear();
      for (int32_t id = 0; id < v.vocab_size(); ++id) {
        if ((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u) allowed.push_back(id);
      }
      st.allowed_sum += static_cast<int64_t>(allowed.size());
      if (allowed.empty() || (m.CanEnd() && rng() % 4 == 0)) break;
      const int32_t id = allowed[rng() % allowed.size()];
      a = Clock::now();
      if (!m.AcceptToken(id)) {
        std::fprintf(stderr, "a token of the mask was refused\n");
        std::exit(1);
      }
      st.accept_us.push_back(Us(a, Clock::now()));
    }
  }
  return st;
}

void Report(const char* name, const tc::Grammar& grammar, double convert_us,
            const std::shared_ptr<const tc::TokenVocabulary>& vocab, int walks) {
  auto a = Clock::now();
  auto compiled = tc::CompiledGrammar::Compile(grammar, vocab);
  const double compile_us = Us(a, Clock::now());
  if (!compiled.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, std::string(compiled.status().message()).c_str());
    std::exit(1);
  }
  const Stats cold = Walk(*compiled, 1, 2000, 1);
  const Stats warm = Walk(*compiled, walks, 2000, 2);
  // Every position, on a fresh copy (what eager precomputation would cost).
  auto fresh = tc::CompiledGrammar::Compile(grammar, vocab);
  a = Clock::now();
  const int32_t entries = (*fresh)->PrecomputeAll();
  const double precompute_us = Us(a, Clock::now());
  std::printf("| %-11s | %8.2f | %8.2f | %7d | %7d | %9.1f | %7.1f | %7.1f | %7.1f | %7.1f | %7.1f | %6.1f | %8.0f |\n", name,
              convert_us / 1e3, compile_us / 1e3, (*compiled)->automaton().num_positions(), entries, precompute_us / 1e3,
              Mean(cold.mask_us), Mean(warm.mask_us), Percentile(warm.mask_us, 0.5), Percentile(warm.mask_us, 0.99),
              Percentile(warm.mask_us, 1.0), Mean(warm.accept_us),
              warm.mask_us.empty() ? 0.0 : static_cast<double>(warm.allowed_sum) / static_cast<double>(warm.mask_us.size()));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON_OR_DIR [VOCAB=248320] [WALKS=20]\n", argv[0]);
    return 2;
  }
  const int32_t target = argc > 2 ? std::atoi(argv[2]) : 248320;
  const int walks = argc > 3 ? std::max(1, std::atoi(argv[3])) : 20;
  auto tok = sparkserve::text::Tokenizer::Load(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  const auto n = static_cast<int32_t>((*tok)->id_space_size());
  std::vector<std::string> bytes(static_cast<size_t>(std::max(n, target)));
  std::vector<int32_t> real;
  std::set<std::string> seen;
  for (int32_t id = 0; id < n; ++id) {
    if ((*tok)->IsSpecial(id)) continue;
    if (const std::string* b = (*tok)->TokenBytes(id)) {
      bytes[static_cast<size_t>(id)] = *b;
      real.push_back(id);
      seen.insert(*b);
    }
  }
  std::mt19937_64 rng(20261202);
  for (int32_t id = n; id < target;) {  // padding: two real tokens, at most 16 bytes, not already a token
    std::string t = bytes[static_cast<size_t>(real[rng() % real.size()])] + bytes[static_cast<size_t>(real[rng() % real.size()])];
    if (t.size() > 16 || !seen.insert(t).second) continue;
    bytes[static_cast<size_t>(id++)] = std::move(t);
  }
  auto a = Clock::now();
  auto vocab = tc::TokenVocabulary::Create(std::move(bytes), std::max(n, target));
  const double vocab_ms = Us(a, Clock::now()) / 1e3;
  std::printf("vocabulary: %d ids (%d from the tokenizer, %d padded), longest token %d bytes, built in %.1f ms\n\n",
              vocab->vocab_size(), n, std::max(0, target - n), vocab->max_token_bytes(), vocab_ms);
  std::printf("| grammar     | convert ms | compile ms | positions | entries | precompute all ms | cold mask us | "
              "warm mask us | p50 us | p99 us | max us | accept us | allowed |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");

  a = Clock::now();
  auto schema = tc::JsonSchemaGrammar(LargeSchema());
  const double convert_us = Us(a, Clock::now());
  if (!schema.ok()) {
    std::fprintf(stderr, "schema: %s\n", std::string(schema.status().message()).c_str());
    return 1;
  }
  Report("json_schema", *schema, convert_us, vocab, walks);
  a = Clock::now();
  tc::Grammar object = tc::JsonObjectGrammar();
  Report("json_object", object, Us(a, Clock::now()), vocab, walks);
  a = Clock::now();
  auto regex = tc::RegexGrammar("([A-Z][a-z]{2,12} ){1,4}[0-9]{3}-[0-9]{4} (ok|fail|retry)");
  Report("regex", *regex, Us(a, Clock::now()), vocab, walks);
  a = Clock::now();
  auto gbnf = tc::ParseGbnf(R"gbnf(root ::= stmt ("\n" stmt){0,9}
stmt ::= ident ws "=" ws expr ";"
expr ::= term (ws [-+*/] ws term){0,4}
term ::= ident | [0-9]{1,6} | "(" ws expr ws ")" | ident "(" ws (expr (ws "," ws expr){0,3})? ws ")"
ident ::= [a-z_] [a-z0-9_]{0,15}
ws ::= " "?
)gbnf");
  Report("gbnf", *gbnf, Us(a, Clock::now()), vocab, walks);
  return 0;
}
