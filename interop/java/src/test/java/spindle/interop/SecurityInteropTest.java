package spindle.interop;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;
import static spindle.interop.InteropSupport.REQUEST_TIMEOUT_MS;
import static spindle.interop.InteropSupport.bytes;
import static spindle.interop.InteropSupport.hasCause;
import static spindle.interop.InteropSupport.statusOf;
import static spindle.interop.InteropSupport.strs;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.logging.Level;
import java.util.logging.Logger;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.function.Executable;

import com.seagate.kinetic.common.lib.KineticMessage;
import com.seagate.kinetic.proto.Kinetic.Command.Status.StatusCode;

import kinetic.admin.ACL;
import kinetic.admin.AdminClientConfiguration;
import kinetic.admin.Domain;
import kinetic.admin.KineticAdminClient;
import kinetic.admin.KineticAdminClientFactory;
import kinetic.admin.Role;
import kinetic.client.ClientConfiguration;
import kinetic.client.ClusterVersionFailureException;
import kinetic.client.Entry;
import kinetic.client.EntryMetadata;
import kinetic.client.KineticClient;
import kinetic.client.KineticClientFactory;
import kinetic.client.KineticException;

/**
 * The security and administration operations of the reference admin client
 * ({@link KineticAdminClient}, 0.8.0.4): {@code setAcl}, {@code setLockPin},
 * {@code setErasePin}, {@code lockDevice}, {@code unLockDevice}, {@code instantErase},
 * {@code secureErase}, {@code setClusterVersion}, {@code firmwareDownload}, each over TLS as the
 * admin client does by default ({@link AdminClientConfiguration} turns TLS on).
 *
 * <p>These tests change drive-wide state (ACL, PINs, lock, cluster version, erase), so they run
 * against a <b>dedicated drive</b>: {@code kinetic.adminHost} (default {@code kinetic.host}),
 * {@code kinetic.adminPort} (plain) and {@code kinetic.adminTlsPort} (TLS), started by
 * scripts/java-interop.sh; without both ports every test is reported as skipped. The tests run
 * in a fixed order, and each one puts the drive back into its factory state (identity 1 /
 * "asdfasdf" with every permission only, no PINs, unlocked, cluster version 0); the
 * {@link #backToFactoryState} check after every test verifies that and, if a test left anything
 * behind (a failed assertion half-way), resets the drive with an ERASE using the PINs the test
 * set.
 *
 * <p>Not reachable through this client, so not covered here: power management (the 0.8.0.4
 * admin client has no call for it, and protocol 3.0.6 has no SET_POWER_LEVEL), the
 * SECURE_ERASE PIN operation ({@code secureErase} sends ERASE, like {@code instantErase}), and
 * TLS-only scopes (3.0.6 has no {@code TlsRequired} field).
 *
 * <p>Where the reference simulator (0.8.0.4) is known to differ from the protocol (and Spindle)
 * the test says so; those tests fail against the simulator: it merges ACLs instead of replacing
 * the list, lets any PIN pass when none is set (so LOCK without a lock PIN succeeds), checks
 * RANGE on both bounds of GETKEYRANGE instead of skipping keys outside the scope, accepts
 * firmware downloads, answers SUCCESS to UNLOCK of an unlocked drive, fails with INTERNAL_ERROR
 * on a key shorter than a scope's offset + value, and has no back-off after a wrong PIN. It also
 * answers an unknown identity with a message the client cannot match (the request times out),
 * which is why identities expected to be gone are probed with a short timeout.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class SecurityInteropTest {

    static final String HOST = System.getProperty("kinetic.adminHost",
            System.getProperty("kinetic.host", "127.0.0.1"));
    static final Integer PORT = positive(Integer.getInteger("kinetic.adminPort"));
    static final Integer TLS_PORT = positive(Integer.getInteger("kinetic.adminTlsPort"));

    static final long FACTORY_ID = 1;
    static final String FACTORY_KEY = "asdfasdf";
    static final long SECOND_ID = 2;
    static final String SECOND_KEY = "second identity's key";
    static final long THIRD_ID = 3;
    static final String THIRD_KEY = "third identity's key";

    /** Request timeout of {@link #probe} connections. */
    static final long PROBE_TIMEOUT_MS = 2_000;

    static {
        Logger.getLogger("").setLevel(Level.WARNING);
    }

    private static Integer positive(Integer i) {
        return i != null && i > 0 ? i : null;
    }

    static boolean haveAdminDrive() {
        return PORT != null && TLS_PORT != null;
    }

    /** Unique per test method: "sec.<method>-<hex>/"; scopes are built from it. */
    private String prefix;

    /** Every client a test opens; closed after the test. */
    private final List<KineticClient> opened = new ArrayList<>();

    /**
     * The PINs the drive holds as far as the running test knows (null = none set), kept up to
     * date by the test so that {@link #backToFactoryState} can unlock and erase whatever
     * happened.
     */
    private byte[] lockPin;
    private byte[] erasePin;

    @BeforeEach
    void setUp(TestInfo info) {
        assumeTrue(haveAdminDrive(),
                "kinetic.adminPort / kinetic.adminTlsPort not set: no dedicated drive, security test skipped");
        String method = info.getTestMethod().map(m -> m.getName()).orElse("test");
        prefix = "sec." + method + "-"
                + Long.toHexString(ThreadLocalRandom.current().nextLong() & Long.MAX_VALUE) + "/";
        lockPin = null;
        erasePin = null;
    }

    @AfterEach
    void backToFactoryState() throws Exception {
        if (!haveAdminDrive()) {
            return;
        }
        closeAll();
        String dirty = dirtyState();
        if (dirty != null) {
            System.err.println("security test left the drive not in its factory state (" + dirty
                    + "): resetting it with an ERASE");
            if (lockPin != null) {
                try {
                    KineticAdminClient admin = admin(FACTORY_ID, FACTORY_KEY, 0);
                    admin.unLockDevice(lockPin);
                } catch (KineticException e) {
                    // not locked, or another lock PIN: the ERASE below reports what matters
                }
            }
            KineticAdminClient admin = admin(FACTORY_ID, FACTORY_KEY, 0);
            admin.instantErase(erasePin != null ? erasePin : bytes("reset"));
            lockPin = null;
            erasePin = null;
            closeAll();
            dirty = dirtyState();
            closeAll();
            if (dirty != null) {
                fail("the dedicated drive is not in its factory state even after an ERASE: " + dirty);
            }
        }
    }

    /**
     * Null if the drive is in its factory state as far as a client can tell, otherwise what is
     * not: the factory identity with cluster version 0 works over both ports (so not locked,
     * cluster version 0, factory key), no PIN is set (setting an empty PIN with an empty old
     * PIN is refused once a PIN is set), and the identities the tests add are gone.
     */
    private String dirtyState() {
        try {
            client(FACTORY_ID, FACTORY_KEY, 0, false).noop();
            admin(FACTORY_ID, FACTORY_KEY, 0).getLog();
        } catch (KineticException e) {
            return "factory identity with cluster version 0: " + statusOf(e) + " " + e.getMessage();
        }
        try {
            KineticAdminClient admin = admin(FACTORY_ID, FACTORY_KEY, 0);
            admin.setLockPin(new byte[0], new byte[0]);
            admin.setErasePin(new byte[0], new byte[0]);
        } catch (KineticException e) {
            return "a PIN is set: " + statusOf(e) + " " + e.getMessage();
        }
        for (long id : new long[] {SECOND_ID, THIRD_ID}) {
            try {
                probe(id, id == SECOND_ID ? SECOND_KEY : THIRD_KEY).noop();
                return "identity " + id + " is still in the ACL";
            } catch (KineticException expected) {
                // gone, as in the factory ACL
            }
        }
        return null;
    }

    /**
     * A client with a short request timeout, for identities expected to be unknown or keys
     * expected to be wrong: Spindle answers HMAC_FAILURE at once (the client cannot check its
     * signature: "Hmac failed compare"), the reference simulator answers an unknown identity
     * with a message the client cannot match, so the request times out.
     */
    private KineticClient probe(long id, String key) throws KineticException {
        ClientConfiguration config = new ClientConfiguration();
        config.setHost(HOST);
        config.setPort(PORT);
        config.setUserId(id);
        config.setKey(key);
        config.setRequestTimeoutMillis(PROBE_TIMEOUT_MS);
        KineticClient c = KineticClientFactory.createInstance(config);
        opened.add(c);
        return c;
    }

    private void assertIdentityRejected(long id, String key) throws KineticException {
        KineticClient c = probe(id, key);
        assertThrows(KineticException.class, () -> c.noop(),
                "identity " + id + " with key \"" + key + "\" must be refused");
    }

    private void closeAll() {
        for (KineticClient c : opened) {
            try {
                c.close();
            } catch (Exception e) {
                // closing a connection the drive dropped
            }
        }
        opened.clear();
    }

    // ---- connections, ACLs, keys -------------------------------------------------------------

    /** A client to the dedicated drive, plain TCP or TLS. */
    private KineticClient client(long id, String key, long clusterVersion, boolean tls)
            throws KineticException {
        ClientConfiguration config = new ClientConfiguration();
        config.setHost(HOST);
        config.setPort(tls ? TLS_PORT : PORT);
        config.setUseSsl(tls);
        config.setUserId(id);
        config.setKey(key);
        config.setClusterVersion(clusterVersion);
        config.setRequestTimeoutMillis(REQUEST_TIMEOUT_MS);
        KineticClient c = KineticClientFactory.createInstance(config);
        opened.add(c);
        return c;
    }

    /** An admin client with the admin configuration's default transport: TLS (on the TLS port). */
    private KineticAdminClient admin(long id, String key, long clusterVersion) throws KineticException {
        AdminClientConfiguration config = new AdminClientConfiguration();
        assertTrue(config.getUseSsl(), "the admin configuration defaults to TLS");
        config.setHost(HOST);
        config.setPort(TLS_PORT);
        config.setUserId(id);
        config.setKey(key);
        config.setClusterVersion(clusterVersion);
        config.setRequestTimeoutMillis(REQUEST_TIMEOUT_MS);
        KineticAdminClient c = KineticAdminClientFactory.createInstance(config);
        opened.add(c);
        return c;
    }

    private KineticAdminClient factoryAdmin() throws KineticException {
        return admin(FACTORY_ID, FACTORY_KEY, 0);
    }

    private KineticClient factoryClient() throws KineticException {
        return client(FACTORY_ID, FACTORY_KEY, 0, false);
    }

    static Domain scope(long offset, String value, Role... roles) {
        Domain d = new Domain();
        d.setOffset(offset);
        d.setValue(value);
        d.setRoles(new ArrayList<>(Arrays.asList(roles)));
        return d;
    }

    static ACL acl(long id, String key, Domain... scopes) {
        ACL a = new ACL();
        a.setUserId(id);
        a.setKey(key);
        a.setDomains(new ArrayList<>(Arrays.asList(scopes)));
        return a;
    }

    /** Every permission on every key: the factory identity's rights. */
    static ACL allRoles(long id, String key) {
        return acl(id, key, scope(0, "", Role.values()));
    }

    static List<ACL> factoryAcl() {
        return List.of(allRoles(FACTORY_ID, FACTORY_KEY));
    }

    byte[] key(String name) {
        return (prefix + name).getBytes(UTF_8);
    }

    static Entry entry(byte[] key, String value) {
        return new Entry(key, bytes(value), new EntryMetadata());
    }

    /** Runs call, which must fail with a response carrying status code. */
    static KineticException expectStatus(StatusCode code, Executable call) {
        KineticException e = assertThrows(KineticException.class, call);
        assertEquals(code, statusOf(e), "status of: " + e);
        return e;
    }

    /** The cluster version in the response header an exception carries, or null. */
    static Long responseClusterVersion(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof KineticException) {
                KineticMessage response = ((KineticException) c).getResponseMessage();
                if (response != null && response.getCommand() != null
                        && response.getCommand().hasHeader()
                        && response.getCommand().getHeader().hasClusterVersion()) {
                    return response.getCommand().getHeader().getClusterVersion();
                }
            }
            if (c.getCause() == c) {
                break;
            }
        }
        return null;
    }

    // ---- transport ---------------------------------------------------------------------------

    /** SECURITY and PINOP are accepted only over TLS: on the plain port INVALID_REQUEST. */
    @Test
    @Order(1)
    void securityAndPinOperationsOverPlainTcpAreRefused() throws Exception {
        AdminClientConfiguration config = new AdminClientConfiguration();
        config.setHost(HOST);
        config.setPort(PORT);
        config.setUseSsl(false);
        config.setRequestTimeoutMillis(REQUEST_TIMEOUT_MS);
        KineticAdminClient plain = KineticAdminClientFactory.createInstance(config);
        opened.add(plain);

        expectStatus(StatusCode.INVALID_REQUEST, () -> plain.setAcl(List.of(
                allRoles(FACTORY_ID, FACTORY_KEY), allRoles(SECOND_ID, SECOND_KEY))));
        expectStatus(StatusCode.INVALID_REQUEST, () -> plain.setLockPin(null, bytes("lock")));
        expectStatus(StatusCode.INVALID_REQUEST, () -> plain.setErasePin(null, bytes("erase")));
        expectStatus(StatusCode.INVALID_REQUEST, () -> plain.lockDevice(bytes("lock")));
        expectStatus(StatusCode.INVALID_REQUEST, () -> plain.unLockDevice(bytes("lock")));

        // The refused erase must not have erased anything.
        KineticClient c = factoryClient();
        c.putForced(entry(key("survivor"), "still here"));
        expectStatus(StatusCode.INVALID_REQUEST, () -> plain.instantErase(bytes("erase")));
        assertArrayEquals(bytes("still here"), c.get(key("survivor")).getValue());
        // Other admin requests are fine over plain TCP.
        assertNotNull(plain.getLog().getConfiguration());
    }

    // ---- ACLs ----------------------------------------------------------------------------------

    /**
     * A second identity limited to one key prefix (read/write/delete/range) plus read-only
     * access to keys that carry "pub/" at a fixed offset: it works inside its scopes and gets
     * NOT_AUTHORIZED outside them and for the key-less permissions it lacks.
     */
    @Test
    @Order(2)
    void scopedIdentityWorksOnlyInsideItsScopes() throws Exception {
        String inside = prefix + "in/";
        // Same length as the prefix, so "pub/" sits at the offset of the read-only scope.
        String otherPrefix = prefix.replaceAll(".", "x");
        KineticAdminClient admin = factoryAdmin();
        admin.setAcl(List.of(allRoles(FACTORY_ID, FACTORY_KEY),
                acl(SECOND_ID, SECOND_KEY,
                        scope(0, inside, Role.READ, Role.WRITE, Role.DELETE, Role.RANGE),
                        scope(prefix.length(), "pub/", Role.READ))));

        KineticClient factory = factoryClient();
        factory.putForced(entry(key("outside-the-scopes"), "not yours"));
        byte[] published = (otherPrefix + "pub/doc").getBytes(UTF_8);
        factory.putForced(entry(published, "readable"));

        KineticClient second = client(SECOND_ID, SECOND_KEY, 0, false);
        second.noop();

        // Inside the prefix scope: everything it was given.
        byte[] mine = (inside + "k").getBytes(UTF_8);
        second.putForced(entry(mine, "mine"));
        assertArrayEquals(bytes("mine"), second.get(mine).getValue());
        assertEquals(List.of(inside + "k"),
                strs(second.getKeyRange(bytes(inside), true, bytes(inside + "\u007f"), true, 10)));
        assertTrue(second.delete(new Entry(mine, null, new EntryMetadata())));
        assertNull(second.get(mine));

        // The offset scope: read, but not write.
        assertArrayEquals(bytes("readable"), second.get(published).getValue());
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> second.putForced(entry(published, "defaced")));

        // Outside every scope.
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> second.get(key("outside-the-scopes")));
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> second.putForced(entry(key("outside-the-scopes"), "mine now")));
        expectStatus(StatusCode.NOT_AUTHORIZED,
                () -> second.delete(new Entry(key("outside-the-scopes"), null, new EntryMetadata())));
        assertArrayEquals(bytes("not yours"), factory.get(key("outside-the-scopes")).getValue());
        assertArrayEquals(bytes("readable"), factory.get(published).getValue());

        // Key-less permissions it does not have: GETLOG, SECURITY, SETUP.
        KineticAdminClient secondAdmin = admin(SECOND_ID, SECOND_KEY, 0);
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> secondAdmin.getLog());
        expectStatus(StatusCode.NOT_AUTHORIZED,
                () -> secondAdmin.setAcl(List.of(allRoles(SECOND_ID, SECOND_KEY))));
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> secondAdmin.setLockPin(null, bytes("mine")));
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> secondAdmin.setClusterVersion(9));

        admin.setAcl(factoryAcl());
    }

    /**
     * A scope whose offset + value reaches past the end of a key does not match it: a short key
     * is NOT_AUTHORIZED. (Reference simulator: INTERNAL_ERROR "End index: ..." from the
     * substring it takes.)
     */
    @Test
    @Order(3)
    void scopeReachingPastTheKeyDoesNotMatch() throws Exception {
        KineticAdminClient admin = factoryAdmin();
        admin.setAcl(List.of(allRoles(FACTORY_ID, FACTORY_KEY),
                acl(SECOND_ID, SECOND_KEY, scope(prefix.length(), "pub/", Role.READ, Role.WRITE))));
        try {
            KineticClient factory = factoryClient();
            factory.putForced(entry(key("pub"), "short"));
            factory.putForced(entry(key("pu"), "shorter"));
            KineticClient second = client(SECOND_ID, SECOND_KEY, 0, false);
            second.putForced(entry(key("pub/"), "exactly the scope"));
            expectStatus(StatusCode.NOT_AUTHORIZED, () -> second.get(key("pub")));
            expectStatus(StatusCode.NOT_AUTHORIZED, () -> second.get(key("pu")));
            expectStatus(StatusCode.NOT_AUTHORIZED, () -> second.putForced(entry(key("pub"), "x")));
            expectStatus(StatusCode.NOT_AUTHORIZED, () -> second.get(bytes(prefix)));
        } finally {
            admin.setAcl(factoryAcl());
        }
    }

    /**
     * GETKEYRANGE by an identity whose RANGE scope covers only part of the range returns just
     * the keys inside its scope. (Reference simulator: it checks RANGE on both bounds and
     * answers NOT_AUTHORIZED here.)
     */
    @Test
    @Order(4)
    void getKeyRangeSkipsKeysOutsideTheRangeScope() throws Exception {
        String inside = prefix + "m/";
        KineticAdminClient admin = factoryAdmin();
        admin.setAcl(List.of(allRoles(FACTORY_ID, FACTORY_KEY),
                acl(SECOND_ID, SECOND_KEY, scope(0, inside, Role.READ, Role.RANGE))));
        KineticClient factory = factoryClient();
        for (String k : List.of("a", "m/1", "m/2", "z")) {
            factory.putForced(entry(key(k), k));
        }
        KineticClient second = client(SECOND_ID, SECOND_KEY, 0, false);
        try {
            assertEquals(List.of(prefix + "m/1", prefix + "m/2"),
                    strs(second.getKeyRange(bytes(prefix), true, bytes(prefix + "\u007f"), true, 10)));
            assertEquals(List.of(prefix + "a", prefix + "m/1", prefix + "m/2", prefix + "z"),
                    strs(factory.getKeyRange(bytes(prefix), true, bytes(prefix + "\u007f"), true, 10)));
        } finally {
            admin.setAcl(factoryAcl());
        }
    }

    /**
     * A SECURITY message with an ACL replaces the whole identity list: an identity that is not
     * in the new list is gone. (Reference simulator: merges, identity 2 keeps working.)
     */
    @Test
    @Order(5)
    void setAclReplacesTheWholeList() throws Exception {
        KineticAdminClient admin = factoryAdmin();
        admin.setAcl(List.of(allRoles(FACTORY_ID, FACTORY_KEY), allRoles(SECOND_ID, SECOND_KEY)));
        client(SECOND_ID, SECOND_KEY, 0, false).noop();

        admin.setAcl(List.of(allRoles(FACTORY_ID, FACTORY_KEY), allRoles(THIRD_ID, THIRD_KEY)));
        client(THIRD_ID, THIRD_KEY, 0, false).noop();
        KineticClient second = probe(SECOND_ID, SECOND_KEY);
        KineticException e = assertThrows(KineticException.class, () -> second.noop(),
                "identity 2 is not in the new list");
        // Spindle answers an unknown identity HMAC_FAILURE without a signature it could check.
        assertTrue(statusOf(e) == StatusCode.HMAC_FAILURE || e.getMessage().contains("Hmac"),
                "unknown identity: " + statusOf(e) + " " + e);

        admin.setAcl(factoryAcl());
        assertIdentityRejected(THIRD_ID, THIRD_KEY);
    }

    /** The factory identity's key can be changed; the old key then fails, the new one works. */
    @Test
    @Order(6)
    void factoryIdentityKeyCanBeChanged() throws Exception {
        KineticAdminClient admin = factoryAdmin();
        KineticClient oldKey = factoryClient();
        oldKey.noop();
        admin.setAcl(List.of(allRoles(FACTORY_ID, "rotated key")));
        try {
            // The drive signs its HMAC_FAILURE answer with the new key: "Hmac failed compare".
            assertThrows(KineticException.class, () -> oldKey.noop());
            assertThrows(KineticException.class, () -> admin.getLog());
            KineticClient newKey = client(FACTORY_ID, "rotated key", 0, false);
            newKey.putForced(entry(key("k"), "v"));
            assertArrayEquals(bytes("v"), newKey.get(key("k")).getValue());
        } finally {
            admin(FACTORY_ID, "rotated key", 0).setAcl(factoryAcl());
        }
        factoryClient().noop();
    }

    // ---- PINs ----------------------------------------------------------------------------------

    /** Setting a lock PIN: the old PIN is needed once one is set (NOT_AUTHORIZED otherwise). */
    @Test
    @Order(7)
    void lockPinNeedsTheOldPin() throws Exception {
        KineticAdminClient admin = factoryAdmin();
        admin.setLockPin(null, bytes("lock-1"));
        lockPin = bytes("lock-1");
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> admin.setLockPin(bytes("wrong"), bytes("lock-2")));
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> admin.setLockPin(null, bytes("lock-2")));
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> admin.setLockPin(new byte[0], new byte[0]));
        admin.setLockPin(bytes("lock-1"), bytes("lock-2"));
        lockPin = bytes("lock-2");
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> admin.setLockPin(bytes("lock-1"), bytes("lock-3")));
        // An empty new PIN clears it; then no old PIN is needed any more.
        admin.setLockPin(bytes("lock-2"), new byte[0]);
        lockPin = null;
        admin.setLockPin(null, new byte[0]);
    }

    /** Setting an erase PIN: the old PIN is needed once one is set (NOT_AUTHORIZED otherwise). */
    @Test
    @Order(8)
    void erasePinNeedsTheOldPin() throws Exception {
        KineticAdminClient admin = factoryAdmin();
        admin.setErasePin(null, bytes("erase-1"));
        erasePin = bytes("erase-1");
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> admin.setErasePin(bytes("wrong"), bytes("erase-2")));
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> admin.setErasePin(null, bytes("erase-2")));
        admin.setErasePin(bytes("erase-1"), bytes("erase-2"));
        erasePin = bytes("erase-2");
        // The lock PIN is separate: still none set.
        admin.setLockPin(null, new byte[0]);
        admin.setErasePin(bytes("erase-2"), new byte[0]);
        erasePin = null;
        admin.setErasePin(null, new byte[0]);
    }

    /**
     * LOCK needs a lock PIN to be set: INVALID_REQUEST without one. (Reference simulator: any
     * PIN matches when none is set, so it locks.)
     */
    @Test
    @Order(9)
    void lockWithoutLockPinIsInvalid() throws Exception {
        KineticAdminClient admin = factoryAdmin();
        try {
            expectStatus(StatusCode.INVALID_REQUEST, () -> admin.lockDevice(bytes("any")));
            factoryClient().noop();
        } finally {
            try {
                admin.unLockDevice(bytes("any")); // in case it locked (simulator)
            } catch (KineticException e) {
                // not locked
            }
        }
    }

    /**
     * A locked drive answers DEVICE_LOCKED to every request but PIN operations, on open and on
     * new connections, until UNLOCK with the lock PIN; UNLOCK of an unlocked drive is
     * DEVICE_ALREADY_UNLOCKED.
     */
    @Test
    @Order(10)
    void lockedDriveAnswersDeviceLocked() throws Exception {
        KineticAdminClient admin = factoryAdmin();
        KineticClient c = factoryClient();
        c.putForced(entry(key("k"), "v"));
        admin.setLockPin(null, bytes("lock-pin"));
        lockPin = bytes("lock-pin");

        admin.lockDevice(bytes("lock-pin"));
        expectStatus(StatusCode.DEVICE_LOCKED, () -> c.noop());
        expectStatus(StatusCode.DEVICE_LOCKED, () -> c.get(key("k")));
        expectStatus(StatusCode.DEVICE_LOCKED, () -> c.putForced(entry(key("k"), "changed")));
        KineticClient fresh = factoryClient();
        expectStatus(StatusCode.DEVICE_LOCKED, () -> fresh.get(key("k")));
        KineticClient tls = client(FACTORY_ID, FACTORY_KEY, 0, true);
        expectStatus(StatusCode.DEVICE_LOCKED, () -> tls.noop());
        expectStatus(StatusCode.DEVICE_LOCKED, () -> admin.getLog());
        expectStatus(StatusCode.DEVICE_LOCKED, () -> admin.setLockPin(bytes("lock-pin"), new byte[0]));
        expectStatus(StatusCode.DEVICE_LOCKED, () -> admin.setAcl(factoryAcl()));
        expectStatus(StatusCode.DEVICE_LOCKED, () -> admin.setClusterVersion(3));

        expectStatus(StatusCode.NOT_AUTHORIZED, () -> admin.unLockDevice(bytes("wrong")));
        expectStatus(StatusCode.DEVICE_LOCKED, () -> c.noop());
        admin.unLockDevice(bytes("lock-pin"));

        assertArrayEquals(bytes("v"), c.get(key("k")).getValue());
        fresh.noop();

        admin.setLockPin(bytes("lock-pin"), new byte[0]);
        lockPin = null;
    }

    /**
     * UNLOCK of a drive that is not locked, with the right lock PIN: DEVICE_ALREADY_UNLOCKED.
     * (Reference simulator: SUCCESS.)
     */
    @Test
    @Order(11)
    void unlockOfUnlockedDriveIsDeviceAlreadyUnlocked() throws Exception {
        KineticAdminClient admin = factoryAdmin();
        admin.setLockPin(null, bytes("lock-pin"));
        lockPin = bytes("lock-pin");
        expectStatus(StatusCode.DEVICE_ALREADY_UNLOCKED, () -> admin.unLockDevice(bytes("lock-pin")));
        admin.lockDevice(bytes("lock-pin"));
        admin.unLockDevice(bytes("lock-pin"));
        expectStatus(StatusCode.DEVICE_ALREADY_UNLOCKED, () -> admin.unLockDevice(bytes("lock-pin")));
        factoryClient().noop();
        admin.setLockPin(bytes("lock-pin"), new byte[0]);
        lockPin = null;
    }

    /**
     * A wrong PIN is answered NOT_AUTHORIZED after a back-off that doubles from 100 ms with
     * every wrong PIN in a row; a right PIN resets it. (Spindle; the reference simulator
     * answers at once.)
     */
    @Test
    @Order(12)
    void wrongPinIsAnsweredAfterBackOff() throws Exception {
        KineticAdminClient admin = factoryAdmin();
        admin.setLockPin(null, bytes("lock-pin"));
        lockPin = bytes("lock-pin");
        admin.lockDevice(bytes("lock-pin"));

        long first = timeNotAuthorized(() -> admin.unLockDevice(bytes("guess-1")));
        long second = timeNotAuthorized(() -> admin.unLockDevice(bytes("guess-2")));
        assertTrue(first >= 90, "first wrong PIN answered after " + first + " ms, expected >= 100");
        assertTrue(second >= 190, "second wrong PIN answered after " + second + " ms, expected >= 200");

        admin.unLockDevice(bytes("lock-pin"));
        long again = timeNotAuthorized(() -> admin.lockDevice(bytes("guess-3")));
        // 400 ms if the right PIN had not reset the count; the margin is for a loaded machine.
        assertTrue(again >= 90 && again < 350,
                "after a right PIN the back-off starts again at 100 ms: " + again + " ms");
        admin.setLockPin(bytes("lock-pin"), new byte[0]);
        lockPin = null;
    }

    private static long timeNotAuthorized(Executable call) {
        long start = System.nanoTime();
        expectStatus(StatusCode.NOT_AUTHORIZED, call);
        return (System.nanoTime() - start) / 1_000_000;
    }

    // ---- erase -------------------------------------------------------------------------------

    /**
     * instantErase with the erase PIN wipes the data and returns every setting to the factory
     * state: identity 1 / "asdfasdf" works again (after its key was changed), other identities
     * are gone, cluster version 0, no PINs. A wrong PIN erases nothing.
     */
    @Test
    @Order(13)
    void instantEraseWithErasePinResetsTheDrive() throws Exception {
        factoryClient().putForced(entry(key("k"), "v"));
        KineticAdminClient admin = factoryAdmin();
        admin.setErasePin(null, bytes("erase-pin"));
        erasePin = bytes("erase-pin");
        admin.setLockPin(null, bytes("lock-pin"));
        lockPin = bytes("lock-pin");
        admin.setAcl(List.of(allRoles(FACTORY_ID, "rotated key"), allRoles(SECOND_ID, SECOND_KEY)));
        KineticAdminClient rotated = admin(FACTORY_ID, "rotated key", 0);
        rotated.setClusterVersion(7);
        assertThrows(KineticException.class, () -> factoryClient().noop(), "factory key replaced");

        expectStatus(StatusCode.NOT_AUTHORIZED, () -> rotated.instantErase(bytes("wrong")));
        KineticClient seven = client(FACTORY_ID, "rotated key", 7, false);
        assertArrayEquals(bytes("v"), seven.get(key("k")).getValue(), "nothing erased");

        rotated.instantErase(bytes("erase-pin"));
        erasePin = null;
        lockPin = null;

        KineticClient factory = factoryClient();
        factory.noop();
        assertNull(factory.get(key("k")), "data erased");
        assertEquals(List.of(), strs(factory.getKeyRange(new byte[0], true,
                bytes("\u007f\u007f\u007f\u007f"), true, 10)), "no keys at all");
        assertIdentityRejected(SECOND_ID, SECOND_KEY);
        assertIdentityRejected(FACTORY_ID, "rotated key");
        // No PINs any more: both can be set without an old PIN.
        KineticAdminClient fresh = factoryAdmin();
        fresh.setLockPin(null, new byte[0]);
        fresh.setErasePin(null, new byte[0]);
    }

    /**
     * secureErase (the client sends an ERASE PIN operation) without an erase PIN set accepts
     * any PIN and wipes the data and the ACL.
     */
    @Test
    @Order(14)
    void secureEraseWithoutErasePinAcceptsAnyPin() throws Exception {
        KineticClient factory = factoryClient();
        factory.putForced(entry(key("k"), "v"));
        KineticAdminClient admin = factoryAdmin();
        admin.setAcl(List.of(allRoles(FACTORY_ID, FACTORY_KEY), allRoles(SECOND_ID, SECOND_KEY)));

        admin.secureErase(bytes("whatever"));

        assertNull(factory.get(key("k")), "data erased");
        assertIdentityRejected(SECOND_ID, SECOND_KEY);

        // With an erase PIN set, secureErase needs it.
        factory.putForced(entry(key("k2"), "v2"));
        admin.setErasePin(null, bytes("erase-pin"));
        erasePin = bytes("erase-pin");
        expectStatus(StatusCode.NOT_AUTHORIZED, () -> admin.secureErase(bytes("whatever")));
        assertArrayEquals(bytes("v2"), factory.get(key("k2")).getValue());
        admin.secureErase(bytes("erase-pin"));
        erasePin = null;
        assertNull(factory.get(key("k2")));
    }

    // ---- cluster version ---------------------------------------------------------------------

    /**
     * setClusterVersion: requests with another cluster version then fail with
     * ClusterVersionFailureException (the response header carries the drive's version), clients
     * configured with the new version work; restored to 0 by a client with the new version.
     */
    @Test
    @Order(15)
    void clusterVersionFencesClientsWithAnotherVersion() throws Exception {
        KineticClient old = factoryClient();
        old.putForced(entry(key("k"), "v"));
        KineticAdminClient admin = factoryAdmin();

        admin.setClusterVersion(42);
        try {
            KineticException e = assertThrows(KineticException.class, () -> old.get(key("k")));
            assertTrue(hasCause(e, ClusterVersionFailureException.class), "got " + e);
            assertEquals(Long.valueOf(42), responseClusterVersion(e), "drive's version in the answer");
            KineticException a = assertThrows(KineticException.class, () -> admin.getLog());
            assertTrue(hasCause(a, ClusterVersionFailureException.class), "admin got " + a);
            assertTrue(hasCause(assertThrows(KineticException.class, () -> factoryClient().noop()),
                    ClusterVersionFailureException.class));

            KineticClient current = client(FACTORY_ID, FACTORY_KEY, 42, false);
            assertArrayEquals(bytes("v"), current.get(key("k")).getValue());
            current.putForced(entry(key("k"), "v42"));
            assertNotNull(admin(FACTORY_ID, FACTORY_KEY, 42).getLog().getConfiguration());
        } finally {
            admin(FACTORY_ID, FACTORY_KEY, 42).setClusterVersion(0);
        }
        assertArrayEquals(bytes("v42"), old.get(key("k")).getValue());
        KineticClient stale = client(FACTORY_ID, FACTORY_KEY, 42, false);
        assertTrue(hasCause(assertThrows(KineticException.class, () -> stale.noop()),
                ClusterVersionFailureException.class));
    }

    // ---- firmware ----------------------------------------------------------------------------

    /**
     * firmwareDownload is refused (INVALID_REQUEST: a Spindle drive is upgraded by installing a
     * new binary) and changes nothing. (Reference simulator: stores the bytes and succeeds.)
     */
    @Test
    @Order(16)
    @SuppressWarnings("deprecation") // firmwareDownload(pin, bytes): still part of the 0.8.0.4 API
    void firmwareDownloadIsRefused() throws Exception {
        KineticAdminClient admin = factoryAdmin();
        byte[] image = bytes("this is not a firmware image");
        expectStatus(StatusCode.INVALID_REQUEST, () -> admin.firmwareDownload(image));
        expectStatus(StatusCode.INVALID_REQUEST, () -> admin.firmwareDownload(bytes("pin"), image));
        factoryClient().noop();
        assertNotNull(admin.getLog().getConfiguration());
    }
}
