package spindle.ycsb;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import site.ycsb.ByteIterator;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * The binding against a running drive: {@code -Dkinetic.port=PORT} (and optionally
 * {@code -Dkinetic.host}); skipped without kinetic.port. Covers what YCSB's CoreWorkload does
 * not check by itself: field selection, update merging (also under concurrent updates of one
 * record), NOT_FOUND, delete, and scans that span several GETKEYRANGE requests. Keys use a
 * unique "zz-ycsbtest-HEX/" prefix, so they never meet YCSB's "user..." keys.
 */
class KineticClientTest {

    private final List<KineticClient> clients = new ArrayList<>();
    private String prefix;

    private KineticClient client(String... props) throws Exception {
        String port = System.getProperty("kinetic.port");
        assumeTrue(port != null && !port.isEmpty(), "no drive: set -Dkinetic.port");
        Properties p = new Properties();
        p.setProperty(KineticClient.HOST, System.getProperty("kinetic.host", "127.0.0.1"));
        p.setProperty(KineticClient.PORT, port);
        for (String kv : props) {
            int eq = kv.indexOf('=');
            p.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
        }
        KineticClient c = new KineticClient();
        c.setProperties(p);
        c.init();
        clients.add(c);
        return c;
    }

    @BeforeEach
    void prefix() {
        prefix = "zz-ycsbtest-" + Long.toHexString(ThreadLocalRandom.current().nextLong() & Long.MAX_VALUE) + "/";
    }

    /** Removes this test's keys: a later scan over the drive (a YCSB workload E) meets none. */
    @AfterEach
    void close() throws Exception {
        for (KineticClient c : clients) {
            c.cleanup();
        }
        if (System.getProperty("kinetic.port") == null) {
            return;
        }
        kinetic.client.KineticClient raw = kinetic.client.KineticClientFactory.createInstance(config());
        try {
            byte[] end = (prefix + "\u007f").getBytes(UTF_8);
            List<byte[]> keys;
            do {
                keys = raw.getKeyRange(prefix.getBytes(UTF_8), true, end, true, 200);
                for (byte[] k : keys) {
                    raw.deleteForced(k);
                }
            } while (!keys.isEmpty());
        } finally {
            raw.close();
        }
    }

    private static Map<String, ByteIterator> values(String... kv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return StringByteIterator.getByteIteratorMap(m);
    }

    private static Map<String, String> strings(Map<String, ByteIterator> m) {
        Map<String, String> out = new HashMap<>();
        m.forEach((k, v) -> out.put(k, new String(v.toArray(), UTF_8)));
        return out;
    }

    private Map<String, String> read(KineticClient c, String key, Set<String> fields) {
        Map<String, ByteIterator> r = new HashMap<>();
        assertEquals(Status.OK, c.read("usertable", key, fields, r), key);
        return strings(r);
    }

    @Test
    void insertReadUpdateDelete() throws Exception {
        KineticClient c = client();
        String k = prefix + "k";
        assertEquals(Status.NOT_FOUND, c.read("usertable", k, null, new HashMap<>()));
        assertEquals(Status.NOT_FOUND, c.update("usertable", k, values("field0", "x")));
        assertEquals(Status.NOT_FOUND, c.delete("usertable", k));

        assertEquals(Status.OK, c.insert("usertable", k, values("field0", "a0", "field1", "a1", "field2", "a2")));
        assertEquals(Map.of("field0", "a0", "field1", "a1", "field2", "a2"), read(c, k, null));
        assertEquals(Map.of("field1", "a1"), read(c, k, Set.of("field1", "field9")));

        // update merges the given fields into the stored record
        assertEquals(Status.OK, c.update("usertable", k, values("field1", "b1", "field3", "b3")));
        assertEquals(Map.of("field0", "a0", "field1", "b1", "field2", "a2", "field3", "b3"), read(c, k, null));

        // insert over an existing key replaces the record
        assertEquals(Status.OK, c.insert("usertable", k, values("field0", "c0")));
        assertEquals(Map.of("field0", "c0"), read(c, k, null));

        assertEquals(Status.OK, c.delete("usertable", k));
        assertEquals(Status.NOT_FOUND, c.read("usertable", k, null, new HashMap<>()));
        assertEquals(Status.NOT_FOUND, c.delete("usertable", k));
    }

