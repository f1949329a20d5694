-- PUT /v1/webhook/{id}: a full valid body (no If-Match), cycling over the ids of BENCH_IDS and
-- flipping status, so every request changes its record and appends an event.
dofile((os.getenv("BENCH_LUA_DIR") or "scripts/bench") .. "/common.lua")

function build(n)
  local list = ids()
  local i = ((n * nthreads + tid) % #list) + 1
  local status = (n % 2 == 0) and "inactive" or "active"
  return wrk.format("PUT", "/v1/webhook/" .. list[i], api_headers(true), webhook_body(n, status))
end
