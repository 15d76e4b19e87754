/**
 * Cost of sonda's method probes: the same small method, called through a loop, once
 * plain and once rewritten by the agent (the collector's filter selects Bench::traced
 * only). Both are kept out of line (-XX:CompileCommand=dontinline,Bench::*), as a
 * traced method of real code would be a real call. Times are the thread's CPU time, so
 * that other processes of a busy machine do not count. Prints one line per round:
 * "round <plain ns/call> <traced ns/call>".
 */
public class Bench {
    static final java.lang.management.ThreadMXBean THREADS = java.lang.management.ManagementFactory.getThreadMXBean();

    static long cpu() {
        return THREADS.getCurrentThreadCpuTime();
    }

    static volatile int sink;

    static int plain(int x) {
        return x ^ (x >>> 3);
    }

    static int traced(int x) {
        return x ^ (x >>> 3);
    }

    static void loopPlain(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += plain(i);
        }
        sink += s;
    }

    static void loopTraced(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += traced(i);
        }
        sink += s;
    }

    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        int rounds = Integer.parseInt(args[1]);
        for (int r = 0; r < rounds; r++) {
            long t0 = cpu();
            loopPlain(n);
            long t1 = cpu();
            loopTraced(n);
            long t2 = cpu();
            System.out.printf("round\t%.3f\t%.3f%n", (t1 - t0) / (double) n, (t2 - t1) / (double) n);
        }
    }
}
