package spindle.ycsb;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Method;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

import site.ycsb.measurements.Measurements;
import site.ycsb.workloads.CoreWorkload;

/**
 * Draws operations and record numbers from YCSB's own generators, exactly as a YCSB run
 * would, and prints the same JSON as {@code spindle bench ycsb-sample}:
 *
 * <pre>
 *   {"workload":"A","draws":D,"mode":"frozen","operations":{"Read":n,"Update":n,...},
 *    "top_records":[{"record":r,"count":c},...]}
 * </pre>
 *
 * The workload is {@link CoreWorkload} itself, initialised by its own {@code init} from the
 * workload file with recordcount and operationcount overridden, so the operation chooser
 * (a DiscreteGenerator), the key chooser (ScrambledZipfianGenerator over insertstart ..
 * insertstart + insertcount + expectednewkeys for zipfian, SkewedLatestGenerator over the
 * AcknowledgedCounterGenerator for latest, UniformLongGenerator, ...) and the redraw loop are
 * YCSB 0.17.0's: each draw is {@code operationchooser.nextString()} and, for anything but an
 * INSERT, CoreWorkload's (package-private) {@code nextKeynum()}, called by reflection. Record
 * numbers are counted before key hashing (buildKeyName).
 *
 * <p>{@code --mode frozen} (default) leaves the insert counter alone: an INSERT is counted and
 * draws nothing, so the key space stays at recordcount records for the whole sample, as
 * {@code spindle bench ycsb-sample} does. {@code --mode live} does what doTransactionInsert
 * does on a successful insert, {@code transactioninsertkeysequence.nextValue()} then
 * {@code acknowledge()}, so later draws see the grown key space (a single-threaded YCSB run).
 *
 * <pre>
 *   GeneratorSample --workload A [--workloads DIR | -P FILE] [--records N] [--operations N]
 *                   [--draws D] [--top K] [--mode frozen|live] [-p name=value ...]
 * </pre>
 */
public final class GeneratorSample extends CoreWorkload {

    private static final Map<String, String> OP_NAMES = Map.of(
            "READ", "Read", "UPDATE", "Update", "INSERT", "Insert", "SCAN", "Scan",
            "READMODIFYWRITE", "ReadModifyWrite");

    public static void main(String[] args) throws Exception {
        String letter = "A";
        Path workloads = Paths.get("workloads");
        Path file = null;
        long records = 1000;
        long operations = 1000;
        long draws = 1_000_000;
        int top = 50;
        boolean live = false;
        Map<String, String> overrides = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String v = i + 1 < args.length ? args[i + 1] : null;
            if (v == null && !a.equals("--help")) {
                usage("missing value after " + a);
            }
            switch (a) {
                case "--workload": letter = v.toUpperCase(Locale.ROOT); i++; break;
                case "--workloads": workloads = Paths.get(v); i++; break;
                case "-P": file = Paths.get(v); i++; break;
                case "--records": records = Long.parseLong(v); i++; break;
                case "--operations": operations = Long.parseLong(v); i++; break;
                case "--draws": draws = Long.parseLong(v); i++; break;
                case "--top": top = Integer.parseInt(v); i++; break;
                case "--mode":
                    if (!v.equals("frozen") && !v.equals("live")) {
                        usage("--mode is frozen or live");
                    }
                    live = v.equals("live");
                    i++;
                    break;
                case "-p": {
                    int eq = v.indexOf('=');
                    if (eq < 1) {
                        usage("-p needs name=value");
                    }
                    overrides.put(v.substring(0, eq), v.substring(eq + 1));
                    i++;
                    break;
                }
                default: usage("unknown argument " + a);
            }
        }
        if (file == null) {
            file = workloads.resolve("workload" + letter.toLowerCase(Locale.ROOT));
        }
        Properties p = new Properties();
        try (InputStream in = new FileInputStream(file.toFile())) {
            p.load(in);
        } catch (IOException e) {
            usage("cannot read workload file " + file + ": " + e.getMessage());
        }
        p.setProperty("recordcount", Long.toString(records));
        p.setProperty("operationcount", Long.toString(operations));
        overrides.forEach(p::setProperty);

        Measurements.setProperties(p);
        GeneratorSample w = new GeneratorSample();
        w.init(p);
        Method nextKeynum = CoreWorkload.class.getDeclaredMethod("nextKeynum");
        nextKeynum.setAccessible(true);

        Map<String, Long> ops = new HashMap<>();
        Map<Long, long[]> keys = new HashMap<>();
        for (long d = 0; d < draws; d++) {
            String op = w.operationchooser.nextString();
            ops.merge(OP_NAMES.getOrDefault(op, op), 1L, Long::sum);
            if ("INSERT".equals(op)) {
                if (live) {
                    long k = w.transactioninsertkeysequence.nextValue();
                    w.transactioninsertkeysequence.acknowledge(k);
                }
                continue;
            }
            long k = (Long) nextKeynum.invoke(w);
            keys.computeIfAbsent(k, x -> new long[1])[0]++;
        }

        List<Map.Entry<Long, long[]>> ranked = new ArrayList<>(keys.entrySet());
        ranked.sort((a, b) -> a.getValue()[0] != b.getValue()[0]
                ? Long.compare(b.getValue()[0], a.getValue()[0])
                : Long.compare(a.getKey(), b.getKey()));
        StringBuilder out = new StringBuilder();
        out.append("{\"workload\":\"").append(letter).append("\",\"draws\":").append(draws)
                .append(",\"mode\":\"").append(live ? "live" : "frozen")
                .append("\",\"requestdistribution\":\"")
                .append(p.getProperty(REQUEST_DISTRIBUTION_PROPERTY, REQUEST_DISTRIBUTION_PROPERTY_DEFAULT))
                .append("\",\"operations\":{");
        String sep = "";
        for (String name : new String[] {"Insert", "Read", "ReadModifyWrite", "Scan", "Update"}) {
            Long n = ops.get(name);
            if (n != null) {
                out.append(sep).append('"').append(name).append("\":").append(n);
                sep = ",";
            }
        }
        out.append("},\"top_records\":[");
        sep = "";
        for (int i = 0; i < Math.min(top, ranked.size()); i++) {
            out.append(sep).append("{\"count\":").append(ranked.get(i).getValue()[0])
                    .append(",\"record\":").append(ranked.get(i).getKey()).append('}');
            sep = ",";
        }
        out.append("]}");
        System.out.println(out);
    }

    private static void usage(String problem) {
        System.err.println("GeneratorSample: " + problem);
        System.err.println("usage: GeneratorSample --workload A [--workloads DIR | -P FILE] [--records N]"
                + " [--operations N] [--draws D] [--top K] [--mode frozen|live] [-p name=value ...]");
        System.exit(2);
    }
}
