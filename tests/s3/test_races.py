"""Racing writes of one key through a gateway over the cluster, with its sweeper running.

PUTs (one chunk and several), DELETEs, CopyObjects and CompleteMultipartUploads of one key race
while readers read it, through a gateway of the test's own over the cluster (the suite's
etcd: S3_ETCD) with a sweep grace of one second, so that data an overwrite or a delete let go of
is collected during the race. The gateway keeps manifests and upload records by compare-and-swap
on the cluster, which is what this exercises. Checked:
- every read is one whole object some operation wrote (its MD5 is known), never a mix, never an
  error saying its data was collected;
- the history of the key (each operation's call and return, an error as an unknown outcome) is
  linearizable as a register: no acknowledged write is lost unless a later one replaced it;
- the key reads back whole after the race, and once everything is deleted and the sweeper has
  had time past the grace, the store holds no key that it did not hold before the test.
"""

import hashlib
import json
import os
import random
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from conftest import MIB, make_client, md5_hex, own_gateway, payload, unique_bucket_name

SPINDLE_BIN = os.environ.get("SPINDLE_BIN")
ETCD = os.environ.get("S3_ETCD")
RACE_SECONDS = 8
# The sweeper's first pass walks every intent in the suite's store, those earlier suites left
# included (each collect asks every partition for the data's chunks): on a debug build and two
# busy cores that pass takes about a minute. A bound only a leak exceeds.
LEAK_WAIT_SECONDS = 900
# Tries of one listing of the store's keys.
LISTING_ATTEMPTS = 5
KEY = "contested"


@pytest.fixture
def gateway():
    """A `spindle s3` over the suite's cluster with a one-second sweep grace, stopped after."""
    with own_gateway("--sweep-grace-secs", "1", "--sweep-interval-secs", "1") as (endpoint, _, _, output):
        yield make_client(endpoint=endpoint), output


def store_keys():
    """Every live key of the gateways in the cluster (they start with "s3\\0"), as text. A
    listing the cluster refuses for now (a drive slow to answer on a busy machine, a key being
    settled) is asked again a few times; the last refusal fails with what the command said."""
    for _ in range(LISTING_ATTEMPTS):
        run = subprocess.run(
            [SPINDLE_BIN, "cluster", "range", "s3", "s3\x01", "--max", "1000000", "--json", "--etcd", ETCD],
            capture_output=True, text=True, timeout=120,
        )
        if run.returncode == 0:
            return set(json.loads(run.stdout)["keys"])
        time.sleep(1)
    raise AssertionError(f"the store's keys could not be listed in {LISTING_ATTEMPTS} tries: {run.stderr.strip()}")


def linearizable(history):
    """Whether a register history has a linearization (Wing and Gong's search with Lowe's
    memoisation, as crates/cluster/src/history.rs). Each entry: (kind, value, call, ret) with
    kind "w" (value written; None deletes) or "r" (value read), ret None for an unknown write."""
    ops = sorted(history, key=lambda o: o[2])
    seen = set()

    def search(done, state):
        pending = [i for i in range(len(ops)) if not done >> i & 1]
        if all(ops[i][3] is None for i in pending):
            return True
        if (done, state) in seen:
            return False
        seen.add((done, state))
        horizon = min(ops[i][3] for i in pending if ops[i][3] is not None)
        for i in pending:
            kind, value, call, _ = ops[i]
            if call > horizon:
                break
            if kind == "r" and value != state:
                continue
            if search(done | 1 << i, value if kind == "w" else state):
                return True
        return False

    import sys

    sys.setrecursionlimit(max(10_000, 4 * len(ops)))
    return search(0, None)


def test_linearizable_checker_catches_a_lost_write():
    assert linearizable([("w", "a", 0, 1), ("r", "a", 2, 3)])
    assert not linearizable([("w", "a", 0, 1), ("w", "b", 2, 3), ("r", "a", 4, 5)])
    assert linearizable([("w", "a", 0, 10), ("w", "b", 1, 11), ("r", "a", 12, 13)])
    assert linearizable([("w", "a", 0, None), ("r", None, 1, 2)])
    assert not linearizable([("w", "a", 0, None), ("r", "a", 1, 2), ("r", None, 3, 4)])


