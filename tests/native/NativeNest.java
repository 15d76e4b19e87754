/**
 * A Java program whose methods call a JNI library (tests/native/nativenest.c, built
 * with -finstrument-functions and linked with -lsonda): on the main thread and on a
 * second thread, Java methods call C functions that call C functions, so a trace must
 * show the C functions nested inside the Java methods that called them.
 *
 * Prints the same lines with or without sonda: a sum per thread and the program's own
 * count of C calls (the native library counts them).
 *
 * Usage: NativeNest [rounds]
 */
public class NativeNest {
    static {
        System.loadLibrary("nativenest");
    }

    /** C: Java_NativeNest_work -> c_outer -> c_inner (recursive). */
    static native long work(int n);

    /** C: the library's own count of calls per C function, one "calls name n" line each. */
    static native String counts();

    static long javaOuter(int n) {
        return work(n) + javaLeaf(n);
    }

    static long javaLeaf(int n) {
        return n;
    }

    static long loop(int rounds) {
        long sum = 0;
        for (int i = 0; i < rounds; i++) {
            sum += javaOuter(i % 6);
        }
        return sum;
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 100;
        long[] other = new long[1];
        Thread t = new Thread(() -> other[0] = loop(rounds), "nest-worker");
        t.start();
        long mine = loop(rounds);
        t.join();
        System.out.println("main " + mine);
        System.out.println("worker " + other[0]);
        System.out.print(counts());
    }
}
