#!/usr/bin/env bash
# The HTTP, rebuild and memory benchmark of gatewayd (issue 6). Builds Release into build-bench/
# (a dir of its own: build/ and build-asan/ of scripts/test.sh are never touched), compiles the
# two reference programs of scripts/bench/ with g++, and measures with wrk on this machine
# (wrk -t2 -cC -dDURATION --latency, Lua scripts in scripts/bench/):
#
#  A. One gatewayd on a fresh data dir holding PRELOAD_N webhooks, and the ceiling server
#     scripts/bench/ceiling.cc (a bare Pistache 0.0.5 server: GET a fixed 600-byte JSON body, POST
#     a parsed and echoed body; same threads and keep-alive handling as gatewayd). At each of
#     CONNS connections, RUNS runs of each, ceiling and gatewayd runs interleaved: GET one record,
#     GET a list page (per_page=20), POST create and PUT update (both durable: 2xx means fsynced),
#     each as req/s, p50, p99, errors (non-2xx, socket errors, keep-alive drops) and its ratio to
#     the matching ceiling (GET ceiling for the GETs, POST ceiling for POST and PUT).
#  B. (SKIP_1M=1 skips it.) Two more gatewayds on fresh data dirs, with their read cache off
#     (--read-cache-mb 0, so that GET reads the store), one preloaded with PRELOAD_N records and
#     one with BIG_N: GET one record at 64 connections from each (ids sampled across all its
#     records), their runs alternating; the larger one's peak RSS (VmHWM) then; after SIGTERM,
#     `gatewayctl rebuild --data-dir --fold memory` of that BIG_N-event log against a raw
#     read-only scan that parses every event with RapidJSON (scripts/bench/scan.cc), RUNS times
#     each, interleaved; one rebuild with `--fold disk` (its rate and max RSS, no target); and a
#     restart that must list the same number of records.
#
# wrk's p99 is corrected for coordinated omission (wrk 4's stats_correct): a response that took
# at least twice the run's interval e per connection (duration / responses per connection, about
# 3 ms for a write at 64 connections) also records its latency minus e, minus 2e and so on, the
# latencies that requests sent on schedule during that wait would have had (the Lua scripts'
# done() gets the corrected figures too). So one stall of D ms of the write pipeline, which all 64
# connections wait out, adds about 64 * D / 3 samples between 0 and D ms: a single 100 ms stall
# in a 10 s run of 200k writes puts about 1% of the samples above 10 ms. For each POST and PUT
# run the script therefore also counts gatewayd's synced batch writes that took over 10 ms and
# over 50 ms (the histogram gatewayd_store_batch_write_seconds of /metrics), and their mean,
# printed beside the run's figures and under the table. The mean shows how fast the disk synced
# during the run: the write runs wait for it, the ceiling does not.
#
# Before phase A, scripts/bench/sync_probe.cc times the disk's synced appends alone, with no
# other load and beside a thread spinning at the lowest priority on each CPU in turn, and the
# table's notes give how many syncs took over 10 and 50 ms: what gatewayd's batch writes over
# 10 ms are to be read against (README, "What bounds each figure").
#
# Every figure is the median of RUNS. Prints a markdown table on stdout and saves it, with every
# raw wrk output and the server logs, under build-bench/results/<timestamp>/.
#
#   scripts/bench.sh                                  # full run: about 10 minutes on 2 cores
#                                                     # (phase A 6, phase B 3), plus the build
#   DURATION=3 RUNS=1 SKIP_1M=1 scripts/bench.sh      # quick check: about 70 s
#   DURATION=3 RUNS=1 BIG_N=200000 scripts/bench.sh   # the 1M phase on a smaller log: 75 s
#
# Knobs (environment): DURATION (seconds per wrk run, 10), RUNS (3), CONNS ("64 256"),
# PRELOAD_N (10000 records before the phase A runs and the small GET of phase B), BIG_N
# (1000000), SKIP_1M (0), SYNC_PROBE_SECONDS (5: each run of the disk probe; 0 skips it),
# LIST_PAGE (1: the page the list runs read), LOAD_CONNS (256: the preload's connections),
# FLAT_FACTOR (1.5: GET p50 and p99 at BIG_N may be at most this many times those at
# PRELOAD_N), SETTLE_MAX (60: before each measured run, wait up to this many seconds for
# gatewayd's background work, such as compactions, to end), BUILD (build-bench), KEEP_DATA
# (0; 1 keeps the data dirs under BUILD/run.*). The 1M preload creates BIG_N webhooks over
# HTTP: about 35 to 40 s at 26k to 28k creates/s.
#
# Exit status: 0 when every phase ran and every error count is 0, even when a target is missed
# (it is a measurement); 1 when a phase failed or any request erred.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
# shellcheck source=scripts/deps.sh
source scripts/deps.sh

DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
CONNS=${CONNS:-64 256}
PRELOAD_N=${PRELOAD_N:-10000}
BIG_N=${BIG_N:-1000000}
SKIP_1M=${SKIP_1M:-0}
LIST_PAGE=${LIST_PAGE:-1}
LOAD_CONNS=${LOAD_CONNS:-256}
FLAT_FACTOR=${FLAT_FACTOR:-1.5}
SETTLE_MAX=${SETTLE_MAX:-60}
SYNC_PROBE_SECONDS=${SYNC_PROBE_SECONDS:-5}
BUILD=${BUILD:-$ROOT/build-bench}
KEEP_DATA=${KEEP_DATA:-0}
WRK_THREADS=2
FLAT_CONNS=64
TENANT=team_bench

[[ "$SYNC_PROBE_SECONDS" =~ ^[0-9]+$ ]] || {
  echo "bench: SYNC_PROBE_SECONDS must be a whole number" >&2
  exit 2
}
for knob in DURATION RUNS PRELOAD_N BIG_N LOAD_CONNS LIST_PAGE SETTLE_MAX; do
  [[ "${!knob}" =~ ^[1-9][0-9]*$ ]] || {
    echo "bench: $knob must be a positive integer" >&2
    exit 2
  }
done
read -r -a CONN_LIST <<<"$CONNS"

log() { printf 'bench: %s\n' "$*" >&2; }
die() {
  log "FATAL: $*"
  exit 1
}
now_ns() { date +%s%N; }
FAILURES=()
fail() {
  log "FAILED: $*"
  FAILURES+=("$*")
}

# --- build ----------------------------------------------------------------------------------

gw_install_deps GW_DEPS GW_BENCH_DEPS >&2
mkdir -p "$BUILD"
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGATEWAY_SANITIZE=OFF >&2
fi
# The code measured, as it was when built: src/ may change while the runs go on.
BUILT_FROM="commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain -- src 2>/dev/null)" ]]; then
  BUILT_FROM+=" with uncommitted changes in src/"
fi
cmake --build "$BUILD" -j"$(nproc)" --target gatewayd gatewayctl >&2
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
{
  if [[ ! -x "$BUILD/ceiling" || scripts/bench/ceiling.cc -nt "$BUILD/ceiling" ]]; then
    g++ -O2 -std=c++20 scripts/bench/ceiling.cc -o "$BUILD/ceiling" \
      $(pkg-config --cflags --libs libpistache) -pthread
  fi
  # With gatewayd's CRC-32C for RocksDB's log (src/store/crc32c.h), as gatewayctl has it: the
  # open of both replays the write-ahead log.
  if [[ ! -x "$BUILD/scan" || scripts/bench/scan.cc -nt "$BUILD/scan" ||
    src/store/crc32c.cc -nt "$BUILD/scan" ]]; then
    g++ -O2 -std=c++20 -Isrc scripts/bench/scan.cc src/store/crc32c.cc -o "$BUILD/scan" \
      $(pkg-config --cflags --libs rocksdb)
  fi
  if [[ ! -x "$BUILD/sync_probe" || scripts/bench/sync_probe.cc -nt "$BUILD/sync_probe" ]]; then
    g++ -O2 -std=c++20 -pthread scripts/bench/sync_probe.cc -o "$BUILD/sync_probe"
  fi
}

STAMP=$(date +%Y%m%d-%H%M%S)
RESULTS="$BUILD/results/$STAMP"
mkdir -p "$RESULTS/wrk"
# The data dirs live on the disk of the checkout (a million records take about a gigabyte).
WORK=$(mktemp -d "$BUILD/run.XXXXXX")