def race(s3, bucket, extra=None, faults=None):
    """Races PUTs (one chunk and several), DELETEs, CopyObjects and CompleteMultipartUploads of
    KEY with readers for RACE_SECONDS, every write with EXTRA arguments (a storage class), while
    FAULTS (a function of the seconds since the start) runs beside them; checks every read was
    whole and the key's history linearizable, and returns the copies' source keys."""
    extra = extra or {}
    # The copies' sources, each a distinct object.
    sources = {}
    for i in range(6):
        body = payload(64 * 1024 + i, f"source-{i}")
        s3.put_object(Bucket=bucket, Key=f"source-{i}", Body=body, **extra)
        sources[f"source-{i}"] = md5_hex(body)
    known = set(sources.values())
    lock = threading.Lock()
    history, failures = [], []
    start = time.monotonic()
    stop = time.monotonic() + RACE_SECONDS

    def now():
        return time.monotonic() - start

    def record(kind, value, call, ok):
        with lock:
            history.append((kind, value, call, now() if ok else None))

    def attempt(kind, value, action):
        """Runs one write; an error is an unknown outcome, except for the refusals S3 defines."""
        call = now()
        try:
            action()
            record(kind, value, call, True)
        except ClientError as e:
            code = e.response["Error"]["Code"]
            if code in ("NoSuchUpload",):
                return
            record(kind, value, call, False)

    def putter(w):
        rng = random.Random(w)
        n = 0
        while time.monotonic() < stop:
            n += 1
            size = rng.choice([10 * 1024, 2 * MIB + 3 * 1024])
            body = payload(size, f"put-{w}-{n}")
            digest = md5_hex(body)
            with lock:
                known.add(digest)
            attempt("w", digest, lambda: s3.put_object(Bucket=bucket, Key=KEY, Body=body, **extra))

    def deleter():
        while time.monotonic() < stop:
            attempt("w", None, lambda: s3.delete_object(Bucket=bucket, Key=KEY))
            time.sleep(0.05)

    def copier():
        rng = random.Random(7)
        while time.monotonic() < stop:
            source = rng.choice(sorted(sources))
            attempt("w", sources[source], lambda: s3.copy_object(Bucket=bucket, Key=KEY, CopySource={"Bucket": bucket, "Key": source}, **extra))

    def multipart(w):
        n = 0
        while time.monotonic() < stop:
            n += 1
            first, last = payload(5 * MIB, f"part1-{w}-{n}"), payload(100 * 1024, f"part2-{w}-{n}")
            digest = hashlib.md5(first + last).hexdigest()
            with lock:
                known.add(digest)
            try:
                upload = s3.create_multipart_upload(Bucket=bucket, Key=KEY, **extra)["UploadId"]
                parts = []
                for number, body in ((1, first), (2, last)):
                    etag = s3.upload_part(Bucket=bucket, Key=KEY, UploadId=upload, PartNumber=number, Body=body)["ETag"]
                    parts.append({"PartNumber": number, "ETag": etag})
            except ClientError:
                continue
            attempt("w", digest, lambda: s3.complete_multipart_upload(Bucket=bucket, Key=KEY, UploadId=upload, MultipartUpload={"Parts": parts}))

    def reader():
        while time.monotonic() < stop:
            call = now()
            try:
                r = s3.get_object(Bucket=bucket, Key=KEY)
                body = r["Body"].read()
            except ClientError as e:
                code = e.response["Error"]["Code"]
                if code == "NoSuchKey":
                    record("r", None, call, True)
                elif code in ("SlowDown", "ServiceUnavailable", "503"):
                    pass
                else:
                    failures.append(f"GET answered {code}: {e}")
                continue
            digest = md5_hex(body)
            with lock:
                whole = digest in known
            if not whole:
                failures.append(f"GET returned {len(body)} bytes matching no write")
            record("r", digest, call, True)

    workers = [lambda w=w: putter(w) for w in range(2)] + [deleter, copier] + [lambda w=w: multipart(w) for w in range(2)] + [reader, reader]
    if faults:
        workers.append(lambda: faults(now, stop))
    with ThreadPoolExecutor(len(workers)) as pool:
        for f in [pool.submit(w) for w in workers]:
            f.result()

    assert not failures, f"{len(failures)} bad reads, e.g. {failures[:3]}"
    writes = [h for h in history if h[0] == "w"]
    assert sum(1 for h in writes if h[3] is not None) > 20, f"only {len(writes)} writes were acknowledged"
    assert sum(1 for h in history if h[0] == "r" and h[1] is not None) > 10, "the readers read the key too rarely"
    # The last state read back whole, and part of the history.
    call = now()
    try:
        final = md5_hex(s3.get_object(Bucket=bucket, Key=KEY)["Body"].read())
    except ClientError as e:
        assert e.response["Error"]["Code"] == "NoSuchKey", e
        final = None
    history.append(("r", final, call, now()))
    assert linearizable(history), "the key's history is not linearizable"
    return sources


