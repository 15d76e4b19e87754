import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** Runs without the agent until the test attaches it: prints "ready", waits for the
 *  file args[0], then calls work() args[1] times and prints "phase1"; waits for the file
 *  args[2] (after the test stopped the recording), calls work() as often again, and
 *  prints "sum". Two sleeper threads are alive throughout; every thread prints its
 *  kernel tid. */
public class AttachTarget {
    static int work(int x) {
        return x * 3 + 1;
    }

    static String tid() {
        try {
            String s = new String(Files.readAllBytes(Path.of("/proc/thread-self/stat")), StandardCharsets.ISO_8859_1);
            return s.substring(0, s.indexOf(' '));
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        Path go = Path.of(args[0]);
        int n = Integer.parseInt(args[1]);
        long warm = 0;
        for (int i = 0; i < 100_000; i++) {
            warm += work(i); // compiled before the attach: retransformation must still apply
        }
        for (String name : new String[] {"sleeper-1", "sleeper-2"}) {
            Thread t = new Thread(() -> {
                System.out.println("thread\t" + Thread.currentThread().getName() + "\t" + tid());
                while (!Files.exists(go)) {
                    try {
                        Thread.sleep(10);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, name);
            t.setDaemon(true);
            t.start();
        }
        System.out.println("thread\tmain\t" + tid());
        System.out.println("ready\t" + ProcessHandle.current().pid());
        System.out.flush();
        while (!Files.exists(go)) {
            Thread.sleep(10);
        }
        long sum = warm;
        for (int i = 0; i < n; i++) {
            sum += work(i);
        }
        System.out.println("phase1\t" + sum);
        System.out.flush();
        Path again = Path.of(args[2]);
        while (!Files.exists(again)) {
            Thread.sleep(10);
        }
        for (int i = 0; i < n; i++) {
            sum += work(i);
        }
        System.out.println("sum\t" + sum);
    }
}
