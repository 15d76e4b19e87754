package corpus;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.IntBinaryOperator;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/** Drives every shape of code the rewriter must handle; prints deterministic output. */
public class Main {
    static int checksum;

    static void out(Object o) {
        System.out.println(o);
    }

    public static void main(String[] args) throws Exception {
        Exceptions.run();
        Recursion.run();
        Constructors.run();
        StaticInits.run();
        Lambdas.run();
        Switches.run();
        Wides.run();
        Locking.run();
        Finally.run();
        Nesting.run();
        Interfaces.run();
        Enums.run();
        Records.run();
        Threads.run();
        Generated.run();
        old.Legacy.run();
        out("checksum " + checksum);
    }
}

class Exceptions {
    static int depth(int n) {
        if (n == 0) throw new IllegalStateException("bottom");
        return depth(n - 1) + 1;
    }

    static int catchAt(int throwDepth, int catchEvery) {
        try {
            if (throwDepth % catchEvery == 0) {
                try {
                    return depth(throwDepth);
                } catch (IllegalStateException e) {
                    return -throwDepth;
                }
            }
            return depth(throwDepth);
        } catch (RuntimeException e) {
            return 1000 + throwDepth;
        }
    }

    static int jdkThrows(String s) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    static int arithmetic(int a, int b) {
        try {
            int[] arr = new int[2];
            arr[a] = 10 / b;
            return arr[a];
        } catch (ArithmeticException e) {
            return -2;
        } catch (ArrayIndexOutOfBoundsException e) {
            return -3;
        }
    }

    static void rethrow(int n) throws Exception {
        try {
            depth(n);
        } catch (IllegalStateException e) {
            throw new Exception("wrapped " + e.getMessage(), e);
        }
    }

    static String npe(Object o) {
        try {
            return o.toString();
        } catch (NullPointerException e) {
            return "npe";
        }
    }

    static void run() {
        StringBuilder sb = new StringBuilder();
        for (int d = 0; d < 12; d++) {
            for (int c = 1; c < 4; c++) sb.append(catchAt(d, c)).append(',');
        }
        Main.out("exceptions " + sb);
        Main.out("parse " + jdkThrows("42") + " " + jdkThrows("x"));
        Main.out("arith " + arithmetic(0, 2) + " " + arithmetic(0, 0) + " " + arithmetic(5, 1));
        try {
            rethrow(7);
        } catch (Exception e) {
            Main.out("rethrown " + e.getMessage() + " cause " + e.getCause().getClass().getSimpleName());
        }
        Main.out("npe " + npe(null) + " " + npe("x"));
    }
}

class Recursion {
    static long fib(int n) {
        return n < 2 ? n : fib(n - 1) + fib(n - 2);
    }

    static int ackermann(int m, int n) {
        if (m == 0) return n + 1;
        if (n == 0) return ackermann(m - 1, 1);
        return ackermann(m - 1, ackermann(m, n - 1));
    }

    static boolean even(int n) {
        return n == 0 || odd(n - 1);
    }

    static boolean odd(int n) {
        return n != 0 && even(n - 1);
    }

    static void run() {
        Main.out("fib " + fib(20) + " ack " + ackermann(2, 3) + " even " + even(101));
        Main.checksum += (int) fib(15);
    }
}

class Base {
    final String tag;

    Base(String tag) {
        this.tag = tag;
    }

    Base(Object o) {
        this("obj:" + o);
    }
}

class Helper {
    final int v;

    Helper(int v) {
        if (v < 0) throw new IllegalArgumentException("negative helper");
        this.v = v;
    }

    public String toString() {
        return "Helper" + v;
    }
}

class Derived extends Base {
    static String check(String s) {
        if (s.isEmpty()) throw new IllegalArgumentException("empty before super");
        return s;
    }

    final int n;

    Derived(boolean c, String a, String b) {
        super(c ? a : b);
        n = 1;
    }

    Derived(int v) {
        super(new Helper(v));
        n = v;
    }

    Derived(String s) {
        super(check(s));
        n = 2;
    }

    Derived(String s, int after) {
        super(s);
        if (after < 0) throw new IllegalStateException("after super");
        n = after;
    }

    Derived() {
        this(true, "this-a", "this-b");
    }

    Derived(long x, double y) {
        super(x > 0 ? (y > 0 ? "pp" : "pn") : new StringBuilder("n").append(y > 0 ? 'p' : 'n').toString());
        long l = x * 2;
        double d = y / 2;
        n = (int) (l + d);
    }
}

