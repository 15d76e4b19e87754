package sonda;

import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Test-only probe class: counts entries, exits and exception exits per method id and
 * checks, per thread, that every exit closes the innermost open entry of the same id.
 * At shutdown it writes a report to the file named by -Dsonda.probe.report:
 * "id enters exits exceptions" for every id seen, then "errors N", "open N" (entries
 * never closed, summed over threads other than the reporting one) and the first error.
 * Only JDK classes (never rewritten in this test) are used, so the probe cannot
 * recurse into itself.
 */
public final class Probe {
    private static final int MAX = Integer.getInteger("sonda.probe.max", 1 << 16);
    private static final AtomicLongArray ENTERS = new AtomicLongArray(MAX);
    private static final AtomicLongArray EXITS = new AtomicLongArray(MAX);
    private static final AtomicLongArray THROWS = new AtomicLongArray(MAX);
    private static final AtomicLong ERRORS = new AtomicLong();
    private static volatile String firstError;
    private static final ConcurrentLinkedQueue<Stack> STACKS = new ConcurrentLinkedQueue<>();

    private static final class Stack {
        int[] ids = new int[64];
        int depth;
        final String thread = Thread.currentThread().getName();
    }

    private static final ThreadLocal<Stack> STACK = ThreadLocal.withInitial(() -> {
        Stack s = new Stack();
        STACKS.add(s);
        return s;
    });

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(Probe::report));
    }

    private Probe() {}

    private static void error(String what) {
        if (ERRORS.getAndIncrement() == 0) {
            firstError = what + " on thread " + Thread.currentThread().getName();
        }
    }

    private static boolean valid(int id) {
        if (id < 0 || id >= MAX) {
            error("id out of range: " + id);
            return false;
        }
        return true;
    }

    public static void enter(int id) {
        if (!valid(id)) return;
        ENTERS.incrementAndGet(id);
        Stack s = STACK.get();
        if (s.depth == s.ids.length) s.ids = java.util.Arrays.copyOf(s.ids, s.depth * 2);
        s.ids[s.depth++] = id;
    }

    private static void leave(int id, String how) {
        Stack s = STACK.get();
        if (s.depth == 0) {
            error(how + "(" + id + ") with no open entry");
        } else if (s.ids[s.depth - 1] != id) {
            error(how + "(" + id + ") but innermost open entry is " + s.ids[s.depth - 1]);
            s.depth--;
        } else {
            s.depth--;
        }
    }

    public static void exit(int id) {
        if (!valid(id)) return;
        EXITS.incrementAndGet(id);
        leave(id, "exit");
    }

    public static void exitException(int id) {
        if (!valid(id)) return;
        THROWS.incrementAndGet(id);
        leave(id, "exitException");
    }

    private static void report() {
        String path = System.getProperty("sonda.probe.report");
        if (path == null) return;
        Stack me = STACK.get();
        try (PrintWriter w = new PrintWriter(new FileWriter(path))) {
            for (int i = 0; i < MAX; i++) {
                long e = ENTERS.get(i), x = EXITS.get(i), t = THROWS.get(i);
                if (e != 0 || x != 0 || t != 0) w.println(i + " " + e + " " + x + " " + t);
            }
            long open = 0;
            for (Stack s : STACKS) {
                if (s != me) open += s.depth;
            }
            w.println("errors " + ERRORS.get());
            w.println("open " + open);
            if (firstError != null) w.println("first " + firstError);
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }
}
