package spindle.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import com.seagate.kinetic.proto.Kinetic.Command.Status.StatusCode;

import kinetic.client.ClientConfiguration;
import kinetic.client.Entry;
import kinetic.client.EntryMetadata;
import kinetic.client.KineticClient;
import kinetic.client.KineticClientFactory;
import kinetic.client.KineticException;
import kinetic.client.p2p.KineticP2PClientFactory;
import kinetic.client.p2p.KineticP2pClient;
import kinetic.client.p2p.Operation;
import kinetic.client.p2p.Peer;
import kinetic.client.p2p.PeerToPeerOperation;

/**
 * Peer-to-peer push (PEER2PEERPUSH) through the client's P2P API
 * ({@link KineticP2pClient#PeerToPeerPush}): the drive under test (the "source",
 * {@code kinetic.host}:{@code kinetic.port}) copies entries to a second drive, the "peer" at
 * {@code kinetic.peerHost}:{@code kinetic.peerPort} (TLS: {@code kinetic.peerTlsPort}). The
 * source connects to the peer as an ordinary client with the requester's identity (1 here; the
 * simulator uses the default key "asdfasdf", Spindle the identity's key from its own ACL: both
 * are the factory key here).
 *
 * <p>Per operation: a version means a put at the peer with that version as dbVersion and the
 * source's version as the new version; force ignores the version; neither copies a key the peer
 * does not hold (what neither means for a versioned entry at the peer differs, see
 * {@link #unversionedPushOntoVersionedPeerEntryIsForcedOrVersionMismatch}). Skipped when
 * {@code kinetic.peerPort} is not set. The TLS test needs a source that trusts the peer's
 * certificate (Spindle: {@code p2p_tls_trust}, set by scripts/java-interop.sh; the simulator
 * trusts any certificate).
 */
class P2PInteropTest extends InteropSupport {

    static final String PEER_HOST = System.getProperty("kinetic.peerHost", "127.0.0.1");
    static final Integer PEER_PORT = Integer.getInteger("kinetic.peerPort");
    static final Integer PEER_TLS_PORT = Integer.getInteger("kinetic.peerTlsPort");

    /** Connection to the source drive with the P2P API. */
    private KineticP2pClient p2p;

    /** Connection to the peer drive, to look at (and prepare) what it stores. */
    private KineticClient peer;

    static boolean havePeer() {
        return PEER_PORT != null && PEER_PORT > 0;
    }

    @BeforeAll
    void connectPeer() throws KineticException {
        if (!havePeer()) {
            return;
        }
        p2p = KineticP2PClientFactory.createP2pClient(clientConfig());
        ClientConfiguration config = clientConfig();
        config.setHost(PEER_HOST);
        config.setPort(PEER_PORT);
        peer = KineticClientFactory.createInstance(config);
    }

    /** Every test is reported as skipped (rather than the class vanishing) without a peer. */
    @BeforeEach
    void requirePeer() {
        assumeTrue(havePeer(), "kinetic.peerPort not set: no peer drive, P2P test skipped");
    }

    @AfterAll
    void disconnectPeer() throws KineticException {
        if (p2p != null) {
            p2p.close();
        }
        if (peer != null) {
            peer.close();
        }
    }

    private static Entry entry(byte[] key, String value, String dbVersion) {
        EntryMetadata md = new EntryMetadata();
        md.setVersion(dbVersion == null ? null : bytes(dbVersion));
        return new Entry(key, bytes(value), md);
    }

    private static Peer peerAt(String host, int port, boolean tls) {
        Peer p = new Peer();
        p.setHost(host);
        p.setPort(port);
        p.setUseTls(tls);
        return p;
    }

    private static Operation op(byte[] key) {
        Operation o = new Operation();
        o.setKey(key);
        return o;
    }

    private static Operation op(byte[] key, String version, boolean force) {
        Operation o = op(key);
        o.setVersion(version == null ? null : bytes(version));
        o.setForced(force);
        return o;
    }

    private PeerToPeerOperation push(Peer target, Operation... ops) throws KineticException {
        PeerToPeerOperation request = new PeerToPeerOperation();
        request.setPeer(target);
        for (Operation o : ops) {
            request.addOperation(o);
        }
        PeerToPeerOperation result = p2p.PeerToPeerPush(request);
        assertSame(request, result, "the client fills in the request object");
        assertEquals(ops.length, result.getOperationList().size());
        return result;
    }

