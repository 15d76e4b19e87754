/** Waits until stdin closes; a named daemon thread sleeps meanwhile. */
public class Sleeper {
    public static void main(String[] args) throws Exception {
        Thread worker = new Thread(() -> {
            try {
                Thread.sleep(Long.MAX_VALUE);
            } catch (InterruptedException e) {
                // exit
            }
        }, "sonda-test-worker");
        worker.setDaemon(true);
        worker.start();
        System.out.println("ready " + ProcessHandle.current().pid() + " "
                + System.getProperty("java.vm.version"));
        System.out.flush();
        while (System.in.read() != -1) {
            // wait for the test to close stdin
        }
    }
}
