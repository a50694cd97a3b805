// Tests for proto/auth_token: token files and constant-time comparison.
#include "proto/auth_token.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sparkserve::proto {
namespace {

using ::testing::HasSubstr;

std::filesystem::path WriteTemp(const std::string& name, const std::string& text) {
  auto p = std::filesystem::path(::testing::TempDir()) / name;
  std::ofstream(p, std::ios::binary) << text;
  std::filesystem::permissions(p, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return p;
}

TEST(AuthTokenTest, TokenFileIsTrimmed) {
  auto p = WriteTemp("sparkserve_token_trim", "  s3cret-token\r\n\n");
  absl::StatusOr<std::string> t = ReadTokenFile(p);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "s3cret-token");
  std::filesystem::remove(p);
}

TEST(AuthTokenTest, InnerWhitespaceIsKept) {
  auto p = WriteTemp("sparkserve_token_inner", "a b\tc\n");
  absl::StatusOr<std::string> t = ReadTokenFile(p);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "a b\tc");
  std::filesystem::remove(p);
}

TEST(AuthTokenTest, EmptyTokenFileIsAnError) {
  auto p = WriteTemp("sparkserve_token_empty", " \n\t\r\n");
  absl::StatusOr<std::string> t = ReadTokenFile(p);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(p.string()));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("empty"));
  std::filesystem::remove(p);
}

TEST(AuthTokenTest, MissingTokenFileIsNotFound) {
  absl::StatusOr<std::string> t = ReadTokenFile("/nonexistent/sparkserve/token");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("/nonexistent/sparkserve/token"));
}

TEST(AuthTokenTest, TokensEqual) {
  EXPECT_TRUE(TokensEqual("abc", "abc"));
  EXPECT_TRUE(TokensEqual("", ""));
  EXPECT_FALSE(TokensEqual("abc", "abd"));
  EXPECT_FALSE(TokensEqual("abc", "ab"));
  EXPECT_FALSE(TokensEqual("ab", "abc"));
  EXPECT_FALSE(TokensEqual("", "a"));
  EXPECT_FALSE(TokensEqual("abc", std::string_view("abc\0", 4)));
  EXPECT_FALSE(TokensEqual("Abc", "abc"));
}

}  // namespace
}  // namespace sparkserve::proto
