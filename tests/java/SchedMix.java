import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A workload for checking sonda's thread states against the kernel's own accounting.
 *
 * More runnable threads than CPUs (CPU burners), sleepers, threads doing synchronous file
 * I/O (D state), contention on one monitor, and explicit GCs. Every thread, as the last
 * thing it does, reads its own /proc/thread-self/schedstat and prints
 * "SCHEDSTAT <name> <tid> <run_ns> <wait_ns> <nanoTime of the read> <nr_migrations>
 * <nanoTime before that read> <nanoTime after it>" so a test can compare with the trace up
 * to those instants (nr_migrations: se.nr_migrations of /proc/thread-self/sched, read right
 * after schedstat, -1 where the kernel has no such file).
 *
 * usage: SchedMix DIR [SECONDS]
 */
public class SchedMix {
    /** The class of the contended monitor: the trace must name it. */
    static final class ContendedLock {}

    static final ContendedLock LOCK = new ContendedLock();
    static volatile long sink;

    static void burn(long nanos) {
        long end = System.nanoTime() + nanos;
        long x = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
        }
        sink += x;
    }

    /** "tid run_ns wait_ns when_ns nr_migrations nr_from_ns nr_to_ns": the times are
     * System.nanoTime() (CLOCK_MONOTONIC, the trace's clock): halfway through the schedstat
     * read, and around the read of the migration count, so a test can cut the trace there. */
    static String schedstat() throws IOException {
        String stat = Files.readString(Path.of("/proc/thread-self/stat"), StandardCharsets.US_ASCII);
        String tid = stat.substring(0, stat.indexOf(' '));
        // Once before, so that the classes the read below uses are loaded and it is quick.
        migrations();
        // A running thread's CPU time in schedstat is only brought up to date at the
        // scheduler's next accounting point (a tick, up to 4 ms away): sleeping first
        // makes the kernel account it, so the read is exact up to the last wakeup.
        try {
            Thread.sleep(1);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        long before = System.nanoTime();
        String s = Files.readString(Path.of("/proc/thread-self/schedstat"), StandardCharsets.US_ASCII).trim();
        long after = System.nanoTime();
        long beforeNr = System.nanoTime();
        long nr = migrations();
        long afterNr = System.nanoTime();
        String[] f = s.split(" ");
        return tid + " " + f[0] + " " + f[1] + " " + (before + (after - before) / 2) + " " + nr
                + " " + beforeNr + " " + afterNr;
    }

    /** The kernel's count of moves of this thread to another CPU, -1 if unknown. */
    static long migrations() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/thread-self/sched"), StandardCharsets.US_ASCII)) {
                if (line.startsWith("se.nr_migrations")) {
                    return Long.parseLong(line.substring(line.indexOf(':') + 1).trim());
                }
            }
        } catch (IOException | NumberFormatException e) {
            // No scheduler debug file on this kernel.
        }
        return -1;
    }

    static void report() {
        try {
            String line = "SCHEDSTAT " + Thread.currentThread().getName() + " " + schedstat();
            synchronized (System.out) {
                System.out.println(line);
            }
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 3.0;
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            threads.add(new Thread(() -> {
                while (System.nanoTime() < deadline) {
                    burn(8_000_000);
                    synchronized (LOCK) {
                        burn(2_000_000);
                    }
                }
                report();
            }, "cpu-burner-" + i));
        }
        for (int i = 0; i < 2; i++) {
            threads.add(new Thread(() -> {
                try {
                    while (System.nanoTime() < deadline) {
                        Thread.sleep(10);
                        burn(1_000_000);
                    }
                } catch (InterruptedException e) {
                    return;
                }
                report();
            }, "sleeper-" + i));
        }
        for (int i = 0; i < 2; i++) {
            final int n = i;
            threads.add(new Thread(() -> {
                byte[] block = new byte[256 * 1024];
                try (RandomAccessFile f = new RandomAccessFile(dir.resolve("io-" + n + ".dat").toFile(), "rw")) {
                    while (System.nanoTime() < deadline) {
                        f.seek(0);
                        f.write(block);
                        f.getFD().sync();
                        burn(2_000_000);
                    }
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
                report();
            }, "io-writer-" + i));
        }
        for (Thread t : threads) {
            t.start();
        }
        List<byte[]> garbage = new ArrayList<>();
        while (System.nanoTime() < deadline) {
            for (int i = 0; i < 2000; i++) {
                garbage.add(new byte[1024]);
            }
            garbage.clear();
            System.gc();
            Thread.sleep(200);
        }
        for (Thread t : threads) {
            t.join();
        }
        report();
        System.out.println("DONE " + threads.size() + " threads");
    }
}
