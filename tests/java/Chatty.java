import java.io.IOException;
import java.util.concurrent.CountDownLatch;

/**
 * Many threads calling one small method as fast as they can: the load that fills every
 * thread's ring of the agent buffer (each thread touches all of its ring's pages within
 * a few milliseconds), for the tests of a buffer file on a small file system.
 *
 * usage: Chatty CALLS WORK [THREADS]
 *
 * THREADS threads (64 by default) each call mid() CALLS thousand times, flat out; mid()
 * runs WORK rounds of arithmetic. With CALLS = 0 the threads call until standard input
 * closes (for attaching while they run), after printing "ready", in bursts of 1000
 * calls 10 ms apart: every ring still overflows, and the collector still gets the CPU
 * it needs to attach and drain (64 threads flat out on two CPUs leave it a few
 * percent, which makes an attach take many seconds). Each thread checks its
 * own result against the closed form, so the output is the same whatever the timing:
 * "Chatty: THREADS threads, every sum right", exit status 0 (1 when a sum is wrong).
 */
public class Chatty {
    static volatile boolean stop;

    static long mid(long i, int work) {
        long x = i;
        for (int k = 0; k < work; k++) {
            x = x * 3 + 1;
        }
        return x;
    }

    /** What the sum of mid(i, work) over i in [0, n) must be (mod 2^64). */
    static long expected(long n, int work) {
        long pow = 1;
        long add = 0;
        for (int k = 0; k < work; k++) {
            add = add * 3 + 1;
            pow *= 3;
        }
        // mid(i) = pow * i + add
        long sumI = (n % 2 == 0) ? (n / 2) * (n - 1) : n * ((n - 1) / 2);
        return pow * sumI + add * n;
    }

    public static void main(String[] args) throws Exception {
        long calls = Long.parseLong(args[0]) * 1000;
        int work = Integer.parseInt(args[1]);
        int threads = args.length > 2 ? Integer.parseInt(args[2]) : 64;
        boolean untilEof = calls == 0;
        boolean[] right = new boolean[threads];
        CountDownLatch started = new CountDownLatch(threads);
        Thread[] all = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int me = t;
            all[t] = new Thread(() -> {
                started.countDown();
                long sum = 0;
                long i = 0;
                while (untilEof ? !stop : i < calls) {
                    sum += mid(i, work);
                    i++;
                    if (untilEof && i % 1000 == 0) {
                        try {
                            Thread.sleep(10);
                        } catch (InterruptedException e) {
                            break;
                        }
                    }
                }
                right[me] = sum == expected(i, work);
            }, "chatty-" + t);
            all[t].start();
        }
        started.await();
        if (untilEof) {
            System.out.println("ready");
            System.out.flush();
            try {
                while (System.in.read() >= 0) {
                    // until EOF
                }
            } catch (IOException e) {
                // EOF it is
            }
            stop = true;
        }
        boolean ok = true;
        for (int t = 0; t < threads; t++) {
            all[t].join();
            ok &= right[t];
        }
        System.out.println("Chatty: " + threads + " threads, " + (ok ? "every sum right" : "a sum is WRONG"));
        System.exit(ok ? 0 : 1);
    }
}
