// Test helpers for head/calib: temporary directories and a tiny random demo model written once.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "model/demo_model.h"

namespace sparkserve::calib::testing {

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("sparkserve_calib_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The tiny bf16 demo model (with its tokenizer and chat template) in `dir`.
inline void WriteTinyModel(const std::string& dir, uint64_t seed = 7) {
  model::DemoModelOptions o;
  o.seed = seed;
  o.progress = false;
  auto r = model::WriteDemoModel(dir, o);
  ASSERT_TRUE(r.ok()) << r.status();
}

}  // namespace sparkserve::calib::testing
