// Calibration corpus: plain-text and JSONL files, chat rendering through the model's template,
// the per-sample token cut, random ids with a warning when there is no tokenizer, and clear errors.
#include <filesystem>
#include <set>

#include "gtest/gtest.h"
#include "calib/calibration_corpus.h"
#include "text/chat/chat_template.h"
#include "text/tokenizer/tokenizer.h"
#include "tests/unit/calib/temp_model.h"

namespace sparkserve::calib {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST(CalibrationFile, PlainTextIsOneSamplePerParagraph) {
  TempDir tmp;
  WriteFile(tmp / "c.txt", "\n\nFirst paragraph,\nsecond line.\r\n\r\n  \nSecond one.\n\n\n\nThird.");
  auto t = LoadCalibrationFile(tmp / "c.txt");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0].text, "First paragraph,\nsecond line.");
  EXPECT_EQ((*t)[1].text, "Second one.");
  EXPECT_EQ((*t)[2].text, "Third.");
  EXPECT_FALSE((*t)[0].is_chat());
}

TEST(CalibrationFile, JsonlIsOneChatPerLine) {
  TempDir tmp;
  WriteFile(tmp / "c.jsonl",
            "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": "
            "\"hello\"}]}\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"bye\"}], \"id\": 2}\n");
  auto t = LoadCalibrationFile(tmp / "c.jsonl");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_TRUE((*t)[0].is_chat());
  EXPECT_EQ((*t)[0].messages.size(), 2u);
  EXPECT_EQ((*t)[1].messages[0]["content"], "bye");
}

TEST(CalibrationFile, BadFilesGiveClearErrors) {
  TempDir tmp;
  EXPECT_NE(std::string(LoadCalibrationFile(tmp / "missing.txt").status().message()).find("cannot open"),
            std::string::npos);
  WriteFile(tmp / "empty.txt", "\n  \n");
  EXPECT_NE(std::string(LoadCalibrationFile(tmp / "empty.txt").status().message()).find("empty"), std::string::npos);
  WriteFile(tmp / "bad.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\n{\"messages\": [\n");
  auto bad = LoadCalibrationFile(tmp / "bad.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("bad.jsonl:2:"), std::string::npos) << bad.status();
  WriteFile(tmp / "nomsg.jsonl", "{\"text\": \"a\"}\n");
  auto nomsg = LoadCalibrationFile(tmp / "nomsg.jsonl");
  ASSERT_FALSE(nomsg.ok());
  EXPECT_NE(std::string(nomsg.status().message()).find("messages"), std::string::npos);
}

TEST(CalibrationCorpus, BuiltInMixesProseCodeAndChats) {
  const auto t = BuiltInCalibrationTexts();
  EXPECT_GE(t.size(), 10u);  // enough for the default 8 calibration + 2 held-out samples
  int chats = 0;
  bool code = false, cjk = false;
  for (const auto& x : t) {
    chats += x.is_chat();
    code |= x.text.find("def ") != std::string::npos || x.text.find("#include") != std::string::npos;
    cjk |= x.text.find("\xe7\x9a\x84") != std::string::npos;  // 的
  }
  EXPECT_GE(chats, 1);
  EXPECT_TRUE(code);
  EXPECT_TRUE(cjk);
}

TEST(CalibrationTokenize, ChatsAreRenderedWithTheTemplateAndSamplesAreCut) {
  TempDir tmp;
  testing::WriteTinyModel(tmp / "m");
  std::vector<CalibrationText> texts = {{"plain text sample, long enough to be cut somewhere", nullptr},
                                        {"", nlohmann::ordered_json::parse(
                                                 R"([{"role": "user", "content": "What is 2 + 2?"}])")}};
  TokenizeOptions o;
  o.max_tokens = 1000;
  auto full = TokenizeCalibrationTexts(tmp / "m", texts, o);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_FALSE(full->random_ids);
  EXPECT_TRUE(full->warnings.empty());
  ASSERT_EQ(full->samples.size(), 2u);
  auto tok = text::Tokenizer::Load(tmp / "m");
  auto tmpl = text::ChatTemplate::Load(tmp / "m");
  ASSERT_TRUE(tok.ok() && tmpl.ok());
  auto rendered = tmpl->Render(texts[1].messages, nlohmann::ordered_json::object());
  ASSERT_TRUE(rendered.ok());
  EXPECT_NE(rendered->find("<|im_start|>user"), std::string::npos);
  auto want = (*tok)->Encode(*rendered, false);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(full->samples[1], std::vector<int32_t>(want->begin(), want->end()));
  auto plain = (*tok)->Encode(texts[0].text, false);
  EXPECT_EQ(full->samples[0], std::vector<int32_t>(plain->begin(), plain->end()));
  o.max_tokens = 5;
  auto cut = TokenizeCalibrationTexts(tmp / "m", texts, o);
  ASSERT_TRUE(cut.ok());
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(cut->samples[i].size(), 5u);
    EXPECT_TRUE(std::equal(cut->samples[i].begin(), cut->samples[i].end(), full->samples[i].begin()));
  }
}

TEST(CalibrationTokenize, NoTokenizerMeansRandomIdsAndAWarning) {
  TempDir tmp;
  testing::WriteTinyModel(tmp / "m");
  std::filesystem::remove(tmp / "m/tokenizer.json");
  TokenizeOptions o;
  o.vocab_size = 512;
  o.random_tokens = 40;
  auto r = TokenizeCalibrationTexts(tmp / "m", BuiltInCalibrationTexts(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->random_ids);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("random token ids"), std::string::npos);
  EXPECT_EQ(r->samples.size(), BuiltInCalibrationTexts().size());
  std::set<int32_t> distinct;
  for (const auto& s : r->samples) {
    EXPECT_EQ(s.size(), 40u);
    for (int32_t id : s) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, 512);
      distinct.insert(id);
    }
  }
  EXPECT_GT(distinct.size(), 100u);
}

}  // namespace
}  // namespace sparkserve::calib