CEIL_PID=""
GW_PID=""
SMALL_PID=""
WRK_PID=""
cleanup() {
  local pid
  for pid in "$WRK_PID" "$GW_PID" "$SMALL_PID" "$CEIL_PID"; do
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  if [[ "$KEEP_DATA" == 1 ]]; then
    log "data kept in $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- processes ------------------------------------------------------------------------------

# Waits until file $1 has a line containing $2 while process $3 lives; false when it died or $4
# seconds (default 10) passed.
wait_for_line() {
  local file=$1 needle=$2 pid=$3 limit=${4:-10} i
  for ((i = 0; i < limit * 100; i++)); do
    if grep -q -- "$needle" "$file" 2>/dev/null; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    sleep 0.01
  done
  return 1
}

url_of() { sed -n 's|.*listening on \(http://[^ ]*\).*|\1|p' "$1" | head -n 1; }

start_ceiling() {
  "$BUILD/ceiling" --listen 127.0.0.1:0 >"$RESULTS/ceiling.log" 2>&1 &
  CEIL_PID=$!
  wait_for_line "$RESULTS/ceiling.log" "listening on http://" "$CEIL_PID" ||
    die "the ceiling server did not start: $(cat "$RESULTS/ceiling.log")"
  CEIL_URL=$(url_of "$RESULTS/ceiling.log")
}

# Starts gatewayd on data dir $1, logging to gatewayd-$2.log, with more flags $3...; sets GW_PID
# and GW_URL.
start_gatewayd() {
  local data=$1 name=$2
  shift 2
  env -u GATEWAY_LISTEN "$BUILD/gatewayd" --listen 127.0.0.1:0 --data-dir "$data" \
    --tokens-file "$WORK/tokens" "$@" >"$RESULTS/gatewayd-$name.log" 2>&1 &
  GW_PID=$!
  wait_for_line "$RESULTS/gatewayd-$name.log" "listening on http://" "$GW_PID" 300 ||
    die "gatewayd ($name) did not start: $(tail -n 20 "$RESULTS/gatewayd-$name.log")"
  GW_URL=$(url_of "$RESULTS/gatewayd-$name.log")
}

# SIGTERM to $1 and wait for its exit (60 s at most); the exit status must be 0.
stop_process() {
  local pid=$1 name=$2 rc=0 i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 600; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    fail "$name did not exit within 60 s of SIGTERM"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || rc=$?
  ((rc == 0)) || fail "$name exited with status $rc after SIGTERM"
}

stop_gatewayd() {
  stop_process "$GW_PID" "gatewayd ($1)"
  GW_PID=""
}

gatewayd_alive() {
  kill -0 "$GW_PID" 2>/dev/null ||
    die "gatewayd died during $1: $(tail -n 20 "$RESULTS"/gatewayd-*.log)"
}

api() { curl -sS --max-time 30 -H "Authorization: Bearer $TOKEN" -H "X-Tenant-ID: $TENANT" "$@"; }

# The number of live webhooks, from the list's total.
live_webhooks() {
  api "$GW_URL/v1/webhook?per_page=1" | sed -n 's/.*"total":\([0-9]*\).*/\1/p'
}

# A /metrics value of gatewayd, as an integer.
metric() {
  curl -sS --max-time 30 "$GW_URL/metrics" | awk -v m="$1" '$1 == m { printf "%.0f\n", $2 }'
}

# Two requests to URL $2 on one curl connection: the second must reuse the first's connection
# and no answer may say `Connection: close`. ($3... are more curl arguments.)
check_keepalive() {
  local name=$1 url=$2 out reused closes
  shift 2
  out=$(curl -sv -o /dev/null -o /dev/null "$@" "$url" "$url" 2>&1) || true
  printf '%s\n' "$out" >"$RESULTS/keepalive-$name.txt"
  reused=$(grep -c 'Re-using existing connection' <<<"$out" || true)
  closes=$(grep -ci '^< connection: close' <<<"$out" || true)
  if ((reused == 1 && closes == 0)); then
    log "keep-alive $name: second request reused the connection"
  else
    fail "keep-alive $name: connection reused $reused times, $closes answers with Connection: close (see keepalive-$name.txt)"
  fi
}

# "BATCHES WITHIN_10MS WITHIN_50MS SECONDS": gatewayd's synced batch writes so far, all and those
# that took at most 10 and 50 ms (cumulative buckets of gatewayd_store_batch_write_seconds), and
# the seconds they took in all (its sum). Read from one scrape, not four calls of metric(): a
# batch finishing between scrapes would make the counts disagree (a negative count of slow
# writes).
batch_writes() {
  curl -sS --max-time 30 "$GW_URL/metrics" | awk '
    $1 == "gatewayd_store_batch_write_seconds_count" { n = $2 }
    $1 == "gatewayd_store_batch_write_seconds_bucket{le=\"0.01\"}" { a = $2 }
    $1 == "gatewayd_store_batch_write_seconds_bucket{le=\"0.05\"}" { b = $2 }
    $1 == "gatewayd_store_batch_write_seconds_sum" { t = $2 }
    END { printf "%d %d %d %.6f\n", n, a, b, t }'
}

# The CPU time process $1 has used, in clock ticks (utime + stime of /proc/PID/stat).
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# The CPU time of the gatewayd measured and of phase B's second one while it runs.
gatewayd_ticks() {
  local pid total=0
  for pid in "$GW_PID" "$SMALL_PID"; do
    if [[ -n "$pid" ]]; then total=$((total + $(cpu_ticks "$pid"))); fi
  done
  echo "$total"
}

# Waits until gatewayd uses under 5% of a core over a second, SETTLE_MAX seconds at most: its
# background work after a load (RocksDB flushes and compactions) would otherwise run during the
# next measurement, of gatewayd or of the ceiling.
settle() {
  local hz prev cur i
  [[ -n "$GW_PID" ]] || return 0
  hz=$(getconf CLK_TCK)
  prev=$(gatewayd_ticks)
  for ((i = 1; i <= SETTLE_MAX; i++)); do
    sleep 1
    cur=$(gatewayd_ticks)
    if (((cur - prev) * 100 < hz * 5)); then
      ((i == 1)) || log "gatewayd idle again after $i s"
      return 0
    fi
    prev=$cur
  done
  log "gatewayd still busy after $SETTLE_MAX s; measuring anyway"
}

# --- wrk ------------------------------------------------------------------------------------

export BENCH_LUA_DIR="$ROOT/scripts/bench" BENCH_THREADS=$WRK_THREADS BENCH_TENANT=$TENANT

declare -A RPS=() P50=() P99=() ERR=() SLOW=()

# The value of field $2 of a `BENCH k=v ...` line $1.
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }

