package spindle.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.security.MessageDigest;

import org.junit.jupiter.api.Test;

import com.seagate.kinetic.proto.Kinetic.Command.Status.StatusCode;

import kinetic.client.Entry;
import kinetic.client.EntryMetadata;
import kinetic.client.EntryNotFoundException;
import kinetic.client.KineticException;
import kinetic.client.VersionMismatchException;
import kinetic.client.advanced.PersistOption;

/** PUT / GET / GETVERSION / DELETE and their version (compare-and-swap) and force rules. */
class KeyValueInteropTest extends InteropSupport {

    private static Entry entry(byte[] key, byte[] value, byte[] dbVersion) {
        EntryMetadata md = new EntryMetadata();
        md.setVersion(dbVersion);
        return new Entry(key, value, md);
    }

    @Test
    void noop() throws Exception {
        long rtt = client.noop();
        assertTrue(rtt >= 0, "noop round trip time");
    }

    @Test
    void putNewKeyWithNewVersionThenGet() throws Exception {
        byte[] k = key("k");
        Entry put = client.put(entry(k, bytes("value-1"), null), bytes("v1"));
        assertArrayEquals(bytes("v1"), put.getEntryMetadata().getVersion(),
                "put returns the entry with the new version");

        Entry got = client.get(k);
        assertNotNull(got);
        assertArrayEquals(k, got.getKey(), "GET echoes the key");
        assertArrayEquals(bytes("value-1"), got.getValue());
        assertArrayEquals(bytes("v1"), got.getEntryMetadata().getVersion());
    }

    @Test
    void getMissingKeyIsNull() throws Exception {
        assertNull(client.get(key("missing")));
    }

    @Test
    void getMetadataHasVersionTagAndNoValue() throws Exception {
        byte[] k = key("k");
        Entry e = entry(k, bytes("payload"), null);
        e.getEntryMetadata().setTag(bytes("tag-1"));
        client.put(e, bytes("v1"));

        EntryMetadata md = client.getMetadata(k);
        assertNotNull(md);
        assertArrayEquals(bytes("v1"), md.getVersion());
        assertArrayEquals(bytes("tag-1"), md.getTag());
        assertNull(client.getMetadata(key("missing")), "metadata of a missing key");
    }

    @Test
    void getVersion() throws Exception {
        byte[] k = key("k");
        client.put(entry(k, bytes("x"), null), bytes("version-A"));
        assertArrayEquals(bytes("version-A"), client.getVersion(k));

        client.put(entry(k, bytes("y"), bytes("version-A")), bytes("version-B"));
        assertArrayEquals(bytes("version-B"), client.getVersion(k));

        // The client wraps NOT_FOUND of GETVERSION in a plain KineticException.
        KineticException e = assertThrows(KineticException.class,
                () -> client.getVersion(key("missing")));
        assertTrue(statusOf(e) == StatusCode.NOT_FOUND || hasCause(e, EntryNotFoundException.class),
                "GETVERSION of a missing key -> NOT_FOUND, got " + statusOf(e) + ": " + e);
    }

    @Test
    void putWithMatchingDbVersionReplacesValueAndVersion() throws Exception {
        byte[] k = key("k");
        client.put(entry(k, bytes("one"), null), bytes("1"));
        client.put(entry(k, bytes("two"), bytes("1")), bytes("2"));
        Entry got = client.get(k);
        assertArrayEquals(bytes("two"), got.getValue());
        assertArrayEquals(bytes("2"), got.getEntryMetadata().getVersion());
    }

    @Test
    void putWithWrongDbVersionIsVersionMismatch() throws Exception {
        byte[] k = key("k");
        client.put(entry(k, bytes("one"), null), bytes("1"));

        KineticException e = assertThrows(KineticException.class,
                () -> client.put(entry(k, bytes("two"), bytes("wrong")), bytes("2")));
        assertTrue(hasCause(e, VersionMismatchException.class), "VersionMismatchException: " + e);
        assertEquals(StatusCode.VERSION_MISMATCH, statusOf(e));

        Entry got = client.get(k);
        assertArrayEquals(bytes("one"), got.getValue(), "a failed CAS leaves the value");
        assertArrayEquals(bytes("1"), got.getEntryMetadata().getVersion());
    }

    @Test
    void putWithoutDbVersionOnVersionedKeyIsVersionMismatch() throws Exception {
        byte[] k = key("k");
        client.put(entry(k, bytes("one"), null), bytes("1"));
        assertThrows(VersionMismatchException.class,
                () -> client.put(entry(k, bytes("two"), null), bytes("2")));
        assertArrayEquals(bytes("one"), client.get(k).getValue());
    }

    @Test
    void putWithDbVersionOnMissingKeyIsVersionMismatch() throws Exception {
        byte[] k = key("k");
        assertThrows(VersionMismatchException.class,
                () -> client.put(entry(k, bytes("v"), bytes("1")), bytes("2")));
        assertNull(client.get(k), "nothing stored");
    }

    @Test
    void unversionedKeyCanBeOverwrittenWithoutDbVersion() throws Exception {
        byte[] k = key("k");
        // no new version: the entry is stored without a version ("absent" == empty)
        client.put(entry(k, bytes("one"), null), null);
        client.put(entry(k, bytes("two"), null), bytes("v2"));
        Entry got = client.get(k);
        assertArrayEquals(bytes("two"), got.getValue());
        assertArrayEquals(bytes("v2"), got.getEntryMetadata().getVersion());
    }

