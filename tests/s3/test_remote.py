"""A storage class kept in a remote pool: an external S3 bucket, here a MinIO server of the
test's own (MINIO_BIN), added to the suite's cluster (SPINDLE_BIN, S3_ETCD) with `spindle
cluster pool add NAME --s3 URL` and given to a gateway of the test's own with `--remote-keys`.

What is checked:
- the pool is listed and its keys are nowhere in the cluster's map; bad URLs and drives joining
  it are refused; a gateway mapping a class to it without its keys does not start;
- PUT, multipart uploads (boto3 and awscli) and copies into the class and out of it read back
  byte for byte, report the class, keep their stripes in the bucket under the pool's prefix
  and nothing in the cluster's replicated pool; deleted objects' stripes are swept from the
  bucket;
- a lifecycle rule moves STANDARD objects to the remote class (their chunks leave the cluster);
- with the remote store stopped, reads and writes of the class answer 503 and leave nothing
  visible, STANDARD objects still read; once it is back, everything reads right;
- a stripe replaced or removed in the bucket behind the gateway's back is an error, never wrong
  bytes.
"""

import json
import os
import shlex
import signal
import subprocess
import tempfile
import time
import urllib.request
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import MIB, error_of, free_port, make_client, own_gateway, payload, remove_bucket

SPINDLE = os.environ.get("SPINDLE_BIN")
ETCD = os.environ.get("S3_ETCD", "")
MINIO = os.environ.get("MINIO_BIN")
CLASS = "GLACIER"
REMOTE_USER, REMOTE_SECRET = "spindle-remote", "spindle-remote-secret"
# A gateway's chunks are the drives' largest value: each is one remote object.
CHUNK = MIB
SWEEP = ("--sweep-grace-secs", "1", "--sweep-interval-secs", "1")


def spindle(*args, check=True):
    out = subprocess.run([SPINDLE, *args], capture_output=True, text=True, timeout=120)
    if check and out.returncode != 0:
        raise AssertionError(f"spindle {shlex.join(args)}: {out.stderr}{out.stdout}")
    return out


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.2)


class Minio:
    """A single-node MinIO on a fixed port and directory, so that it can stop and come back."""

    def __init__(self, root):
        self.port, self.console = free_port(), free_port()
        self.data, self.log = os.path.join(root, "minio"), os.path.join(root, "minio.log")
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = None
        self.start()

    def start(self):
        env = {**os.environ, "MINIO_ROOT_USER": REMOTE_USER, "MINIO_ROOT_PASSWORD": REMOTE_SECRET, "MINIO_BROWSER": "off"}
        log = open(self.log, "a")
        self.process = subprocess.Popen(
            [MINIO, "server", "--quiet", "--address", f"127.0.0.1:{self.port}", "--console-address", f"127.0.0.1:{self.console}", self.data],
            stdout=log, stderr=log, env=env,
        )

        def ready():
            assert self.process.poll() is None, f"MinIO exited:\n{open(self.log, errors='replace').read()}"
            try:
                return urllib.request.urlopen(f"{self.url}/minio/health/ready", timeout=2).status == 200
            except OSError:
                return False

        wait_for(ready, 120, "MinIO to be ready")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def client(self):
        return make_client(access_key=REMOTE_USER, secret_key=REMOTE_SECRET, endpoint=self.url)


@pytest.fixture(scope="module")
def remote():
    """(pool name, MinIO, its bucket, the pool's key prefix, the keys file)."""
    assert SPINDLE and ETCD, "SPINDLE_BIN and S3_ETCD must name the spindle binary and the cluster's etcd"
    assert MINIO and os.access(MINIO, os.X_OK), "MINIO_BIN must name a MinIO server (scripts/minio-bin.sh)"
    name = f"rm{uuid.uuid4().hex[:8]}"
    bucket, prefix = f"archive-{uuid.uuid4().hex[:8]}", f"{name}/"
    with tempfile.TemporaryDirectory(prefix="s3-remote-") as root:
        minio = Minio(root)
        try:
            minio.client().create_bucket(Bucket=bucket)
            keys = os.path.join(root, "remote-keys.toml")
            with open(keys, "w") as f:
                f.write(f'access_key = "{REMOTE_USER}"\nsecret_key = "{REMOTE_SECRET}"\n')
            spindle("cluster", "pool", "add", name, "--s3", f"{minio.url}/{bucket}/{name}", "--etcd", ETCD)
            yield name, minio, bucket, prefix, keys
        finally:
            minio.stop()