    private PeerToPeerOperation push(Operation... ops) throws KineticException {
        return push(peerAt(PEER_HOST, PEER_PORT, false), ops);
    }

    private static List<StatusCode> codes(PeerToPeerOperation result) {
        List<StatusCode> out = new ArrayList<>();
        for (Operation o : result.getOperationList()) {
            out.add(o.getStatusCode());
        }
        return out;
    }

    private static void assertEntry(KineticClient c, String where, byte[] key, String value,
            String version) throws KineticException {
        Entry got = c.get(key);
        assertNotNull(got, where + ": entry expected for " + str(key));
        assertEquals(value, str(got.getValue()), where + ": value of " + str(key));
        assertEquals(version, str(got.getEntryMetadata().getVersion()),
                where + ": version of " + str(key));
    }

    @Test
    void pushCopiesValuesAndVersionsToPeer() throws Exception {
        byte[] a = key("a");
        byte[] b = key("b");
        byte[] c = key("c");
        Entry tagged = entry(a, "value a", null);
        tagged.getEntryMetadata().setTag(bytes("tag-a"));
        client.put(tagged, bytes("va"));
        client.put(entry(b, "value b", null), bytes("vb"));
        client.put(entry(c, "value c", null), bytes("vc"));
        for (byte[] k : new byte[][] {a, b, c}) {
            assertNull(peer.get(k), "not on the peer before the push: " + str(k));
        }

        PeerToPeerOperation result = push(op(a), op(b), op(c));

        assertEquals(List.of(StatusCode.SUCCESS, StatusCode.SUCCESS, StatusCode.SUCCESS),
                codes(result), "per-operation status");
        for (Operation o : result.getOperationList()) {
            assertTrue(o.getStatus(), "operation status flag for " + str(o.getKey()));
        }
        assertTrue(result.getStatus(), "allChildOperationsSucceeded");

        assertEntry(peer, "peer", a, "value a", "va");
        assertEntry(peer, "peer", b, "value b", "vb");
        assertEntry(peer, "peer", c, "value c", "vc");
        assertArrayEquals(bytes("tag-a"), peer.get(a).getEntryMetadata().getTag(),
                "the tag is copied too");

        // the source keeps its entries
        assertEntry(client, "source", a, "value a", "va");
        assertEntry(client, "source", b, "value b", "vb");
        assertEntry(client, "source", c, "value c", "vc");
    }

    @Test
    void forcedPushReplacesVersionedEntriesAtPeer() throws Exception {
        byte[] a = key("a");
        byte[] b = key("b");
        client.put(entry(a, "source a", null), bytes("src-a"));
        client.put(entry(b, "source b", null), bytes("src-b"));
        peer.put(entry(a, "peer a", null), bytes("peer-a"));
        peer.put(entry(b, "peer b", null), bytes("peer-b"));

        PeerToPeerOperation result = push(op(a, null, true), op(b, "whatever", true));

        assertEquals(List.of(StatusCode.SUCCESS, StatusCode.SUCCESS), codes(result));
        assertTrue(result.getStatus(), "allChildOperationsSucceeded");
        assertEntry(peer, "peer", a, "source a", "src-a");
        assertEntry(peer, "peer", b, "source b", "src-b");
    }

    /**
     * Neither version nor force while the peer holds a versioned entry under the key. The
     * reference simulator does a forced put then (kinetic-notes); Spindle compares with an
     * absent version, as a PUT would, and answers VERSION_MISMATCH. The protocol README does not
     * say. Either is accepted, as long as the per-operation status tells the truth.
     */
    @Test
    void unversionedPushOntoVersionedPeerEntryIsForcedOrVersionMismatch() throws Exception {
        byte[] k = key("k");
        client.put(entry(k, "source value", null), bytes("src-1"));
        peer.put(entry(k, "peer value", null), bytes("peer-1"));

        PeerToPeerOperation result = push(op(k));

        StatusCode code = result.getOperationList().get(0).getStatusCode();
        if (code == StatusCode.SUCCESS) {
            assertTrue(result.getStatus(), "allChildOperationsSucceeded");
            assertEntry(peer, "peer", k, "source value", "src-1");
        } else {
            assertEquals(StatusCode.VERSION_MISMATCH, code, "per-operation status");
            assertFalse(result.getStatus(), "allChildOperationsSucceeded is false");
            assertEntry(peer, "peer", k, "peer value", "peer-1");
        }
    }

