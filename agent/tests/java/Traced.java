/** Calls methods the tests select: its own (static, throwing, constructor), one of
 *  java.base loaded before VMInit (Integer.reverse) and one of java.sql (a named module
 *  of the platform loader, loaded after VMInit). */
public class Traced {
    final int value;

    Traced(int v) {
        value = v;
    }

    static int work(int x) {
        return x * 2 + 1;
    }

    static void fail(int x) {
        if (x >= 0) {
            throw new IllegalStateException("x" + x);
        }
    }

    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        long sum = 0;
        for (int i = 0; i < n; i++) {
            sum += work(i);
            try {
                fail(i);
            } catch (IllegalStateException e) {
                sum++;
            }
            sum += new Traced(i).value;
            sum += Integer.reverse(i);
            sum += new java.sql.Timestamp(i).getNanos();
        }
        System.out.println("sum\t" + sum);
    }
}
