/** Calls the agent's probe natives directly: n times enter(7)+exit(7), then n times
 *  enter(9)+exitByException(9), on the main thread and on one more thread. */
public class ProbeCalls {
    static void calls(int n) {
        for (int i = 0; i < n; i++) {
            SondaProbe.enter(7);
            SondaProbe.exit(7);
        }
        for (int i = 0; i < n; i++) {
            SondaProbe.enter(9);
            SondaProbe.exitByException(9);
        }
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        calls(n);
        Thread t = new Thread(() -> calls(n), "second");
        t.start();
        t.join();
        System.out.println("calls\t" + n);
    }
}
