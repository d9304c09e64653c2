"""A storage class kept in an erasure-coded pool, through the gateway: objects written with
x-amz-storage-class STANDARD_IA go to a 4+2 pool of eight drives of the test's own (added to
the suite's cluster, SPINDLE_BIN and S3_ETCD), served by a gateway of its own that maps the
class to the pool.

What is checked:
- PUT, multipart uploads and copies into the class and out of it read back byte for byte,
  through boto3 and awscli; HEAD, GET, listings and ListParts report the class; a class the
  gateway does not offer is refused with InvalidStorageClass;
- with two of the pool's drives SIGKILLed every object reads back right; uploads meanwhile
  either succeed and read back right or fail and leave nothing; with a third killed, each read
  is right or a 503 naming the shards missing (some are), never wrong bytes; once the drives
  return, every object reads back right.
"""

import os
import shlex
import signal
import subprocess
import tempfile
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import MIB, empty_bucket, error_of, free_port, make_client, own_gateway, payload, remove_bucket

SPINDLE = os.environ.get("SPINDLE_BIN")
ETCD = os.environ.get("S3_ETCD", "")
CODE = "4+2"
DRIVES = 8
CLASS = "STANDARD_IA"


def spindle(*args, check=True):
    out = subprocess.run([SPINDLE, *args], capture_output=True, text=True, timeout=120)
    if check and out.returncode != 0:
        raise AssertionError(f"spindle {shlex.join(args)}: {out.stderr}{out.stdout}")
    return out


class Drive:
    """A `spindle drive` on a fixed port, so that it can be killed and come back as itself."""

    def __init__(self, root, name):
        self.name, self.port = name, free_port()
        self.data = os.path.join(root, name)
        self.log = os.path.join(root, f"{name}.log")
        self.process = None
        self.start()

    def start(self):
        log = open(self.log, "a")
        # Ranges of up to 20,000 keys, so that one `spindle range` lists every shard it holds.
        config = os.path.join(os.path.dirname(self.data), f"{self.name}.toml")
        with open(config, "w") as f:
            f.write("[limits]\nmax_key_range_count = 20000\n")
        self.process = subprocess.Popen(
            [SPINDLE, "drive", "--data", self.data, "--port", str(self.port), "--tls-port", "0", "--listen", "127.0.0.1", "--config", config],
            stdout=log, stderr=log,
        )
        deadline = time.monotonic() + 60
        while f"listening on 127.0.0.1:{self.port}" not in open(self.log, errors="replace").read():
            assert self.process.poll() is None, f"drive {self.name} exited:\n{open(self.log).read()}"
            assert time.monotonic() < deadline, f"drive {self.name} not listening after 60 s"
            time.sleep(0.1)

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def pool():
    assert SPINDLE and ETCD, "SPINDLE_BIN and S3_ETCD must name the spindle binary and the cluster's etcd"
    name = f"ec{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="s3-erasure-") as root:
        drives = []
        try:
            # The default 256 groups: with two of eight drives down, about nine still have
            # every drive up, so uploads go on.
            spindle("cluster", "pool", "add", name, "--ec", CODE, "--etcd", ETCD)
            for i in range(DRIVES):
                d = Drive(root, f"{name}-{i}")
                drives.append(d)
                spindle("cluster", "add-drive", d.name, f"127.0.0.1:{d.port}", "--pool", name, "--etcd", ETCD)

            def placed():
                import json
                status = json.loads(spindle("cluster", "pool", "status", name, "--etcd", ETCD, "--json").stdout)["pools"][0]
                return status["placed"] == 256 and all(d["up"] for d in status["drives"]) and len(status["drives"]) == DRIVES

            wait_for(placed, 90, f"pool {name}'s groups placed on {DRIVES} drives, all up")
            yield name, drives
        finally:
            for d in drives:
                d.stop()


@pytest.fixture(scope="module")
def ec(pool):
    name, _ = pool
    with own_gateway("--storage-class", f"{CLASS}={name}", "--sweep-grace-secs", "2", "--sweep-interval-secs", "1") as (endpoint, _port, _process, _output):
        yield make_client(endpoint=endpoint), endpoint


@pytest.fixture
def ec_bucket(ec):
    s3, _ = ec
    name = f"spindle-ec-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    yield name
    empty_bucket(s3, name)
    remove_bucket(s3, name)


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout} s: {what}")
        time.sleep(0.25)