    @Test
    void putWithEachPersistOption() throws Exception {
        for (PersistOption option : PersistOption.values()) {
            byte[] k = key(option.name());
            client.put(entry(k, bytes("value-" + option), null), bytes("1"), option);
            client.put(entry(k, bytes("value2-" + option), bytes("1")), bytes("2"), option);
            Entry got = client.get(k);
            assertArrayEquals(bytes("value2-" + option), got.getValue(), option.name());
            assertArrayEquals(bytes("2"), got.getEntryMetadata().getVersion(), option.name());

            // versioned delete with the same option
            assertTrue(client.delete(entry(k, null, bytes("2")), option), option.name());
            assertNull(client.get(k), option.name());
        }
    }

    @Test
    void putForcedIgnoresStoredVersion() throws Exception {
        byte[] k = key("k");
        client.put(entry(k, bytes("one"), null), bytes("1"));

        // putForced sends force=true and uses the entry's version as the new version
        Entry forced = entry(k, bytes("forced"), bytes("F"));
        client.putForced(forced);
        Entry got = client.get(k);
        assertArrayEquals(bytes("forced"), got.getValue());
        assertArrayEquals(bytes("F"), got.getEntryMetadata().getVersion());

        for (PersistOption option : PersistOption.values()) {
            client.putForced(entry(k, bytes("forced-" + option), bytes("F-" + option)), option);
            got = client.get(k);
            assertArrayEquals(bytes("forced-" + option), got.getValue(), option.name());
            assertArrayEquals(bytes("F-" + option), got.getEntryMetadata().getVersion());
        }

        // forced put of a new key
        byte[] k2 = key("new");
        client.putForced(entry(k2, bytes("fresh"), null));
        assertArrayEquals(bytes("fresh"), client.get(k2).getValue());
    }

    @Test
    void deleteVersioned() throws Exception {
        byte[] k = key("k");
        client.put(entry(k, bytes("one"), null), bytes("1"));

        KineticException e = assertThrows(KineticException.class,
                () -> client.delete(entry(k, null, bytes("wrong"))));
        assertTrue(hasCause(e, VersionMismatchException.class), "VersionMismatchException: " + e);
        assertNotNull(client.get(k), "a failed delete keeps the entry");

        assertTrue(client.delete(entry(k, null, bytes("1"))));
        assertNull(client.get(k));
    }

    @Test
    void deleteMissingKeyIsFalse() throws Exception {
        assertFalse(client.delete(entry(key("missing"), null, null)));
        assertFalse(client.delete(entry(key("missing"), null, bytes("1"))));
    }

    @Test
    void deleteForced() throws Exception {
        byte[] k = key("k");
        client.put(entry(k, bytes("one"), null), bytes("1"));
        assertTrue(client.deleteForced(k), "forced delete of a versioned key");
        assertNull(client.get(k));

        assertTrue(client.deleteForced(key("missing")), "forced delete of a missing key");

        for (PersistOption option : PersistOption.values()) {
            byte[] ko = key("o-" + option);
            client.put(entry(ko, bytes("x"), null), bytes("1"));
            assertTrue(client.deleteForced(ko, option), option.name());
            assertNull(client.get(ko), option.name());
        }
    }

    @Test
    void flushAfterAsyncPersistedWrite() throws Exception {
        byte[] k = key("k");
        client.put(entry(k, bytes("write-back"), null), bytes("1"), PersistOption.ASYNC);
        client.flush();
        assertArrayEquals(bytes("write-back"), client.get(k).getValue());
    }

    @Test
    void emptyValueRoundTrip() throws Exception {
        byte[] k = key("empty");
        client.put(entry(k, new byte[0], null), bytes("1"));
        Entry got = client.get(k);
        assertNotNull(got, "an entry with an empty value exists");
        assertNotNull(got.getValue());
        assertEquals(0, got.getValue().length);
        assertArrayEquals(bytes("1"), got.getEntryMetadata().getVersion());
    }

    @Test
    void oneMebibyteValueRoundTrip() throws Exception {
        byte[] k = key("big");
        byte[] value = randomBytes(1024 * 1024);
        client.put(entry(k, value, null), bytes("1"));
        Entry got = client.get(k);
        assertNotNull(got);
        assertEquals(value.length, got.getValue().length);
        assertArrayEquals(value, got.getValue());
    }

    @Test
    void maxSizeKeyAccepted() throws Exception {
        byte[] k = new byte[4096];
        byte[] p = key("");
        System.arraycopy(p, 0, k, 0, p.length);
        java.util.Arrays.fill(k, p.length, k.length, (byte) 'x');
        client.put(entry(k, bytes("v"), null), bytes("1"));
        assertArrayEquals(bytes("v"), client.get(k).getValue());
        assertTrue(client.deleteForced(k));
    }

    @Test
    void tagAndAlgorithmRoundTrip() throws Exception {
        byte[] value = bytes("tagged value");
        String[][] algorithms = {
            {"SHA1", "SHA-1"}, {"SHA2", "SHA-256"}, {"SHA3", null}, {"CRC32", null}, {"CRC64", null},
        };
        for (String[] a : algorithms) {
            byte[] tag = a[1] != null ? MessageDigest.getInstance(a[1]).digest(value)
                    : bytes("opaque-tag-" + a[0]);
            byte[] k = key(a[0]);
            Entry e = entry(k, value, null);
            e.getEntryMetadata().setTag(tag);
            e.getEntryMetadata().setAlgorithm(a[0]);
            client.put(e, bytes("1"));

            Entry got = client.get(k);
            assertArrayEquals(value, got.getValue(), a[0]);
            assertArrayEquals(tag, got.getEntryMetadata().getTag(), a[0] + " tag");
            assertEquals(a[0], got.getEntryMetadata().getAlgorithm(), a[0] + " algorithm");

            EntryMetadata md = client.getMetadata(k);
            assertArrayEquals(tag, md.getTag(), a[0] + " metadata tag");
            assertEquals(a[0], md.getAlgorithm(), a[0] + " metadata algorithm");
        }
    }
}
