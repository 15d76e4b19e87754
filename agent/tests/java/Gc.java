/** Three explicit collections. */
public class Gc {
    public static void main(String[] args) {
        for (int i = 0; i < 3; i++) {
            byte[][] garbage = new byte[1000][];
            for (int j = 0; j < garbage.length; j++) {
                garbage[j] = new byte[1000];
            }
            System.gc();
        }
        System.out.println("gc\t3");
    }
}
