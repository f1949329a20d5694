-- GET /v1/webhook/{id}, cycling over the ids of BENCH_IDS (each thread from its own offset).
dofile((os.getenv("BENCH_LUA_DIR") or "scripts/bench") .. "/common.lua")

local reqs = {}
function build(n)
  local list = ids()
  local i = ((n * nthreads + tid) % #list) + 1
  local r = reqs[i]
  if r == nil then
    r = wrk.format("GET", "/v1/webhook/" .. list[i], api_headers(false))
    reqs[i] = r
  end
  return r
end
