package spindle.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import com.seagate.kinetic.proto.Kinetic.Command.Status.StatusCode;

import kinetic.client.AsyncKineticException;
import kinetic.client.CallbackHandler;
import kinetic.client.CallbackResult;
import kinetic.client.Entry;
import kinetic.client.EntryMetadata;
import kinetic.client.EntryNotFoundException;
import kinetic.client.VersionMismatchException;
import kinetic.client.advanced.PersistOption;

/**
 * The asynchronous API: callbacks, several requests outstanding on one connection (more than
 * the client's window of 10, so responses must come back for the client to go on), and the
 * async variant of every key-value call.
 */
class AsyncInteropTest extends InteropSupport {

    /** Records one callback. */
    static final class Callback<T> implements CallbackHandler<T> {
        private final CountDownLatch done = new CountDownLatch(1);
        private volatile CallbackResult<T> result;
        private volatile AsyncKineticException error;

        @Override
        public void onSuccess(CallbackResult<T> r) {
            result = r;
            done.countDown();
        }

        @Override
        public void onError(AsyncKineticException e) {
            error = e;
            done.countDown();
        }

        void await() throws InterruptedException {
            assertTrue(done.await(REQUEST_TIMEOUT_MS + 5_000, TimeUnit.MILLISECONDS),
                    "callback not called");
        }

        /** Waits and returns the result; fails the test if onError was called. */
        T get() throws Exception {
            await();
            if (error != null) {
                throw new AssertionError("onError: " + error, error);
            }
            return result.getResult();
        }

        /** Waits and returns the error; fails the test if onSuccess was called. */
        AsyncKineticException error() throws Exception {
            await();
            if (error == null) {
                fail("expected onError, got onSuccess: " + result.getResult());
            }
            return error;
        }

        boolean succeeded() throws Exception {
            await();
            return error == null;
        }

        CallbackResult<T> raw() {
            return result;
        }
    }

    private static Entry entry(byte[] key, byte[] value, byte[] dbVersion) {
        EntryMetadata md = new EntryMetadata();
        md.setVersion(dbVersion);
        return new Entry(key, value, md);
    }

    @Test
    void manyOutstandingPutAsyncThenGetAsync() throws Exception {
        int n = 40;
        List<Callback<Entry>> puts = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Callback<Entry> cb = new Callback<>();
            client.putAsync(entry(key("k" + i), bytes("value-" + i), null), bytes("v" + i), cb);
            puts.add(cb);
        }
        for (int i = 0; i < n; i++) {
            Entry put = puts.get(i).get();
            assertArrayEquals(bytes("v" + i), put.getEntryMetadata().getVersion());
        }

