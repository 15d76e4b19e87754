import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** A JVM the test attaches to several times. Reads commands on stdin, one per line:
 *  "work N" calls work() N times and prints "worked <sum>"; "load" loads class Lazy
 *  without linking it ("loaded"); "lazy N" calls Lazy.compute() N times ("computed"); "spawn NAME" starts a thread
 *  NAME that prints "thread NAME <tid>" and waits; "hold" starts a thread "holder" inside
 *  held(), which returns once "release" comes (it prints "held" then); "quit" ends. The
 *  main thread prints "thread main <tid>" and "ready <pid>" first. */
public class Reattach {
    static volatile boolean released;

    /** Loaded before an attach but not linked: JVMTI cannot list its methods then. */
    static class Lazy {
        static int compute(int x) {
            return x + 7;
        }
    }

    static int work(int x) {
        return x * 3 + 1;
    }

    static int other(int x) {
        return x ^ 0x5a;
    }

    static int held() throws InterruptedException {
        while (!released) {
            Thread.sleep(1);
        }
        return 7;
    }

    static String tid() {
        try {
            String s = new String(Files.readAllBytes(Path.of("/proc/thread-self/stat")), StandardCharsets.ISO_8859_1);
            return s.substring(0, s.indexOf(' '));
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        long warm = 0;
        for (int i = 0; i < 200_000; i++) {
            warm += work(i) + other(i); // compiled before any attach
        }
        say("thread\tmain\t" + tid());
        say("ready\t" + ProcessHandle.current().pid() + "\t" + warm);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ");
            switch (f[0]) {
                case "work": {
                    long sum = 0;
                    int n = Integer.parseInt(f[1]);
                    for (int i = 0; i < n; i++) {
                        sum += work(i);
                    }
                    say("worked\t" + sum);
                    break;
                }
                case "spawn": {
                    Thread t = new Thread(() -> {
                        say("thread\t" + Thread.currentThread().getName() + "\t" + tid());
                        try {
                            Thread.sleep(Long.MAX_VALUE);
                        } catch (InterruptedException e) {
                            // ends
                        }
                    }, f[1]);
                    t.setDaemon(true);
                    t.start();
                    break;
                }
                case "hold": {
                    Thread t = new Thread(() -> {
                        say("thread\tholder\t" + tid());
                        try {
                            say("held\t" + held());
                        } catch (InterruptedException e) {
                            // ends
                        }
                    }, "holder");
                    t.setDaemon(true);
                    t.start();
                    break;
                }
                case "load":
                    Class.forName("Reattach$Lazy", false, Reattach.class.getClassLoader());
                    say("loaded");
                    break;
                case "lazy": {
                    long sum = 0;
                    int n = Integer.parseInt(f[1]);
                    for (int i = 0; i < n; i++) {
                        sum += Lazy.compute(i);
                    }
                    say("computed\t" + sum);
                    break;
                }
                case "release":
                    released = true;
                    break;
                case "quit":
                    say("bye");
                    return;
                default:
                    say("unknown\t" + line);
            }
        }
    }
}
