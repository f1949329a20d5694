#!/usr/bin/env bash
# Installs what is missing, builds gatewayd three times (RelWithDebInfo in build/, ASan+UBSan Debug
# in build-asan/, ThreadSanitizer in build-tsan/) and runs every test in each (see run_tsan for
# the third). Exits non-zero on any failure; the last line is a one-line summary. Run as root from
# any directory.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
# shellcheck source=scripts/deps.sh
source scripts/deps.sh

JOBS=$(nproc)
START=$SECONDS
STAGE="install dependencies"
FAILED=()

# Stops background job $1 (nothing if empty) and the processes it started; adds "$2 (stopped
# unfinished; $3)" to the caller's `problems`.
stop_unfinished() {
  [[ -n "$1" ]] || return 0
  pkill -TERM -P "$1" 2>/dev/null || true
  kill "$1" 2>/dev/null || true
  problems+=("$2 (stopped unfinished; $3)")
}

summary() {
  local rc=$?
  local took=$((SECONDS - START))
  local problems=("${FAILED[@]}")
  # A stage failed while the release tests or the lint ran in the background: stop them (with
  # the programs they started) and say they did not finish.
  stop_unfinished "${RELEASE_TESTS:-}" "release tests" build/ctest.log
  stop_unfinished "${LINT:-}" "openapi lint" build/lint.log
  if ((rc != 0)) && [[ "$STAGE" != "final" ]]; then
    problems+=("stage '${STAGE}' (exit ${rc})")
  fi
  if ((${#problems[@]} == 0)); then
    echo "test.sh: PASS - release, ASan/UBSan and TSan builds, all tests passed (${took}s)"
  else
    local IFS=';'
    echo "test.sh: FAIL - ${problems[*]} (${took}s)"
  fi
}
trap summary EXIT
# Killed (CI's time limit, Ctrl-C): exit through the summary with a failure, not the last status.
trap 'STAGE="${STAGE} (interrupted)"; exit 143' TERM INT

stage() {
  STAGE=$1
  echo
  echo "==> ${STAGE} (at $((SECONDS - START)) s)"
}

# Runs ctest in build dir $1; a failure is recorded so the other build still runs. The unit
# tests, one entry per directory, and the integration tests, one entry per file (CMakeLists.txt),
# run side by side, two per core, the costliest first: an integration case spends most of its
# time waiting for the processes it starts and their timeouts (the release build's integration
# tests use about a third of one core).
# The release tests run the same way, in the background (below).
CTEST=(ctest --output-on-failure -j"$((JOBS * 2))")
run_ctest() {
  local dir=$1 label=$2
  stage "${label}: ctest"
  if ! "${CTEST[@]}" --test-dir "$dir"; then
    FAILED+=("${label} tests")
  fi
}

# ThreadSanitizer (build-tsan/): every unit and integration test, gatewayd and the Kafka mock
# broker instrumented too (with C11 thread creation routed through pthreads for librdkafka:
# src/core/tsan_c11_threads.cc). The processes the tests start write their reports to files
# (`log_path`), collected after the run: any report fails the stage. No process sleeps at its
# exit (`atexit_sleep_ms=0`; ThreadSanitizer waits 1 s by default to catch threads still running
# then, which gatewayd and gatewayctl join before they return): with that second for every
# gatewayd and gatewayctl the tests start, this stage took twice as long. Suppressions
# (scripts/tsan.supp) are about RocksDB, Pistache, librdkafka and liblz4, which are built without
# ThreadSanitizer; the HTTP handlers stay checked, races reached through RocksDB (its calls, its
# threads, our callbacks on them) are not, as tsan.supp explains.
run_tsan() {
  local reports="$ROOT/build-tsan/tsan-reports"
  rm -rf "$reports"
  mkdir -p "$reports"
  local -x TSAN_OPTIONS="suppressions=$ROOT/scripts/tsan.supp:log_path=$reports/tsan"
  TSAN_OPTIONS+=":history_size=4:atexit_sleep_ms=0"
  run_ctest build-tsan "thread sanitizer"
  local found=("$reports"/tsan.*)
  if [[ -e "${found[0]}" ]]; then
    cat "${found[@]}"
    FAILED+=("ThreadSanitizer reports (${#found[@]} processes)")
  fi
}

# Lints the OpenAPI document with Spectral (rules: .spectral.yaml). The pinned CLI lives in the
# git-ignored .tools/spectral and is installed there once; it needs no install scripts.
SPECTRAL_VERSION=6.16.3
lint_openapi() {
  local spectral="$ROOT/.tools/spectral/node_modules/.bin/spectral"
  if [[ "$("$spectral" --version 2>/dev/null)" != "$SPECTRAL_VERSION" ]]; then
    if ! command -v npm >/dev/null; then
      gw_install_deps GW_NODE_DEPS || return 1
    fi
    npm install --prefix "$ROOT/.tools/spectral" --no-audit --no-fund --ignore-scripts \
      "@stoplight/spectral-cli@${SPECTRAL_VERSION}" || return 1
  fi
  "$spectral" lint --fail-severity=error src/http/openapi.json
}

stage "install dependencies"
gw_install_deps GW_DEPS GW_TEST_DEPS

# The real deployment (Dockerfile, Kafka in KRaft mode); no Docker engine is needed to check it.
stage "validate docker-compose.yml"
docker-compose -f docker-compose.yml config -q

# The three builds keep line tables only (-g1): file and line in sanitizer reports and in
# backtraces, for about a fifth less compile time than full debug information. The
# ThreadSanitizer build is -O1 (the level its documentation suggests, with -O2): with -g1, about
# a third less compile time than -O2 -g. The two sanitizer builds are unity builds (CMake's
# UNITY_BUILD: each target's sources compiled in batches of 8 per translation unit, so the
# headers of RocksDB, Pistache, RapidJSON and doctest are parsed once per batch): 161 s against
# 230 s for the ASan build from nothing. A batch is one translation unit, so two files of a
# batch must not define one name in one namespace: each integration test file keeps its own in
# gw::itest::<file>_test (two files' kPath met when a new file moved the batches' bounds). The
# release build compiles every file on its own, as scripts/run.sh and scripts/bench.sh do, so that
# a file missing an include fails here too. Its test code (not the code under test) is compiled
# at -O0 (GATEWAY_TEST_CXX_FLAGS): at -O2 the 74 test files took 526 of the build's 872 s of
# compiler time, at -O0 287 s, and the release tests still ran in 82 s.
stage "release: configure + build (build/)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGATEWAY_WERROR=ON -DGATEWAY_SANITIZE=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DGATEWAY_TEST_CXX_FLAGS=-O0
cmake --build build -j"$JOBS"

# The release tests and the OpenAPI lint (mostly npm's download of Spectral on a new machine,
# 30 s) run beside the ASan build, their output kept in build/ctest.log and build/lint.log and
# shown once that build is done. The tests mostly wait (a third of one core, see
# run_ctest), so the build, which keeps both cores busy, hides them. The build runs at a lower
# priority (nice) so that the tests' processes, whose timeouts some cases measure, are scheduled
# before it when they want the CPU.
stage "release: ctest, in the background (log: build/ctest.log)"
"${CTEST[@]}" --test-dir build >build/ctest.log 2>&1 &
RELEASE_TESTS=$!

stage "lint openapi.json (spectral), in the background (log: build/lint.log)"
lint_openapi >build/lint.log 2>&1 &
LINT=$!

stage "sanitizers: configure + build (build-asan/)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DGATEWAY_WERROR=ON -DGATEWAY_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_DEBUG="-g1" -DCMAKE_UNITY_BUILD=ON
nice -n 10 cmake --build build-asan -j"$JOBS"

stage "release: ctest (its output)"
if ! wait "$RELEASE_TESTS"; then
  FAILED+=("release tests")
fi
RELEASE_TESTS=""
cat build/ctest.log

stage "lint openapi.json (its output)"
if ! wait "$LINT"; then
  FAILED+=("openapi lint")
fi
LINT=""
cat build/lint.log

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Leak suppressions are scoped to third-party libraries only (see the file); never to our code.
if [[ -f "$ROOT/scripts/lsan.supp" ]]; then
  export LSAN_OPTIONS="suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0"
fi
run_ctest build-asan sanitizer

stage "thread sanitizer: configure + build (build-tsan/)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGATEWAY_WERROR=ON -DGATEWAY_TSAN=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON
cmake --build build-tsan -j"$JOBS"
run_tsan

STAGE="final"
((${#FAILED[@]} == 0))
