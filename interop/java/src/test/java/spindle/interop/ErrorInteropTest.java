package spindle.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;

import org.junit.jupiter.api.Test;

import com.seagate.kinetic.proto.Kinetic.Command.Status.StatusCode;

import kinetic.client.ClientConfiguration;
import kinetic.client.Entry;
import kinetic.client.EntryMetadata;
import kinetic.client.KineticClient;
import kinetic.client.KineticClientFactory;
import kinetic.client.KineticException;

/** Requests the server must refuse, and what the connection looks like afterwards. */
class ErrorInteropTest extends InteropSupport {

    @Test
    void keyLongerThanMaxKeySizeIsInvalidRequest() throws Exception {
        byte[] k = new byte[4097];
        Arrays.fill(k, (byte) 'k');
        KineticException e = assertThrows(KineticException.class,
                () -> client.put(new Entry(k, bytes("v"), new EntryMetadata()), bytes("1")));
        assertEquals(StatusCode.INVALID_REQUEST, statusOf(e), "status for a 4097-byte key: " + e);

        // the connection is still usable and nothing was stored
        assertTrue(client.noop() >= 0);
        byte[] ok = key("after");
        client.put(new Entry(ok, bytes("fine"), new EntryMetadata()), bytes("1"));
        assertArrayEquals(bytes("fine"), client.get(ok).getValue());
    }

    @Test
    void wrongHmacKeyFails() throws Exception {
        ClientConfiguration config = clientConfig();
        config.setKey("definitely-not-asdfasdf");
        // the sign-on is unsolicited and unsigned, so connecting succeeds; every request fails
        KineticClient bad = KineticClientFactory.createInstance(config);
        try {
            KineticException e = assertThrows(KineticException.class, bad::noop);
            StatusCode code = statusOf(e);
            // The server answers HMAC_FAILURE signed with the identity's real key, which this
            // client cannot verify ("Hmac failed compare"); accept either way of surfacing it.
            assertTrue(code == null || code == StatusCode.HMAC_FAILURE,
                    "HMAC_FAILURE or an HMAC verification error, got " + code + ": " + e);
            byte[] k = key("k");
            assertThrows(KineticException.class,
                    () -> bad.put(new Entry(k, bytes("v"), new EntryMetadata()), bytes("1")));
        } finally {
            bad.close();
        }
        // nothing was written through the bad client, and good clients are unaffected
        assertEquals(null, client.get(key("k")));
        assertTrue(client.noop() >= 0);
    }
}
