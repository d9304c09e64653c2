package spindle.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.seagate.kinetic.proto.Kinetic.Command.Status.StatusCode;

import kinetic.client.BatchAbortedException;
import kinetic.client.BatchOperation;
import kinetic.client.ClientConfiguration;
import kinetic.client.Entry;
import kinetic.client.EntryMetadata;
import kinetic.client.KineticClient;
import kinetic.client.KineticClientFactory;
import kinetic.client.KineticException;

/**
 * Batches through the client's {@link BatchOperation} API: START_BATCH, PUT/DELETE carrying the
 * batch id (sent without waiting for an answer), END_BATCH (commit) or ABORT_BATCH (abort).
 * A batch is atomic: everything is applied at commit or nothing is, and nothing is visible
 * before commit, neither on the batch's own connection nor on another one ({@link #other}).
 */
class BatchInteropTest extends InteropSupport {

    /** The drive's maxOperationCountPerBatch (the simulator's default, and Spindle's). */
    static final int MAX_OPERATIONS_PER_BATCH = 15;

    /** A second connection, to check what other clients see. */
    private KineticClient other;

    @BeforeAll
    void connectOther() throws KineticException {
        other = KineticClientFactory.createInstance(clientConfig());
    }

    @AfterAll
    void disconnectOther() throws KineticException {
        if (other != null) {
            other.close();
        }
    }

    private static Entry entry(byte[] key, byte[] value, byte[] dbVersion) {
        EntryMetadata md = new EntryMetadata();
        md.setVersion(dbVersion);
        return new Entry(key, value, md);
    }

    /** Asserts key holds value and version, as seen by both connections. */
    private void assertStored(byte[] key, String value, String version) throws KineticException {
        for (KineticClient c : new KineticClient[] {client, other}) {
            String who = (c == client ? "batch connection" : "other connection") + ", key " + str(key);
            Entry got = c.get(key);
            assertNotNull(got, who + ": entry expected");
            assertEquals(value, str(got.getValue()), who + ": value");
            if (version != null) {
                assertEquals(version, str(got.getEntryMetadata().getVersion()), who + ": version");
            }
        }
    }

    /** Asserts key is absent, as seen by both connections. */
    private void assertAbsent(byte[] key) throws KineticException {
        assertNull(client.get(key), "batch connection: no entry expected for " + str(key));
        assertNull(other.get(key), "other connection: no entry expected for " + str(key));
    }

    @Test
    void commitAppliesPutsAndDeletesOnlyAtCommit() throws Exception {
        byte[] newKey = key("new");
        byte[] forcedKey = key("forced");
        byte[] casKey = key("cas");
        byte[] deleteKey = key("delete");
        byte[] forcedDeleteKey = key("forced-delete");
        client.put(entry(casKey, bytes("cas-1"), null), bytes("c1"));
        client.put(entry(deleteKey, bytes("doomed"), null), bytes("d1"));
        client.put(entry(forcedDeleteKey, bytes("doomed too"), null), bytes("fd1"));

        BatchOperation batch = client.createBatchOperation();
        batch.put(entry(newKey, bytes("new value"), null), bytes("n1"));
        batch.putForced(entry(forcedKey, bytes("forced value"), bytes("f1")));
        batch.put(entry(casKey, bytes("cas-2"), bytes("c1")), bytes("c2"));
        batch.delete(entry(deleteKey, null, bytes("d1")));
        batch.deleteForced(forcedDeleteKey);

        // Not applied yet: neither the batch's own connection nor another one sees anything.
        assertAbsent(newKey);
        assertAbsent(forcedKey);
        assertStored(casKey, "cas-1", "c1");
        assertStored(deleteKey, "doomed", "d1");
        assertStored(forcedDeleteKey, "doomed too", "fd1");

        batch.commit();

        assertStored(newKey, "new value", "n1");
        assertStored(forcedKey, "forced value", "f1");
        assertStored(casKey, "cas-2", "c2");
        assertAbsent(deleteKey);
        assertAbsent(forcedDeleteKey);
    }

    @Test
    void batchesFollowOneAnotherOnOneConnection() throws Exception {
        byte[] k = key("k");
        BatchOperation first = client.createBatchOperation();
        first.put(entry(k, bytes("one"), null), bytes("1"));
        first.commit();

        BatchOperation second = client.createBatchOperation();
        second.put(entry(k, bytes("two"), bytes("1")), bytes("2"));
        second.commit();
        assertStored(k, "two", "2");

        BatchOperation third = client.createBatchOperation();
        third.delete(entry(k, null, bytes("2")));
        third.commit();
        assertAbsent(k);
    }

    @Test
    void abortAppliesNothing() throws Exception {
        byte[] newKey = key("new");
        byte[] existing = key("existing");
        byte[] deleteKey = key("delete");
        client.put(entry(existing, bytes("kept"), null), bytes("e1"));
        client.put(entry(deleteKey, bytes("kept too"), null), bytes("d1"));

        BatchOperation batch = client.createBatchOperation();
        batch.put(entry(newKey, bytes("never"), null), bytes("n1"));
        batch.putForced(entry(existing, bytes("overwritten?"), bytes("e2")));
        batch.delete(entry(deleteKey, null, bytes("d1")));
        batch.deleteForced(existing);
        batch.abort();

        assertAbsent(newKey);
        assertStored(existing, "kept", "e1");
        assertStored(deleteKey, "kept too", "d1");

        // The connection goes on normally, batches included.
        BatchOperation next = client.createBatchOperation();
        next.put(entry(newKey, bytes("after abort"), null), bytes("n1"));
        next.commit();
        assertStored(newKey, "after abort", "n1");
    }

