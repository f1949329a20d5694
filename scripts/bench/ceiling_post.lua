-- The POST ceiling: POST / of scripts/bench/ceiling.cc (parses the body and echoes it) with the
-- same ~200-byte bodies as create.lua.
dofile((os.getenv("BENCH_LUA_DIR") or "scripts/bench") .. "/common.lua")

function build(n)
  return wrk.format("POST", "/", { ["Content-Type"] = "application/json" }, webhook_body(n))
end