class Constructors {
    class Inner {
        final int k;

        Inner(int k) {
            this.k = k + outerValue;
        }
    }

    int outerValue = 5;

    static void run() {
        List<String> r = new ArrayList<>();
        r.add(new Derived(true, "a", "b").tag);
        r.add(new Derived(false, "a", "b").tag);
        r.add(new Derived(3).tag);
        r.add(new Derived("s").tag);
        r.add(new Derived().tag);
        r.add(new Derived(3L, -1.0).tag + new Derived(-3L, 1.0).tag);
        // An uninitialised object on the stack across a branch: Uninitialized(offset)
        // in the stack map, relocated with the code.
        r.add(new Helper(r.size() > 3 ? 1 : 2).toString() + new Base(r.isEmpty() ? "e" : "f").tag);
        try {
            new Derived(-1);
        } catch (IllegalArgumentException e) {
            r.add("caught " + e.getMessage());
        }
        try {
            new Derived("");
        } catch (IllegalArgumentException e) {
            r.add("caught " + e.getMessage());
        }
        try {
            new Derived("x", -1);
        } catch (IllegalStateException e) {
            r.add("caught " + e.getMessage());
        }
        Constructors outer = new Constructors();
        r.add("inner " + outer.new Inner(2).k);
        Object anon = new Object() {
            public String toString() {
                return "anon";
            }
        };
        r.add(anon.toString());
        Main.out("ctors " + r);
    }
}

class StaticInits {
    static class Table {
        static final int[] SQUARES = new int[50];

        static {
            for (int i = 0; i < SQUARES.length; i++) SQUARES[i] = i * i;
        }
    }

    static class Broken {
        static final int V;

        static {
            if (Table.SQUARES[3] == 9) throw new IllegalStateException("broken clinit");
            V = 1;
        }
    }

    static void run() {
        Main.out("squares " + Table.SQUARES[7]);
        try {
            Main.out(Broken.V);
        } catch (ExceptionInInitializerError e) {
            Main.out("clinit failed: " + e.getCause().getMessage());
        }
        try {
            Main.out(Broken.V);
        } catch (NoClassDefFoundError e) {
            Main.out("then NoClassDefFoundError");
        }
    }
}

class Lambdas {
    static int twice(int x) {
        return 2 * x;
    }

    int base = 3;

    int addBase(int x) {
        return x + base;
    }

    static void run() {
        Function<Integer, Integer> f = Lambdas::twice;
        Lambdas l = new Lambdas();
        Function<Integer, Integer> g = l::addBase;
        Supplier<List<String>> s = ArrayList::new;
        List<String> list = s.get();
        list.add("z");
        list.add("a");
        IntBinaryOperator op = (a, b) -> {
            if (b == 0) throw new ArithmeticException("zero");
            return a / b;
        };
        int caught;
        try {
            caught = op.applyAsInt(1, 0);
        } catch (ArithmeticException e) {
            caught = -1;
        }
        String joined = IntStream.range(0, 20).filter(i -> i % 3 == 0).mapToObj(Integer::toString)
                .collect(Collectors.joining("+"));
        Map<Integer, Long> byLen = IntStream.range(0, 100).boxed()
                .collect(Collectors.groupingBy(i -> Integer.toString(i).length(), TreeMap::new, Collectors.counting()));
        Runnable r = () -> Main.checksum += f.andThen(g).apply(10);
        r.run();
        Main.out("lambdas " + f.andThen(g).apply(4) + " " + list + " " + caught + " " + joined + " " + byLen);
    }
}

class Switches {
    static int table(int x) {
        switch (x) {
            case 0: return 10;
            case 1: return 11;
            case 2: return 12;
            case 3: return 13;
            case 4: x += 100; break;
            case 5: return 15;
            case 6: return 16;
            case 7: return 17;
            case 8: return 18;
            case 9: return 19;
            case 10: return 20;
            case 11: return 21;
            default: return -x;
        }
        return x;
    }

    static int lookup(int x) {
        switch (x) {
            case -1000000: return 1;
            case 7: return 2;
            case 300: return 3;
            case 65536: return 4;
            case Integer.MAX_VALUE: return 5;
            default: return 0;
        }
    }

    static String strings(String s) {
        switch (s) {
            case "alpha": return "A";
            case "beta": return "B";
            case "Aa": return "collide1";
            case "BB": return "collide2";
            default: return "?";
        }
    }