def read(s3, bucket, key, **extra):
    return s3.get_object(Bucket=bucket, Key=key, **extra)["Body"].read()


def test_the_coded_class_holds_objects_whole_and_reports_itself(ec, ec_bucket):
    s3, endpoint = ec
    b = ec_bucket
    bodies = {"empty": b"", "small": payload(1000, 1), "stripes": payload(2 * MIB + 12345, 2)}
    for key, body in bodies.items():
        s3.put_object(Bucket=b, Key=key, Body=body, StorageClass=CLASS)
        assert read(s3, b, key) == body
        assert s3.head_object(Bucket=b, Key=key)["StorageClass"] == CLASS
    assert read(s3, b, "stripes", Range="bytes=1048570-2097160") == bodies["stripes"][1048570:2097161]
    s3.put_object(Bucket=b, Key="hot", Body=b"standard bytes")
    assert "StorageClass" not in s3.head_object(Bucket=b, Key="hot")
    listed = {o["Key"]: o["StorageClass"] for o in s3.list_objects_v2(Bucket=b)["Contents"]}
    assert listed == {"empty": CLASS, "small": CLASS, "stripes": CLASS, "hot": "STANDARD"}
    attrs = s3.get_object_attributes(Bucket=b, Key="small", ObjectAttributes=["StorageClass", "ObjectSize"])
    assert (attrs["StorageClass"], attrs["ObjectSize"]) == (CLASS, 1000)

    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=b, Key="glacier", Body=b"x", StorageClass="GLACIER")
    assert error_of(e) == ("InvalidStorageClass", 400)

    # Multipart into the class: parts, ListParts and the object all say so.
    up = s3.create_multipart_upload(Bucket=b, Key="multi", StorageClass=CLASS)["UploadId"]
    parts = [payload(5 * MIB, 10), payload(5 * MIB + 7, 11), payload(MIB // 3, 12)]
    done = [{"PartNumber": n + 1, "ETag": s3.upload_part(Bucket=b, Key="multi", UploadId=up, PartNumber=n + 1, Body=p)["ETag"]} for n, p in enumerate(parts)]
    assert s3.list_parts(Bucket=b, Key="multi", UploadId=up)["StorageClass"] == CLASS
    assert [u["StorageClass"] for u in s3.list_multipart_uploads(Bucket=b)["Uploads"]] == [CLASS]
    s3.complete_multipart_upload(Bucket=b, Key="multi", UploadId=up, MultipartUpload={"Parts": done})
    assert read(s3, b, "multi") == b"".join(parts)
    assert s3.head_object(Bucket=b, Key="multi")["StorageClass"] == CLASS

    # Copies change the class as asked (STANDARD unless named), also in place.
    s3.copy_object(Bucket=b, Key="warm-copy", CopySource={"Bucket": b, "Key": "stripes"})
    assert "StorageClass" not in s3.head_object(Bucket=b, Key="warm-copy")
    assert read(s3, b, "warm-copy") == bodies["stripes"]
    s3.copy_object(Bucket=b, Key="hot", CopySource={"Bucket": b, "Key": "hot"}, StorageClass=CLASS)
    assert s3.head_object(Bucket=b, Key="hot")["StorageClass"] == CLASS
    assert read(s3, b, "hot") == b"standard bytes"
    s3.copy_object(Bucket=b, Key="hot", CopySource={"Bucket": b, "Key": "hot"}, StorageClass="STANDARD")
    assert "StorageClass" not in s3.head_object(Bucket=b, Key="hot")

    # awscli: a file in one PUT and one in parts, into the class and back.
    with tempfile.TemporaryDirectory() as d:
        for name, size in (("one.bin", 300_000), ("parts.bin", 12 * MIB + 5)):
            src, back = os.path.join(d, name), os.path.join(d, name + ".back")
            with open(src, "wb") as f:
                f.write(payload(size, size))
            aws = ["aws", "--endpoint-url", endpoint, "s3"]
            subprocess.run([*aws, "cp", src, f"s3://{b}/cli/{name}", "--storage-class", CLASS], check=True, capture_output=True, timeout=120)
            subprocess.run([*aws, "cp", f"s3://{b}/cli/{name}", back], check=True, capture_output=True, timeout=120)
            assert open(back, "rb").read() == open(src, "rb").read()
            assert s3.head_object(Bucket=b, Key=f"cli/{name}")["StorageClass"] == CLASS


def test_reads_survive_parity_drives_killed_and_fail_cleanly_beyond(ec, ec_bucket, pool):
    s3, _ = ec
    b = ec_bucket
    _, drives = pool
    objects = {f"o{i}": payload(100_000 + i * 97_000, 100 + i) for i in range(36)}
    for key, body in objects.items():
        s3.put_object(Bucket=b, Key=key, Body=body, StorageClass=CLASS)

    drives[1].kill()
    drives[6].kill()
    try:
        for key, body in objects.items():
            assert read(s3, b, key) == body, key
        # Uploads with two drives down: each lands whole (in a group of drives that are up)
        # or fails and leaves nothing.
        acknowledged, failed = {}, []
        for i in range(12):
            key, body = f"during{i}", payload(200_000 + i, 200 + i)
            try:
                s3.put_object(Bucket=b, Key=key, Body=body, StorageClass=CLASS)
                acknowledged[key] = body
            except ClientError as e:
                assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 503, e.response
                failed.append(key)
        assert acknowledged, "no upload succeeded with two of eight drives down"
        for key, body in acknowledged.items():
            assert read(s3, b, key) == body, key
        for key in failed:
            with pytest.raises(ClientError) as e:
                s3.head_object(Bucket=b, Key=key)
            assert error_of(e)[1] == 404
        objects.update(acknowledged)

        # A third: stripes of groups holding all three are gone for now, and say so.
        drives[3].kill()
        unreadable = 0
        for key, body in objects.items():
            try:
                assert read(s3, b, key) == body, key
            except ClientError as e:
                err = e.response["Error"]
                assert (err.get("Code"), e.response["ResponseMetadata"]["HTTPStatusCode"]) == ("ServiceUnavailable", 503), e.response
                assert "shards" in err.get("Message", ""), err
                unreadable += 1
        assert unreadable > 0, "no object's group held all three killed drives"
    finally:
        for i in (1, 3, 6):
            if drives[i].process.poll() is not None:
                drives[i].start()

    def all_read_right():
        try:
            return all(read(s3, b, key) == body for key, body in objects.items())
        except ClientError:
            return False

    wait_for(all_read_right, 60, "every object to read right once the drives are back")


# Lifecycle: rules that move objects to the coded class, expire them and abort uploads, applied
# by a gateway whose lifecycle day lasts a second and whose pass runs every second.
LIFECYCLE_FLAGS = ("--lifecycle-interval-secs", "1", "--lifecycle-day-secs", "1", "--sweep-grace-secs", "1", "--sweep-interval-secs", "1")


def lifecycle_gateway(pool_name, env=None, metrics=None):
    extra = ("--metrics-listen", f"127.0.0.1:{metrics}") if metrics else ()
    return own_gateway("--storage-class", f"{CLASS}={pool_name}", *LIFECYCLE_FLAGS, *extra, env=env)


def rule(rule_id, prefix, **actions):
    return {"ID": rule_id, "Status": "Enabled", "Filter": {"Prefix": prefix}, **actions}


def test_lifecycle_configurations_are_checked_and_read_back(ec, ec_bucket):
    s3, _ = ec
    b = ec_bucket
    with pytest.raises(ClientError) as e:
        s3.get_bucket_lifecycle_configuration(Bucket=b)
    assert error_of(e) == ("NoSuchLifecycleConfiguration", 404)
    rules = [
        {"ID": "cool", "Status": "Enabled", "Filter": {"And": {"Prefix": "logs/", "Tags": [{"Key": "tier", "Value": "cold"}]}},
         "Transitions": [{"Days": 30, "StorageClass": CLASS}]},
        rule("expire", "tmp/", Expiration={"Days": 7}),
        rule("uploads", "", AbortIncompleteMultipartUpload={"DaysAfterInitiation": 2}),
    ]
    s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": rules})
    got = s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]
    assert [r["ID"] for r in got] == ["cool", "expire", "uploads"]
    assert got[0]["Transitions"] == [{"Days": 30, "StorageClass": CLASS}]
    assert got[0]["Filter"]["And"]["Tags"] == [{"Key": "tier", "Value": "cold"}]
    assert got[1]["Expiration"] == {"Days": 7}
    assert got[2]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 2}
    for bad, code in [
        ([rule("x", "", Transitions=[{"Days": 1, "StorageClass": "GLACIER"}])], "InvalidStorageClass"),
        ([rule("x", "", Expiration={"Days": 0})], "InvalidArgument"),
        ([rule("x", "a", Expiration={"Days": 1}), rule("x", "b", Expiration={"Days": 1})], "InvalidArgument"),
        ([{"ID": "x", "Status": "Enabled", "Filter": {"Tag": {"Key": "k", "Value": "v"}}, "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}], "InvalidRequest"),
    ]:
        with pytest.raises(ClientError) as e:
            s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": bad})
        assert error_of(e) == (code, 400), bad
    s3.delete_bucket_lifecycle(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_lifecycle_configuration(Bucket=b)
    assert error_of(e)[0] == "NoSuchLifecycleConfiguration"


def test_lifecycle_moves_expires_and_aborts_as_its_rules_say(pool):
    name, _ = pool
    metrics = free_port()
    with lifecycle_gateway(name, metrics=metrics) as (endpoint, *_):
        s3 = make_client(endpoint=endpoint)
        b = f"spindle-lc-{uuid.uuid4().hex[:12]}"
        s3.create_bucket(Bucket=b)
        try:
            bodies = {"cold/tagged": payload(1_500_000, 1), "cold/untagged": payload(1000, 2), "tmp/scratch": payload(5000, 3)}
            for key, body in bodies.items():
                s3.put_object(Bucket=b, Key=key, Body=body, Tagging="tier=cold" if key == "cold/tagged" else "")
            up = s3.create_multipart_upload(Bucket=b, Key="cold/multi")["UploadId"]
            parts = [payload(5 * MIB, 4), payload(2 * MIB + 1, 5)]
            done = [{"PartNumber": n + 1, "ETag": s3.upload_part(Bucket=b, Key="cold/multi", UploadId=up, PartNumber=n + 1, Body=p)["ETag"]} for n, p in enumerate(parts)]
            s3.complete_multipart_upload(Bucket=b, Key="cold/multi", UploadId=up, MultipartUpload={"Parts": done})
            s3.put_object_tagging(Bucket=b, Key="cold/multi", Tagging={"TagSet": [{"Key": "tier", "Value": "cold"}]})
            abandoned = s3.create_multipart_upload(Bucket=b, Key="half/done")["UploadId"]
            s3.upload_part(Bucket=b, Key="half/done", UploadId=abandoned, PartNumber=1, Body=b"x" * 1000)
            before = {k: s3.head_object(Bucket=b, Key=k) for k in ("cold/tagged", "cold/multi")}
            s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": [
                {"ID": "cool", "Status": "Enabled", "Filter": {"Tag": {"Key": "tier", "Value": "cold"}}, "Transitions": [{"Days": 2, "StorageClass": CLASS}]},
                rule("expire", "tmp/", Expiration={"Days": 3}),
                rule("uploads", "half/", AbortIncompleteMultipartUpload={"DaysAfterInitiation": 2}),
            ]})

            def settled():
                classes = {k: s3.head_object(Bucket=b, Key=k).get("StorageClass") for k in ("cold/tagged", "cold/multi", "cold/untagged")}
                keys = {o["Key"] for o in s3.list_objects_v2(Bucket=b).get("Contents", [])}
                uploads = s3.list_multipart_uploads(Bucket=b).get("Uploads", [])
                return classes == {"cold/tagged": CLASS, "cold/multi": CLASS, "cold/untagged": None} and "tmp/scratch" not in keys and not uploads

            wait_for(settled, 90, "the rules to move, expire and abort")
            # Moved objects are the same versions: bytes, ETag, time and parts as before.
            for key, body in (("cold/tagged", bodies["cold/tagged"]), ("cold/multi", b"".join(parts))):
                now = s3.head_object(Bucket=b, Key=key)
                assert (now["ETag"], now["LastModified"], now["ContentLength"]) == (before[key]["ETag"], before[key]["LastModified"], before[key]["ContentLength"])
                assert read(s3, b, key) == body
            assert read(s3, b, "cold/multi", PartNumber=2) == parts[1]
            assert read(s3, b, "cold/untagged") == bodies["cold/untagged"]
            import urllib.request
            text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=30).read().decode()
            counts = {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line.startswith("spindle_s3_lifecycle_") and not line.startswith("#")}
            assert counts["spindle_s3_lifecycle_transitioned_total"] >= 2, counts
            assert counts["spindle_s3_lifecycle_expired_total"] >= 1 and counts["spindle_s3_lifecycle_uploads_aborted_total"] >= 1, counts
        finally:
            empty_bucket(s3, b)
            remove_bucket(s3, b)


