# shellcheck shell=bash
# Debian packages gatewayd needs to build, test and run. Sourced by scripts/test.sh, scripts/run.sh,
# scripts/bench_verify.sh, scripts/bench.sh and the Dockerfile's builder stage. gw_install_deps
# installs only what is missing, so a re-run never touches apt.
#
# The lists are used by name (gw_install_deps GW_DEPS GW_TEST_DEPS), which shellcheck cannot see.
# shellcheck disable=SC2034

# What configuring and building every CMake target needs; the Dockerfile's builder installs these.
GW_BUILD_DEPS=(
  build-essential cmake pkg-config ca-certificates
  libpistache-dev rapidjson-dev librocksdb-dev librdkafka-dev libc-ares-dev doctest-dev
  libpsl-dev libidn2-dev libmodsecurity-dev libpcre2-dev libssl-dev libcurl4-openssl-dev
  libjemalloc-dev libseccomp-dev
)

# The base list (scripts/run.sh): building, plus the tools the scripts and benchmarks call.
GW_DEPS=(
  "${GW_BUILD_DEPS[@]}"
  git dnsmasq-base kcat curl
)

# Only scripts/test.sh installs these: docker-compose validates docker-compose.yml; strace shows
# the integration tests that gatewayctl syncs what it writes before it says so.
GW_TEST_DEPS=(
  docker-compose strace
)

# Only scripts/bench.sh installs these: wrk drives the HTTP load; time (/usr/bin/time) gives the
# max RSS of the rebuild folded on disk.
GW_BENCH_DEPS=(
  wrk time
)

# Only scripts/test.sh, and only when no `npm` is on PATH: Node.js runs the OpenAPI linter. (Not in
# GW_TEST_DEPS: a NodeSource `nodejs` bundles npm and conflicts with Debian's `npm` package.)
GW_NODE_DEPS=(
  nodejs npm
)

# Prints the packages of the named lists (default: GW_DEPS) that are not installed, one per line,
# each once. Fails with a message on stderr when a name is not one of the lists above.
gw_missing_deps() {
  local list ref pkg status
  local -A seen=()
  for list in "${@:-GW_DEPS}"; do
    if [[ ! "$list" =~ ^GW_[A-Z_]*DEPS$ ]] || ! declare -p "$list" &>/dev/null; then
      echo "deps: unknown package list '${list}'" >&2
      return 1
    fi
  done
  for list in "${@:-GW_DEPS}"; do
    ref="${list}[@]"
    for pkg in "${!ref}"; do
      [[ -z "${seen[$pkg]:-}" ]] || continue
      seen[$pkg]=1
      status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
      if [[ "$status" != "installed" ]]; then
        printf '%s\n' "$pkg"
      fi
    done
  done
}

# Installs the missing packages of the named lists (default: GW_DEPS) with apt-get, as root or
# through sudo: `gw_install_deps` for running, `gw_install_deps GW_DEPS GW_TEST_DEPS` for testing.
# shellcheck disable=SC2120 # the arguments are optional
gw_install_deps() {
  local lists=("${@:-GW_DEPS}")
  local out missing=()
  out=$(gw_missing_deps "${lists[@]}") || return 1
  if [[ -n "$out" ]]; then
    mapfile -t missing <<<"$out"
  fi
  if ((${#missing[@]} == 0)); then
    echo "deps: all packages of ${lists[*]} already installed"
    return 0
  fi
  local sudo=()
  if ((EUID != 0)); then
    sudo=(sudo)
  fi
  echo "deps: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}
