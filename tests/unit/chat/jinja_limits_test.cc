// The render limits of the Jinja engine (issue 25): a template or its data cannot make a render
// loop, grow or run without bound; each limit ends the render with an error that names it.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "text/chat/jinja/template.h"

namespace sparkserve::text::jinja {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;

TEST(JinjaLimits, HugeOutputStopsAtTheDefaultOutputLimit) {
  // 100,000 x 100,000 bytes = 10 GB without a limit.
  auto t = Template::Parse("{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}", "t");
  ASSERT_TRUE(t.ok()) << t.status();
  auto out = (*t)->Render(ordered_json::object());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("output exceeds"));
}

TEST(JinjaLimits, StringRepetitionIsBoundedByTheOutputLimit) {
  auto t = Template::Parse("{% set s = 'abcd' * 4000000000 %}{{ s | length }}", "t");
  ASSERT_TRUE(t.ok()) << t.status();
  auto out = (*t)->Render(ordered_json::object());
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("exceeds"));
}

TEST(JinjaLimits, NestedLoopsStopAtTheIterationLimit) {
  auto t = Template::Parse("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "t");
  ASSERT_TRUE(t.ok()) << t.status();
  RenderLimits limits;
  limits.max_loop_iterations = 5000;
  auto out = (*t)->Render(ordered_json::object(), limits);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("more than 5000 loop iterations"));
  // Within the limit, the same loops render.
  auto small = Template::Parse("{% for i in range(50) %}{% for j in range(50) %}.{% endfor %}{% endfor %}", "t");
  auto ok = (*small)->Render(ordered_json::object(), limits);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 2500u);
}

TEST(JinjaLimits, RenderTimeIsBounded) {
  auto t = Template::Parse(
      "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}", "t");
  ASSERT_TRUE(t.ok()) << t.status();
  RenderLimits limits;
  limits.max_render_time = std::chrono::milliseconds(50);
  auto out = (*t)->Render(ordered_json::object(), limits);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("took longer than 50 ms"));
}

TEST(JinjaLimits, OutputLimitCountsEveryByte) {
  auto t = Template::Parse("{{ data }}{{ data }}", "t");
  RenderLimits limits;
  limits.max_output_bytes = 100;
  EXPECT_TRUE((*t)->Render(ordered_json{{"data", std::string(50, 'a')}}, limits).ok());
  auto out = (*t)->Render(ordered_json{{"data", std::string(51, 'a')}}, limits);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("output exceeds 100 bytes"));
}

}  // namespace
}  // namespace sparkserve::text::jinja
