package spindle.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import kinetic.client.Entry;
import kinetic.client.EntryMetadata;
import kinetic.client.advanced.PersistOption;

/** GETNEXT / GETPREVIOUS / GETKEYRANGE (forward and reversed). Keys sort as unsigned bytes. */
class RangeInteropTest extends InteropSupport {

    private static final String[] NAMES = {"a", "b", "c", "d", "e"};

    private void putAll() throws Exception {
        for (String n : NAMES) {
            EntryMetadata md = new EntryMetadata();
            client.put(new Entry(key(n), bytes("value-" + n), md), bytes("ver-" + n));
        }
    }

    private List<String> names(String... ns) {
        List<String> out = new ArrayList<>();
        for (String n : ns) {
            out.add(prefix + n);
        }
        return out;
    }

    private boolean inPrefix(Entry e) {
        return e != null && str(e.getKey()).startsWith(prefix);
    }

    @Test
    void getNext() throws Exception {
        putAll();
        Entry next = client.getNext(key("a"));
        assertNotNull(next);
        assertEquals(prefix + "b", str(next.getKey()));
        assertArrayEquals(bytes("value-b"), next.getValue());
        assertArrayEquals(bytes("ver-b"), next.getEntryMetadata().getVersion());

        // from a key that does not exist: the first key after it
        assertEquals(prefix + "c", str(client.getNext(key("bb")).getKey()));
        // from the bare prefix: the first key of the set
        assertEquals(prefix + "a", str(client.getNext(key("")).getKey()));
        // past the last key of this test's set: nothing of ours
        assertFalse(inPrefix(client.getNext(key("e"))), "nothing after the last key");
        // past every possible key used by this suite
        assertNull(client.getNext(new byte[] {(byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff}));
    }

    @Test
    void getPrevious() throws Exception {
        putAll();
        Entry prev = client.getPrevious(key("c"));
        assertNotNull(prev);
        assertEquals(prefix + "b", str(prev.getKey()));
        assertArrayEquals(bytes("value-b"), prev.getValue());
        assertArrayEquals(bytes("ver-b"), prev.getEntryMetadata().getVersion());

        assertEquals(prefix + "e", str(client.getPrevious(key("zz")).getKey()));
        assertEquals(prefix + "c", str(client.getPrevious(key("cc")).getKey()));
        assertFalse(inPrefix(client.getPrevious(key("a"))), "nothing of ours before the first key");
        assertNull(client.getPrevious(new byte[] {0}), "nothing before 0x00");
    }

    @Test
    void getKeyRangeBounds() throws Exception {
        putAll();
        byte[] a = key("a");
        byte[] e = key("e");
        assertEquals(names("a", "b", "c", "d", "e"), strs(client.getKeyRange(a, true, e, true, 200)));
        assertEquals(names("b", "c", "d"), strs(client.getKeyRange(a, false, e, false, 200)));
        assertEquals(names("a", "b", "c", "d"), strs(client.getKeyRange(a, true, e, false, 200)));
        assertEquals(names("b", "c", "d", "e"), strs(client.getKeyRange(a, false, e, true, 200)));
        // bounds that are not stored keys
        assertEquals(names("a", "b", "c", "d", "e"),
                strs(client.getKeyRange(key(""), true, key("z"), true, 200)));
        assertEquals(names("c", "d"), strs(client.getKeyRange(key("bb"), true, key("dd"), false, 200)));
        // single-key range
        assertEquals(names("c"), strs(client.getKeyRange(key("c"), true, key("c"), true, 200)));
    }

    @Test
    void getKeyRangeMaxReturned() throws Exception {
        putAll();
        assertEquals(names("a", "b"), strs(client.getKeyRange(key("a"), true, key("e"), true, 2)));
        assertEquals(names("b"), strs(client.getKeyRange(key("a"), false, key("e"), true, 1)));
    }

    @Test
    void getKeyRangeEmpty() throws Exception {
        putAll();
        List<byte[]> keys = client.getKeyRange(key("x"), true, key("y"), true, 200);
        assertNotNull(keys);
        assertTrue(keys.isEmpty(), "no keys in range: " + strs(keys));
        keys = client.getKeyRange(key("a"), false, key("b"), false, 200);
        assertTrue(keys.isEmpty(), "exclusive neighbours: " + strs(keys));
        // start sorted after end: no keys
        keys = client.getKeyRange(key("e"), true, key("a"), true, 200);
        assertTrue(keys.isEmpty(), "start after end: " + strs(keys));
    }

    @Test
    void getKeyRangeFullLimit() throws Exception {
        // maxKeyRangeCount is 200: a full page of 200 out of 205 keys
        for (int i = 0; i < 205; i++) {
            client.putForced(new Entry(key(String.format("%03d", i)), bytes("v")), PersistOption.ASYNC);
        }
        List<String> keys = strs(client.getKeyRange(key(""), true, key("~"), true, 200));
        assertEquals(200, keys.size());
        assertEquals(prefix + "000", keys.get(0));
        assertEquals(prefix + "199", keys.get(199));
    }

    @Test
    void getKeyRangeReversed() throws Exception {
        putAll();
        byte[] a = key("a");
        byte[] e = key("e");
        assertEquals(names("e", "d", "c", "b", "a"),
                strs(client.getKeyRangeReversed(a, true, e, true, 200)));
        assertEquals(names("d", "c", "b"), strs(client.getKeyRangeReversed(a, false, e, false, 200)));
        assertEquals(names("d", "c", "b", "a"),
                strs(client.getKeyRangeReversed(a, true, e, false, 200)));
        assertEquals(names("e", "d", "c", "b"),
                strs(client.getKeyRangeReversed(a, false, e, true, 200)));
        // maxReturned counts from the end key downwards
        assertEquals(names("e", "d"), strs(client.getKeyRangeReversed(a, true, e, true, 2)));
        assertEquals(names("d", "c"), strs(client.getKeyRangeReversed(key("bb"), true, key("dd"), true, 200)));
    }
}