# The error count of a BENCH line: non-2xx answers, socket errors and keep-alive drops.
errors_of() {
  local line=$1
  echo $(($(field "$line" non2xx) + $(field "$line" connect) + $(field "$line" read) + \
    $(field "$line" write) + $(field "$line" timeout) + $(field "$line" closes)))
}

# run_wrk KEY CONNS RUN URL SCRIPT [NAME=VALUE ...]: one measured wrk run; its figures are kept
# under KEY:CONNS.
run_wrk() {
  local key=$1 conns=$2 run=$3 url=$4 script=$5 out line errors writes=() slow=""
  shift 5
  out="$RESULTS/wrk/$key-c$conns-r$run.txt"
  settle
  # gatewayd's writes: its slow batch writes during the run (see the top of this file).
  if [[ "$key" == create || "$key" == update ]]; then read -r -a writes <<<"$(batch_writes)"; fi
  if ! env "$@" BENCH_SALT="$key-$conns-$run-$STAMP" wrk -t"$WRK_THREADS" -c"$conns" \
    -d"${DURATION}s" --latency -s "scripts/bench/$script" "$url" >"$out" 2>&1; then
    fail "wrk $key c$conns run $run failed: $(tail -n 3 "$out")"
    return 0
  fi
  line=$(grep '^BENCH ' "$out" | tail -n 1)
  if [[ -z "$line" ]]; then
    fail "wrk $key c$conns run $run printed no figures: $(tail -n 3 "$out")"
    return 0
  fi
  errors=$(errors_of "$line")
  if ((${#writes[@]} == 4)); then
    local after=()
    read -r -a after <<<"$(batch_writes)"
    local batches=$((after[0] - writes[0]))
    local over10=$((batches - (after[1] - writes[1]))) over50=$((batches - (after[2] - writes[2])))
    # The mean batch write (log append, fsync, memtable inserts): what the disk's sync took in
    # this run, which the ceiling, writing nothing, does not pay.
    local mean
    mean=$(awk -v t0="${writes[3]}" -v t1="${after[3]}" -v n="$batches" \
      'BEGIN { if (n > 0) printf "%.2f", (t1 - t0) * 1000 / n; else printf "n/a" }')
    SLOW[$key:$conns]+=" $over10/$over50 (${mean} ms)"
    slow="  batch writes $batches (mean $mean ms), over 10 ms $over10, over 50 ms $over50"
  fi
  RPS[$key:$conns]+=" $(field "$line" rps)"
  P50[$key:$conns]+=" $(field "$line" p50_us)"
  P99[$key:$conns]+=" $(field "$line" p99_us)"
  ERR[$key:$conns]=$((${ERR[$key:$conns]:-0} + errors))
  log "$(printf '%-13s c%-3s run %s: %9.0f req/s  p50 %6.2f ms  p99 %6.2f ms  errors %s%s' "$key" \
    "$conns" "$run" "$(field "$line" rps)" "$(ms "$(field "$line" p50_us)")" \
    "$(ms "$(field "$line" p99_us)")" "$errors" "$slow")"
  if ((errors > 0)); then
    fail "$key c$conns run $run: $errors errors ($line)"
  fi
}

# The median of the numbers given.
median() {
  printf '%s\n' "$@" | sort -g | awk '
    NF { a[++n] = $1 }
    END { if (n == 0) print ""; else if (n % 2) print a[(n + 1) / 2]; else print (a[n / 2] + a[n / 2 + 1]) / 2 }'
}
med() {
  local -n table=$1
  # shellcheck disable=SC2086 # the runs' figures are space-separated on purpose
  median ${table[$2]:-}
}
ms() { awk -v us="$1" 'BEGIN { if (us == "") print "n/a"; else printf "%.2f", us / 1000 }'; }

# preload NAME COUNT IDS_PREFIX EVERY: creates COUNT webhooks with LOAD_CONNS connections,
# writing every EVERY-th id to IDS_PREFIX.<thread>; logs the rate.
preload() {
  local name=$1 count=$2 prefix=$3 every=$4 out="$RESULTS/wrk/preload-$1.txt" t0 done_n f
  local limit_s=$((120 + count / 1000)) next_report line rc=0 secs
  rm -f "$WORK"/done.*
  log "preload $name: creating $count webhooks ($LOAD_CONNS connections)"
  t0=$(now_ns)
  next_report=$((t0 + 20000000000))
  BENCH_COUNT=$count BENCH_IDS_OUT=$prefix BENCH_IDS_EVERY=$every BENCH_DONE_OUT="$WORK/done" \
    BENCH_SALT="preload-$name-$STAMP" wrk -t"$WRK_THREADS" -c"$LOAD_CONNS" -d24h --timeout 10s \
    -s scripts/bench/create.lua "$GW_URL" >"$out" 2>&1 &
  WRK_PID=$!
  while :; do
    done_n=0
    for f in "$WORK"/done.*; do [[ -e "$f" ]] && done_n=$((done_n + 1)); done
    ((done_n < WRK_THREADS)) || break
    kill -0 "$WRK_PID" 2>/dev/null || break
    gatewayd_alive "preload $name"
    if (($(now_ns) - t0 > limit_s * 1000000000)); then
      fail "preload $name: not done after $limit_s s"
      break
    fi
    if (($(now_ns) > next_report)); then
      log "preload $name: $(live_webhooks) live webhooks after $((($(now_ns) - t0) / 1000000000)) s"
      next_report=$((next_report + 20000000000))
    fi
    sleep 0.1
  done
  kill -INT "$WRK_PID" 2>/dev/null || true
  wait "$WRK_PID" || rc=$?
  WRK_PID=""
  secs=$(awk -v ns="$(($(now_ns) - t0))" 'BEGIN { printf "%.1f", ns / 1e9 }')
  line=$(grep '^BENCH ' "$out" | tail -n 1 || true)
  if ((rc != 0)) || [[ -z "$line" ]]; then
    fail "preload $name: wrk failed (status $rc): $(tail -n 3 "$out")"
    return 0
  fi
  if (($(errors_of "$line") > 0)); then fail "preload $name: errors ($line)"; fi
  if (($(field "$line" requests) < count)); then
    fail "preload $name: only $(field "$line" requests) of $count creates answered"
  fi
  log "preload $name: $(field "$line" requests) creates answered in $secs s" \
    "($(awk -v r="$(field "$line" rps)" 'BEGIN { printf "%.0f", r }') creates/s while running)"
  PRELOAD_SECONDS[$name]=$secs
}
declare -A PRELOAD_SECONDS=()

# --- phase A: the HTTP figures against the ceiling ------------------------------------------

T_START=$(now_ns)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "results in $RESULTS; load average before: $LOAD_START"

# The disk alone, before anything else runs: synced 40 KB appends (scripts/bench/sync_probe.cc)
# in the data dirs' file system, with no other load and then beside a thread spinning at the
# lowest priority on each CPU in turn. On this project's virtual machine the syncs stall for 10
# to 20 ms whenever a virtual CPU is busy, whatever runs on it; gatewayd's write runs keep both
# busy, so its batch writes over 10 ms are to be read against these.
DISK_PROBES=()
if ((SYNC_PROBE_SECONDS > 0)); then
  for busy in none $(seq 0 $(($(nproc) - 1))); do
    args=(--dir "$WORK" --seconds "$SYNC_PROBE_SECONDS")
    label="idle"
    if [[ "$busy" != none ]]; then
      args+=(--busy-cpu "$busy")
      label="beside a busy thread at SCHED_IDLE on CPU $busy"
    fi
    if line=$("$BUILD/sync_probe" "${args[@]}" 2>&1); then
      printf '%s\n' "$line" >>"$RESULTS/sync_probe.txt"
      DISK_PROBES+=("$label: $(field "$line" over_10ms) / $(field "$line" over_50ms) of\
 $(field "$line" syncs) (p99 $(field "$line" p99_ms) ms, longest $(field "$line" max_ms) ms)")
      log "disk alone, $label: $line"
    else
      fail "sync_probe ($label): $line"
    fi
  done
fi

TOKEN=$("$BUILD/gatewayctl" token create --tokens-file "$WORK/tokens" --tenant "$TENANT" --name bench)
export BENCH_TOKEN=$TOKEN

start_ceiling
start_gatewayd "$WORK/data-a" a
log "phase A: ceiling $CEIL_URL, gatewayd $GW_URL"
check_keepalive ceiling "$CEIL_URL/"
check_keepalive gatewayd "$GW_URL/v1/webhook?per_page=1" \
  -H "Authorization: Bearer $TOKEN" -H "X-Tenant-ID: $TENANT"

preload a "$PRELOAD_N" "$WORK/ids-a" 1
cat "$WORK"/ids-a.* >"$WORK/ids-a.txt"
IDS_A=$(wc -l <"$WORK/ids-a.txt")
((IDS_A > 0)) || die "the preload wrote no ids"
RECORDS_A=$(live_webhooks)
log "phase A: $RECORDS_A live webhooks, GET and PUT cycle over $IDS_A of them"

for conns in "${CONN_LIST[@]}"; do
  for ((run = 1; run <= RUNS; run++)); do
    run_wrk ceiling_get "$conns" "$run" "$CEIL_URL/" ceiling_get.lua
    run_wrk get_one "$conns" "$run" "$GW_URL" get_one.lua BENCH_IDS="$WORK/ids-a.txt"
    run_wrk list "$conns" "$run" "$GW_URL" list.lua BENCH_PAGE="$LIST_PAGE"
    gatewayd_alive "the read runs"
  done
done
for conns in "${CONN_LIST[@]}"; do
  for ((run = 1; run <= RUNS; run++)); do
    run_wrk ceiling_post "$conns" "$run" "$CEIL_URL/" ceiling_post.lua
    run_wrk create "$conns" "$run" "$GW_URL" create.lua
    run_wrk update "$conns" "$run" "$GW_URL" update.lua BENCH_IDS="$WORK/ids-a.txt"
    gatewayd_alive "the write runs"
  done
done
RECORDS_A_END=$(live_webhooks)
EVENTS_A_END=$(metric gatewayd_event_log_last_seq)
stop_process "$CEIL_PID" ceiling
CEIL_PID=""
stop_gatewayd a
[[ "$KEEP_DATA" == 1 ]] || rm -rf "$WORK/data-a"
log "phase A done: $RECORDS_A_END live webhooks, $EVENTS_A_END events at the end"

# --- phase B: a million records: GET flatness, peak RSS, rebuild ----------------------------

REBUILD_RATES=()
SCAN_RATES=()
DISK_REBUILD_RATE=""
DISK_REBUILD_KB=""
SCAN_EVENTS=""
if [[ "$SKIP_1M" != 1 ]]; then
  DATA_B="$WORK/data-b"
  # Two gatewayds, one holding PRELOAD_N records and one BIG_N, both with the read cache off:
  # the GET runs below cycle over about 10,000 ids, all of which it would hold, so they would
  # measure the cache instead of the store. Their runs alternate, so that the machine's speed,
  # which drifts over minutes, weighs on both sides of the ratio alike.
  start_gatewayd "$WORK/data-bs" b-small --read-cache-mb 0
  preload b-small "$PRELOAD_N" "$WORK/ids-bs" 1
  cat "$WORK"/ids-bs.* >"$WORK/ids-bs.txt"
  SMALL_RECORDS=$(live_webhooks)
  SMALL_PID=$GW_PID
  SMALL_URL=$GW_URL
  start_gatewayd "$DATA_B" b --read-cache-mb 0
  log "phase B: gatewayd $SMALL_URL with $SMALL_RECORDS records, gatewayd $GW_URL with $BIG_N"
  # About 10,000 ids spread over all the records.
  EVERY=$((BIG_N / 10000 > 1 ? BIG_N / 10000 : 1))
  preload b-big "$BIG_N" "$WORK/ids-bb" "$EVERY"
  cat "$WORK"/ids-bb.* >"$WORK/ids-big.txt"
  BIG_RECORDS=$(live_webhooks)
  log "phase B: $BIG_RECORDS live webhooks; GET cycles over $(wc -l <"$WORK/ids-big.txt") of them"
  for ((run = 1; run <= RUNS; run++)); do
    run_wrk get_small "$FLAT_CONNS" "$run" "$SMALL_URL" get_one.lua BENCH_IDS="$WORK/ids-bs.txt"
    run_wrk get_big "$FLAT_CONNS" "$run" "$GW_URL" get_one.lua BENCH_IDS="$WORK/ids-big.txt"
  done
  kill -0 "$SMALL_PID" 2>/dev/null ||
    die "gatewayd (b-small) died during the GET runs: $(tail -n 20 "$RESULTS/gatewayd-b-small.log")"
  gatewayd_alive "the GET runs at $BIG_RECORDS records"
  HWM_KB=$(awk '/^VmHWM:/ { print $2 }' "/proc/$GW_PID/status")
  RSS_KB=$(awk '/^VmRSS:/ { print $2 }' "/proc/$GW_PID/status")
  BIG_EVENTS=$(metric gatewayd_event_log_last_seq)
  log "phase B: VmHWM $((HWM_KB / 1024)) MB, VmRSS $((RSS_KB / 1024)) MB, $BIG_EVENTS events"
  stop_process "$SMALL_PID" "gatewayd (b-small)"
  SMALL_PID=""
  stop_gatewayd b
  DATA_B_MB=$(du -sm "$DATA_B" | cut -f1)

  rebuild_ok=1
  for ((run = 1; run <= RUNS; run++)); do
    t0=$(now_ns)
    if "$BUILD/scan" --data-dir "$DATA_B" >"$RESULTS/scan-r$run.txt" 2>&1; then
      t1=$(now_ns)
      SCAN_EVENTS=$(sed -n 's/.*events=\([0-9]*\).*/\1/p' "$RESULTS/scan-r$run.txt")
      SCAN_RATES+=("$(awk -v n="$SCAN_EVENTS" -v ns="$((t1 - t0))" 'BEGIN { printf "%.0f", n / (ns / 1e9) }')")
      log "scan    run $run: $SCAN_EVENTS events in $(awk -v ns="$((t1 - t0))" 'BEGIN { printf "%.2f", ns / 1e9 }') s"
    else
      fail "scan run $run: $(tail -n 3 "$RESULTS/scan-r$run.txt")"
    fi
    if ((rebuild_ok)); then
      t0=$(now_ns)
      # In memory, as the target measures it (auto would choose it here unless memory is short).
      if "$BUILD/gatewayctl" rebuild --data-dir "$DATA_B" --fold memory \
        >"$RESULTS/rebuild-r$run.txt" 2>&1; then
        t1=$(now_ns)
        REBUILD_RATES+=("$(awk -v n="$BIG_EVENTS" -v ns="$((t1 - t0))" 'BEGIN { printf "%.0f", n / (ns / 1e9) }')")
        log "rebuild run $run: $BIG_EVENTS events in $(awk -v ns="$((t1 - t0))" 'BEGIN { printf "%.2f", ns / 1e9 }') s: $(tr '\n' ' ' <"$RESULTS/rebuild-r$run.txt")"
      else
        rebuild_ok=0
        fail "gatewayctl rebuild --data-dir failed (run $run): $(tail -n 3 "$RESULTS/rebuild-r$run.txt" | tr '\n' ' ')"
      fi
    fi
  done
  [[ -z "$SCAN_EVENTS" || "$SCAN_EVENTS" == "$BIG_EVENTS" ]] ||
    fail "the scan read $SCAN_EVENTS events, gatewayd reported $BIG_EVENTS"
  if ((rebuild_ok)); then
    # One rebuild folded on disk, for the README's comparison (no target), with its max RSS.
    t0=$(now_ns)
    if /usr/bin/time -f "max RSS %M KB" "$BUILD/gatewayctl" rebuild --data-dir "$DATA_B" \
      --fold disk >"$RESULTS/rebuild-disk.txt" 2>&1; then
      t1=$(now_ns)
      DISK_REBUILD_RATE=$(awk -v n="$BIG_EVENTS" -v ns="$((t1 - t0))" 'BEGIN { printf "%.0f", n / (ns / 1e9) }')
      DISK_REBUILD_KB=$(sed -n 's/^max RSS \([0-9]*\) KB$/\1/p' "$RESULTS/rebuild-disk.txt")
      log "rebuild on disk: $BIG_EVENTS events in $(awk -v ns="$((t1 - t0))" 'BEGIN { printf "%.2f", ns / 1e9 }') s: $(tr '\n' ' ' <"$RESULTS/rebuild-disk.txt")"
    else
      rebuild_ok=0
      fail "gatewayctl rebuild --fold disk failed: $(tail -n 3 "$RESULTS/rebuild-disk.txt" | tr '\n' ' ')"
    fi
  fi
  if ((rebuild_ok)); then
    start_gatewayd "$DATA_B" b-after-rebuild
    AFTER=$(live_webhooks)
    stop_gatewayd b-after-rebuild
    if [[ "$AFTER" == "$BIG_RECORDS" ]]; then
      log "after the rebuild gatewayd lists the same $AFTER webhooks"
    else
      fail "after the rebuild gatewayd lists $AFTER webhooks, before it $BIG_RECORDS"
    fi
  fi
fi

# --- the table ------------------------------------------------------------------------------

T_END=$(now_ns)
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print ""; else printf "%.2f", a / b }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 >= b + 0) }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 < b + 0) }'; }
int() { awk -v a="$1" 'BEGIN { if (a == "") print "n/a"; else printf "%.0f", a }'; }
or_na() { if [[ -n "$1" ]]; then echo "$1"; else echo "n/a"; fi; }

