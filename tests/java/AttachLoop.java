import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.DataOutputStream;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.locks.LockSupport;

/**
 * A program that runs its own loop while sonda attaches to it, records, detaches and
 * attaches again; it counts what it did itself, which the test compares with the traces.
 *
 * <p>Thread "counter" calls work() in bursts of 100 (about 100,000 calls a second) until
 * the end; work() stores System.nanoTime() (CLOCK_MONOTONIC, the trace's clock), taken in
 * the middle of its body, in an array: a call is inside a recording iff its stamp lies
 * between the first recorded entry and the last recorded exit. At the end the stamps go
 * to the file args[0] (big-endian longs).
 *
 * <p>Thread "napper" calls nap(), 20 ms parked, until the end.
 *
 * <p>The main thread reads commands on stdin: "measure LABEL CALLS WINDOWS" times tiny()
 * (a small method, never inlined with -XX:CompileCommand=dontinline) and reference() (the
 * same code, never instrumented) with the thread's CPU time, alternating windows of CALLS
 * calls (pairs to warm up until three agree within 3%, then WINDOWS pairs), and prints "cost LABEL <median ns per
 * tiny() call> <median ns per reference() call> <median ratio> <calls per window>
 * <windows> <tiny() calls made, warm-up included> <first ns> <last ns>"; "gc N" runs N full collections ("gcs N"); "linger" starts thread "lingerer" in linger(), which returns only at the end ("lingering"); "contend MS" makes two threads
 * ("contender-1", "contender-2") fight for one lock for MS ms ("contended"); "end" stops
 * the counter and prints "calls <n>" and "check <sum of work()'s results>", which depend
 * only on n: the output a run with nobody attached prints.
 */
public class AttachLoop {
    static final int BURST = 100;
    static long[] stamps = new long[1 << 20];
    static int count;
    static long checksum;
    static volatile boolean stop;
    static int sink;

    /** Some arithmetic the JIT cannot remove (about 100 ns), around the stamp. */
    static int spin(int x) {
        int h = x;
        for (int i = 0; i < 40; i++) {
            h = h * 31 + (h >>> 7) + i;
        }
        return h;
    }

    static int work(int x) {
        int h = spin(x);
        long t = System.nanoTime();
        if (count == stamps.length) {
            stamps = Arrays.copyOf(stamps, stamps.length * 2);
        }
        stamps[count++] = t;
        sink += spin(h);
        return x * 3 + 1;
    }

    /** A call that lasts 20 ms, nearly all of it parked: one is nearly always in flight
     *  when a recording stops, so its exit shows whether the agent waits for the calls
     *  still running instrumented code before it ends the recording. */
    static void nap() {
        LockSupport.parkNanos(20_000_000);
    }

    /** A call that returns only at the end: a run loop entered during a recording. */
    static void linger() {
        while (!stop) {
            LockSupport.parkNanos(5_000_000);
        }
    }

    /** A small method (a few ns of dependent arithmetic) whose per-call cost shows a
     *  probe left behind: a probe pair costs ten times more. */
    static int tiny(int x) {
        int h = x;
        for (int i = 0; i < 8; i++) {
            h = (h * 31) ^ (h >>> 3);
        }
        return h;
    }

    /** The same as tiny(), never instrumented: measured in the same windows, it tells
     *  how fast the machine is running at that moment (frequency, the other core's load). */
    static int reference(int x) {
        int h = x;
        for (int i = 0; i < 8; i++) {
            h = (h * 31) ^ (h >>> 3);
        }
        return h;
    }

    static String tid() throws Exception {
        String s = new String(Files.readAllBytes(Path.of("/proc/thread-self/stat")), StandardCharsets.ISO_8859_1);
        return s.substring(0, s.indexOf(' '));
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** ns of CPU per tiny() call over one window of m calls. */
    static double windowTiny(ThreadMXBean cpu, int m) {
        long c0 = cpu.getCurrentThreadCpuTime();
        int acc = 0;
        for (int i = 0; i < m; i++) {
            acc = tiny(acc ^ i); // each call waits for the last: latency, not throughput
        }
        long c1 = cpu.getCurrentThreadCpuTime();
        sink += acc;
        return (double) (c1 - c0) / m;
    }

    /** ns of CPU per reference() call over one window of m calls. */
    static double windowReference(ThreadMXBean cpu, int m) {
        long c0 = cpu.getCurrentThreadCpuTime();
        int acc = 0;
        for (int i = 0; i < m; i++) {
            acc = reference(acc ^ i);
        }
        long c1 = cpu.getCurrentThreadCpuTime();
        sink += acc;
        return (double) (c1 - c0) / m;
    }

    static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }

