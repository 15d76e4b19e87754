package old;

/** Compiled with --release 7; the test patches the class version to 51. */
public class V51 {
    private int total;

    V51(int start) {
        total = start < 0 ? -start : start;
    }

    synchronized int add(int x) {
        if (x % 5 == 0) throw new IllegalArgumentException("five");
        total += x;
        return total;
    }

    static long mix(long a, double b) {
        long r = a;
        for (int i = 0; i < 4; i++) {
            r = r * 3 + (long) (b * i);
        }
        return r;
    }

    static String kind(int x) {
        switch (x) {
            case 1: return "one";
            case 2: return "two";
            case 1000: return "thousand";
            default: return "many";
        }
    }

    static int deep(int n) {
        if (n == 0) throw new IllegalStateException("bottom");
        try {
            return deep(n - 1);
        } finally {
            n++;
        }
    }

    public static String run(int n) {
        V51 v = new V51(-n);
        int errors = 0;
        for (int i = 1; i < 12; i++) {
            try {
                v.add(i);
            } catch (IllegalArgumentException e) {
                errors++;
            }
        }
        String k = kind(1) + kind(2) + kind(1000) + kind(n);
        int d;
        try {
            d = deep(5);
        } catch (IllegalStateException e) {
            d = -5;
        }
        return v.total + " " + errors + " " + mix(n, 1.5) + " " + k + " " + d;
    }
}
