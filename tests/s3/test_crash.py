"""A gateway killed in the middle of uploads: what clients see after its restart, and what is
left in the store once the sweeper has run.

The test runs a gateway of its own over a drive of its own, so that the drive's whole key space
is the gateway's doing: SPINDLE_BIN is the spindle binary and S3_CRASH_DRIVE (HOST:PORT) the
drive, which must list at least a few thousand keys per GETKEYRANGE (scripts/s3-clients.sh
starts it with max_key_range_count raised) so that one `spindle range` call sees all of it.

What is checked, against a gateway SIGKILLed while three uploads stream their bodies (a new
key, an overwrite of an existing key, a part of a multipart upload):
- while they stream, and after the restart, listings and reads show only complete objects:
  the new key is absent, the overwritten key still has its old bytes, the upload still lists
  only its completed part;
- the store did hold the partial data when the gateway died (so the test can see garbage);
- within seconds of a restart with --sweep-grace-secs 1, the store holds exactly the keys it
  held before the uploads began, intents aside;
- the surviving multipart upload completes, and once everything is deleted the store holds
  exactly the keys it held when the bucket was new, with orphan scans running every second
  throughout.
"""

import hashlib
import http.client
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, MIB, REGION, SECRET_KEY, error_of, make_client, md5_hex, multipart_etag, payload

