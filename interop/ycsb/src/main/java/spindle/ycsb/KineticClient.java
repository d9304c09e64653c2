package spindle.ycsb;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.Vector;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Level;
import java.util.logging.Logger;

import kinetic.client.ClientConfiguration;
import kinetic.client.Entry;
import kinetic.client.EntryMetadata;
import kinetic.client.KineticException;
import kinetic.client.VersionMismatchException;
import kinetic.client.advanced.AdvancedKineticClient;
import kinetic.client.advanced.AdvancedKineticClientFactory;
import kinetic.client.advanced.PersistOption;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * YCSB binding for a Kinetic drive (Spindle, or any Kinetic server), over the reference Kinetic
 * Java client 0.8.0.4. YCSB creates one instance per client thread; each holds one connection.
 *
 * <p>Data model: the YCSB key's UTF-8 bytes are the Kinetic key (the table name is ignored, as
 * in Seagate's Kinetic binding and in {@code spindle bench ycsb}, so both use the same keys);
 * the whole record (all its fields) is one Kinetic value in the {@link RecordCodec} format.
 *
 * <ul>
 *   <li>insert: a forced PUT (overwrites whatever is there) with a fresh random 8-byte version;
 *   <li>read: GET, then decode and keep the requested fields (all when {@code fields} is null);
 *       a missing key is {@link Status#NOT_FOUND};
 *   <li>update: read-merge-write. GET the record and its version, put the given fields over the
 *       stored ones, then PUT with the stored version as the expected version (compare-and-swap)
 *       and a fresh new version. If another client wrote the key in between, the drive answers
 *       VERSION_MISMATCH and the update starts over (up to {@code kinetic.casretries} times), so
 *       concurrent updates of different fields of one record never lose each other's fields
 *       (YCSB's default writeallfields=false makes every UPDATE a one-field update). With
 *       {@code kinetic.update=forced} the write is a forced PUT instead (one round trip fewer
 *       on contention, last writer wins on the whole record). A missing key is NOT_FOUND;
 *   <li>delete: GETMETADATA for the version, then a versioned DELETE (retried on a concurrent
 *       write), so a missing key is NOT_FOUND rather than a silent success;
 *   <li>scan: GETKEYRANGE from the start key (inclusive) upwards, at most
 *       {@code kinetic.scanbatch} keys per request (the drive's maxKeyRangeCount; Spindle's is
 *       200), continuing after the last key returned until {@code recordcount} records are
 *       collected or the key space ends; then a GET of each key (a key deleted in between is
 *       skipped).
 * </ul>
 *
 * <p>Writes use {@code kinetic.persist} (SYNC, ASYNC = write-back, FLUSH; default ASYNC, as
 * Seagate's binding and {@code spindle bench ycsb}). A client or drive error is
 * {@link Status#ERROR}; a value that is not a record is {@link Status#UNEXPECTED_STATE}.
 *
 * <p>Properties (YCSB {@code -p}): {@code kinetic.host} (127.0.0.1), {@code kinetic.port}
 * (8123), {@code kinetic.timeout} (request timeout in ms; the Kinetic client's own default when unset), {@code kinetic.persist}
 * (ASYNC), {@code kinetic.update} (cas | forced; cas), {@code kinetic.casretries} (32),
 * {@code kinetic.scanbatch} (200), {@code kinetic.user} (1) and {@code kinetic.hmackey}
 * (asdfasdf): the identity and HMAC key, the Kinetic factory defaults.
 */
public class KineticClient extends DB {

    public static final String HOST = "kinetic.host";
    public static final String PORT = "kinetic.port";
    public static final String TIMEOUT = "kinetic.timeout";
    public static final String PERSIST = "kinetic.persist";
    public static final String UPDATE = "kinetic.update";
    public static final String CAS_RETRIES = "kinetic.casretries";
    public static final String SCAN_BATCH = "kinetic.scanbatch";
    public static final String USER = "kinetic.user";
    public static final String HMAC_KEY = "kinetic.hmackey";

    /** Upper end of every scan: above any key of up to 64 bytes that does not start with 64 0xFF. */
    private static final byte[] SCAN_END = new byte[64];

    static {
        Arrays.fill(SCAN_END, (byte) 0xff);
    }

    /** The Kinetic client logs every connection at INFO; keep only warnings (strong refs). */
    private static final Logger KINETIC_LOG = Logger.getLogger("com.seagate.kinetic");
    private static final Logger KINETIC_API_LOG = Logger.getLogger("kinetic");

    static {
        KINETIC_LOG.setLevel(Level.WARNING);
        KINETIC_API_LOG.setLevel(Level.WARNING);
    }

    /** Errors are printed to stderr, but only the first few of the whole run. */
    private static final AtomicInteger ERRORS_SHOWN = new AtomicInteger();
    private static final int MAX_ERRORS_SHOWN = 10;

    private AdvancedKineticClient client;
    private PersistOption persist;
    private boolean casUpdate;
    private int casRetries;
    private int scanBatch;

    @Override
    public void init() throws DBException {
        Properties p = getProperties();
        String host = p.getProperty(HOST, "127.0.0.1");
        int port = intProperty(p, PORT, 8123);
        ClientConfiguration config = new ClientConfiguration();
        config.setHost(host);
        config.setPort(port);
        if (p.getProperty(TIMEOUT) != null) {
            config.setRequestTimeoutMillis(intProperty(p, TIMEOUT, 0));
        }
        config.setUserId(Long.parseLong(p.getProperty(USER, "1")));
        config.setKey(p.getProperty(HMAC_KEY, "asdfasdf"));
        try {
            persist = PersistOption.valueOf(p.getProperty(PERSIST, "ASYNC").trim().toUpperCase());
        } catch (IllegalArgumentException e) {
            throw new DBException(PERSIST + " must be SYNC, ASYNC or FLUSH");
        }
        String update = p.getProperty(UPDATE, "cas").trim().toLowerCase();
        if (!update.equals("cas") && !update.equals("forced")) {
            throw new DBException(UPDATE + " must be cas or forced");
        }
        casUpdate = update.equals("cas");
        casRetries = intProperty(p, CAS_RETRIES, 32);
        scanBatch = intProperty(p, SCAN_BATCH, 200);
        if (casRetries < 1 || scanBatch < 1) {
            throw new DBException(CAS_RETRIES + " and " + SCAN_BATCH + " must be at least 1");
        }
        try {
            client = AdvancedKineticClientFactory.createAdvancedClientInstance(config);
        } catch (KineticException e) {
            throw new DBException("cannot connect to the Kinetic drive at " + host + ":" + port + ": " + e, e);
        }
    }

    @Override
    public void cleanup() throws DBException {
        if (client != null) {
            try {
                client.close();
            } catch (KineticException e) {
                throw new DBException(e);
            } finally {
                client = null;
            }
        }
    }

    @Override
    public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
        try {
            Entry e = client.get(bytes(key));
            if (e == null) {
                return Status.NOT_FOUND;
            }
            toResult(RecordCodec.decode(e.getValue(), fields), result);
            return Status.OK;
        } catch (KineticException e) {
            return error("read", key, e);
        } catch (IllegalArgumentException e) {
            return unexpected("read", key, e);
        }
    }

    @Override
    public Status scan(String table, String startkey, int recordcount, Set<String> fields,
            Vector<HashMap<String, ByteIterator>> result) {
        if (recordcount < 1) {
            return Status.BAD_REQUEST;
        }
        byte[] from = bytes(startkey);
        boolean inclusive = true;
        int collected = 0;
        String at = startkey;
        try {
            while (collected < recordcount) {
                int want = Math.min(recordcount - collected, scanBatch);
                List<byte[]> keys = client.getKeyRange(from, inclusive, SCAN_END, true, want);
                for (byte[] k : keys) {
                    at = new String(k, UTF_8);
                    Entry e = client.get(k);
                    if (e == null) {
                        continue; // deleted since the range was listed
                    }
                    HashMap<String, ByteIterator> record = new HashMap<>();
                    toResult(RecordCodec.decode(e.getValue(), fields), record);
                    result.add(record);
                    if (++collected == recordcount) {
                        break;
                    }
                }
                if (keys.size() < want) {
                    break; // the key space ends here
                }
                from = keys.get(keys.size() - 1);
                inclusive = false;
            }
            return Status.OK;
        } catch (KineticException e) {
            return error("scan", at, e);
        } catch (IllegalArgumentException e) {
            return unexpected("scan", at, e);
        }
    }

    @Override
    public Status update(String table, String key, Map<String, ByteIterator> values) {
        byte[] k = bytes(key);
        Map<String, byte[]> given = fromValues(values);
        try {
            for (int attempt = 0; attempt < casRetries; attempt++) {
                Entry stored = client.get(k);
                if (stored == null) {
                    return Status.NOT_FOUND;
                }
                TreeMap<String, byte[]> merged = RecordCodec.decode(stored.getValue(), null);
                merged.putAll(given);
                byte[] value = RecordCodec.encode(merged);
                if (!casUpdate) {
                    client.putForced(entry(k, value, newVersion()), persist);
                    return Status.OK;
                }
                try {
                    client.put(entry(k, value, stored.getEntryMetadata().getVersion()), newVersion(), persist);
                    return Status.OK;
                } catch (KineticException e) {
                    if (!isVersionMismatch(e)) {
                        throw e;
                    }
                    // written (or deleted) by someone else since our GET: read again
                }
            }
            return error("update", key, new KineticException(
                    "version mismatch on each of " + casRetries + " compare-and-swap attempts"));
        } catch (KineticException e) {
            return error("update", key, e);
        } catch (IllegalArgumentException e) {
            return unexpected("update", key, e);
        }
    }

    @Override
    public Status insert(String table, String key, Map<String, ByteIterator> values) {
        try {
            client.putForced(entry(bytes(key), RecordCodec.encode(fromValues(values)), newVersion()), persist);
            return Status.OK;
        } catch (KineticException e) {
            return error("insert", key, e);
        }
    }

    @Override
    public Status delete(String table, String key) {
        byte[] k = bytes(key);
        try {
            for (int attempt = 0; attempt < casRetries; attempt++) {
                EntryMetadata md = client.getMetadata(k);
                if (md == null) {
                    return Status.NOT_FOUND;
                }
                try {
                    return client.delete(entry(k, null, md.getVersion()), persist) ? Status.OK : Status.NOT_FOUND;
                } catch (KineticException e) {
                    if (!isVersionMismatch(e)) {
                        throw e;
                    }
                }
            }
            return error("delete", key, new KineticException(
                    "version mismatch on each of " + casRetries + " attempts"));
        } catch (KineticException e) {
            return error("delete", key, e);
        }
    }

    // --- helpers ------------------------------------------------------------------------

    private static int intProperty(Properties p, String name, int dflt) throws DBException {
        String v = p.getProperty(name);
        if (v == null) {
            return dflt;
        }
        try {
            return Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            throw new DBException(name + " is not an integer: " + v);
        }
    }

    private static byte[] bytes(String s) {
        return s.getBytes(UTF_8);
    }

    /** A Kinetic entry; {@code version} is the expected (put/delete) or new (forced put) one. */
    private static Entry entry(byte[] key, byte[] value, byte[] version) {
        EntryMetadata md = new EntryMetadata();
        md.setVersion(version);
        return new Entry(key, value, md);
    }

    private static byte[] newVersion() {
        byte[] v = new byte[8];
        ThreadLocalRandom.current().nextBytes(v);
        return v;
    }

    private static Map<String, byte[]> fromValues(Map<String, ByteIterator> values) {
        Map<String, byte[]> out = new HashMap<>(values.size() * 2);
        for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
            out.put(e.getKey(), e.getValue().toArray());
        }
        return out;
    }

    private static void toResult(Map<String, byte[]> fields, Map<String, ByteIterator> result) {
        for (Map.Entry<String, byte[]> e : fields.entrySet()) {
            result.put(e.getKey(), new ByteArrayByteIterator(e.getValue()));
        }
    }

    private static boolean isVersionMismatch(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof VersionMismatchException) {
                return true;
            }
            if (c instanceof KineticException) {
                var response = ((KineticException) c).getResponseMessage();
                if (response != null && response.getCommand() != null && response.getCommand().hasStatus()
                        && response.getCommand().getStatus().getCode().name().equals("VERSION_MISMATCH")) {
                    return true;
                }
            }
            if (c.getCause() == c) {
                break;
            }
        }
        return false;
    }

    private static Status error(String op, String key, Exception e) {
        show(op, key, e);
        return Status.ERROR;
    }

    private static Status unexpected(String op, String key, Exception e) {
        show(op, key, e);
        return Status.UNEXPECTED_STATE;
    }

    private static void show(String op, String key, Exception e) {
        int n = ERRORS_SHOWN.incrementAndGet();
        if (n <= MAX_ERRORS_SHOWN) {
            System.err.println("spindle.ycsb.KineticClient: " + op + " " + key + ": " + e);
        } else if (n == MAX_ERRORS_SHOWN + 1) {
            System.err.println("spindle.ycsb.KineticClient: further errors not shown");
        }
    }
}
