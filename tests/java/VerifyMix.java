import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Function;
import java.util.function.IntUnaryOperator;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * A workload that exercises what a bytecode rewriter can get wrong: threads, exceptions
 * at many depths, recursion, constructors that throw before and after super(), static
 * initialisers, lambdas, switch-heavy code, synchronized methods, long/double locals,
 * try/finally. Its output is deterministic, so a run under the agent must print exactly
 * what a run without it prints.
 */
public class VerifyMix {
    static final Map<String, Integer> TABLE;

    static {
        TABLE = new TreeMap<>();
        for (int i = 0; i < 5; i++) {
            TABLE.put("k" + i, i * i);
        }
    }

    static class Base {
        final int v;

        Base(int v) {
            if (v < 0) {
                throw new IllegalArgumentException("negative " + v);
            }
            this.v = v;
        }
    }

    static class Derived extends Base {
        final long w;

        Derived(int v) {
            super(check(v) ? v : -v);
            if (v == 13) {
                throw new IllegalStateException("unlucky after super");
            }
            w = v * 2L;
        }

        Derived(String s) {
            this(Integer.parseInt(s));
        }

        static boolean check(int v) {
            if (v == 99) {
                throw new ArithmeticException("thrown before super");
            }
            return v >= 0;
        }
    }

    static class WithInit {
        static final int[] SQUARES = IntStream.range(0, 10).map(x -> x * x).toArray();
        static int boom;

        static {
            if (SQUARES.length != 10) {
                throw new Error("bad init");
            }
            boom = SQUARES[3];
        }
    }

    static int depth(int n) {
        if (n == 0) {
            throw new RuntimeException("bottom");
        }
        try {
            return depth(n - 1) + 1;
        } finally {
            if (n % 3 == 0) {
                counter++;
            }
        }
    }

    static int counter;

    static int fib(int n) {
        return n < 2 ? n : fib(n - 1) + fib(n - 2);
    }

    static String sw(int x) {
        switch (x) {
            case 0: return "zero";
            case 1: return "one";
            case 2: return "two";
            case 3: return "three";
            case 4: return "four";
            case 5: return "five";
            case 6: return "six";
            case 7: return "seven";
            default: return "many";
        }
    }

    static int sparse(int x) {
        switch (x) {
            case -1000000: return 1;
            case 17: return 2;
            case 4242: return 3;
            case 1 << 20: return 4;
            default: return 0;
        }
    }

    static String strSwitch(String s) {
        switch (s) {
            case "alpha": return "A";
            case "beta": return "B";
            case "gamma": return "G";
            default: return "?";
        }
    }

    static double mixLocals(long a, double b, int c, long d) {
        long x = a * c;
        double y = b / (d + 1);
        for (int i = 0; i < c; i++) {
            x += i;
            y *= 1.0001;
        }
        return x + y;
    }

    static synchronized int syncStatic(int x) {
        if (x == 7) {
            throw new IllegalStateException("sync throw");
        }
        return x + 1;
    }

    synchronized int syncInstance(int x) {
        return x * 3;
    }

    static int catchAtDepth(int d) {
        try {
            return depth(d);
        } catch (RuntimeException e) {
            return -d;
        }
    }

    enum Color {
        RED, GREEN, BLUE;

        Color next() {
            return values()[(ordinal() + 1) % values().length];
        }
    }

    record Point(int x, int y) {
        Point {
            if (x < 0) {
                throw new IllegalArgumentException("x");
            }
        }

        int dist() {
            return Math.abs(x) + Math.abs(y);
        }
    }

    interface Shape {
        double area();

        default String describe() {
            return getClass().getSimpleName() + ":" + String.format("%.2f", area());
        }

        static Shape square(double s) {
            return () -> s * s;
        }
    }

    public static void main(String[] args) throws Exception {
        StringBuilder out = new StringBuilder();
        out.append("table ").append(TABLE).append('\n');
        for (int v : new int[] {1, 13, 99, -5, 42}) {
            try {
                Derived d = new Derived(v);
                out.append("derived ").append(d.v).append(' ').append(d.w).append('\n');
            } catch (RuntimeException e) {
                out.append("ctor ").append(v).append(' ').append(e.getClass().getSimpleName()).append(' ').append(e.getMessage()).append('\n');
            }
        }
        try {
            new Derived("x1");
        } catch (NumberFormatException e) {
            out.append("parse failed\n");
        }
        out.append("init ").append(WithInit.boom).append('\n');
        for (int d = 1; d <= 12; d++) {
            out.append(catchAtDepth(d)).append(' ');
        }
        out.append("counter ").append(counter).append('\n');
        out.append("fib ").append(fib(20)).append('\n');
        for (int i = -1; i < 10; i++) {
            out.append(sw(i)).append(sparse(i == 3 ? 4242 : i)).append(' ');
        }
        out.append(strSwitch("beta")).append(strSwitch("delta")).append('\n');
        out.append(String.format("locals %.4f%n", mixLocals(3L, 2.5, 50, 7L)));
        for (int i = 5; i < 9; i++) {
            try {
                out.append(syncStatic(i)).append(' ');
            } catch (IllegalStateException e) {
                out.append("ISE ");
            }
        }
        out.append(new VerifyMix().syncInstance(4)).append('\n');
        out.append(Color.RED.next()).append(' ').append(Color.BLUE.next()).append('\n');
        out.append(new Point(3, -4).dist()).append(' ');
        try {
            new Point(-1, 0);
        } catch (IllegalArgumentException e) {
            out.append("bad point\n");
        }
        out.append(Shape.square(3).area()).append('\n');
        Function<Integer, Integer> twice = x -> x * 2;
        IntUnaryOperator inc = x -> x + 1;
        out.append(twice.andThen(twice).apply(5)).append(' ').append(inc.applyAsInt(9)).append('\n');
        List<String> words = List.of("delta", "alpha", "charlie", "bravo");
        out.append(words.stream().sorted().map(String::toUpperCase).collect(Collectors.joining(","))).append('\n');
        Map<Integer, List<Integer>> groups = IntStream.range(0, 30).boxed().collect(Collectors.groupingBy(i -> i % 4));
        out.append(groups).append('\n');

        ExecutorService pool = Executors.newFixedThreadPool(4);
        List<Future<Integer>> fs = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            final int n = t;
            fs.add(pool.submit(() -> {
                int acc = 0;
                for (int i = 0; i < 200; i++) {
                    acc += catchAtDepth(1 + (i + n) % 9) + fib(8);
                    try {
                        if (i % 17 == n) {
                            throw new java.io.IOException("io " + i);
                        }
                    } catch (java.io.IOException e) {
                        acc += e.getMessage().length();
                    }
                }
                return acc;
            }));
        }
        long total = 0;
        for (Future<Integer> f : fs) {
            total += f.get();
        }
        pool.shutdown();
        out.append("threads ").append(total).append('\n');
        Map<String, Integer> hm = new HashMap<>();
        for (String w : "the quick brown fox jumps over the lazy dog the end".split(" ")) {
            hm.merge(w, 1, Integer::sum);
        }
        out.append(new TreeMap<>(hm)).append('\n');
        System.out.print(out);
    }
}
