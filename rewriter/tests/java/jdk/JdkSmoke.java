import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.LocalDate;
import java.time.format.DateTimeFormatter;
import java.util.*;
import java.util.concurrent.*;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/** Exercises much of java.base; prints deterministic output (probe report to stderr). */
public class JdkSmoke {
    public static void main(String[] args) throws Exception {
        Map<String, Integer> m = new HashMap<>();
        for (int i = 0; i < 1000; i++) m.merge("k" + (i % 37), i, Integer::sum);
        System.out.println("map " + new TreeMap<>(m).firstEntry() + " " + m.size());
        List<String> l = new ArrayList<>(List.of("pear", "apple", "fig", "banana"));
        Collections.sort(l);
        l.sort(Comparator.comparing(String::length).thenComparing(Comparator.reverseOrder()));
        System.out.println("list " + l);
        Pattern p = Pattern.compile("(\\w+)@(\\w+)\\.com");
        Matcher mt = p.matcher("a@b.com, cc@dd.com x@y.org");
        StringBuilder sb = new StringBuilder();
        while (mt.find()) sb.append(mt.group(2)).append(';');
        System.out.println("regex " + sb + " " + "a1b22c333".replaceAll("[0-9]+", "#"));
        System.out.println("stream " + IntStream.rangeClosed(1, 50).filter(i -> i % 7 == 0).boxed()
                .map(String::valueOf).collect(Collectors.joining(",", "[", "]")));
        System.out.println("format " + String.format("%08.3f|%-6s|%x|%,d", Math.PI, "ab", 255, 1234567));
        System.out.println("big " + BigInteger.valueOf(3).pow(80) + " " + new BigDecimal("1.10").multiply(new BigDecimal("3.3")));
        System.out.println("time " + LocalDate.of(2024, 2, 28).plusDays(2).format(DateTimeFormatter.ISO_DATE)
                + " " + Duration.ofMinutes(135));
        byte[] utf = "grüße €".getBytes(StandardCharsets.UTF_8);
        System.out.println("utf8 " + utf.length + " " + new String(utf, StandardCharsets.UTF_8) + " "
                + Base64.getEncoder().encodeToString(utf));
        try {
            Object o = List.of(1).get(3);
            System.out.println(o);
        } catch (IndexOutOfBoundsException e) {
            System.out.println("caught " + e.getClass().getSimpleName());
        }
        try {
            Integer.parseInt("zz");
        } catch (NumberFormatException e) {
            System.out.println("caught " + e.getMessage());
        }
        ExecutorService pool = Executors.newFixedThreadPool(3);
        List<Future<Long>> fs = new ArrayList<>();
        for (int t = 0; t < 6; t++) {
            final int n = t;
            fs.add(pool.submit(() -> LongStreamSum.sum(n * 1000)));
        }
        long total = 0;
        for (Future<Long> f : fs) total += f.get();
        pool.shutdown();
        pool.awaitTermination(1, TimeUnit.MINUTES);
        System.out.println("threads " + total);
        ConcurrentHashMap<Integer, Integer> chm = new ConcurrentHashMap<>();
        IntStream.range(0, 2000).parallel().forEach(i -> chm.merge(i % 10, 1, Integer::sum));
        System.out.println("parallel " + new TreeMap<>(chm));
        Optional<String> opt = l.stream().filter(s -> s.startsWith("b")).findFirst();
        System.out.println("optional " + opt.orElse("none") + " " + Objects.hash(1, 2, 3));
        try {
            Class<?> c = Class.forName("java.lang.SondaProbe");
            System.err.println("SONDA " + c.getMethod("report").invoke(null));
        } catch (ClassNotFoundException e) {
            System.err.println("SONDA none");
        }
    }
}

class LongStreamSum {
    static long sum(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) s += i;
        return s;
    }
}
