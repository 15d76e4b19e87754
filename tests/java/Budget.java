import java.util.concurrent.atomic.AtomicLong;

/**
 * A workload for the overhead budget: "requests" (request, a few milliseconds each,
 * once per request) that each call a tiny method (hot) thousands of times between
 * bits of real work. Both live in this class, so that removing hot's probes
 * retransforms the class that holds request while requests are in flight.
 *
 * Prints "CALLS Budget::request <n> 0" and "CALLS Budget::hot <n> 0" (the calls
 * made), and "RATE <requests a second>" over the second half of the run.
 *
 * usage: Budget [THREADS] [SECONDS] [HOT_PER_REQUEST]
 */
public class Budget {
    static final AtomicLong REQUESTS = new AtomicLong();
    static final AtomicLong HOT = new AtomicLong();
    static volatile long sink;
    static volatile boolean stop;

    static int hot(int x) {
        return x * 31 + 7;
    }

    static long request(int n) {
        long acc = n;
        for (int i = 0; i < n; i++) {
            acc += hot(i);
            // Real work between two calls: a few hundred dependent multiplies.
            for (int j = 0; j < 400; j++) {
                acc = acc * 6364136223846793005L + 1442695040888963407L;
            }
        }
        return acc;
    }

    static void serve(int hotPerRequest) {
        long acc = 0;
        long requests = 0;
        while (!stop) {
            acc += request(hotPerRequest);
            requests++;
            REQUESTS.incrementAndGet();
        }
        HOT.addAndGet(requests * hotPerRequest);
        sink += acc;
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 4;
        int hotPerRequest = args.length > 2 ? Integer.parseInt(args[2]) : 5000;
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            ts[t] = new Thread(() -> serve(hotPerRequest), "server-" + t);
            ts[t].start();
        }
        long half = (long) (seconds * 500);
        Thread.sleep(half);
        long at = REQUESTS.get();
        long t0 = System.nanoTime();
        Thread.sleep(half);
        long done = REQUESTS.get() - at;
        double rate = done * 1e9 / (System.nanoTime() - t0);
        stop = true;
        for (Thread t : ts) {
            t.join();
        }
        System.out.println("CALLS Budget::request " + REQUESTS.get() + " 0");
        System.out.println("CALLS Budget::hot " + HOT.get() + " 0");
        System.out.printf("RATE %.1f%n", rate);
    }
}
