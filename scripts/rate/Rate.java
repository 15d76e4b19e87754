/**
 * A steady call rate for the agent's recording path (scripts/bench-rate.sh): THREADS
 * threads each call {@link Target#work} RATE times a second (paced in batches of 1000
 * against System.nanoTime; 0 is as fast as it can) for SECONDS seconds, then print the
 * calls each made, so the recording's count can be held to it.
 *
 * PACE says how a thread ahead of its schedule waits: "spin" (the default) busy-waits,
 * so each thread holds a CPU all the time whatever its rate, as a CPU-bound program
 * would; "sleep" parks until the schedule catches up when it is more than 100 us ahead,
 * so a thread uses the CPU its calls need, as a server at that rate would.
 *
 * Usage: java Rate THREADS RATE SECONDS [spin|sleep]
 */
public final class Rate {
    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long rate = Long.parseLong(args[1]);
        double seconds = Double.parseDouble(args[2]);
        boolean sleep = args.length > 3 && args[3].equals("sleep");
        if (args.length > 3 && !sleep && !args[3].equals("spin")) {
            throw new IllegalArgumentException("PACE is spin or sleep, not " + args[3]);
        }
        long[] calls = new long[threads];
        long[] sinks = new long[threads];
        Thread[] workers = new Thread[threads];
        long start = System.nanoTime();
        long end = start + (long) (seconds * 1e9);
        for (int t = 0; t < threads; t++) {
            final int me = t;
            workers[t] = new Thread(() -> {
                long n = 0;
                long sink = 0;
                long now = System.nanoTime();
                while (now < end) {
                    for (int i = 0; i < 1000; i++) {
                        sink += Target.work(n + i);
                    }
                    n += 1000;
                    now = System.nanoTime();
                    if (rate > 0) {
                        // Behind schedule: go on; ahead: wait for the schedule.
                        long due = start + (long) (n * 1e9 / rate);
                        while (now < due && now < end) {
                            if (sleep && due - now > 100_000) {
                                java.util.concurrent.locks.LockSupport.parkNanos(due - now);
                            } else {
                                Thread.onSpinWait();
                            }
                            now = System.nanoTime();
                        }
                    }
                }
                calls[me] = n;
                sinks[me] = sink;
            }, "rate-" + t);
        }
        for (Thread w : workers) w.start();
        for (Thread w : workers) w.join();
        long total = 0;
        long sink = 0;
        for (int t = 0; t < threads; t++) {
            total += calls[t];
            sink += sinks[t];
        }
        double elapsed = (System.nanoTime() - start) / 1e9;
        System.out.printf("calls=%d elapsed=%.3f rate=%.0f sink=%d%n", total, elapsed, total / elapsed, sink & 1);
    }
}

final class Target {
    static long work(long x) {
        return x ^ (x >>> 7);
    }
}