def gateway(remote, *flags, env=None):
    name, _, _, _, keys = remote
    return own_gateway("--storage-class", f"{CLASS}={name}", "--remote-keys", f"{name}={keys}", *SWEEP, *flags, env=env)


def remote_keys(remote):
    _, minio, bucket, prefix, _ = remote
    s3 = minio.client()
    keys = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys |= {o["Key"] for o in page.get("Contents", [])}
    return keys


def cluster_data_keys():
    out = spindle("cluster", "range", "s3", "s3\x01", "--max", "1000000", "--json", "--etcd", ETCD).stdout
    return {k for k in json.loads(out)["keys"] if len(k) > 3 and k[3] in "DG"}


def error_of_response(e):
    return e.response["Error"].get("Code"), e.response["ResponseMetadata"]["HTTPStatusCode"]


def read(s3, bucket, key):
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def test_the_pool_is_listed_without_its_keys_and_misuse_is_refused(remote):
    name, minio, bucket, _, keys = remote
    listed = json.loads(spindle("cluster", "pool", "list", "--etcd", ETCD, "--json").stdout)["pools"]
    mine = [p for p in listed if p["name"] == name]
    assert mine == [{"name": name, "kind": "remote", "endpoint": minio.url, "bucket": bucket, "prefix": f"{name}/", "region": "us-east-1"}]
    status = spindle("cluster", "status", "--etcd", ETCD).stdout
    assert f"pool {name}: remote S3 bucket {minio.url}/{bucket}/{name}/" in status, status
    # The listing is the pool as the map holds it: no keys (they are each gateway's).
    for bad in ["127.0.0.1:1/bucket", "http://127.0.0.1:1", "http://127.0.0.1:1/Bad_Bucket"]:
        out = spindle("cluster", "pool", "add", f"x{uuid.uuid4().hex[:6]}", "--s3", bad, "--etcd", ETCD, check=False)
        assert out.returncode != 0 and bad in out.stderr, out.stderr
    out = spindle("cluster", "pool", "add", name, "--s3", f"{minio.url}/{bucket}", "--etcd", ETCD, check=False)
    assert out.returncode != 0 and "already exists" in out.stderr, out.stderr
    out = spindle("cluster", "add-drive", "stray", "127.0.0.1:1", "--pool", name, "--etcd", ETCD, check=False)
    assert out.returncode != 0 and "remote bucket" in out.stderr, out.stderr
    # A gateway offering the class without the pool's keys stops with a reason.
    with pytest.raises(AssertionError) as e:
        with own_gateway("--storage-class", f"{CLASS}={name}"):
            pass
    assert "no keys" in str(e.value) and name in str(e.value), e.value


