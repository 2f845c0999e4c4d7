-- wrk_post.lua: wrk sends one request body (a file made by `loadgen --dump-body`) as a msgpack
-- POST, back to back on every connection, and prints loadgen's one-line result:
--   rps=.. p50_ms=.. p99_ms=.. body_MBps=.. resp_MBps=.. requests=.. errors=.. body_bytes=..
-- Environment: SEGOPS_WRK_BODY (the body file), SEGOPS_WRK_TOKEN (optional bearer token).
local f = assert(io.open(os.getenv("SEGOPS_WRK_BODY"), "rb"))
local body = f:read("*a")
f:close()
wrk.method = "POST"
wrk.body = body
wrk.headers["Content-Type"] = "application/msgpack"
wrk.headers["Accept"] = "application/msgpack"
local token = os.getenv("SEGOPS_WRK_TOKEN")
if token and token ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. token
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  -- status counts answers outside 200-399: a refused request is an error, not a request served
  local errors = e.connect + e.read + e.write + e.status + e.timeout
  io.write(string.format(
    "rps=%.1f p50_ms=%.3f p99_ms=%.3f body_MBps=%.2f resp_MBps=%.2f requests=%d errors=%d body_bytes=%d\n",
    (summary.requests - e.status) / secs, latency:percentile(50) / 1e3, latency:percentile(99) / 1e3,
    (summary.requests - e.status) * #body / secs / 1e6, summary.bytes / secs / 1e6,
    summary.requests - e.status, errors, #body))
end
