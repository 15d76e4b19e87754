package demo;

import java.io.IOException;
import java.io.PrintStream;
import java.io.RandomAccessFile;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A small service with request classes of known demand: the bundled demo workload.
 *
 * A generator thread sends requests with exponential inter-arrival times to a pool of
 * worker threads ("worker-N"). Each request class burns a set amount of thread CPU time,
 * sleeps a set time, writes to a file synchronously, or a mix. Every call measures itself
 * with the JVM's own clocks (ThreadMXBean thread CPU time, System.nanoTime) and its
 * thread's run-queue wait (/proc/thread-self/schedstat), so a trace's per-call demands can
 * be checked against the JVM's own figures.
 *
 * Mean CPU demand per request: 0.5 x 2 ms + 0.3 x 1 ms + 0.2 x (2 ms + the write's own
 * CPU time) = about 1.8 ms, so the default 550 requests/s keep about one CPU busy.
 *
 * usage: ServiceDemo [--workers N] [--rate REQ_PER_S] [--seconds S] [--out CSV] [--dir DIR]
 * Prints one summary line per request class; with --out, one CSV line per call: class,
 * thread, start_ns and wall_ns (System.nanoTime just around the call), cpu_ns (thread CPU
 * time), and over a span holding both (see measured): wait_ns (run-queue wait), span_ns
 * (its length) and span_cpu_ns (its thread CPU time).
 */
public final class ServiceDemo {
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();
    static volatile long sink;

    /** Per-class totals measured by the calls themselves. */
    static final class Stats {
        final String name;
        final AtomicInteger calls = new AtomicInteger();
        final AtomicLong cpuNs = new AtomicLong();
        final AtomicLong wallNs = new AtomicLong();
        final AtomicLong waitNs = new AtomicLong();

        Stats(String name) {
            this.name = name;
        }
    }

    static final Stats BROWSE = new Stats("browse");
    static final Stats SEARCH = new Stats("search");
    static final Stats CHECKOUT = new Stats("checkout");

    static PrintStream perCall;
    static Path dir;

