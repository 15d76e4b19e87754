import java.util.concurrent.atomic.AtomicLong;

/**
 * Counts its own calls, per method, so a test can compare the calls a trace recorded
 * with the calls really made, exits by exception included. Prints
 * "CALLS <Class::method> <calls> <exits by exception>" for each method.
 *
 * usage: CallCount [THREADS] [ITERATIONS]
 */
public class CallCount {
    static final AtomicLong LEAF = new AtomicLong();
    static final AtomicLong RECURSE = new AtomicLong();
    static final AtomicLong THROWER = new AtomicLong();
    static final AtomicLong THROWER_EXC = new AtomicLong();
    static final AtomicLong CATCHER = new AtomicLong();
    static final AtomicLong NODE_INIT = new AtomicLong();
    static final AtomicLong NODE_INIT_EXC = new AtomicLong();
    static final AtomicLong RUN = new AtomicLong();
    static volatile long sink;

    static class Node {
        final int v;

        Node(int v) {
            super();
            NODE_INIT.incrementAndGet();
            if (v % 11 == 0) {
                NODE_INIT_EXC.incrementAndGet();
                throw new IllegalArgumentException("eleven");
            }
            this.v = v;
        }
    }

    static int leaf(int x) {
        LEAF.incrementAndGet();
        return x * 31 + 7;
    }

    static int recurse(int n) {
        RECURSE.incrementAndGet();
        return n <= 0 ? leaf(n) : recurse(n - 1) + 1;
    }

    static int thrower(int n) {
        THROWER.incrementAndGet();
        if (n % 3 == 0) {
            THROWER_EXC.incrementAndGet();
            throw new IllegalStateException("three");
        }
        return leaf(n);
    }

    static int catcher(int n) {
        CATCHER.incrementAndGet();
        try {
            return thrower(n);
        } catch (IllegalStateException e) {
            return -1;
        }
    }

    static void run(int iterations) {
        RUN.incrementAndGet();
        long acc = 0;
        for (int i = 0; i < iterations; i++) {
            acc += recurse(i % 7);
            acc += catcher(i);
            try {
                acc += new Node(i).v;
            } catch (IllegalArgumentException e) {
                acc--;
            }
        }
        sink += acc;
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 4;
        int iterations = args.length > 1 ? Integer.parseInt(args[1]) : 20000;
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            ts[t] = new Thread(() -> run(iterations), "counter-" + t);
            ts[t].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        System.out.println("CALLS CallCount::leaf " + LEAF.get() + " 0");
        System.out.println("CALLS CallCount::recurse " + RECURSE.get() + " 0");
        System.out.println("CALLS CallCount::thrower " + THROWER.get() + " " + THROWER_EXC.get());
        System.out.println("CALLS CallCount::catcher " + CATCHER.get() + " 0");
        System.out.println("CALLS CallCount$Node::<init> " + NODE_INIT.get() + " " + NODE_INIT_EXC.get());
        System.out.println("CALLS CallCount::run " + RUN.get() + " 0");
    }
}
