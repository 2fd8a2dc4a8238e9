-- wrk script for bench/soak.sh: alternates two GETs through lanyard and
-- tallies what came back, for the soak's checks.
--
--   GET /            the mock answers whose token was sent ("client_id"),
--                    so the tally shows which account served each second;
--   GET rule path    the verification rule, which the mock authorizes by
--                    role and project group (docs/service.md §5.4).
--
-- Environment (wrk passes no arguments to done(), so both sides read it):
--   SOAK_RULE_PATH   the rule path, through the proxy (no /api prefix)
--   SOAK_DELAY_MS    pause per connection between requests; 0 = none
--   SOAK_WRK_OUT     where done() writes its tally, one record a line:
--                      requests N | duration_us N | error KIND N
--                      status CODE N | client ID UNIX_SECOND N
--                      latency_us PERCENTILE N

local rule_path = os.getenv("SOAK_RULE_PATH") or "/"
local delay_ms = tonumber(os.getenv("SOAK_DELAY_MS") or "0") or 0

-- Per thread: wrk runs this file in every thread's Lua state, and done()
-- collects the globals below with thread:get. Flat tables of numbers
-- only, so they copy between states.
statuses = {}
clients = {}

local requests = {}
local sent = 0

function init(args)
   requests[1] = wrk.format("GET", "/")
   requests[2] = wrk.format("GET", rule_path)
end

function request()
   sent = sent + 1
   return requests[(sent % 2) + 1]
end

if delay_ms > 0 then
   function delay()
      return delay_ms
   end
end

function response(status, headers, body)
   statuses[status] = (statuses[status] or 0) + 1
   if body then
      local client = string.match(body, '"client_id":"([^"]+)"')
      if client then
         local key = client .. " " .. os.time()
         clients[key] = (clients[key] or 0) + 1
      end
   end
end

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

function done(summary, latency, _)
   local out = assert(io.open(assert(os.getenv("SOAK_WRK_OUT")), "w"))
   out:write(string.format("requests %d\n", summary.requests))
   out:write(string.format("duration_us %d\n", summary.duration))
   for kind, count in pairs(summary.errors) do
      out:write(string.format("error %s %d\n", kind, count))
   end
   local all_statuses, all_clients = {}, {}
   for _, thread in ipairs(threads) do
      for status, count in pairs(thread:get("statuses")) do
         all_statuses[status] = (all_statuses[status] or 0) + count
      end
      for key, count in pairs(thread:get("clients")) do
         all_clients[key] = (all_clients[key] or 0) + count
      end
   end
   for status, count in pairs(all_statuses) do
      out:write(string.format("status %d %d\n", status, count))
   end
   for key, count in pairs(all_clients) do
      out:write(string.format("client %s %d\n", key, count))
   end
   for _, p in ipairs({ 50, 99, 99.9 }) do
      out:write(string.format("latency_us %s %d\n", p, latency:percentile(p)))
   end
   out:write(string.format("latency_us max %d\n", latency.max))
   out:close()
end
