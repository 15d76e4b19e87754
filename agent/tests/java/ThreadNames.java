import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** Starts threads with awkward names; each prints its index and kernel tid (truth). */
public class ThreadNames {
    static final String[] NAMES = {
        "worker-1", "Ünïcödé ☃ thread", "emoji 😀 thread", "quote \"#7\" odd prio=1 nid=0x1",
        "a-very-long-thread-name-beyond-15-bytes", "dup", "dup",
    };

    /** The kernel tid: the first field of /proc/thread-self/stat (whose comm field may
     *  hold a cut UTF-8 sequence, so it is read as bytes). */
    static String tid() {
        try {
            byte[] b = Files.readAllBytes(Path.of("/proc/thread-self/stat"));
            String s = new String(b, StandardCharsets.ISO_8859_1);
            return s.substring(0, s.indexOf(' '));
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        System.out.println("thread\t-1\t" + tid() + "\tfalse");
        for (int i = 0; i < NAMES.length; i++) {
            final int index = i;
            Thread t = new Thread(() -> System.out.println("thread\t" + index + "\t" + tid() + "\t" + Thread.currentThread().isDaemon()), NAMES[i]);
            t.setDaemon(i % 2 == 0);
            t.start();
            t.join();
        }
        // The kernel's view of every thread still alive.
        for (File task : new File("/proc/self/task").listFiles()) {
            try {
                byte[] comm = Files.readAllBytes(task.toPath().resolve("comm"));
                System.out.println("task\t" + task.getName() + "\t" + new String(comm, StandardCharsets.ISO_8859_1).trim());
            } catch (java.io.IOException gone) {
                // The thread ended meanwhile.
            }
        }
    }
}