SPINDLE_BIN = os.environ.get("SPINDLE_BIN")
CRASH_DRIVE = os.environ.get("S3_CRASH_DRIVE")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """One `spindle s3` process over the crash test's drive, its stderr kept in a file."""

    def __init__(self, *extra):
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="s3-crash-gateway-", suffix=".log", delete=False)
        command = [
            SPINDLE_BIN, "s3", "--drive", CRASH_DRIVE, "--listen", f"127.0.0.1:{self.port}",
            "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY, *extra,
        ]
        self.command = shlex.join(command)
        self.process = subprocess.Popen(command, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while f"listening on 127.0.0.1:{self.port}" not in self.output():
            assert self.process.poll() is None, f"the gateway exited: {self.command}\n{self.output()}"
            assert time.monotonic() < deadline, f"the gateway is not listening after 60 s\n{self.output()}"
            time.sleep(0.1)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.s3 = make_client(endpoint=self.endpoint)

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def kill(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        os.unlink(self.log.name)


@pytest.fixture
def gateways():
    started = []
    assert SPINDLE_BIN and CRASH_DRIVE, "SPINDLE_BIN and S3_CRASH_DRIVE must name the spindle binary and the crash test's drive"

    def start(*extra):
        g = Gateway(*extra)
        started.append(g)
        return g

    yield start
    for g in started:
        g.stop()


def store_keys():
    """Every key the gateway has on the drive (they all start with "s3\\0"), as text (bytes that
    are not UTF-8 become U+FFFD, which keeps distinct keys distinct here: they differ in ids)."""
    out = subprocess.run(
        [SPINDLE_BIN, "range", "s3", "s3\x01", "--max", "20000", "--drive", CRASH_DRIVE, "--json"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    keys = json.loads(out)["keys"]
    assert len(keys) < 20000, "the drive's range limit cut the listing"
    return set(keys)


def kind(key):
    # "s3\0" then one byte naming the record kind: B bucket, O object, U upload, P part,
    # D data chunk, G intent (crates/s3/src/layout.rs).
    return key[3] if len(key) > 3 else "?"


def of_kind(keys, kinds):
    return {k for k in keys if kind(k) in kinds}


def by_kind(keys):
    counts = {}
    for k in keys:
        counts[kind(k)] = counts.get(kind(k), 0) + 1
    return counts


# How long the crash test waits for the gateway to take in the stalled bodies and for the
# sweeper (every second, a grace of one) to clear what is left: far beyond either on a quiet
# machine, so that only a leak (keys that stay for good), not a busy one, runs past it.
SETTLED_WITHIN = 120


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout} s: {what}")
        time.sleep(0.25)


class StalledPut:
    """A signed PUT whose headers announce BODY whole but which sends only its first SENT bytes
    and then waits, its connection open, as a client with a slow or stuck source would."""

    def __init__(self, endpoint, path, body, sent):
        self.url = endpoint + path
        request = AWSRequest(method="PUT", url=self.url, data=b"", headers={"x-amz-content-sha256": hashlib.sha256(body).hexdigest()})
        request.headers["Content-Length"] = str(len(body))
        SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(request)
        parsed = urllib.parse.urlsplit(self.url)
        self.conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
        self.conn.putrequest("PUT", parsed.path + (f"?{parsed.query}" if parsed.query else ""), skip_accept_encoding=True)
        for name, value in request.headers.items():
            self.conn.putheader(name, value)
        self.conn.endheaders()
        step = 256 * 1024
        for i in range(0, sent, step):
            self.conn.send(body[i : min(i + step, sent)])

    def close(self):
        self.conn.close()


def test_gateway_killed_mid_upload(gateways):
    first = gateways()
    s3 = first.s3
    bucket = "crash-" + os.urandom(4).hex()
    s3.create_bucket(Bucket=bucket)
    at_creation = store_keys()

    # Complete state before the crash: an object about to be overwritten, and a multipart
    # upload with its first part uploaded.
    old = payload(2 * MIB + 17, "old")
    s3.put_object(Bucket=bucket, Key="existing", Body=old)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="assembled")["UploadId"]
    part1 = payload(5 * MIB, "part1")
    part1_etag = s3.upload_part(Bucket=bucket, Key="assembled", UploadId=upload, PartNumber=1, Body=part1)["ETag"]
    before_uploads = store_keys()
    chunks_before = len(of_kind(before_uploads, "D"))

    # Three uploads that stall part way through their bodies.
    fresh, newer, part2 = payload(24 * MIB, "fresh"), payload(16 * MIB, "newer"), payload(5 * MIB, "part2")
    stalled = [
        StalledPut(first.endpoint, f"/{bucket}/fresh", fresh, 12 * MIB),
        StalledPut(first.endpoint, f"/{bucket}/existing", newer, 6 * MIB),
        StalledPut(first.endpoint, f"/{bucket}/assembled?partNumber=2&uploadId={upload}", part2, 3 * MIB),
    ]
    try:
        # Wait until the store holds a good share of the 21 MiB sent (chunks are at most 1 MiB;
        # loopback socket buffers may hold a few MiB of each body that the gateway has not read).
        least = 8
        seen = []

        def enough_chunks():
            seen.append(len(of_kind(store_keys(), "D")) - chunks_before)
            return seen[-1] >= least

        try:
            wait_for(enough_chunks, SETTLED_WITHIN, "")
        except AssertionError:
            raise AssertionError(f"{SETTLED_WITHIN} s into the stalled uploads the store holds {seen[-1]} new chunks, fewer than {least}; "
                                 f"the gateway log:\n{first.output()[-3000:]}") from None

        # Meanwhile clients see only complete objects.
        listing = s3.list_objects_v2(Bucket=bucket)
        assert [(o["Key"], o["Size"], o["ETag"]) for o in listing.get("Contents", [])] == [("existing", len(old), f'"{md5_hex(old)}"')]
        assert s3.get_object(Bucket=bucket, Key="existing")["Body"].read() == old
        with pytest.raises(ClientError) as e:
            s3.head_object(Bucket=bucket, Key="fresh")
        assert error_of(e)[1] == 404

        first.kill()
    finally:
        for p in stalled:
            p.close()
    at_crash = store_keys()
    garbage = at_crash - before_uploads
    assert len(of_kind(garbage, "D")) >= least, f"the crash left no partial data to sweep: {by_kind(garbage)}"

    # Orphan scans every second as well: they run beside the uploads, completions and sweeps
    # below and must take nothing any record references.
    second = gateways("--sweep-grace-secs", "1", "--sweep-interval-secs", "1", "--orphan-scan-interval-secs", "1")
    s3 = second.s3

    def clients_see_the_state_before_the_uploads():
        listing = s3.list_objects_v2(Bucket=bucket)
        assert [(o["Key"], o["Size"]) for o in listing.get("Contents", [])] == [("existing", len(old))]
        assert s3.get_object(Bucket=bucket, Key="existing")["Body"].read() == old
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=bucket, Key="fresh")
        assert error_of(e) == ("NoSuchKey", 404)
        uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        assert [(u["Key"], u["UploadId"]) for u in uploads] == [("assembled", upload)]
        parts = s3.list_parts(Bucket=bucket, Key="assembled", UploadId=upload).get("Parts", [])
        assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in parts] == [(1, part1_etag, len(part1))]

    clients_see_the_state_before_the_uploads()

    # The sweeper removes what the crash left: the store returns to its keys before the uploads
    # began (intents, kind G, aside: the sweeper also drops those of data still referenced).
    def swept():
        now = store_keys()
        return now if of_kind(now, "BOUPD") == of_kind(before_uploads, "BOUPD") else None

    try:
        wait_for(swept, SETTLED_WITHIN, "the crash's garbage is still in the store")
    except AssertionError:
        now = store_keys()
        raise AssertionError(
            f"{SETTLED_WITHIN} s after the restart the store still holds {by_kind(now - before_uploads)} keys more and "
            f"{by_kind(before_uploads - now)} fewer (by kind) than before the uploads; the crash left {by_kind(garbage)}"
        ) from None
    clients_see_the_state_before_the_uploads()

    # The surviving upload completes; then everything is deleted and the store returns to the
    # keys it held when the bucket was new.
    part2_etag = s3.upload_part(Bucket=bucket, Key="assembled", UploadId=upload, PartNumber=2, Body=part2)["ETag"]
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="assembled", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part1_etag}, {"PartNumber": 2, "ETag": part2_etag}]},
    )
    assert done["ETag"] == multipart_etag([part1, part2])
    assert s3.get_object(Bucket=bucket, Key="assembled")["Body"].read() == part1 + part2
    s3.put_object(Bucket=bucket, Key="existing", Body=newer)
    assert s3.get_object(Bucket=bucket, Key="existing")["Body"].read() == newer

    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "existing"}, {"Key": "assembled"}]})
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    try:
        wait_for(lambda: store_keys() == at_creation, SETTLED_WITHIN, "deleted objects' data is still in the store")
    except AssertionError:
        now = store_keys()
        raise AssertionError(
            f"{SETTLED_WITHIN} s after deleting every object the store holds {by_kind(now - at_creation)} keys more and "
            f"{by_kind(at_creation - now)} fewer (by kind) than when the bucket was new"
        ) from None
    s3.delete_bucket(Bucket=bucket)
    assert "orphan scan" in second.output(), "the gateway ran no orphan scan"


def test_client_abandoning_an_upload(s3, bucket):
    """A client that goes away in the middle of a body: the key is never created and the
    gateway keeps serving (the gateway under test is the suite's main one)."""
    from conftest import ENDPOINT

    s3.put_object(Bucket=bucket, Key="kept", Body=b"complete")
    body = payload(8 * MIB, "abandoned")
    for path in (f"/{bucket}/abandoned", f"/{bucket}/kept"):
        p = StalledPut(ENDPOINT, path, body, 3 * MIB)
        time.sleep(0.5)
        p.close()
    time.sleep(0.5)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["kept"]
    assert s3.get_object(Bucket=bucket, Key="kept")["Body"].read() == b"complete"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="abandoned")
    assert error_of(e)[1] == 404