    /** Windows of tiny() and reference() calls, alternating; the ratio of each pair is
     *  the cost of tiny() relative to the machine's speed at that moment. */
    static void measure(ThreadMXBean cpu, String label, int calls, int windows) {
        // Warm up until three windows in a row agree within 3% (at least 3, at most 50):
        // after a detach both methods run interpreted, then C1 code, until C2 compiles
        // them again, later on a busy machine.
        double[] recent = new double[3];
        long made = 0;
        for (int w = 0; w < 50; w++) {
            made += calls;
            recent[w % 3] = windowTiny(cpu, calls) + windowReference(cpu, calls);
            double lo = Math.min(recent[0], Math.min(recent[1], recent[2]));
            double hi = Math.max(recent[0], Math.max(recent[1], recent[2]));
            if (w >= 2 && hi <= lo * 1.03) {
                break;
            }
        }
        long first = System.nanoTime();
        double[] tiny = new double[windows];
        double[] reference = new double[windows];
        double[] ratio = new double[windows];
        for (int w = 0; w < windows; w++) {
            made += calls;
            tiny[w] = windowTiny(cpu, calls);
            reference[w] = windowReference(cpu, calls);
            ratio[w] = tiny[w] / reference[w];
        }
        long last = System.nanoTime();
        say(String.format("cost\t%s\t%.4f\t%.4f\t%.4f\t%d\t%d\t%d\t%d\t%d", label, median(tiny),
                median(reference), median(ratio), calls, windows, made, first, last));
    }

    static final Object LOCK = new Object();

    /** Two threads taking turns on LOCK, each holding it for 2 ms, for `ms` ms. */
    static void contend(long ms) throws InterruptedException {
        long until = System.nanoTime() + ms * 1_000_000;
        Thread[] ts = new Thread[2];
        for (int k = 0; k < 2; k++) {
            ts[k] = new Thread(() -> {
                while (System.nanoTime() < until) {
                    synchronized (LOCK) {
                        LockSupport.parkNanos(2_000_000);
                    }
                }
            }, "contender-" + (k + 1));
            ts[k].start();
        }
        for (Thread t : ts) {
            t.join();
        }
    }

    public static void main(String[] args) throws Exception {
        ThreadMXBean cpu = ManagementFactory.getThreadMXBean();
        Thread counter = new Thread(() -> {
            try {
                say("thread\tcounter\t" + tid());
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            int i = 0;
            while (!stop) {
                for (int b = 0; b < BURST; b++) {
                    checksum += work(i++);
                }
                LockSupport.parkNanos(1_000_000);
            }
        }, "counter");
        counter.start();
        Thread napper = new Thread(() -> {
            try {
                say("thread\tnapper\t" + tid());
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            while (!stop) {
                nap();
            }
        }, "napper");
        napper.setDaemon(true);
        napper.start();
        say("thread\tmain\t" + tid());
        for (int w = 0; w < 20; w++) {
            windowTiny(cpu, 1_000_000); // tiny() and the loops compiled before any attach
            windowReference(cpu, 1_000_000);
        }
        while (count < 20_000) {
            Thread.sleep(10); // work() compiled too
        }
        say("ready\t" + ProcessHandle.current().pid());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ");
            if (f[0].equals("measure")) {
                measure(cpu, f[1], Integer.parseInt(f[2]), Integer.parseInt(f[3]));
            } else if (f[0].equals("gc")) {
                int n = Integer.parseInt(f[1]);
                for (int g = 0; g < n; g++) {
                    System.gc();
                }
                say("gcs\t" + n);
            } else if (f[0].equals("contend")) {
                contend(Long.parseLong(f[1]));
                say("contended");
            } else if (f[0].equals("linger")) {
                Thread lingerer = new Thread(AttachLoop::linger, "lingerer");
                lingerer.setDaemon(true);
                lingerer.start();
                say("lingering");
            } else if (f[0].equals("end")) {
                break;
            } else {
                say("unknown\t" + line);
            }
        }
        stop = true;
        counter.join();
        try (DataOutputStream out = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(args[0])))) {
            for (int i = 0; i < count; i++) {
                out.writeLong(stamps[i]);
            }
        }
        say("calls\t" + count);
        say("check\t" + checksum);
    }
}
