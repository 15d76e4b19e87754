-- wrk script for scripts/tomcat.sh: each connection cycles through the pages, so the
-- load is an even mix of CPU-bound, sleeping and mixed requests (and a static page,
-- served by Tomcat's DefaultServlet instead of a JSP).
local paths = { "/cpu.jsp", "/sleep.jsp", "/mixed.jsp", "/index.html" }
local counter = 0

function setup(thread)
    thread:set("offset", counter)
    counter = counter + 1
end

local i = 0
function request()
    i = i + 1
    return wrk.format("GET", paths[((i + (offset or 0)) % #paths) + 1])
end
