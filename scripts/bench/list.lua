-- GET /v1/webhook?page=P&per_page=20, P from BENCH_PAGE (default 1).
dofile((os.getenv("BENCH_LUA_DIR") or "scripts/bench") .. "/common.lua")

local req
function build(n)
  if req == nil then
    local page = os.getenv("BENCH_PAGE") or "1"
    req = wrk.format("GET", "/v1/webhook?page=" .. page .. "&per_page=20", api_headers(false))
  end
  return req
end
