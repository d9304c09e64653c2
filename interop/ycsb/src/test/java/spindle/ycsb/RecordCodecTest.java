package spindle.ycsb;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.junit.jupiter.api.Test;

/** The record value format (no drive needed). */
class RecordCodecTest {

    private static Map<String, byte[]> record(int fields, int length) {
        Map<String, byte[]> r = new HashMap<>();
        for (int f = 0; f < fields; f++) {
            byte[] v = new byte[length];
            Arrays.fill(v, (byte) ('a' + f));
            r.put("field" + f, v);
        }
        return r;
    }

    @Test
    void roundTripsAYcsbDefaultRecord() {
        Map<String, byte[]> r = record(10, 100);
        byte[] encoded = RecordCodec.encode(r);
        assertEquals(1 + 4 + 10 * (4 + 6 + 4 + 100), encoded.length);
        TreeMap<String, byte[]> back = RecordCodec.decode(encoded, null);
        assertEquals(r.keySet(), back.keySet());
        r.forEach((k, v) -> assertArrayEquals(v, back.get(k), k));
    }

    @Test
    void exactLayout() {
        Map<String, byte[]> r = new HashMap<>();
        r.put("b", new byte[] {0x1f, 0, (byte) 0xff});
        r.put("a", new byte[0]);
        byte[] expected = {
            0x01, 0, 0, 0, 2,
            0, 0, 0, 1, 'a', 0, 0, 0, 0,
            0, 0, 0, 1, 'b', 0, 0, 0, 3, 0x1f, 0, (byte) 0xff,
        };
        assertArrayEquals(expected, RecordCodec.encode(r), "sorted by name, length-prefixed");
    }

    @Test
    void decodesOnlyTheRequestedFields() {
        byte[] encoded = RecordCodec.encode(record(10, 5));
        TreeMap<String, byte[]> some = RecordCodec.decode(encoded, Set.of("field3", "field7", "nope"));
        assertEquals(Set.of("field3", "field7"), some.keySet());
        assertArrayEquals("ddddd".getBytes(UTF_8), some.get("field3"));
    }

    @Test
    void rejectsWhatIsNotARecord() {
        byte[] good = RecordCodec.encode(record(2, 3));
        assertThrows(IllegalArgumentException.class, () -> RecordCodec.decode(null, null));
        assertThrows(IllegalArgumentException.class, () -> RecordCodec.decode("field0=abc".getBytes(UTF_8), null));
        assertThrows(IllegalArgumentException.class, () -> RecordCodec.decode(Arrays.copyOf(good, good.length - 1), null));
        assertThrows(IllegalArgumentException.class, () -> RecordCodec.decode(Arrays.copyOf(good, good.length + 1), null));
        byte[] huge = good.clone();
        huge[8] = (byte) 0x7f; // first name length far beyond the value
        assertThrows(IllegalArgumentException.class, () -> RecordCodec.decode(huge, null));
    }

    @Test
    void emptyRecord() {
        assertEquals(0, RecordCodec.decode(RecordCodec.encode(Map.of()), null).size());
    }
}