def test_the_remote_class_keeps_objects_in_the_bucket_and_sweeps_them(remote):
    name, *_ = remote
    before_cluster, before_remote = cluster_data_keys(), remote_keys(remote)
    with gateway(remote) as (endpoint, *_):
        s3 = make_client(endpoint=endpoint)
        b = f"spindle-remote-{uuid.uuid4().hex[:10]}"
        s3.create_bucket(Bucket=b)
        try:
            small, big = payload(1000, 1), payload(2 * MIB + 12345, 2)
            s3.put_object(Bucket=b, Key="small", Body=small, StorageClass=CLASS)
            s3.put_object(Bucket=b, Key="big", Body=big, StorageClass=CLASS)
            up = s3.create_multipart_upload(Bucket=b, Key="multi", StorageClass=CLASS)["UploadId"]
            parts_body = [payload(5 * MIB, 3), payload(MIB + 1, 4)]
            parts = [{"PartNumber": i + 1, "ETag": s3.upload_part(Bucket=b, Key="multi", UploadId=up, PartNumber=i + 1, Body=p)["ETag"]} for i, p in enumerate(parts_body)]
            s3.complete_multipart_upload(Bucket=b, Key="multi", UploadId=up, MultipartUpload={"Parts": parts})
            with tempfile.NamedTemporaryFile() as f:
                f.write(payload(9 * MIB, 5))
                f.flush()
                # awscli (its keys in the environment scripts/s3-clients.sh sets): a multipart
                # upload of 8 MiB parts.
                cli = subprocess.run(["aws", "--endpoint-url", endpoint, "s3", "cp", f.name, f"s3://{b}/cli", "--storage-class", CLASS], capture_output=True, text=True, timeout=300)
                assert cli.returncode == 0, cli.stderr
                ls = subprocess.run(["aws", "--endpoint-url", endpoint, "s3api", "list-objects-v2", "--bucket", b], capture_output=True, text=True, timeout=120)
                assert {o["Key"]: o["StorageClass"] for o in json.loads(ls.stdout)["Contents"]} == {k: CLASS for k in ("big", "cli", "multi", "small")}
                cli_body = payload(9 * MIB, 5)
            expected = {"small": small, "big": big, "multi": b"".join(parts_body), "cli": cli_body}
            for key, body in expected.items():
                assert read(s3, b, key) == body, key
                assert s3.head_object(Bucket=b, Key=key)["StorageClass"] == CLASS
            ranged = s3.get_object(Bucket=b, Key="big", Range="bytes=1048000-1049999")["Body"].read()
            assert ranged == big[1048000:1050000]
            # Every stripe in the bucket (one remote object per 1 MiB chunk of each object or
            # part), nothing in the cluster's replicated pool once the sweeper had its turn.
            stripes = 1 + 3 + (5 + 2) + 9
            wait_for(lambda: len(remote_keys(remote) - before_remote) == stripes, 60, f"{stripes} stripes in the bucket")
            wait_for(lambda: cluster_data_keys() <= before_cluster, 60, "no chunk of the remote class in the cluster")
            # Out of the class and back, in place.
            s3.copy_object(Bucket=b, Key="big", CopySource={"Bucket": b, "Key": "big"}, StorageClass="STANDARD", MetadataDirective="COPY")
            assert s3.head_object(Bucket=b, Key="big").get("StorageClass", "STANDARD") == "STANDARD"
            assert read(s3, b, "big") == big
            s3.copy_object(Bucket=b, Key="big-cold", CopySource={"Bucket": b, "Key": "big"}, StorageClass=CLASS)
            assert read(s3, b, "big-cold") == big
            wait_for(lambda: len(remote_keys(remote) - before_remote) == stripes, 60, "the moved object's stripes swept and the copy's written")
            for key in ["small", "big", "multi", "cli", "big-cold"]:
                s3.delete_object(Bucket=b, Key=key)
            wait_for(lambda: remote_keys(remote) <= before_remote, 90, "every stripe swept from the bucket")
            wait_for(lambda: cluster_data_keys() <= before_cluster, 90, "every chunk swept from the cluster")
        finally:
            remove_bucket(s3, b)


def test_a_lifecycle_rule_moves_objects_to_the_remote_tier(remote):
    before_remote = remote_keys(remote)
    before_cluster = cluster_data_keys()
    with gateway(remote, "--lifecycle-interval-secs", "1", "--lifecycle-day-secs", "1") as (endpoint, *_):
        s3 = make_client(endpoint=endpoint)
        b = f"spindle-remote-lc-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(Bucket=b)
        try:
            bodies = {f"logs/{i}": payload(300_000 * (i + 1), 10 + i) for i in range(4)}
            bodies["keep/hot"] = payload(5000, 20)
            for key, body in bodies.items():
                s3.put_object(Bucket=b, Key=key, Body=body)
            s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": [
                {"ID": "archive", "Status": "Enabled", "Filter": {"Prefix": "logs/"}, "Transitions": [{"Days": 1, "StorageClass": CLASS}]}]})

            def moved():
                return all(s3.head_object(Bucket=b, Key=k).get("StorageClass") == CLASS for k in bodies if k.startswith("logs/"))

            wait_for(moved, 120, "the logs/ objects to move to the remote class")
            assert s3.head_object(Bucket=b, Key="keep/hot").get("StorageClass", "STANDARD") == "STANDARD"
            for key, body in bodies.items():
                assert read(s3, b, key) == body, key
            # 300 KB to 1.2 MB: one or two stripes each.
            wait_for(lambda: len(remote_keys(remote) - before_remote) == 1 + 1 + 1 + 2, 60, "the moved objects' stripes in the bucket")
            s3.delete_bucket_lifecycle(Bucket=b)
            for key in bodies:
                s3.delete_object(Bucket=b, Key=key)
            wait_for(lambda: remote_keys(remote) <= before_remote and cluster_data_keys() <= before_cluster, 90, "everything swept")
        finally:
            remove_bucket(s3, b)


