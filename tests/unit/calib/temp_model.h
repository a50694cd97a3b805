// Test helpers for calib: temporary directories and a tiny random demo model written once.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "head/demo/demo_model.h"
#include "tests/unit/temp_dir.h"

namespace sparkserve::calib::testing {

using test_support::TempDir;

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The tiny bf16 demo model (with its tokenizer and chat template) in `dir`.
inline void WriteTinyModel(const std::string& dir, uint64_t seed = 7) {
  head::DemoModelOptions o;
  o.seed = seed;
  o.progress = false;
  auto r = head::WriteDemoModel(dir, o);
  ASSERT_TRUE(r.ok()) << r.status();
}

}  // namespace sparkserve::calib::testing
