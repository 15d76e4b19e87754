<%-- CPU-bound page: a chain of SHA-256 digests (about 1 ms of CPU on this class of
     machine), no blocking. --%><%@ page contentType="text/plain" import="java.security.MessageDigest" %><%
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    byte[] h = new byte[32];
    for (int i = 0; i < 2000; i++) {
        h = md.digest(h);
    }
    out.print("cpu " + String.format("%02x%02x%02x%02x", h[0], h[1], h[2], h[3]));
%>
