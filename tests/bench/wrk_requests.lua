-- wrk script: one request per line of a file, each with its own cookie (and body).
-- usage: wrk -tT ... -s wrk_requests.lua URL -- REQUESTS_FILE T
-- A line is METHOD<TAB>PATH<TAB>COOKIE[<TAB>BODY]; a body is sent url-encoded.
-- Thread k (0-based) sends lines k, k+T, k+2T, ... and starts again at line k after the last,
-- so a file of one-use requests (submits, claims) must hold more lines than the run sends:
-- the caller compares the request count with the file.
-- The RESULT line has the same fields as the peer's (../../../shared/peers/turkle).
local threads = {}
local lines = {}
local idx, step = 1, 1

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  for line in io.lines(args[1]) do
    local method, path, cookie, body = line:match("^([^\t]+)\t([^\t]+)\t([^\t]*)\t?(.*)$")
    local headers = {Cookie = cookie}
    if body ~= "" then
      headers["Content-Type"] = "application/x-www-form-urlencoded"
    else
      body = nil
    end
    lines[#lines + 1] = wrk.format(method, path, headers, body)
  end
  step = tonumber(args[2])
  idx = tid + 1
end

function request()
  local r = lines[idx]
  idx = idx + step
  if idx > #lines then idx = tid + 1 end
  return r
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_s=%.2f rps=%.1f p50_ms=%.2f p95_ms=%.2f p99_ms=%.2f " ..
    "max_ms=%.2f mean_ms=%.2f err_connect=%d err_read=%d err_write=%d err_status=%d err_timeout=%d\n",
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000, latency.mean / 1000,
    e.connect, e.read, e.write, e.status, e.timeout))
end
