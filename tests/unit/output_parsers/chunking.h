// Test support: ways to cut a text into streamed pieces (whole, one code point at a time, seeded
// random byte-level cuts) and a runner that feeds pieces to a parser and collects its events.
#pragma once
#include <cstdint>
#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "text/output/output_event.h"

namespace sparkserve::text::testing {

inline std::vector<std::string> OnePiece(std::string_view text) { return {std::string(text)}; }

// One UTF-8 character per piece (a character never splits: what the detokeniser guarantees).
inline std::vector<std::string> OneCharacterPerPiece(std::string_view text) {
  std::vector<std::string> pieces;
  size_t i = 0;
  while (i < text.size()) {
    size_t n = 1;
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
    pieces.emplace_back(text.substr(i, n));
    i += n;
  }
  return pieces;
}

// Random cuts at any byte (pieces of 0..max_piece bytes; empty pieces included on purpose).
inline std::vector<std::string> RandomPieces(std::string_view text, uint32_t seed,
                                             size_t max_piece = 9) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> len(0, max_piece);
  std::vector<std::string> pieces;
  size_t i = 0;
  while (i < text.size()) {
    size_t n = std::min(len(rng), text.size() - i);
    pieces.emplace_back(text.substr(i, n));
    i += n;
  }
  return pieces;
}

// Every chunking used by the equivalence tests: whole, per character, and `random_count` seeds.
inline std::vector<std::vector<std::string>> AllChunkings(std::string_view text,
                                                          int random_count = 25) {
  std::vector<std::vector<std::string>> all = {OnePiece(text), OneCharacterPerPiece(text)};
  for (int s = 0; s < random_count; ++s) {
    all.push_back(RandomPieces(text, 1000u + static_cast<uint32_t>(s), 1 + s % 12));
  }
  return all;
}

using FeedFn = std::function<void(std::string_view, OutputEvents&)>;
using FinishFn = std::function<void(OutputEvents&)>;

inline OutputEvents RunPieces(const std::vector<std::string>& pieces, const FeedFn& feed,
                              const FinishFn& finish) {
  OutputEvents events;
  for (const std::string& p : pieces) feed(p, events);
  finish(events);
  return events;
}

// Deterministic ids "call_0", "call_1", ... per parser instance.
inline std::function<std::string()> CountingIds() {
  auto n = std::make_shared<int>(0);
  return [n] { return "call_" + std::to_string((*n)++); };
}

// Reasoning + content + raw call markup, in event order: must equal the input minus <think> tags.
inline std::string Reconstruct(const OutputEvents& events) {
  std::string out;
  for (const OutputEvent& e : events) {
    if (e.kind == OutputEventKind::kReasoningDelta || e.kind == OutputEventKind::kContentDelta ||
        e.kind == OutputEventKind::kToolCallEnd) {
      out += e.text;
    }
  }
  return out;
}

inline ParsedOutput Accumulate(const OutputEvents& events) {
  ParsedOutput p;
  p.Apply(events);
  return p;
}

}  // namespace sparkserve::text::testing
