-- POST /v1/webhook: every request creates a new webhook (a body unique per thread and request).
-- Also the preload: with BENCH_COUNT it stops after that many responses, and with BENCH_IDS_OUT
-- it writes the created ids (see common.lua).
dofile((os.getenv("BENCH_LUA_DIR") or "scripts/bench") .. "/common.lua")

function build(n)
  return wrk.format("POST", "/v1/webhook", api_headers(true), webhook_body(n))
end