    @Test
    void versionMismatchInPutAbortsWholeBatch() throws Exception {
        byte[] before = key("a-before");
        byte[] cas = key("b-cas");
        byte[] deleted = key("c-delete");
        byte[] after = key("d-after");
        client.put(entry(cas, bytes("one"), null), bytes("1"));
        client.put(entry(deleted, bytes("stays"), null), bytes("x1"));

        BatchOperation batch = client.createBatchOperation();
        batch.putForced(entry(before, bytes("A"), bytes("a1")));                    // 0
        batch.put(entry(cas, bytes("two"), bytes("wrong-version")), bytes("2"));   // 1: mismatch
        batch.deleteForced(deleted);                                                // 2
        batch.put(entry(after, bytes("D"), null), bytes("d1"));                     // 3

        BatchAbortedException e = assertThrows(BatchAbortedException.class, batch::commit);
        assertEquals(1, e.getFailedOperationIndex(), "failedOperationIndex: " + e);
        assertNotNull(statusOf(e), "the END_BATCH response is attached: " + e);

        assertAbsent(before);
        assertStored(cas, "one", "1");
        assertStored(deleted, "stays", "x1");
        assertAbsent(after);

        // The connection is still usable afterwards.
        client.noop();
        client.put(entry(cas, bytes("two"), bytes("1")), bytes("2"));
        assertStored(cas, "two", "2");
    }

    @Test
    void versionMismatchInLastDeleteAbortsWholeBatch() throws Exception {
        byte[] a = key("a");
        byte[] b = key("b");
        byte[] c = key("c");
        client.put(entry(c, bytes("versioned"), null), bytes("c1"));

        BatchOperation batch = client.createBatchOperation();
        batch.putForced(entry(a, bytes("A"), null));            // 0
        batch.put(entry(b, bytes("B"), null), bytes("b1"));     // 1
        batch.deleteForced(key("absent"));                      // 2: forced delete of a missing key is fine
        batch.delete(entry(c, null, bytes("c-wrong")));         // 3: mismatch

        BatchAbortedException e = assertThrows(BatchAbortedException.class, batch::commit);
        assertEquals(3, e.getFailedOperationIndex(), "failedOperationIndex: " + e);

        assertAbsent(a);
        assertAbsent(b);
        assertStored(c, "versioned", "c1");
    }

    @Test
    void maxOperationCountCommits() throws Exception {
        BatchOperation batch = client.createBatchOperation();
        for (int i = 0; i < MAX_OPERATIONS_PER_BATCH; i++) {
            batch.putForced(entry(key(String.format("k%02d", i)), bytes("v" + i), null));
        }
        batch.commit();
        for (int i = 0; i < MAX_OPERATIONS_PER_BATCH; i++) {
            assertStored(key(String.format("k%02d", i)), "v" + i, null);
        }
    }

    /**
     * One operation more than maxOperationCountPerBatch: the batch fails and nothing is applied.
     *
     * <p>Spindle holds the operations and answers END_BATCH with INVALID_BATCH and
     * failedSequence = the 16th operation, which the client turns into a
     * BatchAbortedException with failedOperationIndex 15. The reference simulator instead
     * sends an unsolicited INVALID_REQUEST as soon as the 16th operation arrives and closes the
     * connection (the client then fails every call with "IO error"). A NOOP is sent between the
     * last operation and the commit: a drive that keeps the connection answers it (requests
     * without a batch id are executed normally during a batch), and on the simulator it fails,
     * so END_BATCH is not sent at all. (If END_BATCH reaches the simulator in the same read as
     * the 16th operation, the simulator starts committing the first 15 on the closed
     * connection and never finishes, blocking every later request on every connection.)
     * Runs on its own connection because the simulator closes it; reported as skipped there.
     */
    @Test
    void moreThanMaxOperationCountFailsAndAppliesNothing() throws Exception {
        int n = MAX_OPERATIONS_PER_BATCH + 1;
        boolean connectionKept;
        ClientConfiguration config = clientConfig();
        config.setRequestTimeoutMillis(10_000);
        KineticClient own = KineticClientFactory.createInstance(config);
        try {
            BatchOperation batch = own.createBatchOperation();
            for (int i = 0; i < n; i++) {
                batch.putForced(entry(key(String.format("k%02d", i)), bytes("v" + i), null));
            }
            try {
                own.noop();
                connectionKept = true;
            } catch (KineticException closedByDrive) {
                // the reference simulator's behaviour (see above)
                connectionKept = false;
            }
            if (connectionKept) {
                KineticException e = assertThrows(KineticException.class, batch::commit,
                        "commit of " + n + " operations");
                if (e instanceof BatchAbortedException) {
                    assertEquals(StatusCode.INVALID_BATCH, statusOf(e), "END_BATCH status: " + e);
                    assertEquals(n - 1, ((BatchAbortedException) e).getFailedOperationIndex(),
                            "failedOperationIndex names the operation beyond the limit: " + e);
                }
            }
        } finally {
            try {
                own.close();
            } catch (KineticException ignored) {
                // already closed by the drive
            }
        }
        for (int i = 0; i < n; i++) {
            assertAbsent(key(String.format("k%02d", i)));
        }
        // Reported as skipped (after the checks above) when the drive did not get to END_BATCH.
        assumeTrue(connectionKept, "the drive closed the connection at operation " + n
                + " (reference simulator behaviour): END_BATCH not tested");
    }
}
