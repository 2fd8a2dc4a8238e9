-- wrk script for bench/run.sh: optionally a POST with a body of a given
-- size, and one parseable summary line at the end.
--
-- Environment (wrk passes no arguments to done(), so it reads these):
--   BENCH_BODY_BYTES   > 0: every request is a POST with a body this long;
--                      unset or 0: GET
--
-- done() prints one line to stdout:
--   BENCH requests=N duration_us=N bytes=N p50_us=N p99_us=N max_us=N
--         connect=N read=N write=N timeout=N status=N
-- where status counts answers of 400 and above (wrk's own count; nothing
-- here answers 3xx), the others are socket errors. No response() callback:
-- it would run Lua for every answer and slow wrk down on a machine whose
-- cores it shares with the proxies it measures.

local body_bytes = tonumber(os.getenv("BENCH_BODY_BYTES") or "0") or 0

if body_bytes > 0 then
   wrk.method = "POST"
   wrk.body = string.rep("x", body_bytes)
   wrk.headers["Content-Type"] = "application/octet-stream"
end

function done(summary, latency, _)
   local e = summary.errors
   io.write(string.format(
      "BENCH requests=%d duration_us=%d bytes=%d p50_us=%d p99_us=%d max_us=%d "
         .. "connect=%d read=%d write=%d timeout=%d status=%d\n",
      summary.requests, summary.duration, summary.bytes,
      latency:percentile(50), latency:percentile(99), latency.max,
      e.connect, e.read, e.write, e.timeout, e.status))
end