def test_a_remote_store_down_fails_cleanly_and_reads_resume(remote):
    _, minio, *_ = remote
    with gateway(remote) as (endpoint, *_):
        s3 = make_client(endpoint=endpoint)
        b = f"spindle-remote-down-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(Bucket=b)
        cold, hot = payload(3 * MIB + 5, 30), payload(2 * MIB, 31)
        try:
            s3.put_object(Bucket=b, Key="cold", Body=cold, StorageClass=CLASS)
            s3.put_object(Bucket=b, Key="hot", Body=hot)
            minio.stop()
            try:
                with pytest.raises(ClientError) as e:
                    read(s3, b, "cold")
                assert error_of(e) == ("ServiceUnavailable", 503)
                assert "remote store" in e.value.response["Error"]["Message"]
                with pytest.raises(ClientError) as e:
                    s3.put_object(Bucket=b, Key="new", Body=payload(MIB, 32), StorageClass=CLASS)
                assert error_of(e) == ("ServiceUnavailable", 503)
                with pytest.raises(ClientError) as e:
                    s3.head_object(Bucket=b, Key="new")
                assert error_of(e)[1] == 404, "a failed write leaves nothing visible"
                assert read(s3, b, "hot") == hot, "STANDARD objects do not need the remote store"
            finally:
                minio.start()

            def reads_right():
                try:
                    return read(s3, b, "cold") == cold
                except ClientError as e:
                    assert error_of_response(e) == ("ServiceUnavailable", 503), e
                    return False

            wait_for(reads_right, 60, "the cold object to read right once the remote store is back")
            s3.put_object(Bucket=b, Key="new", Body=payload(MIB, 32), StorageClass=CLASS)
            assert read(s3, b, "new") == payload(MIB, 32)
        finally:
            remove_bucket(s3, b)


def test_a_damaged_or_missing_remote_stripe_is_an_error_never_wrong_bytes(remote):
    _, minio, bucket, _, _ = remote
    before_remote = remote_keys(remote)
    with gateway(remote) as (endpoint, *_):
        s3 = make_client(endpoint=endpoint)
        b = f"spindle-remote-rot-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(Bucket=b)
        try:
            for key, seed in (("rot", 40), ("gone", 41)):
                s3.put_object(Bucket=b, Key=key, Body=payload(MIB + 100, seed), StorageClass=CLASS)
            wait_for(lambda: len(remote_keys(remote) - before_remote) == 4, 60, "four stripes in the bucket")
            theirs = minio.client()
            # Each object's second stripe (index 1) is its 100-byte tail.
            tails = sorted(k for k in remote_keys(remote) - before_remote if k.endswith("/00000001"))
            assert len(tails) == 2
            stored = theirs.get_object(Bucket=bucket, Key=tails[0])["Body"].read()
            flipped = stored[:-1] + bytes([stored[-1] ^ 0x20])
            theirs.put_object(Bucket=bucket, Key=tails[0], Body=flipped)
            theirs.delete_object(Bucket=bucket, Key=tails[1])
            for key, seed in (("rot", 40), ("gone", 41)):
                want = payload(MIB + 100, seed)
                try:
                    got = read(s3, b, key)
                except Exception:  # noqa: BLE001 - the answer started with the whole first stripe; the damage cuts it short
                    continue
                assert len(got) < len(want) and want.startswith(got), f"{key}: damage returned as data"
            # A GET of the tail alone is refused before it starts.
            for key in ("rot", "gone"):
                with pytest.raises(ClientError) as e:
                    s3.get_object(Bucket=b, Key=key, Range=f"bytes={MIB}-{MIB + 99}")["Body"].read()
                assert error_of(e) == ("InternalError", 500), key
                assert "remote store" in e.value.response["Error"]["Message"]
        finally:
            remove_bucket(s3, b)