def cluster_keys():
    import json
    out = spindle("cluster", "range", "s3", "s3\x01", "--max", "1000000", "--json", "--etcd", ETCD).stdout
    return {k for k in json.loads(out)["keys"] if len(k) > 3 and k[3] in "DG"}


def shard_keys(drives):
    import json
    epoch = json.loads(spindle("cluster", "status", "--etcd", ETCD, "--json").stdout)["epoch"]
    keys = set()
    for d in drives:
        out = spindle("range", "--hex", "00000000", "ffffffff", "--max", "20000", "--drive", f"127.0.0.1:{d.port}", "--cluster-version", str(epoch), "--json").stdout
        keys |= {(d.name, k) for k in json.loads(out)["keys"]}
    return keys


def test_a_transition_cut_by_a_crash_at_each_step_resumes_and_leaves_one_copy(pool):
    name, drives = pool
    b = f"spindle-lc-crash-{uuid.uuid4().hex[:8]}"
    body = payload(2 * MIB + 777, 9)
    data_before, shards_before = cluster_keys(), shard_keys(drives)
    for step in ("transition-copied", "transition-swapped"):
        with lifecycle_gateway(name, env={"SPINDLE_GATEWAY_CRASH_AT": step}) as (endpoint, _port, process, output):
            s3 = make_client(endpoint=endpoint)
            if step == "transition-copied":
                s3.create_bucket(Bucket=b)
                s3.put_object(Bucket=b, Key="obj", Body=body)
                etag = s3.head_object(Bucket=b, Key="obj")["ETag"]
                s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": [rule("cool", "", Transitions=[{"Days": 1, "StorageClass": CLASS}])]})
            wait_for(lambda: process.poll() is not None, 90, f"the gateway to crash at {step}")
            assert f"crashing at {step}" in output(), output()
    with lifecycle_gateway(name) as (endpoint, *_):
        s3 = make_client(endpoint=endpoint)
        head = s3.head_object(Bucket=b, Key="obj")
        assert (head.get("StorageClass"), head["ETag"]) == (CLASS, etag)
        assert read(s3, b, "obj") == body
        # Swept: no chunk or intent left in the replicated pool, and in the coded pool only
        # the shards of the one copy the object references (3 stripes of 6 shards).
        wait_for(lambda: cluster_keys() <= data_before and len(shard_keys(drives) - shards_before) == 18, 90, "the copies the crashes left to be swept")
        s3.delete_object(Bucket=b, Key="obj")
        s3.delete_bucket_lifecycle(Bucket=b)
        wait_for(lambda: shard_keys(drives) <= shards_before, 90, "the object's shards to be swept after its delete")
        remove_bucket(s3, b)