# One row of the HTTP table: LABEL KEY CONNS CEILING_KEY MIN_RATIO.
http_row() {
  local label=$1 key=$2 conns=$3 ceil=$4 min=$5 rps p50 p99 crps r target result=PASS
  rps=$(med RPS "$key:$conns")
  p50=$(med P50 "$key:$conns")
  p99=$(med P99 "$key:$conns")
  if [[ -z "$ceil" ]]; then
    printf '| %s | %s | %s | %s | %s | %s | | | | |\n' "$label" "$conns" "$(int "$rps")" \
      "$(ms "$p50")" "$(ms "$p99")" "${ERR[$key:$conns]:-n/a}"
    return
  fi
  crps=$(med RPS "$ceil:$conns")
  r=$(ratio "$rps" "$crps")
  target=">= $min"
  ge "$r" "$min" || result=FAIL
  if ((conns == 64)); then
    target+=", p99 < 10 ms"
    lt "$p99" 10000 || result=FAIL
  fi
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$conns" "$(int "$rps")" \
    "$(ms "$p50")" "$(ms "$p99")" "${ERR[$key:$conns]:-n/a}" "$(int "$crps")" "$(or_na "$r")" \
    "$target" "$result"
}

COMMAND="DURATION=$DURATION RUNS=$RUNS CONNS=\"$CONNS\" PRELOAD_N=$PRELOAD_N"
if [[ "$SKIP_1M" == 1 ]]; then COMMAND+=" SKIP_1M=1"; else COMMAND+=" BIG_N=$BIG_N"; fi
COMMAND+=" scripts/bench.sh"
{
  echo "## gatewayd benchmark $STAMP"
  echo
  echo "\`$COMMAND\` on $(nproc) cores, wrk -t$WRK_THREADS on the same machine;" \
    "$BUILT_FROM;" \
    "load average $LOAD_START before, $LOAD_END after; $(((T_END - T_START) / 1000000000)) s."
  echo "Median of $RUNS runs of ${DURATION} s. Phase A: $RECORDS_A webhooks preloaded" \
    "(GET and PUT cycle over $IDS_A ids; list page $LIST_PAGE, per_page=20)."
  echo
  echo "| request | conns | req/s | p50 ms | p99 ms | errors | ceiling req/s | ratio | target | result |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for conns in "${CONN_LIST[@]}"; do
    http_row "GET one record" get_one "$conns" ceiling_get 0.70
    http_row "GET list page" list "$conns" ceiling_get 0.30
    http_row "POST create (durable)" create "$conns" ceiling_post 0.40
    http_row "PUT update (durable)" update "$conns" ceiling_post 0.40
  done
  for conns in "${CONN_LIST[@]}"; do
    http_row "ceiling GET (600 B)" ceiling_get "$conns" "" ""
    http_row "ceiling POST (echo)" ceiling_post "$conns" "" ""
  done
  echo
  echo "Synced batch writes of gatewayd over 10 ms / over 50 ms in each run, in run order (every"
  echo "client waits such a write out; wrk's p99 counts each stall about 64 * D / 3 times at 64"
  echo "connections, see the top of scripts/bench.sh), and the run's mean batch write (log append,"
  echo "fsync, memtable inserts; the ceiling writes nothing, so a slower disk lowers the write"
  echo "ratios):"
  for conns in "${CONN_LIST[@]}"; do
    echo "POST at $conns connections:${SLOW[create:$conns]:- n/a}; PUT:${SLOW[update:$conns]:- n/a}."
  done
  echo
  if ((${#DISK_PROBES[@]} > 0)); then
    echo "The disk alone before phase A (scripts/bench/sync_probe.cc: 40 KB appended and"
    echo "fdatasync'd in a loop, ${SYNC_PROBE_SECONDS} s each), syncs over 10 ms / over 50 ms of all:"
    printf -- '- %s\n' "${DISK_PROBES[@]}"
    echo
  fi
  if [[ "$SKIP_1M" == 1 ]]; then
    echo "Phase B (1M records, rebuild, peak RSS) skipped (SKIP_1M=1)."
  else
    echo "Phase B: two fresh gatewayds, of $SMALL_RECORDS and $BIG_RECORDS live webhooks, their" \
      "GET runs alternating (preload of $BIG_N creates: ${PRELOAD_SECONDS[b-big]:-0} s); data dir" \
      "$DATA_B_MB MB."
    echo
    echo "| figure | value | baseline | ratio | target | result |"
    echo "|---|---|---|---|---|---|"
    rb=$(median "${REBUILD_RATES[@]}")
    sc=$(median "${SCAN_RATES[@]}")
    r=$(ratio "$rb" "$sc")
    result=PASS
    ge "$r" 0.40 || result=FAIL
    echo "| \`gatewayctl rebuild\` of a $BIG_EVENTS-event log | $(int "$rb") events/s |" \
      "raw scan + RapidJSON parse: $(int "$sc") events/s | $(or_na "$r") | >= 0.40 | $result |"
    echo "| the same, \`--fold disk\` (one run, no target) | $(int "$DISK_REBUILD_RATE") events/s," \
      "max RSS $((${DISK_REBUILD_KB:-0} / 1024)) MB | | $(or_na "$(ratio "$DISK_REBUILD_RATE" "$sc")") | | |"
    hwm_mb=$((HWM_KB / 1024))
    result=PASS
    ((hwm_mb <= 400)) || result=FAIL
    echo "| peak RSS (VmHWM) of gatewayd with $BIG_RECORDS live records | $hwm_mb MB |" \
      "VmRSS at the end $((RSS_KB / 1024)) MB | | <= 400 MB | $result |"
    s50=$(med P50 "get_small:$FLAT_CONNS")
    s99=$(med P99 "get_small:$FLAT_CONNS")
    b50=$(med P50 "get_big:$FLAT_CONNS")
    b99=$(med P99 "get_big:$FLAT_CONNS")
    r50=$(ratio "$b50" "$s50")
    r99=$(ratio "$b99" "$s99")
    result=PASS
    { awk -v a="$r50" -v f="$FLAT_FACTOR" 'BEGIN { exit !(a != "" && a <= f) }' &&
      awk -v a="$r99" -v f="$FLAT_FACTOR" 'BEGIN { exit !(a != "" && a <= f) }'; } || result=FAIL
    echo "| GET one record, $FLAT_CONNS conns, at $BIG_RECORDS records: p50 / p99 |" \
      "$(ms "$b50") / $(ms "$b99") ms ($(int "$(med RPS "get_big:$FLAT_CONNS")") req/s) |" \
      "at $SMALL_RECORDS records: $(ms "$s50") / $(ms "$s99") ms ($(int "$(med RPS "get_small:$FLAT_CONNS")") req/s) |" \
      "$(or_na "$r50") / $(or_na "$r99") | <= $FLAT_FACTOR (flat) | $result |"
    echo
    echo "Errors of the GET runs of phase B: ${ERR[get_small:$FLAT_CONNS]:-n/a} at $SMALL_RECORDS" \
      "records, ${ERR[get_big:$FLAT_CONNS]:-n/a} at $BIG_RECORDS."
  fi
  if ((${#FAILURES[@]} > 0)); then
    echo
    echo "Failures:"
    printf -- '- %s\n' "${FAILURES[@]}"
  fi
} | tee "$RESULTS/summary.md"
log "raw outputs and the table: $RESULTS"
((${#FAILURES[@]} == 0))
