// bench/bench_datasets: exact random lengths against a counter, seeding, range ratio, ShareGPT and
// prompts files, and the errors for bad options (no server: counters are local).
#include "bench/bench_datasets.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "gtest/gtest.h"

namespace sparkserve::bench {
namespace {

// Words count one token each, except "people", "number" and "water" which count two: exact
// lengths must still be reached.
class LumpyCounter : public PromptTokenCounter {
 public:
  absl::StatusOr<int> Count(const std::string& text) override {
    std::istringstream in(text);
    std::string w;
    int n = 0;
    while (in >> w) n += (w == "people" || w == "number" || w == "water") ? 2 : 1;
    ++calls;
    return n;
  }
  std::string name() const override { return "lumpy"; }
  int calls = 0;
};

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(BenchDatasetsTest, RandomPromptsHaveExactLengthsAndAreSeeded) {
  LumpyCounter counter;
  DatasetOptions o;
  o.num_prompts = 20;
  o.random_input_len = 37;
  o.random_output_len = 9;
  o.seed = 11;
  auto a = BuildDataset(o, counter);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 20u);
  for (const BenchPrompt& p : *a) {
    EXPECT_EQ(p.prompt_len, 37);
    EXPECT_EQ(*counter.Count(p.prompt), 37) << p.prompt;
    EXPECT_EQ(p.output_len, 9);
  }
  auto b = BuildDataset(o, counter);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*a)[3].prompt, (*b)[3].prompt);
  o.seed = 12;
  auto c = BuildDataset(o, counter);
  EXPECT_NE((*a)[3].prompt, (*c)[3].prompt);
}

TEST(BenchDatasetsTest, RangeRatioDrawsWithinBounds) {
  LumpyCounter counter;
  DatasetOptions o;
  o.num_prompts = 40;
  o.random_input_len = 20;
  o.random_output_len = 10;
  o.random_range_ratio = 0.5;
  auto d = BuildDataset(o, counter);
  ASSERT_TRUE(d.ok());
  std::set<int> in_lens;
  for (const BenchPrompt& p : *d) {
    EXPECT_GE(p.prompt_len, 10);
    EXPECT_LE(p.prompt_len, 30);
    EXPECT_GE(p.output_len, 5);
    EXPECT_LE(p.output_len, 15);
    in_lens.insert(p.prompt_len);
  }
  EXPECT_GT(in_lens.size(), 3u);
}

TEST(BenchDatasetsTest, PrefixIsSharedAndCounted) {
  LumpyCounter counter;
  DatasetOptions o;
  o.name = "prefix";
  o.prefix_len = 15;
  o.random_input_len = 5;
  o.num_prompts = 3;
  auto d = BuildDataset(o, counter);
  ASSERT_TRUE(d.ok()) << d.status();
  for (const BenchPrompt& p : *d) EXPECT_EQ(p.prompt_len, 20) << p.prompt;
  // First 15 counted tokens' text identical across prompts.
  auto words = [](const std::string& s, int n) {
    std::istringstream in(s);
    std::string w, out;
    for (int i = 0; i < n && in >> w; ++i) out += w + " ";
    return out;
  };
  const std::string head = words((*d)[0].prompt, 12);
  for (const BenchPrompt& p : *d) EXPECT_EQ(words(p.prompt, 12), head);
}

TEST(BenchDatasetsTest, ShareGptTakesFirstHumanAndGptTurnsAndFilters) {
  const std::string path = TempFile("sg.json", R"([
    {"conversations": [{"from": "gpt", "value": "skipped: before the human turn"},
                       {"from": "human", "value": "one two three four five"},
                       {"from": "gpt", "value": "a b c d e f"},
                       {"from": "human", "value": "later turns ignored"}]},
    {"conversations": [{"from": "human", "value": "too short"}, {"from": "gpt", "value": "a b c d"}]},
    {"conversations": [{"from": "human", "value": "only a human turn here"}]},
    {"id": "no conversations"}
  ])");
  LumpyCounter counter;
  DatasetOptions o;
  o.name = "sharegpt";
  o.path = path;
  o.num_prompts = 1;
  auto d = BuildDataset(o, counter);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].prompt, "one two three four five");
  EXPECT_EQ((*d)[0].prompt_len, 5);
  EXPECT_EQ((*d)[0].output_len, 6);
  o.num_prompts = 2;
  const auto too_few = BuildDataset(o, counter);
  ASSERT_FALSE(too_few.ok());
  EXPECT_NE(std::string(too_few.status().message()).find("only 1 usable conversations for 2 prompts"),
            std::string::npos);
  o.path = TempFile("bad.json", R"({"not": "a list"})");
  EXPECT_FALSE(BuildDataset(o, counter).ok());
}

TEST(BenchDatasetsTest, PromptsFileCyclesLines) {
  const std::string path = TempFile("p.txt", "first line\r\n\nsecond line here\n");
  LumpyCounter counter;
  DatasetOptions o;
  o.name = "prompts";
  o.path = path;
  o.num_prompts = 3;
  o.random_output_len = 7;
  auto d = BuildDataset(o, counter);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 3u);
  EXPECT_EQ((*d)[0].prompt, "first line");
  EXPECT_EQ((*d)[1].prompt, "second line here");
  EXPECT_EQ((*d)[2].prompt, "first line");
  EXPECT_EQ((*d)[1].prompt_len, 3);
  EXPECT_EQ((*d)[1].output_len, 7);
}

TEST(BenchDatasetsTest, BadOptionsAreClearErrors) {
  LumpyCounter counter;
  auto msg = [&](DatasetOptions o) {
    auto r = BuildDataset(o, counter);
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  DatasetOptions o;
  o.num_prompts = 2;
  o.random_input_len = 4;
  DatasetOptions bad = o;
  bad.name = "alpaca";
  EXPECT_NE(msg(bad).find("--dataset 'alpaca'"), std::string::npos);
  bad = o;
  bad.num_prompts = 0;
  EXPECT_NE(msg(bad).find("--num-prompts"), std::string::npos);
  bad = o;
  bad.random_range_ratio = 1.0;
  EXPECT_NE(msg(bad).find("--random-range-ratio"), std::string::npos);
  bad = o;
  bad.name = "prefix";
  EXPECT_NE(msg(bad).find("--prefix-len"), std::string::npos);
  bad = o;
  bad.name = "prompts";
  EXPECT_NE(msg(bad).find("needs --dataset-path"), std::string::npos);
  bad.path = "/nonexistent/prompts.txt";
  EXPECT_NE(msg(bad).find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace sparkserve::bench
