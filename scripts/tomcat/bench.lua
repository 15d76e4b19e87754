-- wrk script for scripts/bench-tomcat.sh: one page (wrk's URL), and only a done() hook,
-- so that wrk keeps its static request and never calls Lua per request or response.
-- It prints wrk's exact totals on one line for the script to read.
function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format("BENCH requests=%d duration_us=%d bytes=%d errors=%d non2xx=%d p50_us=%d p99_us=%d\n",
        summary.requests, summary.duration, summary.bytes,
        e.connect + e.read + e.write + e.timeout, e.status,
        latency:percentile(50), latency:percentile(99)))
end
