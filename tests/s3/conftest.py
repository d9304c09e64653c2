"""Fixtures shared by the S3 suites: boto3 clients for the gateway the environment names, and
buckets that are emptied and removed after each test.

The gateway under test is named by environment variables (scripts/s3-clients.sh sets them):
S3_ENDPOINT (http://127.0.0.1:PORT), S3_ACCESS_KEY, S3_SECRET_KEY and optionally S3_REGION
(default us-east-1). A missing variable is an error, not a reason to skip.
"""

import contextlib
import hashlib
import os
import random
import shlex
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

MIB = 1024 * 1024


def _env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        raise RuntimeError(f"{name} is not set: run the suite through scripts/s3-clients.sh or set it")
    return value


ENDPOINT = _env("S3_ENDPOINT")
ACCESS_KEY = _env("S3_ACCESS_KEY")
SECRET_KEY = _env("S3_SECRET_KEY")
REGION = os.environ.get("S3_REGION", "us-east-1")


def client_config(**overrides):
    """Path-style SigV4 with no retries: a retried request would hide the failure under test."""
    settings = dict(
        signature_version="s3v4",
        s3={"addressing_style": "path"},
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=10,
        read_timeout=120,
        max_pool_connections=32,
    )
    settings.update(overrides)
    return Config(**settings)


def make_client(access_key=ACCESS_KEY, secret_key=SECRET_KEY, endpoint=ENDPOINT, verify=None, **config):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        verify=verify,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=REGION,
        config=client_config(**config),
    )


def unique_bucket_name(tag="t"):
    return f"spindle-{tag}-{uuid.uuid4().hex[:12]}"


def payload(size, seed):
    """SIZE pseudo-random bytes, the same for the same SEED."""
    return random.Random(seed).randbytes(size)


def md5_hex(data):
    return hashlib.md5(data).hexdigest()


def quoted_md5(data):
    return f'"{md5_hex(data)}"'


def multipart_etag(parts):
    """The S3 ETag of an object completed from PARTS (their bytes, in order)."""
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(digests).hexdigest()}-{len(parts)}"'


def error_of(excinfo):
    """(code, HTTP status) of a ClientError caught by pytest.raises."""
    err = excinfo.value
    assert isinstance(err, ClientError), err
    return err.response["Error"].get("Code"), err.response["ResponseMetadata"]["HTTPStatusCode"]


def empty_bucket(s3, bucket):
    """Aborts every multipart upload and deletes every object (and version) of BUCKET."""
    for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
        for up in page.get("Uploads", []):
            s3.abort_multipart_upload(Bucket=bucket, Key=up["Key"], UploadId=up["UploadId"])
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        for i in range(0, len(keys), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys[i : i + 1000], "Quiet": True})
    # A versioned bucket keeps versions and delete markers: each removed by its id.
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        keys = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def remove_bucket(s3, bucket):
    try:
        empty_bucket(s3, bucket)
        s3.delete_bucket(Bucket=bucket)
    except ClientError as e:
        if e.response["Error"].get("Code") not in ("NoSuchBucket", "404"):
            raise


@pytest.fixture(scope="session")
def s3():
    return make_client()


@pytest.fixture
def bucket(s3):
    """A new, empty bucket, removed (with whatever the test left in it) afterwards."""
    name = unique_bucket_name()
    s3.create_bucket(Bucket=name)
    yield name
    remove_bucket(s3, name)


@pytest.fixture
def other_bucket(s3):
    name = unique_bucket_name("o")
    s3.create_bucket(Bucket=name)
    yield name
    remove_bucket(s3, name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def own_gateway(*flags, scheme="http", env=None):
    """A `spindle s3` of the test's own over the suite's cluster (SPINDLE_BIN, S3_ETCD), with
    FLAGS (and ENV added to the environment); yields (endpoint, port, process, log reader)
    and stops it after."""
    spindle, etcd = os.environ.get("SPINDLE_BIN"), os.environ.get("S3_ETCD")
    assert spindle and etcd, "SPINDLE_BIN and S3_ETCD must name the spindle binary and the cluster's etcd"
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="s3-gateway-", suffix=".log", delete=False)
    command = [
        spindle, "s3", "--cluster", "etcd://" + etcd.removeprefix("http://"), "--listen", f"127.0.0.1:{port}",
        "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY, *flags,
    ]
    process = subprocess.Popen(command, stdout=log, stderr=log, env={**os.environ, **(env or {})})

    def output():
        with open(log.name, errors="replace") as f:
            return f.read()

    try:
        deadline = time.monotonic() + 60
        while f"listening on 127.0.0.1:{port}" not in output():
            assert process.poll() is None, f"the gateway exited: {shlex.join(command)}\n{output()}"
            assert time.monotonic() < deadline, f"the gateway is not listening after 60 s\n{output()}"
            time.sleep(0.1)
        yield f"{scheme}://127.0.0.1:{port}", port, process, output
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        os.unlink(log.name)
