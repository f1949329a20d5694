-- The GET ceiling: GET / of scripts/bench/ceiling.cc (a fixed 600-byte JSON body).
dofile((os.getenv("BENCH_LUA_DIR") or "scripts/bench") .. "/common.lua")

local req
function build(n)
  if req == nil then req = wrk.format("GET", "/", {}) end
  return req
end