    static int expr(Enums.Color c, int y) {
        return switch (c) {
            case RED -> y + 1;
            case GREEN -> {
                int t = y * 2;
                yield t;
            }
            default -> throw new IllegalArgumentException("blue");
        };
    }

    // Padding changes: the switch sits at different alignments depending on the
    // code before it, which the probes shift.
    static int aligned1(int x) {
        int a = x;
        switch (a) { case 1: return 1; case 2: return 2; case 3: return 3; default: return 0; }
    }

    static int aligned2(long pad, int x) {
        long b = pad + 1;
        switch (x) { case 10: return (int) b; case 20: return 2; case 40: return 3; default: return 0; }
    }

    static void run() {
        StringBuilder sb = new StringBuilder();
        for (int i = -1; i < 14; i++) sb.append(table(i)).append(' ');
        for (int v : new int[] {-1000000, 7, 300, 65536, Integer.MAX_VALUE, 3}) sb.append(lookup(v)).append(' ');
        for (String s : new String[] {"alpha", "beta", "Aa", "BB", "gamma"}) sb.append(strings(s)).append(' ');
        sb.append(expr(Enums.Color.RED, 1)).append(' ').append(expr(Enums.Color.GREEN, 4)).append(' ');
        try {
            expr(Enums.Color.BLUE, 0);
        } catch (IllegalArgumentException e) {
            sb.append(e.getMessage()).append(' ');
        }
        for (int i = 0; i < 5; i++) sb.append(aligned1(i)).append(aligned2(i, i * 10));
        Main.out("switches " + sb);
        Main.out("bigswitch " + BigSwitch.dense(77) + " " + BigSwitch.sparse(77 * 1009) + " " + BigSwitch.dense(-5));
    }
}

class Wides {
    static double mix(long a, double b, int c, long d) {
        long x = a * d;
        double y = b * c;
        float f = (float) y;
        long z = x ^ (long) f;
        double w = z + y;
        for (long i = 0; i < 5; i++) {
            w += i * 0.5;
            x += i;
        }
        return w + x;
    }

    static long longLoop(long n) {
        long s = 0;
        for (long i = 0; i < n; i++) s += i * i;
        return s;
    }

    static void run() {
        Main.out("wides " + mix(3L, 2.5, 4, 7L) + " " + longLoop(1000) + " " + ManyLocals.sum(3));
    }
}

class Locking {
    private int count;
    private static int staticCount;

    synchronized void inc() {
        count++;
    }

    static synchronized void staticInc() {
        staticCount++;
    }

    synchronized int incOrThrow(int x) {
        if (x % 7 == 0) throw new IllegalArgumentException("seven");
        return ++count;
    }

    int block(Object lock, int x) {
        synchronized (lock) {
            if (x < 0) throw new IllegalStateException("neg in block");
            count += x;
            return count;
        }
    }

    static void run() throws InterruptedException {
        Locking l = new Locking();
        Object lock = l; // the same monitor as the synchronized methods: no race on count
        Thread[] ts = new Thread[4];
        int[] errors = new int[4];
        for (int t = 0; t < ts.length; t++) {
            final int id = t;
            ts[t] = new Thread(() -> {
                for (int i = 0; i < 1000; i++) {
                    l.inc();
                    staticInc();
                    try {
                        l.incOrThrow(i);
                    } catch (IllegalArgumentException e) {
                        errors[id]++;
                    }
                    try {
                        l.block(lock, i % 5 == 0 ? -1 : 1);
                    } catch (IllegalStateException e) {
                        errors[id]++;
                    }
                }
            }, "locker-" + t);
            ts[t].start();
        }
        for (Thread t : ts) t.join();
        int e = 0;
        for (int x : errors) e += x;
        Main.out("locking " + l.count + " " + staticCount + " " + e);
    }
}

class Finally {
    static int log;

    static int tryFinally(int x) {
        try {
            if (x == 0) return 10;
            if (x == 1) throw new IllegalStateException("one");
            return 20;
        } finally {
            log++;
        }
    }

    @SuppressWarnings("finally")
    static int finallyReturns(int x) {
        try {
            if (x > 0) throw new RuntimeException("swallowed");
            return 1;
        } finally {
            return 2;
        }
    }