def test_racing_writes_of_one_key_with_the_sweeper(gateway):
    s3, log = gateway
    bucket = unique_bucket_name("race")
    before = store_keys()
    s3.create_bucket(Bucket=bucket)
    sources = race(s3, bucket)

    # Past the grace, once everything is deleted, nothing the test wrote is left in the store.
    s3.delete_object(Bucket=bucket, Key=KEY)
    for source in sources:
        s3.delete_object(Bucket=bucket, Key=source)
    for upload in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
        s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    s3.delete_bucket(Bucket=bucket)
    # The sweeper, with its one-second grace, collects every gateway's garbage in the store:
    # what earlier suites left may come first, hence the generous bound.
    deadline = time.monotonic() + LEAK_WAIT_SECONDS
    while True:
        left = store_keys() - before
        if not left or time.monotonic() > deadline:
            break
        time.sleep(1)
    kinds = {}
    for k in left:
        kinds[k[3:4]] = kinds.get(k[3:4], 0) + 1
    assert not left, f"{len(left)} keys left {LEAK_WAIT_SECONDS} s after everything was deleted (grace 1 s), by kind {kinds}, e.g. {sorted(left)[:5]}; the gateway's log ends:\n" + "\n".join(log().splitlines()[-40:])


def test_writers_of_one_key_through_two_gateways_all_succeed():
    """Eight writers, four through each of two gateways over the cluster, put five 1 MiB
    payloads each to one key (no retries): every PUT succeeds (a gateway's writers take turns
    at the key's swap, and the two gateways' swaps race fairly), and the key ends as the last
    write of one of them."""
    writers, rounds = 8, 5
    with own_gateway() as (first, _, _, first_log), own_gateway() as (second, _, _, second_log):
        clients = [make_client(endpoint=first), make_client(endpoint=second)]
        bucket = unique_bucket_name("duel")
        clients[0].create_bucket(Bucket=bucket)
        failures = []

        def writer(w):
            s3 = clients[w % 2]
            for i in range(rounds):
                try:
                    s3.put_object(Bucket=bucket, Key="hot", Body=payload(MIB, f"w{w}-{i}"))
                except ClientError as e:
                    failures.append((w, i, str(e)))

        with ThreadPoolExecutor(writers) as pool:
            for f in [pool.submit(writer, w) for w in range(writers)]:
                f.result()
        logs = "\n".join(first_log().splitlines()[-20:] + second_log().splitlines()[-20:])
        assert not failures, f"{len(failures)} PUTs failed, e.g. {failures[:3]}; the gateways' logs end:\n{logs}"
        body = clients[1].get_object(Bucket=bucket, Key="hot")["Body"].read()
        assert md5_hex(body) in {md5_hex(payload(MIB, f"w{w}-{rounds - 1}")) for w in range(writers)}
        clients[0].delete_object(Bucket=bucket, Key="hot")
        clients[0].delete_bucket(Bucket=bucket)
