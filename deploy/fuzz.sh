#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan in their own build dir and
# runs each for a fixed time on its committed corpus. New coverage goes to a scratch folder (emptied
# at each run); a crash fails the run and leaves its input in DIR/crashes/: commit it under
# tests/fuzz/regressions/TARGET/ (ctest replays those in every build) together with the fix. --unit-tests also builds the unit
# tests of the code the targets cover (tokenizer, chat templates, output parsers, constraints) in
# the same ASan + UBSan build and runs them first. --runs caps the inputs a target runs and --seed
# fixes libFuzzer's random seed: together they make a run repeatable (CI's). Ends with
# "fuzz: N passed, N failed".
#   deploy/fuzz.sh [--build-dir DIR] [--seconds N] [--runs N] [--seed N] [--unit-tests] [TARGET...]
source "$(dirname "$0")/common.sh"
BUILD_DIR="$REPO_ROOT/build-fuzz"
SECONDS_EACH=20
RUNS=-1
SEED=0
UNIT_TESTS=0
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$(realpath -m "$2")"; shift 2 ;;
    --seconds) SECONDS_EACH="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    --unit-tests) UNIT_TESTS=1; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) die "unknown argument '$1' (see --help)" ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(http_request_fuzz jinja_template_fuzz tokenizer_fuzz output_parser_fuzz config_json_fuzz safetensors_header_fuzz
                                      gguf_header_fuzz)
command -v clang++ >/dev/null || die "clang++ not found (deploy/setup.sh installs it)"

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}" CCACHE_BASEDIR="$REPO_ROOT" CCACHE_NOHASHDIR=1
cmake -S "$REPO_ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DSPARKSERVE_CUDA=OFF -DSPARKSERVE_FUZZ=ON >&2
UNIT_TARGETS=(tokenizer_test jinja_engine_test output_parsers_test constraint_test)
build_targets=("${TARGETS[@]}")
[ "$UNIT_TESTS" = 1 ] && build_targets+=("${UNIT_TARGETS[@]}")
cmake --build "$BUILD_DIR" -j "${SPARKSERVE_JOBS:-$(nproc)}" --target "${build_targets[@]}" >&2

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
passed=0
failed=()
if [ "$UNIT_TESTS" = 1 ]; then
  for t in "${UNIT_TARGETS[@]}"; do
    log "unit tests under ASan + UBSan: $t"
    # Run from the source root as ctest does (tests read fixtures by relative path).
    if (cd "$REPO_ROOT" && "$BUILD_DIR/tests/$t" --gtest_brief=1 > "$BUILD_DIR/$t.log" 2>&1); then
      passed=$((passed + 1))
      grep -E "^\[  PASSED  \]" "$BUILD_DIR/$t.log" >&2 || true
    else
      tail -60 "$BUILD_DIR/$t.log" >&2
      failed+=("$t")
    fi
  done
fi

mkdir -p "$BUILD_DIR/crashes"
for t in "${TARGETS[@]}"; do
  corpus="$REPO_ROOT/tests/fuzz/corpus/${t%_fuzz}"
  [ -d "$corpus" ] || corpus="$REPO_ROOT/tests/fuzz/corpus/$t"
  scratch="$BUILD_DIR/new-corpus/$t"
  rm -rf "$scratch"  # each run starts from the committed corpus alone (repeatable with --seed)
  mkdir -p "$scratch"
  dict=()
  [ -f "$REPO_ROOT/tests/fuzz/${t%_fuzz}.dict" ] && dict=(-dict="$REPO_ROOT/tests/fuzz/${t%_fuzz}.dict")
  log "fuzzing $t for ${SECONDS_EACH}s$([ "$RUNS" -ge 0 ] && echo " or $RUNS inputs")"
  if ! "$BUILD_DIR/tests/fuzz/$t" "${dict[@]}" -max_total_time="$SECONDS_EACH" -runs="$RUNS" -seed="$SEED" -timeout=25 -rss_limit_mb=3072 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$BUILD_DIR/crashes/$t-" "$scratch" "$corpus" \
      > "$BUILD_DIR/$t.log" 2>&1; then
    tail -40 "$BUILD_DIR/$t.log" >&2
    failed+=("$t")
  else
    passed=$((passed + 1))
    grep -E "^stat::number_of_executed_units|^Done" "$BUILD_DIR/$t.log" | tr '\n' ' ' >&2; echo >&2
  fi
done
echo "fuzz: $passed passed, ${#failed[@]} failed"
if [ ${#failed[@]} -gt 0 ]; then
  die "failed: ${failed[*]} (fuzz crash inputs in $BUILD_DIR/crashes/; commit them under tests/fuzz/regressions/TARGET/)"
fi
log "fuzzed ${#TARGETS[@]} targets for ${SECONDS_EACH}s each: no crash"
