#!/usr/bin/env bash
# Installs what is missing, builds Release into build/, makes a dev token for team_demo and runs
# gatewayd, by default on 127.0.0.1:8080 with its data in ./data (relative to the repository root;
# a relative path given is taken from the directory run.sh was started in).
# GATEWAY_LISTEN, GATEWAY_DATA_DIR and GATEWAY_TOKENS_FILE change where, as do the flags
# --listen, --data-dir and --tokens-file (flags win); any other GATEWAY_* variable reaches gatewayd
# as it is, and other arguments are passed on to it (scripts/run.sh --rate-limit 100). --help is
# gatewayd's, with no token made; a data dir a running gatewayd holds is refused before the
# tokens file is touched.
set -euo pipefail

LISTEN="${GATEWAY_LISTEN:-127.0.0.1:8080}"
DATA_DIR="${GATEWAY_DATA_DIR:-}"
TOKENS="${GATEWAY_TOKENS_FILE:-}"
# The three flags run.sh gives gatewayd itself are taken from the arguments (given twice,
# gatewayd would refuse them), in either form, `--listen X` or `--listen=X`.
PASSED=()
declare -A GIVEN=()
HELP=""
while [[ $# -gt 0 ]]; do
  # One of the three given twice is refused, as gatewayd refuses a flag given twice: which one
  # was meant is a guess (helper 137: the last one was taken).
  case "$1" in
    --listen|--data-dir|--tokens-file|--listen=*|--data-dir=*|--tokens-file=*)
      name="${1%%=*}"
      if [[ -n "${GIVEN[$name]:-}" ]]; then echo "run.sh: $name is given more than once" >&2; exit 2; fi
      GIVEN[$name]=1 ;;
    --help|-h) HELP=1 ;;
  esac
  case "$1" in
    --listen|--data-dir|--tokens-file)
      if [[ $# -lt 2 ]]; then echo "run.sh: $1 needs a value" >&2; exit 2; fi
      case "$1" in
        --listen) LISTEN="$2" ;;
        --data-dir) DATA_DIR="$2"; DATA_GIVEN=1 ;;
        --tokens-file) TOKENS="$2"; TOKENS_GIVEN=1 ;;
      esac
      shift 2 ;;
    --listen=*) LISTEN="${1#*=}"; shift ;;
    --data-dir=*) DATA_DIR="${1#*=}"; DATA_GIVEN=1; shift ;;
    --tokens-file=*) TOKENS="${1#*=}"; TOKENS_GIVEN=1; shift ;;
    *) PASSED+=("$1"); shift ;;
  esac
done
# An empty value given to a flag is refused, as gatewayd refuses it: `--data-dir="$UNSET"` would
# otherwise run on the default's data (helper 118). An empty variable counts as unset, as for
# gatewayd.
if [[ -z "${LISTEN}" || ( -n "${DATA_GIVEN:-}" && -z "${DATA_DIR}" ) ||
      ( -n "${TOKENS_GIVEN:-}" && -z "${TOKENS}" ) ]]; then
  echo "run.sh: --listen, --data-dir and --tokens-file must not be empty" >&2
  exit 2
