import java.io.File;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;

/** Loads class Traced (from the directory in args[0]) in two separate class loaders and
 *  calls Traced.work three times through each. */
public class TwoLoaders {
    public static void main(String[] args) throws Exception {
        URL[] path = {new File(args[0]).toURI().toURL()};
        for (int k = 0; k < 2; k++) {
            try (URLClassLoader loader = new URLClassLoader(path, null)) {
                Class<?> c = loader.loadClass("Traced");
                Method work = c.getDeclaredMethod("work", int.class);
                work.setAccessible(true);
                for (int i = 0; i < 3; i++) {
                    work.invoke(null, i);
                }
            }
        }
        System.out.println("done");
    }
}
