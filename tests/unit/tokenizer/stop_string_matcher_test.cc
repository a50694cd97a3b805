// StopStringMatcher: stops across piece boundaries, holds back possible starts, same result for any
// split of the text as for the whole text.
#include "text/tokenizer/stop_string_matcher.h"

#include <gtest/gtest.h>

#include <random>

namespace sparkserve::text {
namespace {

struct StreamResult {
  std::vector<std::string> outputs;
  std::optional<size_t> stop;
  std::string text;  // everything emitted, Finish() included
};

StreamResult Feed(StopStringMatcher m, const std::vector<std::string>& pieces) {
  StreamResult r;
  for (const auto& p : pieces) {
    auto out = m.Push(p);
    r.outputs.push_back(out.text);
    r.text += out.text;
    if (out.stop_index) {
      EXPECT_FALSE(r.stop.has_value()) << "stop reported twice";
      r.stop = out.stop_index;
    }
  }
  r.text += m.Finish();
  return r;
}

StopStringMatcher Make(std::vector<std::string> stops, bool include = false) {
  auto m = StopStringMatcher::Create(std::move(stops), include);
  EXPECT_TRUE(m.ok());
  return *m;
}

TEST(StopStringMatcher, StopAcrossPiecesIsWithheld) {
  const StreamResult r = Feed(Make({"END"}), {"ab", "cE", "N", "Dxyz", "more"});
  EXPECT_EQ(r.outputs, (std::vector<std::string>{"ab", "c", "", "", ""}));
  EXPECT_EQ(r.stop, 0u);
  EXPECT_EQ(r.text, "abc");
}

TEST(StopStringMatcher, IncludeStop) {
  const StreamResult r = Feed(Make({"END"}, true), {"abcE", "NDx"});
  EXPECT_EQ(r.text, "abcEND");
  EXPECT_EQ(r.stop, 0u);
}

TEST(StopStringMatcher, FalseStartIsReleased) {
  const StreamResult r = Feed(Make({"END"}), {"aE", "N", "X", "E"});
  EXPECT_EQ(r.outputs, (std::vector<std::string>{"a", "", "ENX", ""}));
  EXPECT_FALSE(r.stop.has_value());
  EXPECT_EQ(r.text, "aENXE");  // Finish releases the held "E"
}

TEST(StopStringMatcher, FirstCompletedStopWins) {
  // "bc" completes before "abcd" could: it wins although "abcd" starts earlier.
  StreamResult r = Feed(Make({"abcd", "bc"}), {"ab", "cd"});
  EXPECT_EQ(r.stop, 1u);
  EXPECT_EQ(r.text, "a");
  // Same end: the longer one.
  r = Feed(Make({"cd", "abcd"}), {"abcd"});
  EXPECT_EQ(r.stop, 1u);
  EXPECT_EQ(r.text, "");
}

TEST(StopStringMatcher, MultibyteStops) {
  const StreamResult r = Feed(Make({"\xE3\x80\x82"}), {"\xE4\xB8\xAD", "\xE6\x96\x87\xE3\x80\x82", "x"});
  EXPECT_EQ(r.text, "\xE4\xB8\xAD\xE6\x96\x87");
  EXPECT_EQ(r.stop, 0u);
}

TEST(StopStringMatcher, NoStopsPassThroughAndEmptyStopIsAnError) {
  const StreamResult r = Feed(Make({}), {"a", "b"});
  EXPECT_EQ(r.outputs, (std::vector<std::string>{"a", "b"}));
  auto bad = StopStringMatcher::Create({"ok", ""});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

// Reference on the whole text: the first stop completed scanning left to right (longest on a tie).
StreamResult Reference(const std::vector<std::string>& stops, const std::string& text, bool include) {
  StreamResult r;
  for (size_t end = 1; end <= text.size(); ++end) {
    std::optional<size_t> best;
    for (size_t i = 0; i < stops.size(); ++i) {
      if (stops[i].size() <= end && text.compare(end - stops[i].size(), stops[i].size(), stops[i]) == 0 &&
          (!best || stops[i].size() > stops[*best].size())) {
        best = i;
      }
    }
    if (best) {
      r.stop = best;
      r.text = text.substr(0, include ? end : end - stops[*best].size());
      return r;
    }
  }
  r.text = text;
  return r;
}

TEST(StopStringMatcher, AnySplitGivesTheWholeTextResult) {
  std::mt19937 rng(3);
  auto random_string = [&](size_t max_len) {
    std::string s;
    const size_t n = 1 + rng() % max_len;
    for (size_t i = 0; i < n; ++i) s.push_back("abcab"[rng() % 5]);
    return s;
  };
  for (int iter = 0; iter < 5000; ++iter) {
    std::vector<std::string> stops;
    const size_t nstops = rng() % 4;
    for (size_t i = 0; i < nstops; ++i) stops.push_back(random_string(5));
    const std::string text = random_string(30);
    const bool include = rng() % 2;
    std::vector<std::string> pieces;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = rng() % 5;  // empty pieces too
      pieces.push_back(text.substr(pos, len));
      pos += len;
    }
    const StreamResult got = Feed(Make(stops, include), pieces);
    const StreamResult want = Reference(stops, text, include);
    ASSERT_EQ(got.stop, want.stop) << text;
    ASSERT_EQ(got.text, want.text) << text;
  }
}

// After every push, exactly the longest suffix that may still start a stop is held back (what
// streaming clients see does not lag more than it must), with one set shared by many matchers.
TEST(StopStringMatcher, SharedSetHoldsBackOnlyTheLongestPossibleStart) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<std::string> stops;
    for (size_t i = 0, n = 1 + rng() % 6; i < n; ++i) {
      std::string s;
      for (size_t k = 0, len = 1 + rng() % 6; k < len; ++k) s.push_back("abc"[rng() % 3]);
      stops.push_back(s);
    }
    auto set = StopStringSet::Create(stops);
    ASSERT_TRUE(set.ok());
    for (int sample = 0; sample < 4; ++sample) {
      StopStringMatcher m(*set);
      std::string text, emitted;
      for (int step = 0; step < 20 && !m.stopped(); ++step) {
        std::string piece;
        for (size_t k = 0, len = rng() % 4; k < len; ++k) piece.push_back("abcd"[rng() % 4]);
        text += piece;
        auto out = m.Push(piece);
        emitted += out.text;
        if (out.stop_index) {
          EXPECT_EQ(emitted, Reference(stops, text, false).text);
          break;
        }
        size_t hold = 0;
        for (size_t len = 1; len <= text.size(); ++len) {
          for (const auto& s : stops) {
            if (s.size() > len && text.compare(text.size() - len, len, s, 0, len) == 0) hold = len;
          }
        }
        ASSERT_EQ(emitted, text.substr(0, text.size() - hold)) << "stops " << stops.size() << " text " << text;
      }
    }
  }
}

TEST(StopStringMatcher, ManyLongStopsOnALongText) {
  // 16 stops of 256 bytes sharing long prefixes with the text: near misses everywhere.
  std::vector<std::string> stops;
  for (int i = 0; i < 16; ++i) stops.push_back(std::string(255, 'a') + static_cast<char>('b' + i));
  auto m = StopStringMatcher::Create(stops);
  ASSERT_TRUE(m.ok());
  std::string text(200000, 'a');
  text += "z";  // the stops end in b..q: no match
  std::string emitted;
  for (size_t pos = 0; pos < text.size(); pos += 3) emitted += m->Push(text.substr(pos, 3)).text;
  emitted += m->Finish();
  EXPECT_EQ(emitted, text);
  auto m2 = StopStringMatcher::Create(stops);
  auto out = m2->Push(std::string(300, 'a') + "e" + "tail");
  EXPECT_EQ(out.stop_index, 3u);
  EXPECT_EQ(out.text, std::string(45, 'a'));
}

}  // namespace
}  // namespace sparkserve::text
