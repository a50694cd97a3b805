// `sparkserve --version`: version, git commit and the CUDA architectures compiled in.
#include <cstdio>

#include "head/cli/commands.h"
#include "sparkserve/version.h"

namespace sparkserve::head {

void PrintVersion() {
  std::printf("sparkserve %s (commit %s)\ncuda: %s\n", kVersion, kGitCommit, kCudaArchs);
}

}  // namespace sparkserve::head
