package spindle.interop;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.logging.Level;
import java.util.logging.Logger;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.TestInstance;

import com.seagate.kinetic.common.lib.KineticMessage;
import com.seagate.kinetic.proto.Kinetic.Command.Status.StatusCode;

import kinetic.admin.AdminClientConfiguration;
import kinetic.admin.KineticAdminClient;
import kinetic.admin.KineticAdminClientFactory;
import kinetic.client.ClientConfiguration;
import kinetic.client.KineticException;
import kinetic.client.advanced.AdvancedKineticClient;
import kinetic.client.advanced.AdvancedKineticClientFactory;

/**
 * Shared set-up for the interoperability tests: one client connection per test class to the
 * server at {@code kinetic.host}:{@code kinetic.port} (system properties, defaults 127.0.0.1 and
 * 8123) with the factory identity 1 / key "asdfasdf", and a unique key prefix per test
 * (class + method name + random suffix) so tests never see each other's keys.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class InteropSupport {

    static final String HOST = System.getProperty("kinetic.host", "127.0.0.1");
    static final int PORT = Integer.getInteger("kinetic.port", 8123);

    /** Bounded so that a server that stays silent fails a test instead of hanging it. */
    static final long REQUEST_TIMEOUT_MS = 20_000;

    static {
        // The client logs every connection at INFO; only warnings are of interest here.
        Logger.getLogger("").setLevel(Level.WARNING);
    }

    protected AdvancedKineticClient client;

    /** Unique per test method: "ClassName.method-<hex>/" */
    protected String prefix;

    @BeforeAll
    void connect() throws KineticException {
        client = AdvancedKineticClientFactory.createAdvancedClientInstance(clientConfig());
    }

    @AfterAll
    void disconnect() throws KineticException {
        if (client != null) {
            client.close();
        }
    }

    @BeforeEach
    void uniquePrefix(TestInfo info) {
        String method = info.getTestMethod().map(m -> m.getName()).orElse("test");
        prefix = getClass().getSimpleName() + "." + method + "-"
                + Long.toHexString(ThreadLocalRandom.current().nextLong() & Long.MAX_VALUE) + "/";
    }

    static ClientConfiguration clientConfig() {
        ClientConfiguration config = new ClientConfiguration();
        config.setHost(HOST);
        config.setPort(PORT);
        config.setRequestTimeoutMillis(REQUEST_TIMEOUT_MS);
        return config;
    }

    static KineticAdminClient adminClient() throws KineticException {
        AdminClientConfiguration config = new AdminClientConfiguration();
        config.setHost(HOST);
        config.setPort(PORT);
        config.setUseSsl(false);
        config.setRequestTimeoutMillis(REQUEST_TIMEOUT_MS);
        return KineticAdminClientFactory.createInstance(config);
    }

    /** Key = test prefix + name, UTF-8. */
    byte[] key(String name) {
        return (prefix + name).getBytes(UTF_8);
    }

    static byte[] bytes(String s) {
        return s.getBytes(UTF_8);
    }

    static String str(byte[] b) {
        return b == null ? null : new String(b, UTF_8);
    }

    static List<String> strs(List<byte[]> keys) {
        List<String> out = new ArrayList<>();
        for (byte[] k : keys) {
            out.add(str(k));
        }
        return out;
    }

    /**
     * The status code of the server response carried by a client exception (on the exception
     * itself or on one of its causes: some client calls wrap), or null if there is none (a
     * transport failure such as "Hmac failed compare").
     */
    static StatusCode statusOf(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof KineticException) {
                KineticMessage response = ((KineticException) c).getResponseMessage();
                if (response != null && response.getCommand() != null
                        && response.getCommand().hasStatus()) {
                    return response.getCommand().getStatus().getCode();
                }
            }
            if (c.getCause() == c) {
                break;
            }
        }
        return null;
    }

    /** True if t or one of its causes is an instance of type. */
    static boolean hasCause(Throwable t, Class<? extends Throwable> type) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (type.isInstance(c)) {
                return true;
            }
            if (c.getCause() == c) {
                break;
            }
        }
        return false;
    }

    static byte[] randomBytes(int n) {
        byte[] b = new byte[n];
        ThreadLocalRandom.current().nextBytes(b);
        return b;
    }
}
