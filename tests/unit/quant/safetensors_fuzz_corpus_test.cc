// Replays the committed libFuzzer corpus (tests/fuzz/corpus/safetensors_header) through the header
// parser in the normal build: every input must give an error or a consistent header, never a crash.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "gtest/gtest.h"
#include "quant/safetensors_reader.h"
#include "tests/fuzz/safetensors_header_check.h"

namespace sparkserve::quant {
namespace {

TEST(SafetensorsFuzzCorpus, EveryInputParsesOrFailsCleanly) {
  const std::filesystem::path dir = std::filesystem::path(SPARKSERVE_SOURCE_DIR) / "tests/fuzz/corpus/safetensors_header";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int total = 0, accepted = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto h = ParseSafetensorsHeader(bytes, entry.path().filename().string());
    ++total;
    if (h.ok()) {
      ++accepted;
      EXPECT_EQ(CheckHeaderInvariants(*h, bytes.size()), "") << entry.path();
    } else {
      EXPECT_FALSE(h.status().message().empty()) << entry.path();
      EXPECT_NE(std::string(h.status().message()).find(entry.path().filename().string()), std::string::npos)
          << "error does not name the file: " << h.status();
    }
  }
  EXPECT_GE(total, 100) << "the corpus has shrunk";
  EXPECT_GT(accepted, 0) << "the corpus holds no valid header";
}

}  // namespace
}  // namespace sparkserve::quant
