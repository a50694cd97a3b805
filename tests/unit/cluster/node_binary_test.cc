// Process-level test: the real sparkserve-node binary on 127.0.0.1, driven by NodeClient.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "engine/node_client.h"

extern char** environ;

namespace sparkserve::engine {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;

// A child process with its stderr captured through a pipe.
class NodeProcess {
 public:
  explicit NodeProcess(std::vector<std::string> args) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    err_fd_ = fds[0];
  }
  ~NodeProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(err_fd_);
  }
  bool started() const { return pid_ > 0; }

  // Reads stderr until `pattern` matches (returns the match's first group) or `timeout` passes.
  std::optional<std::string> WaitForStderr(const std::regex& pattern, milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      std::smatch m;
      if (std::regex_search(stderr_, m, pattern)) return m.size() > 1 ? m[1].str() : m[0].str();
      pollfd p{err_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) > 0) {
        char buf[4096];
        ssize_t n = read(err_fd_, buf, sizeof(buf));
        if (n <= 0) break;
        stderr_.append(buf, static_cast<size_t>(n));
      }
    }
    std::smatch m;
    if (std::regex_search(stderr_, m, pattern)) return m.size() > 1 ? m[1].str() : m[0].str();
    return std::nullopt;
  }

  // Sends `sig` and waits up to `timeout` for the exit; returns the exit code (-1 if none).
  int SignalAndWait(int sig, milliseconds timeout) {
    kill(pid_, sig);
    const auto end = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        WaitForStderr(std::regex("$^"), milliseconds(100));  // drain
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return -1;
  }
  const std::string& stderr_text() const { return stderr_; }

 private:
  pid_t pid_ = -1;
  int err_fd_ = -1;
  bool exited_ = false;
  std::string stderr_;
};

std::string NodeBinary() { return std::string(SPARKSERVE_BINARY_DIR) + "/bin/sparkserve-node"; }

TEST(NodeBinaryTest, ServesHelloWithTokenAndStopsOnSigterm) {
  const auto token_file = std::filesystem::path(::testing::TempDir()) / "sparkserve_node_binary_token";
  std::ofstream(token_file) << "binary-test-token\n";
  std::filesystem::permissions(token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

  NodeProcess node({NodeBinary(), "--host", "127.0.0.1", "--port", "0", "--token-file", token_file.string()});
  ASSERT_TRUE(node.started()) << NodeBinary();
  std::optional<std::string> port = node.WaitForStderr(std::regex("listening on 127\\.0\\.0\\.1:(\\d+)"), milliseconds(10000));
  ASSERT_TRUE(port.has_value()) << node.stderr_text();
  const std::string target = "127.0.0.1:" + *port;

  absl::StatusOr<std::unique_ptr<NodeClient>> ok = NodeClient::Connect(target, "binary-test-token", milliseconds(5000));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->node().build_id(), kBuildId);
  absl::StatusOr<proto::HealthResponse> health = (*ok)->Health();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->state(), proto::NODE_STATE_CONNECTED);

  absl::StatusOr<std::unique_ptr<NodeClient>> bad = NodeClient::Connect(target, "wrong", milliseconds(5000));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnauthenticated);
  // The head stays connected: the daemon still stops within its 1 s grace.

  EXPECT_EQ(node.SignalAndWait(SIGTERM, milliseconds(5000)), 0) << node.stderr_text();
  EXPECT_THAT(node.stderr_text(), HasSubstr("received SIGTERM, shutting down"));
  EXPECT_THAT(node.stderr_text(), HasSubstr("auth token mismatch"));
  std::filesystem::remove(token_file);
}

TEST(NodeBinaryTest, StopsOnSigintAndWarnsWithoutToken) {
  NodeProcess node({NodeBinary(), "--host", "127.0.0.1", "--port", "0"});
  ASSERT_TRUE(node.started());
  ASSERT_TRUE(node.WaitForStderr(std::regex("listening on 127\\.0\\.0\\.1:(\\d+)"), milliseconds(10000)).has_value())
      << node.stderr_text();
  EXPECT_TRUE(node.WaitForStderr(std::regex("no --token-file"), milliseconds(5000)).has_value()) << node.stderr_text();
  EXPECT_EQ(node.SignalAndWait(SIGINT, milliseconds(5000)), 0) << node.stderr_text();
}

TEST(NodeBinaryTest, MissingTokenFileFailsClearly) {
  NodeProcess node({NodeBinary(), "--host", "127.0.0.1", "--port", "0", "--token-file", "/nonexistent/token"});
  ASSERT_TRUE(node.started());
  std::optional<std::string> line = node.WaitForStderr(std::regex("token file /nonexistent/token[^\n]*"), milliseconds(5000));
  ASSERT_TRUE(line.has_value()) << node.stderr_text();
  EXPECT_EQ(node.SignalAndWait(0, milliseconds(5000)), 1);
}

}  // namespace
}  // namespace sparkserve::engine
