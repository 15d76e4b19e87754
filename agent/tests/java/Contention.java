import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;

/** A waiter blocks on a monitor of class Contention$Lock that a holder keeps 200 ms. */
public class Contention {
    static final class Lock {}

    static String tid() {
        try {
            String s = new String(Files.readAllBytes(Path.of("/proc/thread-self/stat")), java.nio.charset.StandardCharsets.ISO_8859_1);
            return s.substring(0, s.indexOf(' '));
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        int rounds = Integer.parseInt(args[0]);
        for (int r = 0; r < rounds; r++) {
            Lock lock = new Lock();
            CountDownLatch held = new CountDownLatch(1);
            Thread holder = new Thread(() -> {
                synchronized (lock) {
                    held.countDown();
                    try {
                        Thread.sleep(200);
                    } catch (InterruptedException e) {
                        throw new RuntimeException(e);
                    }
                }
            }, "holder-" + r);
            holder.start();
            held.await();
            Thread waiter = new Thread(() -> {
                System.out.println("waiter\t" + tid());
                synchronized (lock) {
                    lock.hashCode();
                }
            }, "waiter-" + r);
            waiter.start();
            waiter.join();
            holder.join();
        }
    }
}
