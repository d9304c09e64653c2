package spindle.ycsb;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The value format of a YCSB record stored as one Kinetic value (format 1):
 *
 * <pre>
 *   u8   format            = 0x01
 *   u32  field count       N
 *   N times, fields sorted by name (so equal records encode to equal bytes):
 *     u32  name length     L   (bytes)
 *     L    name            (UTF-8)
 *     u32  value length    V   (bytes)
 *     V    value           (raw bytes, any content)
 * </pre>
 *
 * All integers are big-endian and unsigned in meaning (a length above 2^31-1 is rejected).
 * Length prefixes rather than separators, so field values may hold any byte. A YCSB default
 * record (10 fields "field0".."field9" of 100 bytes) takes 1 + 4 + 10 * (4 + 6 + 4 + 100) =
 * 1145 bytes. Decoding rejects a wrong format byte, a truncated value and trailing bytes.
 */
public final class RecordCodec {

    public static final byte FORMAT = 0x01;

    private RecordCodec() {}

    /** Encodes the fields (sorted by name). */
    public static byte[] encode(Map<String, byte[]> fields) {
        TreeMap<String, byte[]> sorted = new TreeMap<>(fields);
        int size = 1 + 4;
        byte[][] names = new byte[sorted.size()][];
        int i = 0;
        for (Map.Entry<String, byte[]> e : sorted.entrySet()) {
            names[i] = e.getKey().getBytes(UTF_8);
            size += 4 + names[i].length + 4 + e.getValue().length;
            i++;
        }
        ByteBuffer out = ByteBuffer.allocate(size);
        out.put(FORMAT).putInt(sorted.size());
        i = 0;
        for (byte[] value : sorted.values()) {
            out.putInt(names[i].length).put(names[i]).putInt(value.length).put(value);
            i++;
        }
        return out.array();
    }

    /**
     * Decodes a record; with {@code only} non-null, keeps just the fields named there (names
     * absent from the record are simply missing from the result). Sorted by name.
     *
     * @throws IllegalArgumentException if the bytes are not a format-1 record
     */
    public static TreeMap<String, byte[]> decode(byte[] value, Set<String> only) {
        if (value == null || value.length < 5) {
            throw new IllegalArgumentException("not a record: " + (value == null ? "null" : value.length + " bytes"));
        }
        ByteBuffer in = ByteBuffer.wrap(value);
        byte format = in.get();
        if (format != FORMAT) {
            throw new IllegalArgumentException("unknown record format " + (format & 0xff));
        }
        TreeMap<String, byte[]> out = new TreeMap<>();
        try {
            int n = length(in, "field count");
            for (int i = 0; i < n; i++) {
                byte[] name = new byte[length(in, "name length")];
                in.get(name);
                byte[] v = new byte[length(in, "value length")];
                in.get(v);
                String field = new String(name, UTF_8);
                if (only == null || only.contains(field)) {
                    out.put(field, v);
                }
            }
        } catch (BufferUnderflowException e) {
            throw new IllegalArgumentException("truncated record (" + value.length + " bytes)");
        }
        if (in.hasRemaining()) {
            throw new IllegalArgumentException(in.remaining() + " trailing bytes after the record");
        }
        return out;
    }

    private static int length(ByteBuffer in, String what) {
        int n = in.getInt();
        if (n < 0 || n > in.remaining()) {
            throw new IllegalArgumentException(what + " " + Integer.toUnsignedString(n)
                    + " exceeds the " + in.remaining() + " bytes left");
        }
        return n;
    }
}
