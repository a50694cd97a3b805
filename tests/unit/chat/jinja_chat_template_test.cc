// ChatTemplate: where templates come from (tokenizer_config.json string or named list,
// chat_template.jinja winning, additional_chat_templates/), which one is picked, the variables a
// render sees, continue_final_message, and the real Qwen3 / Qwen3.5 templates loading.
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "text/chat/chat_template.h"
#include "tests/unit/temp_dir.h"

namespace sparkserve::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using ::testing::HasSubstr;

const ordered_json kUserHi = ordered_json::array({{{"role", "user"}, {"content", "hi"}}});

fs::path Fixtures() { return fs::path(SPARKSERVE_SOURCE_DIR) / ".." / "shared" / "fixtures"; }

using test_support::TempDir;

TEST(JinjaChatTemplate, StringTemplateSeesSpecialTokensAndDefaults) {
  ordered_json config = {
      {"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}}},
      {"eos_token", "</s>"},
      {"unk_token", nullptr},
      {"chat_template",
       "{{ bos_token }}|{{ eos_token }}|{{ unk_token is defined }}|{{ tools }}|{{ documents }}|"
       "{{ add_generation_prompt }}|{{ enable_thinking is defined }}"},
  };
  auto t = ChatTemplate::FromConfig(config, {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render(kUserHi, ordered_json::object()), "<s>|</s>|False|None|None|False|False");
  EXPECT_EQ(*t->Render(kUserHi, {{"add_generation_prompt", true}, {"enable_thinking", false}, {"eos_token", "E"}}),
            "<s>|E|False|None|None|True|True");
}

TEST(JinjaChatTemplate, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  ordered_json config = {{"chat_template", ordered_json::array({{{"name", "default"}, {"template", "D"}},
                                                                {{"name", "tool_use"}, {"template", "T"}},
                                                                {{"name", "rag"}, {"template", "R"}}})}};
  auto t = ChatTemplate::FromConfig(config, {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render(kUserHi, ordered_json::object()), "D");
  EXPECT_EQ(*t->Render(kUserHi, {{"tools", ordered_json::array()}}), "T");
  EXPECT_EQ(*t->Render(kUserHi, {{"tools", nullptr}}), "D");
  ChatRenderOptions rag;
  rag.template_name = "rag";
  EXPECT_EQ(*t->Render(kUserHi, ordered_json::object(), rag), "R");
  ChatRenderOptions missing;
  missing.template_name = "nope";
  auto bad = t->Render(kUserHi, ordered_json::object(), missing);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("available: default, rag, tool_use"));
}

TEST(JinjaChatTemplate, NamedTemplatesWithoutDefaultNeedAName) {
  ordered_json config = {{"chat_template", ordered_json::array({{{"name", "a"}, {"template", "A"}}})}};
  auto t = ChatTemplate::FromConfig(config, {});
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->Render(kUserHi, ordered_json::object()).ok());
}

TEST(JinjaChatTemplate, BadConfigsAreClearErrors) {
  EXPECT_EQ(ChatTemplate::FromConfig({{"eos_token", "x"}}, {}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(ChatTemplate::FromConfig({{"chat_template", 3}}, {}).ok());
  EXPECT_FALSE(ChatTemplate::FromConfig({{"chat_template", ordered_json::array({{{"name", "x"}}})}}, {}).ok());
  auto syntax = ChatTemplate::FromConfig({{"chat_template", "{% if %}"}}, {});
  ASSERT_FALSE(syntax.ok());
  EXPECT_THAT(std::string(syntax.status().message()), HasSubstr("chat_template[default]:1:"));
}

TEST(JinjaChatTemplate, ChatTemplateJinjaWinsOverTokenizerConfig) {
  TempDir dir;
  dir.Write("tokenizer_config.json", R"({"chat_template": "from config", "eos_token": "<e>"})");
  auto from_config = ChatTemplate::Load(dir.path());
  ASSERT_TRUE(from_config.ok()) << from_config.status();
  EXPECT_EQ(*from_config->Render(kUserHi, ordered_json::object()), "from config");
  dir.Write("chat_template.jinja", "from file {{ eos_token }}\n");
  auto from_file = ChatTemplate::Load(dir.path());
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(*from_file->Render(kUserHi, ordered_json::object()), "from file <e>");
  dir.Write("additional_chat_templates/tool_use.jinja", "tools!");
  auto with_extra = ChatTemplate::Load(dir.path());
  ASSERT_TRUE(with_extra.ok()) << with_extra.status();
  EXPECT_EQ(with_extra->names(), (std::vector<std::string>{"default", "tool_use"}));
  EXPECT_EQ(*with_extra->Render(kUserHi, {{"tools", ordered_json::array()}}), "tools!");
}

TEST(JinjaChatTemplate, MissingDirectoryIsNotFound) {
  auto t = ChatTemplate::Load("/nonexistent/model");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("/nonexistent/model"));
}

TEST(JinjaChatTemplate, ContinueFinalMessageStopsInsideTheLastTurn) {
  auto t = ChatTemplate::FromConfig(
      {{"chat_template", "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"}}, {});
  ASSERT_TRUE(t.ok());
  ChatRenderOptions cont;
  cont.continue_final_message = true;
  ordered_json msgs = kUserHi;
  msgs.push_back({{"role", "assistant"}, {"content", "Hello"}});
  EXPECT_EQ(*t->Render(msgs, ordered_json::object(), cont), "<user>hi</user><assistant>Hello");
  msgs.back()["content"] = "Hello ";
  EXPECT_EQ(*t->Render(msgs, ordered_json::object(), cont), "<user>hi</user><assistant>Hello ");
  msgs.back()["content"] = ordered_json::array({{{"type", "text"}, {"text", "Par"}}, {{"type", "image"}}});
  // Content parts: the tag follows the last text part (this template prints the list's repr).
  EXPECT_EQ(*t->Render(msgs, ordered_json::object(), cont), "<user>hi</user><assistant>[{'type': 'text', 'text': 'Par");
  EXPECT_FALSE(t->Render(msgs, {{"add_generation_prompt", true}}, cont).ok());
  msgs.back()["content"] = ordered_json::array({{{"type", "image"}}});
  EXPECT_FALSE(t->Render(msgs, ordered_json::object(), cont).ok());  // no text to continue
  auto dropping = ChatTemplate::FromConfig({{"chat_template", "{% for m in messages %}{{ m.role }}{% endfor %}"}}, {});
  ASSERT_TRUE(dropping.ok());
  msgs.back()["content"] = "Hello";
  EXPECT_FALSE(dropping->Render(msgs, ordered_json::object(), cont).ok());  // the template drops the message
}

TEST(JinjaChatTemplate, Qwen3FixtureRendersAGenerationPrompt) {
  auto t = ChatTemplate::Load(Fixtures() / "qwen3-tokenizer");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render(kUserHi, {{"add_generation_prompt", true}}), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(*t->Render(kUserHi, {{"add_generation_prompt", true}, {"enable_thinking", false}}),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(JinjaChatTemplate, Qwen35RaiseExceptionIsABadRequest) {
  TempDir dir;
  std::ifstream in(Fixtures() / "qwen3_5-chat_template.jinja", std::ios::binary);
  ASSERT_TRUE(in.good());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  dir.Write("chat_template.jinja", text);
  auto t = ChatTemplate::Load(dir.path());
  ASSERT_TRUE(t.ok()) << t.status();
  auto out = t->Render(ordered_json::array(), ordered_json::object());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(jinja::RaisedMessage(out.status()).has_value());
  EXPECT_EQ(*jinja::RaisedMessage(out.status()), "No messages provided.");
  EXPECT_EQ(*t->Render(kUserHi, {{"add_generation_prompt", true}}),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n");
}

}  // namespace
}  // namespace sparkserve::text
