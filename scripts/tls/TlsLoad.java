import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.security.KeyStore;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;

/**
 * The TLS study's load generator (scripts/study-tls.sh): opens connections at a fixed
 * rate (open loop: a connection starts every 1/RATE s whatever the server does), each
 * one TLS handshake, one `GET PATH` with `Connection: close`, the answer read to its
 * end. With REUSE=1 all connections share one client session cache, so they resume the
 * server's session; with REUSE=0 each has a context of its own and makes a full
 * handshake.
 *
 * It counts for itself which connections resumed (the independent truth sonda's
 * classes are held to): a new session's creation time is taken during the handshake,
 * so it is not before the connection began; a resumed session keeps the creation time
 * of the session it resumes, which is (a full handshake takes milliseconds).
 *
 * Prints "LOAD connections=N full=F resumed=R errors=E seconds=S throughput=X
 * conn_ms_mean=M" (throughput: connections completed per second; conn_ms_mean: from
 * the start of connect to the end of the answer, as httperf's connection time).
 *
 * usage: TlsLoad PORT TRUSTSTORE PASSWORD PROTOCOL RATE SECONDS REUSE PATH
 */
public class TlsLoad {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        char[] password = args[2].toCharArray();
        String protocol = args[3];
        double rate = Double.parseDouble(args[4]);
        double seconds = Double.parseDouble(args[5]);
        boolean reuse = args[6].equals("1");
        String path = args[7];
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (var f = new java.io.FileInputStream(args[1])) {
            ks.load(f, password);
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ks);
        TrustManager[] tms = tmf.getTrustManagers();
        SSLContext shared = SSLContext.getInstance(protocol);
        shared.init(null, tms, null);
        byte[] request = ("GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII);
        InetAddress lo = InetAddress.getLoopbackAddress();

        AtomicLong done = new AtomicLong(), full = new AtomicLong(), resumed = new AtomicLong();
        AtomicLong errors = new AtomicLong(), connNanos = new AtomicLong();
        ExecutorService pool = Executors.newCachedThreadPool();
        long n = Math.round(rate * seconds);
        long period = Math.round(1e9 / rate);
        long t0 = System.nanoTime();
        for (long i = 0; i < n; i++) {
            long due = t0 + i * period;
            long wait = due - System.nanoTime();
            if (wait > 0) {
                TimeUnit.NANOSECONDS.sleep(wait);
            }
            pool.execute(() -> {
                long start = System.nanoTime();
                long startMs = System.currentTimeMillis();
                try {
                    SSLContext ctx = shared;
                    if (!reuse) {
                        ctx = SSLContext.getInstance(protocol);
                        ctx.init(null, tms, null);
                    }
                    try (SSLSocket s = (SSLSocket) ctx.getSocketFactory().createSocket(lo, port)) {
                        // As httperf does: without it, Nagle holds the request
                        // behind the unacknowledged Finished until the server's
                        // delayed ACK (40 ms on Linux).
                        s.setTcpNoDelay(true);
                        s.setEnabledProtocols(new String[] {protocol});
                        s.startHandshake();
                        OutputStream out = s.getOutputStream();
                        out.write(request);
                        out.flush();
                        InputStream in = s.getInputStream();
                        byte[] buf = new byte[8192];
                        long got = 0;
                        for (int r; (r = in.read(buf)) > 0; ) {
                            got += r;
                        }
                        if (got == 0) {
                            throw new IllegalStateException("empty answer");
                        }
                        if (s.getSession().getCreationTime() < startMs) {
                            resumed.incrementAndGet();
                        } else {
                            full.incrementAndGet();
                        }
                    }
                    connNanos.addAndGet(System.nanoTime() - start);
                    done.incrementAndGet();
                } catch (Exception e) {
                    if (errors.incrementAndGet() <= 3) {
                        System.err.println("TlsLoad: " + e);
                    }
                }
            });
        }
        pool.shutdown();
        pool.awaitTermination(60, TimeUnit.SECONDS);
        double elapsed = (System.nanoTime() - t0) / 1e9;
        long d = done.get();
        System.out.printf("LOAD connections=%d full=%d resumed=%d errors=%d seconds=%.3f throughput=%.2f conn_ms_mean=%.3f%n",
                d, full.get(), resumed.get(), errors.get(), elapsed, d / elapsed,
                d == 0 ? 0.0 : connNanos.get() / 1e6 / d);
    }
}
