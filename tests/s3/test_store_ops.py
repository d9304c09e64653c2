"""A gateway of the test's own over one drive of its own: what an S3 write costs the store,
counted by the drive itself (every store operation is one Kinetic command, and the drive's
GETLOG statistics count them by type; each operation of a PUT is there for its crash safety,
docs/design/s3-gateway.md, "What a PUT asks of the store", says why), and what the gateway
logs of the requests it answers."""

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time

from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, SECRET_KEY, free_port, make_client, payload, unique_bucket_name

COUNTED = ("GET", "PUT", "DELETE", "FLUSHALLDATA", "GETKEYRANGE", "GETVERSION", "GETNEXT", "GETPREVIOUS")


def _wait_for(process, output, text, what):
    deadline = time.monotonic() + 60
    while text not in output():
        assert process.poll() is None, f"{what} exited:\n{output()}"
        assert time.monotonic() < deadline, f"{what} did not start within 60 s:\n{output()}"
        time.sleep(0.1)


def _stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def drive_and_gateway(*flags, drive_flags=()):
    """A drive (with DRIVE_FLAGS) and a gateway over it (with FLAGS), both the test's own;
    yields (boto3 client, drive address, a reader of the gateway's log, the gateway's
    endpoint)."""
    spindle = os.environ.get("SPINDLE_BIN")
    assert spindle, "SPINDLE_BIN must name the spindle binary"
    with tempfile.TemporaryDirectory(prefix="s3-store-ops-") as work:
        drive_port, gateway_port = free_port(), free_port()
        drive_log, gateway_log = os.path.join(work, "drive.log"), os.path.join(work, "gateway.log")
        processes = []
        try:
            with open(drive_log, "w") as log:
                drive = subprocess.Popen([spindle, "drive", "--data", os.path.join(work, "data"), "--port", str(drive_port),
                                          "--tls-port", "0", "--listen", "127.0.0.1", *drive_flags], stdout=log, stderr=log)
            processes.append(drive)
            _wait_for(drive, lambda: open(drive_log, errors="replace").read(), "listening on", "the drive")
            with open(gateway_log, "w") as log:
                gateway = subprocess.Popen([spindle, "s3", "--drive", f"127.0.0.1:{drive_port}", "--listen", f"127.0.0.1:{gateway_port}",
                                            "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY, *flags], stdout=log, stderr=log)
            processes.append(gateway)
            _wait_for(gateway, lambda: open(gateway_log, errors="replace").read(), f"listening on 127.0.0.1:{gateway_port}", "the gateway")
            endpoint = f"http://127.0.0.1:{gateway_port}"
            yield make_client(endpoint=endpoint), f"127.0.0.1:{drive_port}", lambda: open(gateway_log, errors="replace").read(), endpoint
        finally:
            for p in reversed(processes):
                _stop(p)


def drive_ops(drive):
    """The drive's commands so far, by type (GETLOG statistics)."""
    out = subprocess.run([os.environ["SPINDLE_BIN"], "getlog", "--type", "statistics", "--json", "--drive", drive],
                         check=True, capture_output=True, text=True).stdout
    return {s["type"]: s["count"] for s in json.loads(out)["statistics"] if s["type"] in COUNTED}


def ops_of(drive, action):
    before = drive_ops(drive)
    action()
    after = drive_ops(drive)
    return {t: after.get(t, 0) - before.get(t, 0) for t in set(before) | set(after) if after.get(t, 0) != before.get(t, 0)}


def test_a_put_asks_the_store_only_what_its_crash_safety_needs():
    with drive_and_gateway() as (s3, drive, _, _):
        bucket = unique_bucket_name("ops")
        s3.create_bucket(Bucket=bucket)
        body = b"x" * 1000
        # A new key: the bucket's record, the intent, the chunk, the flush that makes the chunk
        # durable, the object's current version, the intent's refresh, the manifest, and the
        # intent dropped.
        new = ops_of(drive, lambda: s3.put_object(Bucket=bucket, Key="k", Body=body))
        assert new == {"GET": 2, "PUT": 4, "FLUSHALLDATA": 1, "DELETE": 1}, new
        # Replacing it: the same, and the replaced data marked for the sweeper.
        again = ops_of(drive, lambda: s3.put_object(Bucket=bucket, Key="k", Body=body))
        assert again == {"GET": 2, "PUT": 5, "FLUSHALLDATA": 1, "DELETE": 1}, again
        # A conditional PUT reads the object first, to fail before its upload.
        conditional = ops_of(drive, lambda: s3.put_object(Bucket=bucket, Key="other", Body=body, IfNoneMatch="*"))
        assert conditional == {"GET": 3, "PUT": 4, "FLUSHALLDATA": 1, "DELETE": 1}, conditional
        assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == body


def test_a_users_put_asks_the_store_what_an_administrators_does():
    """The access decision reads the bucket's record, and the PUT takes it from there."""
    with tempfile.TemporaryDirectory(prefix="s3-store-ops-users-") as keys:
        users_key = os.path.join(keys, "users.key")
        subprocess.run([os.environ["SPINDLE_BIN"], "s3", "users-key", users_key], check=True, capture_output=True)
        with drive_and_gateway("--users-key", users_key) as (_, drive, _, endpoint):
            made = subprocess.run([os.environ["SPINDLE_BIN"], "s3", "user", "add", "ops-user", "--drive", drive, "--users-key", users_key, "--json"],
                                  check=True, capture_output=True, text=True).stdout
            key = json.loads(made)
            s3 = make_client(access_key=key["access_key"], secret_key=key["secret_key"], endpoint=endpoint)
            bucket = unique_bucket_name("uops")
            s3.create_bucket(Bucket=bucket)
            new = ops_of(drive, lambda: s3.put_object(Bucket=bucket, Key="k", Body=b"x" * 1000))
            # The gateway re-reads its users every few seconds (a range and one record per
            # user): a re-read that fell within the PUT is not the PUT's.
            if new.get("GETKEYRANGE") == 1:
                del new["GETKEYRANGE"]
                new["GET"] -= 1
            assert new == {"GET": 2, "PUT": 4, "FLUSHALLDATA": 1, "DELETE": 1}, new


def test_every_answer_carries_a_request_id_and_client_errors_are_not_logged_as_errors():
    with drive_and_gateway() as (s3, _, log, _):
        bucket = unique_bucket_name("ids")
        s3.create_bucket(Bucket=bucket)
        ok = s3.put_object(Bucket=bucket, Key="k", Body=b"x")["ResponseMetadata"]["RequestId"]
        ids = [ok]
        for _ in range(20):
            try:
                s3.get_object(Bucket=bucket, Key="absent")
            except ClientError as e:
                assert e.response["Error"]["Code"] == "NoSuchKey"
                ids.append(e.response["ResponseMetadata"]["RequestId"])
        assert all(len(i) == 16 and all(c in "0123456789ABCDEF" for c in i) for i in ids), ids
        assert len(set(ids)) == len(ids), "request IDs repeat"
        # 404s are the client's business: nothing at ERROR or WARN for them.
        plain = re.sub(r"\x1b\[[0-9;]*m", "", log())
        lines = [line for line in plain.splitlines() if " ERROR " in line or " WARN " in line]
        assert lines == [], "\n".join(lines)


def test_a_full_drive_answers_storage_full_and_keeps_what_it_holds():
    """A write the drive has no room for is refused with 507 and a code that says so (as MinIO
    answers XMinioStorageFull), not a bare InternalError; what was stored reads back whole."""
    with drive_and_gateway(drive_flags=("--capacity-bytes", str(24 * 1024 * 1024))) as (s3, _, log, _):
        bucket = unique_bucket_name("full")
        s3.create_bucket(Bucket=bucket)
        stored = []
        refused = None
        for i in range(64):
            body = payload(1024 * 1024, i)
            try:
                s3.put_object(Bucket=bucket, Key=f"k{i}", Body=body)
            except ClientError as e:
                refused = e
                break
            stored.append((f"k{i}", body))
        assert refused is not None, "64 MiB went into a drive of 24 MiB"
        assert refused.response["Error"]["Code"] == "XSpindleStorageFull", refused.response
        assert refused.response["ResponseMetadata"]["HTTPStatusCode"] == 507
        assert "full" in refused.response["Error"]["Message"]
        assert stored, "nothing fit"
        for key, body in stored:
            assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body
        assert "a drive is full; answered 507" in log()
