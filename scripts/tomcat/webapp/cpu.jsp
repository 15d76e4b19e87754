<%-- CPU-bound page: a chain of 2000 SHA-256 digests (about 0.2 ms of CPU on a 2-vCPU AMD EPYC KVM guest,
     measured by scripts/bench-tomcat.sh with HEAVY_PAGE=/cpu.jsp), no blocking. --%><%@ page contentType="text/plain" import="java.security.MessageDigest" %><%
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    byte[] h = new byte[32];
    for (int i = 0; i < 2000; i++) {
        h = md.digest(h);
    }
    out.print("cpu " + String.format("%02x%02x%02x%02x", h[0], h[1], h[2], h[3]));
%>
