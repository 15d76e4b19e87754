/**
 * A small JVM workload for the collector's tests: three worker threads each call
 * step() ITERATIONS times; step() spins about a millisecond and sleeps one.
 *
 * usage: Workload [ITERATIONS]
 */
public class Workload {
    static volatile long sink;

    static void step() throws InterruptedException {
        long end = System.nanoTime() + 1_000_000;
        long x = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 100; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
        }
        sink += x;
        Thread.sleep(1);
    }

    public static void main(String[] args) throws Exception {
        int iterations = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        Thread[] workers = new Thread[3];
        for (int w = 0; w < workers.length; w++) {
            workers[w] = new Thread(() -> {
                try {
                    for (int i = 0; i < iterations; i++) {
                        step();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "worker-" + w);
            workers[w].start();
        }
        for (Thread t : workers) {
            t.join();
        }
    }
}