def test_racing_writes_in_the_coded_class_with_drives_killed_stay_linearizable(ec, pool):
    """The S3 race of test_races (PUTs, DELETEs, copies and multipart completions of one key,
    readers, every read whole, the history linearizable), every object in the coded class,
    while two of the pool's drives are SIGKILLed and brought back in turn."""
    from test_races import race

    s3, _ = ec
    _, drives = pool
    b = f"spindle-ec-race-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=b)

    def faults(now, stop):
        for victims, at in (((0, 5), 1.5), ((2,), 4.5)):
            while now() < at and time.monotonic() < stop:
                time.sleep(0.05)
            for i in victims:
                drives[i].kill()
            time.sleep(1.5)
            for i in victims:
                drives[i].start()

    try:
        race(s3, b, extra={"StorageClass": CLASS}, faults=faults)
    finally:
        for d in drives:
            if d.process.poll() is not None:
                d.start()
        empty_bucket(s3, b)
        remove_bucket(s3, b)


def test_a_default_class_takes_writes_that_name_none(pool):
    name, _ = pool
    with own_gateway("--storage-class", f"{CLASS}={name}", "--default-storage-class", CLASS) as (endpoint, *_):
        s3 = make_client(endpoint=endpoint)
        b = f"spindle-ec-default-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(Bucket=b)
        try:
            s3.put_object(Bucket=b, Key="plain", Body=b"no class named")
            s3.put_object(Bucket=b, Key="standard", Body=b"named STANDARD", StorageClass="STANDARD")
            assert s3.head_object(Bucket=b, Key="plain")["StorageClass"] == CLASS
            assert "StorageClass" not in s3.head_object(Bucket=b, Key="standard")
            assert read(s3, b, "plain") == b"no class named"
        finally:
            empty_bucket(s3, b)
            remove_bucket(s3, b)
