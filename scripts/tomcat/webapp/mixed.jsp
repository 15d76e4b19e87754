<%-- Mixed page: half the digest chain of cpu.jsp, then a 2 ms sleep. --%><%@ page contentType="text/plain" import="java.security.MessageDigest" %><%
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    byte[] h = new byte[32];
    for (int i = 0; i < 1000; i++) {
        h = md.digest(h);
    }
    Thread.sleep(2);
    out.print("mixed " + String.format("%02x%02x%02x%02x", h[0], h[1], h[2], h[3]));
%>
