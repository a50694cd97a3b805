// sparkserve-node: the node daemon's entry point. Serves NodeService until SIGINT/SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "CLI/CLI.hpp"
#include "core/logging.h"
#include "node/node_server.h"
#include "proto/auth_token.h"
#include "sparkserve/version.h"

namespace {

std::filesystem::path DefaultCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "sparkserve";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "sparkserve";
  return std::filesystem::temp_directory_path() / "sparkserve-cache";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sparkserve-node: a tensor-parallel worker that receives its shard from a sparkserve head"};
  int port = 29500;
  std::string host;
  std::string token_file;
  std::string tls_cert, tls_key;
  int device = 0;
  std::string cache_dir;
  std::string log_level;
  bool version = false;
  app.add_option("--port", port, "gRPC port to listen on (0: pick a free one and log it)")->check(CLI::Range(0, 65535));
  app.add_option("--host", host,
                 "address to listen on (default: 0.0.0.0 with --token-file, else 127.0.0.1 only, with a warning: "
                 "a node without a token is never reachable from other machines unless you pass --host)");
  app.add_option("--token-file", token_file,
                 "file holding the shared auth token; a head must prove it has the same token (HMAC challenge: the "
                 "token never crosses the wire). The token is the only protection: run on a private link");
  app.add_option("--device", device, "CUDA device this node computes on (default 0)")->check(CLI::NonNegativeNumber);
  app.add_option("--tls-cert", tls_cert, "serve over TLS with this PEM certificate (with --tls-key; heads pass --tls-ca)");
  app.add_option("--tls-key", tls_key, "the PEM private key of --tls-cert");
  app.add_option("--cache-dir", cache_dir, "shard cache directory (default $XDG_CACHE_HOME/sparkserve or ~/.cache/sparkserve)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off (default info, or $SPARKSERVE_LOG_LEVEL)");
  app.add_flag("--version", version, "print version and exit");
  CLI11_PARSE(app, argc, argv);
  sparkserve::core::InitLogging(log_level);
  if (version) {
    std::printf("sparkserve-node %s (commit %s)\ncuda: %s\n", sparkserve::kVersion, sparkserve::kGitCommit,
                sparkserve::kCudaArchs);
    return 0;
  }

  sparkserve::node::NodeOptions options;
  options.port = port;
  options.device = device;
  options.tls_cert_file = tls_cert;
  options.tls_key_file = tls_key;
  options.cache_dir = cache_dir.empty() ? DefaultCacheDir() : std::filesystem::path(cache_dir);
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = sparkserve::proto::ReadTokenFile(token_file);
    if (!token.ok()) {
      spdlog::error("{}", std::string(token.status().message()));
      return 1;
    }
    options.token = *std::move(token);
  }
  options.host = !host.empty() ? host : options.token ? "0.0.0.0" : "127.0.0.1";
  if (!options.token && host.empty()) {
    spdlog::warn("no --token-file: listening on 127.0.0.1 only (heads on other machines cannot reach it); give a "
                 "--token-file to listen on every address, or --host to choose one");
  }

  // Signals are taken by sigwait below; block them before gRPC starts its threads (they inherit it).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const bool has_token = options.token.has_value();
  absl::StatusOr<std::unique_ptr<sparkserve::node::NodeServer>> server =
      sparkserve::node::NodeServer::Start(std::move(options));
  if (!server.ok()) {
    spdlog::error("{}", std::string(server.status().message()));
    return 1;
  }
  spdlog::info("sparkserve-node {} listening on {} (build {}, cache {}, device {}{})", sparkserve::kVersion,
               (*server)->address(), sparkserve::kBuildId, (*server)->service().options().cache_dir.string(), device,
               tls_cert.empty() ? "" : ", TLS");
  if (!has_token)
    spdlog::warn("no --token-file: any head that can reach this port may connect (use a token off trusted networks)");
  (*server)->service().set_exit_callback([] { kill(getpid(), SIGTERM); });

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  // Calls still running (a head's open connection, a shard stream) are cut after 1 s.
  (*server)->Shutdown(std::chrono::milliseconds(1000));
  (*server)->Wait();
  spdlog::info("stopped");
  return 0;
}