    @Test
    void forcedUpdateAlsoMerges() throws Exception {
        KineticClient c = client("kinetic.update=forced", "kinetic.persist=sync");
        String k = prefix + "k";
        assertEquals(Status.NOT_FOUND, c.update("usertable", k, values("field0", "x")));
        assertEquals(Status.OK, c.insert("usertable", k, values("field0", "a0", "field1", "a1")));
        assertEquals(Status.OK, c.update("usertable", k, values("field1", "b1")));
        assertEquals(Map.of("field0", "a0", "field1", "b1"), read(c, k, null));
    }

    @Test
    void concurrentUpdatesOfOneRecordLoseNothing() throws Exception {
        String k = prefix + "hot";
        client().insert("usertable", k, values("init", "0"));
        int threads = 4;
        int perThread = 25;
        List<KineticClient> cs = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            cs.add(client("kinetic.casretries=1000"));
        }
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<Status>> results = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                KineticClient c = cs.get(t);
                int id = t;
                results.add(pool.submit(() -> {
                    for (int i = 0; i < perThread; i++) {
                        Status s = c.update("usertable", k, values("t" + id + "-" + i, "v"));
                        if (!s.isOk()) {
                            return s;
                        }
                    }
                    return Status.OK;
                }));
            }
            for (Future<Status> f : results) {
                assertEquals(Status.OK, f.get());
            }
        } finally {
            pool.shutdown();
        }
        assertEquals(1 + threads * perThread, read(cs.get(0), k, null).size(),
                "compare-and-swap updates keep every thread's fields");
    }

    @Test
    void scanSpansSeveralKeyRangeRequests() throws Exception {
        KineticClient c = client("kinetic.scanbatch=3");
        for (int i = 0; i < 10; i++) {
            String id = String.format("k%02d", i);
            assertEquals(Status.OK, c.insert("usertable", prefix + id, values("id", id, "other", "x")));
        }
        Vector<HashMap<String, ByteIterator>> out = new Vector<>();
        assertEquals(Status.OK, c.scan("usertable", prefix + "k02", 7, Set.of("id"), out));
        List<String> ids = new ArrayList<>();
        for (HashMap<String, ByteIterator> r : out) {
            assertEquals(Set.of("id"), r.keySet(), "only the requested field");
            ids.add(new String(r.get("id").toArray(), UTF_8));
        }
        assertEquals(List.of("k02", "k03", "k04", "k05", "k06", "k07", "k08"), ids);

        // from a key between two records; a deleted record is not returned
        assertEquals(Status.OK, c.delete("usertable", prefix + "k06"));
        out.clear();
        assertEquals(Status.OK, c.scan("usertable", prefix + "k04x", 3, null, out));
        assertEquals(2, out.get(0).size(), "all fields");
        assertEquals(List.of("k05", "k07", "k08"),
                out.stream().map(r -> new String(r.get("id").toArray(), UTF_8)).toList());
    }

    @Test
    void aValueThatIsNotARecordIsUnexpectedState() throws Exception {
        KineticClient c = client();
        // a value in another format under a key the binding then reads
        kinetic.client.KineticClient raw = kinetic.client.KineticClientFactory.createInstance(config());
        try {
            raw.putForced(new kinetic.client.Entry((prefix + "raw").getBytes(UTF_8), "field0=abc".getBytes(UTF_8)));
        } finally {
            raw.close();
        }
        assertEquals(Status.UNEXPECTED_STATE, c.read("usertable", prefix + "raw", null, new HashMap<>()));
        assertEquals(Status.UNEXPECTED_STATE, c.update("usertable", prefix + "raw", values("f", "v")));
    }

    private static kinetic.client.ClientConfiguration config() {
        kinetic.client.ClientConfiguration config = new kinetic.client.ClientConfiguration();
        config.setHost(System.getProperty("kinetic.host", "127.0.0.1"));
        config.setPort(Integer.parseInt(System.getProperty("kinetic.port")));
        return config;
    }

    @Test
    void rejectsBadProperties() throws Exception {
        assumeTrue(System.getProperty("kinetic.port") != null, "no drive: set -Dkinetic.port");
        for (String bad : new String[] {"kinetic.persist=SOMETIMES", "kinetic.update=maybe", "kinetic.scanbatch=0"}) {
            KineticClient c = new KineticClient();
            Properties p = new Properties();
            p.setProperty(KineticClient.PORT, System.getProperty("kinetic.port"));
            p.setProperty(bad.substring(0, bad.indexOf('=')), bad.substring(bad.indexOf('=') + 1));
            c.setProperties(p);
            boolean threw = false;
            try {
                c.init();
            } catch (site.ycsb.DBException e) {
                threw = true;
            }
            assertTrue(threw, bad);
        }
    }
}
