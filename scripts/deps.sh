# shellcheck shell=bash
# Debian packages gatewayd needs to build, test and run. Sourced by scripts/test.sh and
# scripts/run.sh. gw_install_deps installs only what is missing, so a re-run never touches apt.

GW_DEPS=(
  build-essential cmake pkg-config git ca-certificates
  libpistache-dev rapidjson-dev librocksdb-dev librdkafka-dev libc-ares-dev doctest-dev
  libpsl-dev libmodsecurity-dev libssl-dev libcurl4-openssl-dev
  dnsmasq-base kcat curl
)

# Prints the packages of GW_DEPS that are not installed, one per line.
gw_missing_deps() {
  local pkg status
  for pkg in "${GW_DEPS[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    if [[ "$status" != "installed" ]]; then
      printf '%s\n' "$pkg"
    fi
  done
}

# Installs the missing packages with apt-get (as root, or through sudo when not root).
gw_install_deps() {
  local missing=()
  mapfile -t missing < <(gw_missing_deps)
  if ((${#missing[@]} == 0)); then
    echo "deps: all ${#GW_DEPS[@]} packages already installed"
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