    @Test
    void pushWithNewKeyRenamesAtPeer() throws Exception {
        byte[] k = key("original");
        byte[] renamed = key("renamed");
        client.put(entry(k, "moving value", null), bytes("v1"));

        Operation o = op(k);
        o.setNewKey(renamed);
        PeerToPeerOperation result = push(o);

        assertEquals(List.of(StatusCode.SUCCESS), codes(result));
        assertTrue(result.getStatus(), "allChildOperationsSucceeded");
        assertEntry(peer, "peer", renamed, "moving value", "v1");
        assertNull(peer.get(k), "the peer has the entry under the new key only");
        assertEntry(client, "source", k, "moving value", "v1");
        assertNull(client.get(renamed), "the source is not renamed");
    }

    @Test
    void keyMissingOnSourceIsNotFoundOthersSucceed() throws Exception {
        byte[] a = key("a");
        byte[] missing = key("b-missing");
        byte[] c = key("c");
        client.put(entry(a, "value a", null), bytes("va"));
        client.put(entry(c, "value c", null), bytes("vc"));

        PeerToPeerOperation result = push(op(a), op(missing), op(c));

        assertEquals(List.of(StatusCode.SUCCESS, StatusCode.NOT_FOUND, StatusCode.SUCCESS),
                codes(result), "per-operation status");
        List<Operation> ops = result.getOperationList();
        assertTrue(ops.get(0).getStatus());
        assertFalse(ops.get(1).getStatus());
        assertTrue(ops.get(2).getStatus());
        assertFalse(result.getStatus(), "allChildOperationsSucceeded is false");

        assertEntry(peer, "peer", a, "value a", "va");
        assertNull(peer.get(missing));
        assertEntry(peer, "peer", c, "value c", "vc");
    }

    @Test
    void versionConflictAtPeerIsVersionMismatch() throws Exception {
        byte[] conflict = key("a-conflict");
        byte[] matching = key("b-matching");
        byte[] forced = key("c-forced");
        for (byte[] k : new byte[][] {conflict, matching, forced}) {
            client.put(entry(k, "source " + str(k), null), bytes("src-1"));
            peer.put(entry(k, "peer " + str(k), null), bytes("peer-1"));
        }

        PeerToPeerOperation result = push(
                op(conflict, "not-the-peer-version", false),   // compared with the peer's version
                op(matching, "peer-1", false),                 // matches: replaced
                op(forced, "not-the-peer-version", true));     // force ignores the version

        assertEquals(List.of(StatusCode.VERSION_MISMATCH, StatusCode.SUCCESS, StatusCode.SUCCESS),
                codes(result), "per-operation status");
        assertFalse(result.getOperationList().get(0).getStatus());
        assertFalse(result.getStatus(), "allChildOperationsSucceeded is false");

        assertEntry(peer, "peer", conflict, "peer " + str(conflict), "peer-1");
        assertEntry(peer, "peer", matching, "source " + str(matching), "src-1");
        assertEntry(peer, "peer", forced, "source " + str(forced), "src-1");
    }

    @Test
    void versionedPushOfKeyMissingAtPeerIsVersionMismatch() throws Exception {
        byte[] k = key("k");
        client.put(entry(k, "source value", null), bytes("src-1"));

        PeerToPeerOperation result = push(op(k, "expected-at-peer", false));

        assertEquals(List.of(StatusCode.VERSION_MISMATCH), codes(result));
        assertNull(peer.get(k));
    }

    @Test
    void unreachablePeerIsRemoteConnectionError() throws Exception {
        int closedPort;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            closedPort = s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        byte[] k = key("k");
        client.put(entry(k, "value", null), bytes("v1"));

        KineticException e = assertThrows(KineticException.class,
                () -> push(peerAt("127.0.0.1", closedPort, false), op(k)));
        assertEquals(StatusCode.REMOTE_CONNECTION_ERROR, statusOf(e), "status: " + e);

        // the source connection is still fine
        client.noop();
    }

    @Test
    void pushToPeerOverTls() throws Exception {
        assumeTrue(PEER_TLS_PORT != null && PEER_TLS_PORT > 0, "kinetic.peerTlsPort not set");
        byte[] k = key("k");
        client.put(entry(k, "over tls", null), bytes("t1"));

        PeerToPeerOperation result = push(peerAt(PEER_HOST, PEER_TLS_PORT, true), op(k));

        assertEquals(List.of(StatusCode.SUCCESS), codes(result));
        assertEntry(peer, "peer", k, "over tls", "t1");
    }
}
