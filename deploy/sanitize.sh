#!/usr/bin/env bash
# Sanitizer runs, each in its own build dir (CPU only):
#   asan: ASan + UBSan build of the CPU unit tests and the server; runs ctest and the e2e suite
#         against that server (SPARKSERVE_BUILD_DIR).
#   tsan: TSan build of the test binaries whose code runs on several threads (HTTP server + API
#         workers, engine + mask thread + thread pool, speculative engine); runs every test of
#         those binaries (deploy/tsan.supp: third-party suppressions). Not the cluster tests: they
#         go through Debian's gRPC and absl, built without TSan, whose absl::Mutex and atomics TSan
#         cannot see, so every message crossing gRPC reports (~2,500 reports, none with our code on
#         both stacks); that needs gRPC and absl built with -fsanitize=thread.
#         ~30 min of build from an empty cache on 2 shared cores, then 6-12 min of tests.
# Ends with one line "N passed, N failed" over everything it ran.
#   deploy/sanitize.sh [asan|tsan ...] [--tests REGEX] [--no-e2e]
source "$(dirname "$0")/common.sh"
KINDS=()
TEST_REGEX=""
E2E=1
while [ $# -gt 0 ]; do
  case "$1" in
    asan|tsan) KINDS+=("$1"); shift ;;
    --tests) TEST_REGEX="$2"; shift 2 ;;
    --no-e2e) E2E=0; shift ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ ${#KINDS[@]} -gt 0 ] || KINDS=(asan tsan)
# Only the asan e2e run needs the test virtualenv (build/venv).
SETUP_ARGS=(--build-dir "$REPO_ROOT/build")
[[ " ${KINDS[*]} " == *" asan "* && "$E2E" = 1 ]] || SETUP_ARGS+=(--no-venv)
"$REPO_ROOT/deploy/setup.sh" "${SETUP_ARGS[@]}" >&2
VENV_PY="$REPO_ROOT/build/venv/bin/python"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}" CCACHE_BASEDIR="$REPO_ROOT" CCACHE_NOHASHDIR=1
JOBS="${SPARKSERVE_JOBS:-$(nproc)}"
passed=0; failed=0

configure() {  # DIR FLAGS
  cmake -S "$REPO_ROOT" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARKSERVE_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="$2 -fno-omit-frame-pointer" -DCMAKE_C_FLAGS="$2 -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="$2" -DCMAKE_SHARED_LINKER_FLAGS="$2" >&2
}

run_ctest() {  # DIR REGEX
  local args=(--test-dir "$1" --output-on-failure -j "$JOBS" --timeout 900)
  [ -n "$2" ] && args+=(-R "$2")
  set +e
  ctest "${args[@]}" 2>&1 | tee "$1/ctest.log"
  local rc=${PIPESTATUS[0]}
  set -e
  local total fails
  total=$(grep -Eo 'tests failed out of [0-9]+' "$1/ctest.log" | grep -Eo '[0-9]+$' || echo 0)
  fails=$(grep -Eo '[0-9]+ tests failed out of' "$1/ctest.log" | grep -Eo '^[0-9]+' || echo 0)
  # No test selected, or ctest itself failed: that is a failure, not "0 failed".
  if [ "$total" = 0 ] || { [ "$rc" != 0 ] && [ "$fails" = 0 ]; }; then fails=$((fails + 1)); fi
  passed=$((passed + total - fails)); failed=$((failed + fails))
}

# The binaries TSan runs, and a ctest regex naming every test suite in them (read from the binaries,
# so new suites are picked up; gtest_discover_tests names tests SUITE.NAME).
TSAN_TARGETS=(http_test engine_test spec_engine_test core_test)
tsan_regex() {  # DIR
  local suites
  suites=$(for t in "${TSAN_TARGETS[@]}"; do "$1/tests/$t" --gtest_list_tests | grep -Eo '^[A-Za-z0-9_/]+\.'; done \
             | sed 's/\.$//' | sort -u | paste -sd'|')
  [ -n "$suites" ] || die "tsan: no test suites found in ${TSAN_TARGETS[*]}"
  echo "^(${suites})\\."
}

for kind in "${KINDS[@]}"; do
  dir="$REPO_ROOT/build-$kind"
  if [ "$kind" = asan ]; then
    configure "$dir" "-fsanitize=address,undefined -fno-sanitize-recover=undefined"
    # Leaks are reported at exit (detect_leaks); UBSan findings abort the test.
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    log "asan: building"
    cmake --build "$dir" -j "$JOBS" >&2
    run_ctest "$dir" "$TEST_REGEX"
    if [ "$E2E" = 1 ]; then
      log "asan: e2e suite against the ASan+UBSan server"
      set +e
      SPARKSERVE_BUILD_DIR="$dir" "$VENV_PY" -m pytest -q -p no:cacheprovider "$REPO_ROOT/tests/e2e" \
        --junitxml="$dir/pytest.xml" 2>&1 | tee "$dir/pytest.log"
      set -e
      read -r p f < <("$VENV_PY" - "$dir/pytest.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print("0 1"); sys.exit()
suites = [root] if root.tag == "testsuite" else list(root)
t = sum(int(s.get("tests", 0)) for s in suites)
f = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
k = sum(int(s.get("skipped", 0)) for s in suites)
print(t - f - k, f)
PY
)
      passed=$((passed + p)); failed=$((failed + f))
    fi
    unset ASAN_OPTIONS UBSAN_OPTIONS
  else
    # GCC warns (-Wtsan) that Boost.Asio's atomic_thread_fence is not modelled: harmless, its
    # queues take mutexes, which TSan does see.
    configure "$dir" "-fsanitize=thread"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$REPO_ROOT/deploy/tsan.supp"
    log "tsan: building ${TSAN_TARGETS[*]}"
    cmake --build "$dir" -j "$JOBS" --target "${TSAN_TARGETS[@]}" >&2
    regex="${TEST_REGEX:-$(tsan_regex "$dir")}"
    log "tsan: ctest -R '$regex' ($(ctest --test-dir "$dir" -N -R "$regex" | grep -Eo 'Total Tests: [0-9]+'))"
    run_ctest "$dir" "$regex"
    unset TSAN_OPTIONS
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
