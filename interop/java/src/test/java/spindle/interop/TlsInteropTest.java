package spindle.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import kinetic.admin.AdminClientConfiguration;
import kinetic.admin.KineticAdminClient;
import kinetic.admin.KineticAdminClientFactory;
import kinetic.admin.KineticLog;
import kinetic.client.ClientConfiguration;
import kinetic.client.Entry;
import kinetic.client.EntryMetadata;
import kinetic.client.KineticClient;
import kinetic.client.KineticClientFactory;

/**
 * The reference client over TLS (it trusts any certificate and speaks TLS 1.2 on Java 17),
 * against the drive's TLS port ({@code kinetic.tlsPort}), which serves a self-signed certificate
 * generated on first start.
 */
class TlsInteropTest extends InteropSupport {

    static final int TLS_PORT = Integer.getInteger("kinetic.tlsPort", 8443);

    @Test
    void keyValueOperationsOverTls() throws Exception {
        ClientConfiguration config = clientConfig();
        config.setPort(TLS_PORT);
        config.setUseSsl(true);
        KineticClient tls = KineticClientFactory.createInstance(config);
        try {
            Entry entry = new Entry(key("k"), bytes("over tls"), new EntryMetadata());
            tls.putForced(entry);
            assertArrayEquals(bytes("over tls"), tls.get(key("k")).getValue());
            // The plain-text connection sees the same store.
            assertArrayEquals(bytes("over tls"), client.get(key("k")).getValue());
            assertTrue(tls.delete(new Entry(key("k"), null, new EntryMetadata())));
            tls.noop();
        } finally {
            tls.close();
        }
    }

    @Test
    void adminGetLogOverTls() throws Exception {
        AdminClientConfiguration config = new AdminClientConfiguration();
        config.setHost(HOST);
        config.setPort(TLS_PORT);
        config.setUseSsl(true);
        config.setRequestTimeoutMillis(REQUEST_TIMEOUT_MS);
        KineticAdminClient admin = KineticAdminClientFactory.createInstance(config);
        try {
            KineticLog log = admin.getLog();
            assertNotNull(log.getLimits());
            assertEquals(4096, log.getLimits().getMaxKeySize());
            assertEquals(TLS_PORT, log.getConfiguration().getTlsPort());
            assertEquals(PORT, log.getConfiguration().getPort());
        } finally {
            admin.close();
        }
    }
}
