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

summary() {
  local rc=$?
  local took=$((SECONDS - START))
  local problems=("${FAILED[@]}")
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
  echo "==> ${STAGE}"
}

# Runs ctest in build dir $1; a failure is recorded so the other build still runs.
run_ctest() {
  local dir=$1 label=$2
  stage "${label}: ctest"
  if ! ctest --test-dir "$dir" --output-on-failure; then
    FAILED+=("${label} tests")
  fi
}

# ThreadSanitizer (build-tsan/): every unit and integration test, gatewayd and the Kafka mock
# broker instrumented too (with C11 thread creation routed through pthreads for librdkafka:
# src/core/tsan_c11_threads.cc). The processes the tests start write their reports to files
# (`log_path`), collected after the run: any report fails the stage. Suppressions
# (scripts/tsan.supp) name RocksDB, Pistache and librdkafka, which are built without
# ThreadSanitizer; the HTTP handlers stay checked, races reached through RocksDB (its calls, its
# threads, our callbacks on them) are not, as tsan.supp explains.
run_tsan() {
  stage "thread sanitizer: tests"
  local reports="$ROOT/build-tsan/tsan-reports"
  rm -rf "$reports"
  mkdir -p "$reports"
  local options="suppressions=$ROOT/scripts/tsan.supp:log_path=$reports/tsan:history_size=4"
  if ! TSAN_OPTIONS="$options" build-tsan/unit_tests; then
    FAILED+=("tsan unit tests")
  fi
  if ! TSAN_OPTIONS="$options" build-tsan/integration_tests; then
    FAILED+=("tsan integration tests")
  fi
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

stage "release: configure + build (build/)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGATEWAY_WERROR=ON -DGATEWAY_SANITIZE=OFF
cmake --build build -j"$JOBS"
run_ctest build release

stage "lint openapi.json (spectral)"
if ! lint_openapi; then
  FAILED+=("openapi lint")
fi

stage "sanitizers: configure + build (build-asan/)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DGATEWAY_WERROR=ON -DGATEWAY_SANITIZE=ON
cmake --build build-asan -j"$JOBS"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Leak suppressions are scoped to third-party libraries only (see the file); never to our code.
if [[ -f "$ROOT/scripts/lsan.supp" ]]; then
  export LSAN_OPTIONS="suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0"
fi
run_ctest build-asan sanitizer

stage "thread sanitizer: configure + build (build-tsan/)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGATEWAY_WERROR=ON -DGATEWAY_TSAN=ON
cmake --build build-tsan -j"$JOBS"
run_tsan

STAGE="final"
((${#FAILED[@]} == 0))
