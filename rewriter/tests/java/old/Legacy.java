package old;

import java.util.ArrayList;
import java.util.List;
import java.util.function.IntUnaryOperator;

/** Compiled with --release 8 (class version 52); drives the older-version classes. */
public class Legacy {
    static int applyAll(List<IntUnaryOperator> ops, int x) {
        for (IntUnaryOperator op : ops) x = op.applyAsInt(x);
        return x;
    }

    public static void run() {
        List<IntUnaryOperator> ops = new ArrayList<>();
        ops.add(x -> x + 1);
        ops.add(x -> x * 3);
        ops.add(Math::negateExact);
        System.out.println("legacy52 " + applyAll(ops, 4));
        System.out.println("v51 " + V51.run(9));
        System.out.println("v50 " + V50.run(9));
        System.out.println("v49 " + V49.run(9));
        System.out.println("v46 " + V46.run(9));
    }
}
