// TempDir: a fresh directory under the system temp dir for one test, removed on destruction.
// Shared by every unit test that writes files (checkpoints, templates, quantizer outputs).
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace sparkserve::test_support {

class TempDir {
 public:
  // `tag` goes into the directory's name, to tell which test left it behind after a crash.
  explicit TempDir(const std::string& tag = "test") {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("sparkserve_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  // Writes `text` to `name` under the directory, creating parent folders.
  void Write(const std::string& name, const std::string& text) const {
    std::filesystem::create_directories((path_ / name).parent_path());
    std::ofstream(path_ / name, std::ios::binary) << text;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace sparkserve::test_support
