-- Shared by the wrk scripts of scripts/bench.sh; each scenario script loads it first with
--   dofile((os.getenv("BENCH_LUA_DIR") or "scripts/bench") .. "/common.lua")
-- and then defines build(n): the n-th request (n = 0, 1, ...) of a wrk thread, as wrk.format
-- returns it. The thread's number is `tid` (0-based) and the number of threads `nthreads`
-- (BENCH_THREADS, which must equal wrk's -t: a thread starts before wrk sets up the next one, so
-- it cannot count them itself).
--
-- Read from the environment (every wrk thread has a Lua state of its own and reads it itself):
--   BENCH_TOKEN, BENCH_TENANT   the bearer token and X-Tenant-ID of gatewayd requests
--   BENCH_IDS                   a file of record ids, one per line (ids(), for GET one and PUT)
--   BENCH_COUNT                 each thread stops after its share of this many responses (the
--                               preload) and then creates the file BENCH_DONE_OUT.<tid>; wrk
--                               itself runs for -d, so scripts/bench.sh sends it SIGINT once
--                               every thread is done
--   BENCH_IDS_OUT, BENCH_IDS_EVERY   the preload writes every EVERY-th created id (default 1) to
--                               BENCH_IDS_OUT.<tid>
--   BENCH_SALT                  made part of created bodies, so two runs never send the same body
--
-- done() prints one line that scripts/bench.sh reads:
--   BENCH rps=R p50_us=U p99_us=U requests=N non2xx=N closes=N connect=N read=N write=N
--         timeout=N first_bad=STATUS
-- non2xx counts responses outside 200..299 (counted by response() below, so wrk's own 4xx/5xx
-- count is not needed); closes counts responses carrying `Connection: close` (a keep-alive drop:
-- wrk reconnects silently and counts no error for it). first_bad is the first such status with
-- the start of its body, or "-".

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

nthreads = tonumber(os.getenv("BENCH_THREADS") or "") or 2

token = os.getenv("BENCH_TOKEN") or ""
tenant = os.getenv("BENCH_TENANT") or "team_bench"
salt = os.getenv("BENCH_SALT") or "0"

function api_headers(with_body)
  local h = {
    ["Authorization"] = "Bearer " .. token,
    ["X-Tenant-ID"] = tenant,
  }
  if with_body then h["Content-Type"] = "application/json" end
  return h
end

-- The record ids of BENCH_IDS, read once per thread.
local id_list
function ids()
  if id_list == nil then
    id_list = {}
    local path = os.getenv("BENCH_IDS")
    if path == nil or path == "" then error("BENCH_IDS is not set") end
    for line in io.lines(path) do
      if line ~= "" then table.insert(id_list, line) end
    end
    if #id_list == 0 then error("no ids in " .. path) end
  end
  return id_list
end

-- A webhook body of about 200 bytes, unique per thread and n.
function webhook_body(n, status)
  return string.format(
    '{"team_id":"%s","provider":"github","workload_id":"w-%s-%d-%d",' ..
    '"status":"%s","external_id":"bench-external-id-0123456789abcdef0123456789abcdef-%d"}',
    tenant, salt, tid, n, status or "active", n)
end

local sent = 0
local count_limit, ids_out, ids_every

function init(args)
  non2xx = 0
  closes = 0
  responses = 0
  first_bad = "-"
  local c = tonumber(os.getenv("BENCH_COUNT") or "")
  if c ~= nil then
    -- This thread's share of the total.
    count_limit = math.floor(c / nthreads) + ((tid < c % nthreads) and 1 or 0)
  end
  local out = os.getenv("BENCH_IDS_OUT")
  if out ~= nil and out ~= "" then
    ids_out = assert(io.open(out .. "." .. tid, "a"))
    ids_every = tonumber(os.getenv("BENCH_IDS_EVERY") or "1") or 1
  end
  if prepare then prepare(args) end
end

function request()
  local r = build(sent)
  sent = sent + 1
  return r
end

function response(status, headers, body)
  responses = responses + 1
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    if first_bad == "-" then
      first_bad = tostring(status) .. ":" .. string.gsub(string.sub(body or "", 1, 160), "%s", "_")
    end
  end
  local conn = headers["Connection"] or headers["connection"]
  if conn ~= nil and string.lower(conn) == "close" then closes = closes + 1 end
  if ids_out ~= nil and status >= 200 and status <= 299 and (responses % ids_every) == 0 then
    local id = string.match(body or "", '"webhook_id":"([^"]+)"')
    if id ~= nil then
      ids_out:write(id, "\n")
      ids_out:flush()
    end
  end
  if count_limit ~= nil and responses == count_limit then
    local marker = os.getenv("BENCH_DONE_OUT")
    if marker ~= nil and marker ~= "" then assert(io.open(marker .. "." .. tid, "w")):close() end
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local bad, cl, first = 0, 0, "-"
  for _, t in ipairs(threads) do
    bad = bad + t:get("non2xx")
    cl = cl + t:get("closes")
    local f = t:get("first_bad")
    if first == "-" and f ~= nil then first = f end
  end
  local e = summary.errors
  io.write(string.format(
    "BENCH rps=%.1f p50_us=%d p99_us=%d requests=%d non2xx=%d closes=%d connect=%d read=%d " ..
    "write=%d timeout=%d first_bad=%s\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99),
    summary.requests, bad, cl, e.connect, e.read, e.write, e.timeout, first))
end
