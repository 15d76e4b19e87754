<%-- Blocking page: sleeps 5 ms and uses almost no CPU. --%><%@ page contentType="text/plain" %><%
    Thread.sleep(5);
    out.print("slept 5 ms");
%>
