package java.lang;

/**
 * Test-only probe for a rewritten java.base: lives in java.lang so every java.base
 * class can call it. The probes call no Java code at all (a class monitor and a
 * primitive array only): they cannot recurse into rewritten code, and they never
 * initialise another class. That matters during JVM bootstrap: the first probe call
 * initialises this class, and a static initialiser that touched, say, Unsafe would
 * initialise it before the JVM has injected its constants (UnsafeConstants) and break
 * it. Counts per method id: entries, exits, exception exits.
 */
public final class SondaProbe {
    private static final int MAX = 1 << 17;
    private static final long[] COUNTS = new long[3 * MAX];

    private SondaProbe() {}

    private static synchronized void add(int id, int kind) {
        if (id >= 0 && id < MAX) COUNTS[3 * id + kind]++;
    }

    public static void enter(int id) {
        add(id, 0);
    }

    public static void exit(int id) {
        add(id, 1);
    }

    public static void exitException(int id) {
        add(id, 2);
    }

    /**
     * "ids E enters E exits X exceptions T open O bad B": bad counts ids with more
     * exits than entries; open is entries not yet closed (frames still on stacks).
     */
    public static synchronized String report() {
        long ids = 0, e = 0, x = 0, t = 0, bad = 0;
        for (int i = 0; i < MAX; i++) {
            long a = COUNTS[3 * i], b = COUNTS[3 * i + 1], c = COUNTS[3 * i + 2];
            if (a != 0) ids++;
            e += a;
            x += b;
            t += c;
            if (b + c > a) bad++;
        }
        return "ids " + ids + " enters " + e + " exits " + x + " exceptions " + t + " open " + (e - x - t)
                + " bad " + bad;
    }
}
