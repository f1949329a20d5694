#!/usr/bin/env bash
# Benchmark of the background DNS verifier: N domains (default 1000) verified against a local
# dnsmasq that serves all their CNAMEs. Builds Release into build-rel/ when needed, runs gatewayd
# and dnsmasq on free loopback ports with a fresh temp data dir, and prints one summary line:
# the wall time from the first verify request until the list of verified domains reaches N, and
# the lookups per second that makes.
#
#   scripts/bench_verify.sh            # N=1000, 16 verify requests in flight
#   N=5000 PARALLEL=32 scripts/bench_verify.sh
#
# Needs bash, curl, sed, awk and /usr/sbin/dnsmasq (dnsmasq-base); everything it starts is
# stopped on exit.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
# shellcheck source=scripts/deps.sh
source scripts/deps.sh

N=${N:-1000}
PARALLEL=${PARALLEL:-16}
DEADLINE_S=${DEADLINE_S:-120}
BUILD=${BUILD:-$ROOT/build-rel}
DNSMASQ=/usr/sbin/dnsmasq
TENANT=team_bench

log() { printf 'bench: %s\n' "$*" >&2; }
die() {
  log "$*"
  exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

gw_install_deps >&2

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGATEWAY_SANITIZE=OFF >&2
fi
cmake --build "$BUILD" -j"$(nproc)" --target gatewayd gatewayctl >&2

WORK=$(mktemp -d /tmp/gatewayd-bench-XXXXXX)
GW_PID=""
DNS_PID=""
cleanup() {
  local pid
  for pid in "$GW_PID" "$DNS_PID"; do
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits until file $1 has a line containing $2 while process $3 lives; false when it died or
# 10 s passed.
wait_for_line() {
  local file=$1 needle=$2 pid=$3 i
  for ((i = 0; i < 1000; i++)); do
    if grep -q -- "$needle" "$file" 2>/dev/null; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    sleep 0.01
  done
  return 1
}

# Starts dnsmasq with conf file $1 on port $2; sets DNS_PID. False when it does not come up
# (e.g. the port is taken).
start_dnsmasq() {
  local conf=$1 port=$2
  "$DNSMASQ" --keep-in-foreground --no-resolv --no-hosts --conf-file="$conf" --port="$port" \
    --listen-address=127.0.0.1 --bind-interfaces --pid-file="$WORK/dnsmasq.pid" \
    --log-facility=- --user=root >"$WORK/dnsmasq.log" 2>&1 &
  DNS_PID=$!
  if wait_for_line "$WORK/dnsmasq.log" "started, version" "$DNS_PID"; then return 0; fi
  kill -KILL "$DNS_PID" 2>/dev/null || true
  wait "$DNS_PID" 2>/dev/null || true
  DNS_PID=""
  return 1
}

stop_dnsmasq() {
  kill -KILL "$DNS_PID" 2>/dev/null || true
  wait "$DNS_PID" 2>/dev/null || true
  DNS_PID=""
}

# 1. dnsmasq first, with no records, to own a port that gatewayd is told about.
printf 'local=/#/\n' >"$WORK/empty.conf"
DNS_PORT=""
for ((attempt = 0; attempt < 50; attempt++)); do
  port=$((20000 + RANDOM % 40000))
  if start_dnsmasq "$WORK/empty.conf" "$port"; then
    DNS_PORT=$port
    break
  fi
done
[[ -n "$DNS_PORT" ]] || die "could not start dnsmasq on a free port: $(cat "$WORK/dnsmasq.log")"

# 2. gatewayd on a free port with a fresh data dir and one token.
TOKEN=$("$BUILD/gatewayctl" token create --tokens-file "$WORK/tokens" --tenant "$TENANT" --name bench)
env -u GATEWAY_LISTEN "$BUILD/gatewayd" --listen 127.0.0.1:0 --data-dir "$WORK/data" \
  --tokens-file "$WORK/tokens" --dns-servers "127.0.0.1:$DNS_PORT" >"$WORK/gatewayd.log" 2>&1 &
GW_PID=$!
wait_for_line "$WORK/gatewayd.log" "listening on http://" "$GW_PID" ||
  die "gatewayd did not start: $(cat "$WORK/gatewayd.log")"
URL=$(sed -n 's|.*listening on \(http://[^ ]*\).*|\1|p' "$WORK/gatewayd.log" | head -n 1)

# Writes the curl config lines shared by every request.
auth_config() {
  printf 'silent\nshow-error\n'
  printf 'header = "Authorization: Bearer %s"\nheader = "X-Tenant-ID: %s"\nheader = "Expect:"\n' \
    "$TOKEN" "$TENANT"
}

# 3. N domains, one keep-alive connection; bench-I.example.net are siblings (scope exact), so none
# inherits from another.
{
  for ((i = 0; i < N; i++)); do
    printf 'url = "%s/v1/domain"\n' "$URL"
    auth_config
    printf 'header = "Content-Type: application/json"\n'
    printf 'data-binary = "{\\"team_id\\":\\"%s\\",\\"hostname\\":\\"bench-%d.example.net\\"}"\n' \
      "$TENANT" "$i"
    printf 'write-out = "\\n"\n'
    if ((i + 1 < N)); then printf 'next\n'; fi
  done
} >"$WORK/create.curl"
curl -sS -K "$WORK/create.curl" >"$WORK/created.jsonl"

# id, verification_hostname and verification_value of each created domain.
awk '
  function member(key,    re) {
    re = "\"" key "\":\"[^\"]*\""
    if (!match($0, re)) return ""
    return substr($0, RSTART + length(key) + 4, RLENGTH - length(key) - 5)
  }
  { id = member("domain_id"); host = member("verification_hostname"); value = member("verification_value")
    if (id != "" && host != "" && value != "") print id, host, value }
' "$WORK/created.jsonl" >"$WORK/domains.txt"
CREATED=$(wc -l <"$WORK/domains.txt")
((CREATED == N)) || die "created $CREATED of $N domains; first answer: $(head -c 500 "$WORK/created.jsonl")"

# 4. dnsmasq again on its port, now with a CNAME for each.
{
  printf 'local=/#/\n'
  awk '{ print "cname=" $2 "," $3 }' "$WORK/domains.txt"
} >"$WORK/records.conf"
stop_dnsmasq
started=0
for ((attempt = 0; attempt < 50; attempt++)); do
  if start_dnsmasq "$WORK/records.conf" "$DNS_PORT"; then
    started=1
    break
  fi
  sleep 0.1
done
((started)) || die "could not restart dnsmasq on port $DNS_PORT: $(cat "$WORK/dnsmasq.log")"

# 5. Verify them all, PARALLEL requests in flight, and poll until every one is verified.
first=1
while read -r id _; do
  ((first)) || printf 'next\n'
  first=0
  printf 'url = "%s/v1/domain/%s/verify"\n' "$URL" "$id"
  auth_config
  printf 'request = "POST"\nheader = "Content-Length: 0"\noutput = "/dev/null"\n'
  printf 'write-out = "%%{http_code}\\n"\n'
done <"$WORK/domains.txt" >"$WORK/verify.curl"
verified_total() {
  curl -sS -H "Authorization: Bearer $TOKEN" -H "X-Tenant-ID: $TENANT" \
    "$URL/v1/domain?status=verified&per_page=1" | sed -n 's/.*"total":\([0-9]*\).*/\1/p'
}

T0=$(now_ms)
curl -sS --no-progress-meter -Z --parallel-immediate --parallel-max "$PARALLEL" -K "$WORK/verify.curl" \
  >"$WORK/verify.codes"
T_SENT=$(now_ms)
OK=$(grep -c '^200$' "$WORK/verify.codes" || true)
((OK == N)) || die "$OK of $N verify requests got 200: $(sort "$WORK/verify.codes" | uniq -c | tr '\n' ' ')"

VERIFIED=0
while :; do
  VERIFIED=$(verified_total)
  VERIFIED=${VERIFIED:-0}
  ((VERIFIED >= N)) && break
  (($(now_ms) - T0 < DEADLINE_S * 1000)) || break
  sleep 0.01
done
T1=$(now_ms)

METRICS=$(curl -sS "$URL/metrics")
lookups() {
  printf '%s\n' "$METRICS" | awk -v o="$1" '$1 == "gatewayd_verifier_lookups_total{outcome=\"" o "\"}" { print $2 }'
}
FAILED=0
for outcome in no_cname wrong_value nxdomain servfail timeout unreachable; do
  FAILED=$((FAILED + $(lookups "$outcome" | sed 's/\..*//; s/^$/0/')))
done

ELAPSED=$((T1 - T0))
SENT=$((T_SENT - T0))
RATE=$(awk -v n="$VERIFIED" -v ms="$ELAPSED" 'BEGIN { if (ms < 1) ms = 1; printf "%.0f", n * 1000 / ms }')
SECONDS_TXT=$(awk -v ms="$ELAPSED" 'BEGIN { printf "%.3f", ms / 1000 }')
SENT_TXT=$(awk -v ms="$SENT" 'BEGIN { printf "%.3f", ms / 1000 }')
STATUS=ok
((VERIFIED >= N)) || STATUS="INCOMPLETE after ${DEADLINE_S}s"
echo "bench_verify: ${VERIFIED}/${N} domains verified in ${SECONDS_TXT}s from the first verify request" \
  "(${SENT_TXT}s to send ${N} requests, ${PARALLEL} in flight), ${RATE} lookups/s," \
  "failed lookups ${FAILED}: ${STATUS}"
[[ "$STATUS" == ok ]]