    /** Burns about `nanos` of this thread's CPU time. */
    static void burnCpu(long nanos) {
        long end = MX.getCurrentThreadCpuTime() + nanos;
        long x = sink;
        do {
            for (int i = 0; i < 2000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
        } while (MX.getCurrentThreadCpuTime() < end);
        sink = x;
    }

    static void sleepMs(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** A page view: pure CPU, 2 ms. */
    public static void browse() {
        burnCpu(2_000_000);
    }

    /** A search: 1 ms CPU, then 3 ms waiting for a (simulated) back end. */
    public static void search() {
        burnCpu(1_000_000);
        sleepMs(3);
    }

    /** A checkout: 2 ms CPU (pricing, the order), a synchronous 4 KiB write to disk, 2 ms waiting. */
    public static void checkout() {
        burnCpu(2_000_000);
        try (RandomAccessFile f = new RandomAccessFile(dir.resolve("orders-" + Thread.currentThread().getName()).toFile(), "rw")) {
            f.write(new byte[4096]);
            f.getFD().sync();
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
        sleepMs(2);
    }

    /** Each thread's own schedstat file, kept open and re-read at offset 0 (one pread). */
    static final ThreadLocal<FileChannel> SCHEDSTAT = ThreadLocal.withInitial(() -> {
        try {
            return FileChannel.open(Path.of("/proc/thread-self/schedstat"), StandardOpenOption.READ);
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
    });
    static final ThreadLocal<ByteBuffer> SCHEDSTAT_BUF = ThreadLocal.withInitial(() -> ByteBuffer.allocate(128));

    /** Per-thread scratch for two schedstat readings: {wait, timeslices} each. */
    static final ThreadLocal<long[]> SCHEDSTAT_READS = ThreadLocal.withInitial(() -> new long[4]);

    /**
     * Reads this thread's schedstat into into[at] (total run-queue wait, ns) and into[at + 1]
     * (timeslices run: one more at every switch-in). False when unreadable.
     */
    static boolean schedstat(long[] into, int at) {
        FileChannel f = SCHEDSTAT.get();
        if (f == null) {
            return false;
        }
        try {
            ByteBuffer b = SCHEDSTAT_BUF.get();
            b.clear();
            int n = f.read(b, 0);
            int i = 0;
            while (i < n && b.get(i) != ' ') {
                i++;
            }
            for (int field = 0; field < 2; field++) {
                long v = 0;
                for (i++; i < n && b.get(i) >= '0' && b.get(i) <= '9'; i++) {
                    v = v * 10 + (b.get(i) - '0');
                }
                into[at + field] = v;
            }
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * An instant (System.nanoTime) at which this thread's run-queue wait is known exactly,
     * with the thread's CPU time read right beside it: schedstat is read before and after
     * the two clocks, again until no switch-in happened between the two reads (the
     * run-queue wait only grows at a switch-in). CPU time and wait go to into[0] and
     * into[1] (wait -1 if schedstat cannot be read); `cpuFirst` reads the CPU clock
     * before nanoTime (at a span's end) instead of after it (at its start), so the span
     * holds the CPU window.
     */
    static long instantWithWait(long[] into, boolean cpuFirst) {
        long[] r = SCHEDSTAT_READS.get();
        while (true) {
            boolean readable = schedstat(r, 0);
            long t;
            if (cpuFirst) {
                into[0] = MX.getCurrentThreadCpuTime();
                t = System.nanoTime();
            } else {
                t = System.nanoTime();
                into[0] = MX.getCurrentThreadCpuTime();
            }
            if (!readable) {
                into[1] = -1;
                return t;
            }
            if (schedstat(r, 2) && r[0] == r[2] && r[1] == r[3]) {
                into[1] = r[0];
                return t;
            }
        }
    }

    /**
     * Runs one call and measures it with the JVM's clocks: its wall time (nanoTime just
     * around the call) and thread CPU time (just around those), and, over a span that
     * holds them, the span's own CPU time and run-queue wait. The span starts and ends at
     * instants whose wait is known exactly (see instantWithWait), so span - span CPU -
     * wait is the time the call was blocked, whatever preempts the thread around the
     * call: the same interval for all three clocks.
     */
    static void measured(Stats s, Runnable call) {
        long[] start = new long[2];
        long[] end = new long[2];
        long s0 = instantWithWait(start, false);
        long c0 = MX.getCurrentThreadCpuTime();
        long t0 = System.nanoTime();
        call.run();
        long t1 = System.nanoTime();
        long c1 = MX.getCurrentThreadCpuTime();
        long s1 = instantWithWait(end, true);
        long wait = start[1] < 0 || end[1] < 0 ? -1 : end[1] - start[1];
        s.calls.incrementAndGet();
        s.cpuNs.addAndGet(c1 - c0);
        s.wallNs.addAndGet(t1 - t0);
        s.waitNs.addAndGet(Math.max(0, wait));
        if (perCall != null) {
            String line = String.format(Locale.ROOT, "%s,%s,%d,%d,%d,%d,%d,%d", s.name, Thread.currentThread().getName(),
                    t0, t1 - t0, c1 - c0, wait, s1 - s0, end[0] - start[0]);
            synchronized (perCall) {
                perCall.println(line);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        int workers = 6;
        double rate = 550;
        double seconds = 6;
        String out = null;
        dir = Path.of(System.getProperty("java.io.tmpdir"));
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--workers": workers = Integer.parseInt(args[++i]); break;
                case "--rate": rate = Double.parseDouble(args[++i]); break;
                case "--seconds": seconds = Double.parseDouble(args[++i]); break;
                case "--out": out = args[++i]; break;
                case "--dir": dir = Path.of(args[++i]); break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        Files.createDirectories(dir);
        if (out != null) {
            perCall = new PrintStream(out, "UTF-8");
            perCall.println("class,thread,start_ns,wall_ns,cpu_ns,wait_ns,span_ns,span_cpu_ns");
        }
        AtomicInteger n = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(workers, r -> new Thread(r, "worker-" + n.incrementAndGet()));
        Random random = new Random(42);
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long next = System.nanoTime();
        while (next < end) {
            double u = random.nextDouble();
            Runnable task;
            if (u < 0.5) {
                task = () -> measured(BROWSE, ServiceDemo::browse);
            } else if (u < 0.8) {
                task = () -> measured(SEARCH, ServiceDemo::search);
            } else {
                task = () -> measured(CHECKOUT, ServiceDemo::checkout);
            }
            pool.execute(task);
            next += (long) (-Math.log(1 - random.nextDouble()) / rate * 1e9);
            long wait = next - System.nanoTime();
            if (wait > 0) {
                TimeUnit.NANOSECONDS.sleep(wait);
            }
        }
        pool.shutdown();
        pool.awaitTermination(1, TimeUnit.MINUTES);
        if (perCall != null) {
            perCall.close();
        }
        for (Stats s : new Stats[] {BROWSE, SEARCH, CHECKOUT}) {
            int c = Math.max(1, s.calls.get());
            System.out.printf(Locale.ROOT, "%-9s calls %6d  mean cpu %8.3f ms  mean wall %8.3f ms  mean cpu wait %8.3f ms%n",
                    s.name, s.calls.get(), s.cpuNs.get() / 1e6 / c, s.wallNs.get() / 1e6 / c, s.waitNs.get() / 1e6 / c);
        }
    }
}
