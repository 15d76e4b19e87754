import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.security.KeyStore;
import java.util.Arrays;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSession;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;

/**
 * A TLS server and its client in one JVM, for telling full TLS handshakes from resumed
 * ones in a trace.
 *
 * The server accepts on 127.0.0.1 and hands each connection to one of two workers,
 * which call {@link #serve}: the handshake, one request line, one answer, close. So one
 * {@code serve} call is one connection, and the JSSE methods of its handshake run
 * inside it on its thread (a full handshake calls the server-certificate producer, a
 * resumed one does not).
 *
 * The client makes FULL connections that each start a new session (the session is
 * invalidated after each, so the next cannot resume it), then RESUMED connections
 * after one more full one that opens the session they resume. It counts for itself
 * which connections resumed: a connection whose session has the creation time of the
 * session before it (and, in TLS 1.2, its id) resumed that session (JSSE keeps both on
 * resumption; TLS 1.3 gives the resumed session a new id; the client waits 2 ms after
 * each connection so that no two new sessions share a creation time). It prints "CLIENT full=F resumed=R" at the end, the truth a test
 * holds the trace to.
 *
 * usage: TlsPair KEYSTORE PASSWORD PROTOCOL FULL RESUMED (PROTOCOL: TLSv1.2, TLSv1.3)
 */
public class TlsPair {
    /** One connection, on a worker thread: the whole server side of it. */
    static void serve(SSLSocket s) throws Exception {
        try (s) {
            s.startHandshake();
            BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.US_ASCII));
            String line = in.readLine();
            OutputStream out = s.getOutputStream();
            out.write(("ok " + line + "\n").getBytes(StandardCharsets.US_ASCII));
            out.flush();
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: TlsPair KEYSTORE PASSWORD PROTOCOL FULL RESUMED");
            System.exit(2);
        }
        char[] password = args[1].toCharArray();
        String protocol = args[2];
        int full = Integer.parseInt(args[3]);
        int resumed = Integer.parseInt(args[4]);
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (FileInputStream f = new FileInputStream(args[0])) {
            ks.load(f, password);
        }
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(ks, password);
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ks);

        SSLContext serverCtx = SSLContext.getInstance(protocol);
        serverCtx.init(kmf.getKeyManagers(), null, null);
        SSLServerSocket server = (SSLServerSocket) serverCtx.getServerSocketFactory()
                .createServerSocket(0, 64, InetAddress.getLoopbackAddress());
        server.setEnabledProtocols(new String[] {protocol});
        ExecutorService workers = Executors.newFixedThreadPool(2, r -> new Thread(r, "tls-worker"));
        Thread acceptor = new Thread(() -> {
            try {
                while (true) {
                    SSLSocket s = (SSLSocket) server.accept();
                    workers.execute(() -> {
                        try {
                            serve(s);
                        } catch (Exception e) {
                            System.err.println("server: " + e);
                        }
                    });
                }
            } catch (Exception e) {
                // closed at the end
            }
        }, "tls-acceptor");
        acceptor.start();

        SSLContext clientCtx = SSLContext.getInstance(protocol);
        clientCtx.init(null, tmf.getTrustManagers(), null);
        int port = server.getLocalPort();
        int sawFull = 0;
        int sawResumed = 0;
        byte[] lastId = null;
        long lastCreated = -1;
        int total = full + (resumed > 0 ? resumed + 1 : 0);
        for (int i = 0; i < total; i++) {
            boolean keep = i >= full;
            try (SSLSocket c = (SSLSocket) clientCtx.getSocketFactory()
                    .createSocket(InetAddress.getLoopbackAddress(), port)) {
                c.setEnabledProtocols(new String[] {protocol});
                c.startHandshake();
                OutputStream out = c.getOutputStream();
                out.write(("GET " + i + "\n").getBytes(StandardCharsets.US_ASCII));
                out.flush();
                BufferedReader in = new BufferedReader(new InputStreamReader(c.getInputStream(), StandardCharsets.US_ASCII));
                String answer = in.readLine();
                if (answer == null || !answer.equals("ok GET " + i)) {
                    throw new IllegalStateException("connection " + i + ": answer " + answer);
                }
                SSLSession session = c.getSession();
                byte[] id = session.getId();
                // TLS 1.3 gives a resumed session a new id: there the creation time
                // tells (a new session's is the clock's, 2 ms past the one before).
                boolean wasResumed = lastId != null && session.getCreationTime() == lastCreated
                        && (protocol.equals("TLSv1.3") || Arrays.equals(id, lastId));
                if (wasResumed) {
                    sawResumed++;
                } else {
                    sawFull++;
                }
                lastId = id;
                lastCreated = session.getCreationTime();
                if (!keep) {
                    // The next connection must not resume this session.
                    session.invalidate();
                    lastId = null;
                }
            }
            Thread.sleep(2);
        }
        server.close();
        workers.shutdown();
        if (!workers.awaitTermination(10, TimeUnit.SECONDS)) {
            throw new IllegalStateException("workers did not finish");
        }
        System.out.println("CLIENT protocol=" + protocol + " full=" + sawFull + " resumed=" + sawResumed);
    }
}
