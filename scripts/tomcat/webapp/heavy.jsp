<%-- Heavy page of scripts/bench-tomcat.sh: a chain of N SHA-256 digests (N from the
     parameter n, default 16000: about 1 ms of CPU on a 2-vCPU AMD EPYC KVM guest; the
     benchmark prints the JVM CPU per request it measured), no blocking, and no HTTP
     session: a JSP makes one per request by default, and wrk never sends the cookie
     back, so a long run would fill the heap with sessions (it did: 20 requests in 5 s
     after ten minutes). --%><%@ page contentType="text/plain" session="false" import="java.security.MessageDigest" %><%
    String param = request.getParameter("n");
    int n = param == null ? 16000 : Integer.parseInt(param);
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    byte[] h = new byte[32];
    for (int i = 0; i < n; i++) {
        h = md.digest(h);
    }
    out.print("heavy " + String.format("%02x%02x%02x%02x", h[0], h[1], h[2], h[3]));
%>