fi
# A path given is the caller's: a relative one is taken from the directory run.sh was started in,
# not the repository's, which the script works in (`cd /srv && /repo/scripts/run.sh --data-dir gw`
# put the data in /repo/gw). The default data dir is the repository's ./data.
caller_path() {
  if [[ -z "$1" || "$1" == /* ]]; then printf '%s' "$1"; else printf '%s/%s' "$PWD" "$1"; fi
}
DATA_DIR="$(caller_path "${DATA_DIR}")"
TOKENS="$(caller_path "${TOKENS}")"

# The repository of the script itself, also when it is run through a symlink (helper 137).
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# The default data dir is the repository's ./data, named by its absolute path so that what run.sh
# and gatewayd print about it (the tokens file, `cannot open ...`) holds from any directory.
DATA_DIR="${DATA_DIR:-${PWD}/data}"
TOKENS="${TOKENS:-${DATA_DIR}/tokens}"
# shellcheck source=scripts/deps.sh
source scripts/deps.sh

gw_install_deps

# Warnings are errors in CI (scripts/test.sh), not when someone just wants to run the service:
# A user's build should not stop on a warning a newer compiler adds; test.sh builds with -Werror.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGATEWAY_SANITIZE=OFF -DGATEWAY_WERROR=OFF
cmake --build build -j"$(nproc)" --target gatewayd gatewayctl kafka_mock

# Help is gatewayd's, with nothing else done: no token made or revoked.
if [[ -n "${HELP}" ]]; then
  exec build/gatewayd --help
fi

# A data dir a running gatewayd holds (its RocksDB LOCK open) is refused here, before the tokens
# file is touched: the start would fail on it, and the revoke below would have taken the running
# server's dev token away (helper 137). Processes run.sh may not look at are not seen.
# (find's -lname takes a pattern: the path's own *, ? and [ are escaped.)
LOCK_PATTERN="$(realpath -m "${DATA_DIR}")/LOCK"
LOCK_PATTERN="$(printf '%s' "${LOCK_PATTERN}" | sed 's/[][*?\\]/\\&/g')"
HOLDER="$(find /proc/[0-9]*/fd -maxdepth 1 -lname "${LOCK_PATTERN}" -print -quit 2>/dev/null || true)"
if [[ -n "${HOLDER}" ]]; then
  HOLDER="${HOLDER#/proc/}"
  echo "run.sh: ${DATA_DIR} is in use by process ${HOLDER%%/*}; stop it, or give another --data-dir" >&2
  exit 1
fi
# gatewayd also locks the directory itself (flock), which holds when LOCK was deleted.
LOCKED=0
if [[ -d "${DATA_DIR}" ]]; then
  flock --nonblock --shared --conflict-exit-code 75 "${DATA_DIR}" true 2>/dev/null || LOCKED=$?
fi
if ((LOCKED == 75)); then
  echo "run.sh: ${DATA_DIR} is in use (another gatewayd holds a lock on it); stop it, or give another --data-dir" >&2
  exit 1
fi

# The directories made here are made durable, as gatewayd makes its own data dir's: each one's
# entry is synced in the directory it was made in (coreutils' `sync FILE` fsyncs FILE), or a
# power cut could take the data dir away with every event acknowledged in it. The directories
# named get mode 0700, as gatewayd gives a data dir it makes (it holds every tenant's records;
# under the umask they were 0755, helper 137); parents made with them get the umask's.
make_dirs() {
  local dir made=()
  for dir in "$@"; do
    while [[ ! -e "${dir}" ]]; do made+=("${dir}"); dir="$(dirname "${dir}")"; done
  done
  # shellcheck disable=SC2174 # the mode for the directories named only, as meant
  mkdir -p -m 700 "$@"
  for dir in ${made[@]+"${made[@]}"}; do sync "$(dirname "${dir}")"; done
}
make_dirs "${DATA_DIR}" "$(dirname "${TOKENS}")"
# One dev token at a time: the previous run's is revoked (a running gatewayd re-reads the file
# when it changes). Tokens are stored hashed, so an old one cannot be shown again.
if [[ -f "${TOKENS}" ]] && grep -Eq '^[0-9a-f]{64} team_demo dev$' "${TOKENS}"; then
  build/gatewayctl token revoke --tokens-file "${TOKENS}" --tenant team_demo --name dev >/dev/null
fi
TOKEN=$(build/gatewayctl token create --tokens-file "${TOKENS}" --tenant team_demo --name dev)

# An address with port 0 gets its port when gatewayd starts: it prints `listening on ...`.
URL="http://${LISTEN}"
PORT_NOTE=""
if [[ "${LISTEN}" == *:0 ]]; then
  URL="http://${LISTEN%:0}:PORT"
  PORT_NOTE="(PORT: the one gatewayd picks, in its 'listening on' line below)"
fi
cat <<MSG

Dev token for tenant team_demo (a new one each run, the previous one revoked; its hash is in
${TOKENS}):
  ${TOKEN}

Try:
  curl -sS -H "Authorization: Bearer ${TOKEN}" -H "X-Tenant-ID: team_demo" ${URL}/v1/domain
${PORT_NOTE}
MSG

exec build/gatewayd --listen "${LISTEN}" --data-dir "${DATA_DIR}" --tokens-file "${TOKENS}" \
  ${PASSED[@]+"${PASSED[@]}"}
