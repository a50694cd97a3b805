// A fresh temporary directory for one test, removed with everything in it at the end.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

namespace sparkserve::quant {

class TestDir {
 public:
  TestDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sparkserve_quant_XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TestDir() {
    std::error_code ec;
    if (!root_.empty()) std::filesystem::remove_all(root_, ec);
  }
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;
  // root/rel ("" gives the root itself).
  std::string path(const std::string& rel) const {
    return rel.empty() ? root_ : (std::filesystem::path(root_) / rel).string();
  }

 private:
  std::string root_;
};

}  // namespace sparkserve::quant
