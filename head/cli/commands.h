// The sparkserve subcommands: each Add*Command registers one on the app and returns the exit code
// through `*exit_code` when it runs. One file per command under head/cli/.
#pragma once
#include "CLI/CLI.hpp"

namespace sparkserve::head {

// Prints "sparkserve VERSION (commit C)\ncuda: sm_90a ..." to stdout.
void PrintVersion();

}  // namespace sparkserve::head