    static int nested(int x) {
        int r = 0;
        try {
            try {
                if (x == 2) throw new IllegalArgumentException();
                r += 1;
            } finally {
                r += 10;
                if (x == 3) throw new IllegalStateException();
            }
        } catch (IllegalArgumentException e) {
            r += 100;
        } catch (IllegalStateException e) {
            r += 1000;
        } finally {
            r += 10000;
        }
        return r;
    }

    static void run() {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 3; i++) {
            try {
                sb.append(tryFinally(i)).append(' ');
            } catch (IllegalStateException e) {
                sb.append("ise ");
            }
        }
        sb.append(finallyReturns(0)).append(finallyReturns(1)).append(' ');
        for (int i = 0; i < 4; i++) sb.append(nested(i)).append(' ');
        Main.out("finally " + sb + log);
    }
}

class Nesting {
    static class Outer {
        static class Inner {
            class Deeper {
                String name() {
                    return getClass().getName();
                }
            }
        }
    }

    static void run() {
        Outer.Inner in = new Outer.Inner();
        Main.out("nesting " + in.new Deeper().name() + " " + new Odd$Name().hello());
    }
}

class Odd$Name {
    String hello() {
        return "odd";
    }
}

interface Shape {
    double area();

    default String describe() {
        return name() + " area " + Math.round(area());
    }

    private String name() {
        return getClass().getSimpleName();
    }

    static Shape square(double s) {
        return new Sq(s);
    }

    final class Sq implements Shape {
        final double s;

        Sq(double s) {
            this.s = s;
        }

        public double area() {
            return s * s;
        }
    }
}

class Interfaces {
    static void run() {
        Shape c = () -> 3.0;
        Main.out("interfaces " + Shape.square(3).describe() + " " + Math.round(c.area()));
    }
}

class Enums {
    enum Color {
        RED, GREEN, BLUE
    }

    enum Op {
        ADD("+") {
            int apply(int a, int b) {
                return a + b;
            }
        },
        DIV("/") {
            int apply(int a, int b) {
                return a / b;
            }
        };

        final String sym;

        Op(String sym) {
            this.sym = sym;
        }

        abstract int apply(int a, int b);
    }

    static void run() {
        StringBuilder sb = new StringBuilder();
        for (Op op : Op.values()) {
            try {
                sb.append(op.sym).append(op.apply(6, op == Op.DIV ? 0 : 2)).append(' ');
            } catch (ArithmeticException e) {
                sb.append(op.name()).append(" failed ");
            }
        }
        sb.append(Color.valueOf("GREEN").ordinal());
        Main.out("enums " + sb);
    }
}

record Point(int x, int y) {
    Point {
        if (x < 0) throw new IllegalArgumentException("negative x");
    }

    Point(int v) {
        this(v, v);
    }

    int dist() {
        return Math.abs(x) + Math.abs(y);
    }
}

class Records {
    static void run() {
        Point p = new Point(3, 4);
        String bad;
        try {
            new Point(-1, 0);
            bad = "no";
        } catch (IllegalArgumentException e) {
            bad = e.getMessage();
        }
        Main.out("records " + p + " " + p.dist() + " " + p.equals(new Point(3, 4)) + " "
                + (p.hashCode() == new Point(3, 4).hashCode()) + " " + new Point(2) + " " + bad);
    }
}

class Threads {
    static int work(int seed) {
        int acc = seed;
        for (int i = 0; i < 2000; i++) {
            try {
                acc = step(acc, i);
            } catch (IllegalStateException e) {
                acc += 3;
            }
        }
        return acc;
    }

    static int step(int acc, int i) {
        if ((acc + i) % 13 == 0) throw new IllegalStateException();
        return acc * 31 + i;
    }

    static void run() throws Exception {
        int n = 6;
        int[] results = new int[n];
        AtomicInteger done = new AtomicInteger();
        Thread[] ts = new Thread[n];
        for (int t = 0; t < n; t++) {
            final int id = t;
            ts[t] = new Thread(() -> {
                results[id] = work(id);
                done.incrementAndGet();
            });
            ts[t].start();
        }
        for (Thread t : ts) t.join();
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(3);
        List<java.util.concurrent.Future<Integer>> fs = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            final int id = t;
            fs.add(pool.submit(() -> work(100 + id)));
        }
        long sum = 0;
        for (java.util.concurrent.Future<Integer> f : fs) sum += f.get();
        pool.shutdown();
        pool.awaitTermination(1, java.util.concurrent.TimeUnit.MINUTES);
        Main.out("threads " + java.util.Arrays.toString(results) + " " + done.get() + " " + sum);
    }
}