        List<Callback<Entry>> gets = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Callback<Entry> cb = new Callback<>();
            client.getAsync(key("k" + i), cb);
            gets.add(cb);
        }
        for (int i = 0; i < n; i++) {
            Entry got = gets.get(i).get();
            assertNotNull(got, "k" + i);
            assertEquals(prefix + "k" + i, str(got.getKey()));
            assertArrayEquals(bytes("value-" + i), got.getValue());
            assertArrayEquals(bytes("v" + i), got.getEntryMetadata().getVersion());
        }
    }

    @Test
    void putAsyncWithPersistOptions() throws Exception {
        List<Callback<Entry>> cbs = new ArrayList<>();
        for (PersistOption option : PersistOption.values()) {
            Callback<Entry> cb = new Callback<>();
            client.putAsync(entry(key(option.name()), bytes("p-" + option), null), bytes("1"),
                    option, cb);
            cbs.add(cb);
        }
        for (Callback<Entry> cb : cbs) {
            cb.get();
        }
        for (PersistOption option : PersistOption.values()) {
            assertArrayEquals(bytes("p-" + option), client.get(key(option.name())).getValue());
        }
    }

    @Test
    void putAsyncVersionMismatchGoesToOnError() throws Exception {
        byte[] k = key("k");
        client.put(entry(k, bytes("one"), null), bytes("1"));
        Callback<Entry> cb = new Callback<>();
        client.putAsync(entry(k, bytes("two"), bytes("wrong")), bytes("2"), cb);
        AsyncKineticException e = cb.error();
        assertTrue(statusOf(e) == StatusCode.VERSION_MISMATCH
                || hasCause(e, VersionMismatchException.class), "VERSION_MISMATCH: " + e);
        assertArrayEquals(bytes("one"), client.get(k).getValue());
    }

    @Test
    void getAsyncMissingKey() throws Exception {
        Callback<Entry> cb = new Callback<>();
        client.getAsync(key("missing"), cb);
        if (cb.succeeded()) {
            assertNull(cb.get(), "a missing key yields a null entry");
        } else {
            AsyncKineticException e = cb.error();
            assertTrue(statusOf(e) == StatusCode.NOT_FOUND
                    || hasCause(e, EntryNotFoundException.class), "NOT_FOUND: " + e);
        }
    }

    @Test
    void putForcedAsyncAndDeleteAsyncVariants() throws Exception {
        byte[] k = key("k");
        Callback<Entry> p1 = new Callback<>();
        client.putForcedAsync(entry(k, bytes("forced"), bytes("F1")), p1);
        p1.get();
        Callback<Entry> p2 = new Callback<>();
        client.putForcedAsync(entry(k, bytes("forced2"), bytes("F2")), PersistOption.FLUSH, p2);
        p2.get();
        Entry got = client.get(k);
        assertArrayEquals(bytes("forced2"), got.getValue());
        assertArrayEquals(bytes("F2"), got.getEntryMetadata().getVersion());

        Callback<EntryMetadata> md = new Callback<>();
        client.getMetadataAsync(k, md);
        assertArrayEquals(bytes("F2"), md.get().getVersion());

        Callback<Boolean> d1 = new Callback<>();
        client.deleteAsync(entry(k, null, bytes("F2")), d1);
        assertTrue(d1.get(), "versioned async delete");
        assertNull(client.get(k));

        byte[] k2 = key("k2");
        client.put(entry(k2, bytes("x"), null), bytes("1"));
        Callback<Boolean> d2 = new Callback<>();
        client.deleteAsync(entry(k2, null, bytes("1")), PersistOption.SYNC, d2);
        assertTrue(d2.get());

        byte[] k3 = key("k3");
        client.put(entry(k3, bytes("x"), null), bytes("1"));
        Callback<Boolean> d3 = new Callback<>();
        client.deleteForcedAsync(k3, d3);
        assertTrue(d3.get());
        assertNull(client.get(k3));

        Callback<Boolean> d4 = new Callback<>();
        client.deleteForcedAsync(key("missing"), PersistOption.ASYNC, d4);
        assertTrue(d4.get(), "forced async delete of a missing key");

        Callback<Boolean> d5 = new Callback<>();
        client.deleteAsync(entry(key("missing"), null, null), d5);
        if (d5.succeeded()) {
            assertFalse(d5.get(), "async delete of a missing key");
        } else {
            AsyncKineticException e = d5.error();
            assertTrue(statusOf(e) == StatusCode.NOT_FOUND
                    || hasCause(e, EntryNotFoundException.class), "NOT_FOUND: " + e);
        }
    }

    @Test
    void rangeAsyncVariants() throws Exception {
        for (String n : new String[] {"a", "b", "c"}) {
            client.put(entry(key(n), bytes("value-" + n), null), bytes("1"));
        }
        Callback<Entry> next = new Callback<>();
        client.getNextAsync(key("a"), next);
        assertEquals(prefix + "b", str(next.get().getKey()));
        assertArrayEquals(bytes("value-b"), next.get().getValue());

        Callback<Entry> prev = new Callback<>();
        client.getPreviousAsync(key("c"), prev);
        assertEquals(prefix + "b", str(prev.get().getKey()));

        Callback<List<byte[]>> range = new Callback<>();
        client.getKeyRangeAsync(key("a"), true, key("c"), true, 10, range);
        assertEquals(List.of(prefix + "a", prefix + "b", prefix + "c"), strs(range.get()));

        Callback<List<byte[]>> reversed = new Callback<>();
        client.getKeyRangeReversedAsync(key("a"), true, key("c"), true, 10, reversed);
        assertEquals(List.of(prefix + "c", prefix + "b", prefix + "a"), strs(reversed.get()));
    }
}
