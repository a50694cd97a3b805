// sparkserve-node: the node daemon's entry point.
#include <cstdio>

#include "CLI/CLI.hpp"
#include "core/logging.h"
#include "sparkserve/version.h"

int main(int argc, char** argv) {
  CLI::App app{"sparkserve-node: a tensor-parallel worker that receives its shard from a sparkserve head"};
  int port = 29500;
  bool version = false;
  app.add_option("--port", port, "gRPC port to listen on")->check(CLI::Range(1, 65535));
  app.add_flag("--version", version, "print version and exit");
  CLI11_PARSE(app, argc, argv);
  sparkserve::core::InitLogging();
  if (version) {
    std::printf("sparkserve-node %s (commit %s)\ncuda: %s\n", sparkserve::kVersion, sparkserve::kGitCommit,
                sparkserve::kCudaArchs);
    return 0;
  }
  return 0;
}
