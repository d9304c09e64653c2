"""Users, owners and access through boto3: users kept apart, public objects and buckets, ACLs,
bucket policies that allow and deny, the public access block, object ownership, and key
rotation and removal. Each test runs a gateway of its own over the suite's cluster with a
users key (`spindle s3 users-key`), and makes its users with `spindle s3 user`."""

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid

import botocore
import pytest
from botocore.config import Config

from conftest import error_of, make_client, own_gateway, unique_bucket_name, client_config, REGION

import boto3

SPINDLE = os.environ.get("SPINDLE_BIN")
ETCD = os.environ.get("S3_ETCD", "")
ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
# The gateway re-reads its users at least this often (users::REFRESH, 5 s), and at once for a
# key it does not know: a bound only a defect exceeds.
REFRESH_BOUND = 60


def spindle(*args):
    out = subprocess.run([SPINDLE, "s3", *args], check=True, capture_output=True, text=True, timeout=120)
    return out.stdout


def store_flags():
    return ["--cluster", "etcd://" + ETCD.removeprefix("http://")]


@pytest.fixture(scope="module")
def users_key():
    d = tempfile.mkdtemp(prefix="s3-users-")
    path = os.path.join(d, "users.key")
    spindle("users-key", path)
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    yield path
    os.unlink(path)
    os.rmdir(d)


@pytest.fixture(scope="module")
def gateway(users_key):
    with own_gateway("--users-key", users_key) as (endpoint, _port, _process, _log):
        yield endpoint


def add_user(users_key, tag):
    name = f"{tag}-{uuid.uuid4().hex[:8]}"
    k = json.loads(spindle("user", "add", name, *store_flags(), "--users-key", users_key, "--json"))
    assert k["user"] == name and k["access_key"] and k["secret_key"]
    return name, k["access_key"], k["secret_key"]


def client_of(gateway, key):
    return make_client(access_key=key[1], secret_key=key[2], endpoint=gateway)


def anonymous(gateway):
    return boto3.client("s3", endpoint_url=gateway, region_name=REGION, config=client_config(signature_version=botocore.UNSIGNED))


@pytest.fixture(scope="module")
def ann(users_key):
    return add_user(users_key, "ann")


@pytest.fixture(scope="module")
def bob(users_key):
    return add_user(users_key, "bob")


@pytest.fixture
def ann_bucket(gateway, ann):
    s3 = client_of(gateway, ann)
    name = unique_bucket_name("ann")
    s3.create_bucket(Bucket=name)
    yield name
    admin = make_client(endpoint=gateway)
    for page in admin.get_paginator("list_objects_v2").paginate(Bucket=name):
        for o in page.get("Contents", []):
            admin.delete_object(Bucket=name, Key=o["Key"])
    admin.delete_bucket(Bucket=name)


def denied(call, *args, **kwargs):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        call(*args, **kwargs)
    assert error_of(e) == ("AccessDenied", 403), (call.__name__, kwargs.get("Key"), e.value.response["Error"].get("Message"))


def test_users_are_kept_apart(gateway, ann, bob, ann_bucket):
    a, b, admin = client_of(gateway, ann), client_of(gateway, bob), make_client(endpoint=gateway)
    a.put_object(Bucket=ann_bucket, Key="k", Body=b"ann's")
    assert a.get_object(Bucket=ann_bucket, Key="k")["Body"].read() == b"ann's"
    assert ann_bucket in [x["Name"] for x in a.list_buckets()["Buckets"]]
    assert ann_bucket not in [x["Name"] for x in b.list_buckets()["Buckets"]]
    assert ann_bucket in [x["Name"] for x in admin.list_buckets()["Buckets"]]
    denied(b.get_object, Bucket=ann_bucket, Key="k")
    denied(b.get_object, Bucket=ann_bucket, Key="missing")
    denied(b.put_object, Bucket=ann_bucket, Key="k", Body=b"bob's")
    denied(b.delete_object, Bucket=ann_bucket, Key="k")
    denied(b.list_objects_v2, Bucket=ann_bucket)
    denied(b.get_bucket_acl, Bucket=ann_bucket)
    denied(b.delete_bucket, Bucket=ann_bucket)
    denied(b.copy_object, Bucket=ann_bucket, Key="copy", CopySource={"Bucket": ann_bucket, "Key": "k"})
    denied(anonymous(gateway).get_object, Bucket=ann_bucket, Key="k")
    denied(anonymous(gateway).list_buckets)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        b.create_bucket(Bucket=ann_bucket)
    assert error_of(e) == ("BucketAlreadyExists", 409)
    # bob's own bucket cannot take a copy of ann's object either.
    mine = unique_bucket_name("bob")
    b.create_bucket(Bucket=mine)
    try:
        denied(b.copy_object, Bucket=mine, Key="stolen", CopySource={"Bucket": ann_bucket, "Key": "k"})
    finally:
        b.delete_bucket(Bucket=mine)
    assert a.get_object(Bucket=ann_bucket, Key="k")["Body"].read() == b"ann's"
    owner = a.get_bucket_acl(Bucket=ann_bucket)["Owner"]
    assert len(owner["ID"]) == 64


def test_public_objects_and_object_acls(gateway, ann, bob, ann_bucket):
    a, anon = client_of(gateway, ann), anonymous(gateway)
    a.put_object(Bucket=ann_bucket, Key="public", Body=b"for all", ACL="public-read")
    a.put_object(Bucket=ann_bucket, Key="private", Body=b"mine")
    assert anon.get_object(Bucket=ann_bucket, Key="public")["Body"].read() == b"for all"
    assert anon.head_object(Bucket=ann_bucket, Key="public")["ContentLength"] == 7
    denied(anon.get_object, Bucket=ann_bucket, Key="private")
    denied(anon.put_object, Bucket=ann_bucket, Key="public", Body=b"vandal")
    grants = a.get_object_acl(Bucket=ann_bucket, Key="public")["Grants"]
    assert {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ"} in grants
    # Made private again: anonymous readers are refused.
    a.put_object_acl(Bucket=ann_bucket, Key="public", ACL="private")
    denied(anon.get_object, Bucket=ann_bucket, Key="public")
    # A grant to bob by his id lets him read that object only.
    bob_id = client_of(gateway, bob).list_buckets()["Owner"]["ID"]
    a.put_object_acl(Bucket=ann_bucket, Key="private", GrantRead=f'id="{bob_id}"')
    b = client_of(gateway, bob)
    assert b.get_object(Bucket=ann_bucket, Key="private")["Body"].read() == b"mine"
    denied(b.get_object, Bucket=ann_bucket, Key="public")
    denied(b.get_object_acl, Bucket=ann_bucket, Key="private")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        a.put_object_acl(Bucket=ann_bucket, Key="private", GrantRead='emailAddress="x@example.com"')
    assert error_of(e)[0] == "UnresolvableGrantByEmailAddress"


def test_bucket_acls_public_and_authenticated(gateway, ann, bob, ann_bucket):
    a, b, anon = client_of(gateway, ann), client_of(gateway, bob), anonymous(gateway)
    a.put_object(Bucket=ann_bucket, Key="k", Body=b"x")
    a.put_bucket_acl(Bucket=ann_bucket, ACL="public-read")
    assert [o["Key"] for o in anon.list_objects_v2(Bucket=ann_bucket)["Contents"]] == ["k"]
    denied(anon.put_object, Bucket=ann_bucket, Key="new", Body=b"x")
    denied(anon.get_object, Bucket=ann_bucket, Key="k")  # the object itself stays private
    a.put_bucket_acl(Bucket=ann_bucket, ACL="authenticated-read")
    denied(anon.list_objects_v2, Bucket=ann_bucket)
    assert b.list_objects_v2(Bucket=ann_bucket)["KeyCount"] == 1
    a.put_bucket_acl(Bucket=ann_bucket, ACL="public-read-write")
    anon.put_object(Bucket=ann_bucket, Key="dropped", Body=b"anonymous")
    a.put_bucket_acl(Bucket=ann_bucket, ACL="private")
    denied(b.list_objects_v2, Bucket=ann_bucket)
    grants = a.get_bucket_acl(Bucket=ann_bucket)["Grants"]
    assert [g["Permission"] for g in grants] == ["FULL_CONTROL"]


def test_policies_that_allow_and_deny(gateway, ann, bob, ann_bucket):
    a, b = client_of(gateway, ann), client_of(gateway, bob)
    for k in ["shared/x", "private/x", "secret/x"]:
        a.put_object(Bucket=ann_bucket, Key=k, Body=k.encode())
    arn = f"arn:aws:s3:::{ann_bucket}"
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::000000000000:user/{bob[0]}"}, "Action": ["s3:GetObject"], "Resource": f"{arn}/shared/*"},
            {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::000000000000:user/{bob[0]}"}, "Action": "s3:ListBucket", "Resource": arn, "Condition": {"StringLike": {"s3:prefix": "shared/*"}}},
            {"Effect": "Deny", "Principal": "*", "Action": ["s3:GetObject", "s3:DeleteObject"], "Resource": f"{arn}/secret/*"},
        ],
    }
    a.put_bucket_policy(Bucket=ann_bucket, Policy=json.dumps(policy))
    assert json.loads(a.get_bucket_policy(Bucket=ann_bucket)["Policy"]) == policy
    assert a.get_bucket_policy_status(Bucket=ann_bucket)["PolicyStatus"]["IsPublic"] is False
    assert b.get_object(Bucket=ann_bucket, Key="shared/x")["Body"].read() == b"shared/x"
    denied(b.get_object, Bucket=ann_bucket, Key="private/x")
    denied(b.put_object, Bucket=ann_bucket, Key="shared/y", Body=b"x")
    assert [o["Key"] for o in b.list_objects_v2(Bucket=ann_bucket, Prefix="shared/")["Contents"]] == ["shared/x"]
    denied(b.list_objects_v2, Bucket=ann_bucket)
    denied(a.get_object, Bucket=ann_bucket, Key="secret/x")  # a Deny binds the owner too
    denied(a.delete_object, Bucket=ann_bucket, Key="secret/x")
    # DeleteObjects names its keys in its body: each is decided on its own.
    out = a.delete_objects(Bucket=ann_bucket, Delete={"Objects": [{"Key": "secret/x"}, {"Key": "private/x"}]})
    assert [(e["Key"], e["Code"]) for e in out.get("Errors", [])] == [("secret/x", "AccessDenied")]
    assert [d["Key"] for d in out["Deleted"]] == ["private/x"]
    denied(b.put_bucket_policy, Bucket=ann_bucket, Policy=json.dumps(policy))
    for bad in ["{not json", json.dumps({"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::elsewhere/*"}]})]:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            a.put_bucket_policy(Bucket=ann_bucket, Policy=bad)
        assert error_of(e) == ("MalformedPolicy", 400)
    a.delete_bucket_policy(Bucket=ann_bucket)
    denied(b.get_object, Bucket=ann_bucket, Key="shared/x")
    assert a.get_object(Bucket=ann_bucket, Key="secret/x")["Body"].read() == b"secret/x"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        a.get_bucket_policy(Bucket=ann_bucket)
    assert error_of(e) == ("NoSuchBucketPolicy", 404)


def test_a_policy_can_demand_tls_and_make_a_bucket_public(gateway, ann, ann_bucket):
    a, anon = client_of(gateway, ann), anonymous(gateway)
    a.put_object(Bucket=ann_bucket, Key="k", Body=b"x")
    arn = f"arn:aws:s3:::{ann_bucket}"
    public = {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"{arn}/*"}]}
    a.put_bucket_policy(Bucket=ann_bucket, Policy=json.dumps(public))
    assert a.get_bucket_policy_status(Bucket=ann_bucket)["PolicyStatus"]["IsPublic"] is True
    assert anon.get_object(Bucket=ann_bucket, Key="k")["Body"].read() == b"x"
    # RestrictPublicBuckets stops the public policy; BlockPublicPolicy refuses a new one.
    a.put_public_access_block(Bucket=ann_bucket, PublicAccessBlockConfiguration={"RestrictPublicBuckets": True, "BlockPublicPolicy": True})
    denied(anon.get_object, Bucket=ann_bucket, Key="k")
    denied(a.put_bucket_policy, Bucket=ann_bucket, Policy=json.dumps(public))
    got = a.get_public_access_block(Bucket=ann_bucket)["PublicAccessBlockConfiguration"]
    assert got == {"BlockPublicAcls": False, "IgnorePublicAcls": False, "BlockPublicPolicy": True, "RestrictPublicBuckets": True}
    a.delete_public_access_block(Bucket=ann_bucket)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        a.get_public_access_block(Bucket=ann_bucket)
    assert error_of(e) == ("NoSuchPublicAccessBlockConfiguration", 404)
    tls_only = {"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": [arn, f"{arn}/*"], "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}
    a.put_bucket_policy(Bucket=ann_bucket, Policy=json.dumps(tls_only))
    denied(a.get_object, Bucket=ann_bucket, Key="k")  # this gateway serves plain HTTP
    a.delete_bucket_policy(Bucket=ann_bucket)
    assert a.get_object(Bucket=ann_bucket, Key="k")["Body"].read() == b"x"


def test_public_access_block_and_object_ownership(gateway, ann, ann_bucket):
    a, anon = client_of(gateway, ann), anonymous(gateway)
    a.put_object(Bucket=ann_bucket, Key="k", Body=b"x", ACL="public-read")
    a.put_public_access_block(Bucket=ann_bucket, PublicAccessBlockConfiguration={"IgnorePublicAcls": True})
    denied(anon.get_object, Bucket=ann_bucket, Key="k")
    a.put_public_access_block(Bucket=ann_bucket, PublicAccessBlockConfiguration={"BlockPublicAcls": True})
    assert anon.get_object(Bucket=ann_bucket, Key="k")["Body"].read() == b"x"
    denied(a.put_object, Bucket=ann_bucket, Key="k2", Body=b"x", ACL="public-read")
    denied(a.put_bucket_acl, Bucket=ann_bucket, ACL="public-read")
    a.delete_public_access_block(Bucket=ann_bucket)
    a.put_bucket_ownership_controls(Bucket=ann_bucket, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})
    assert a.get_bucket_ownership_controls(Bucket=ann_bucket)["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        a.put_object(Bucket=ann_bucket, Key="k3", Body=b"x", ACL="public-read")
    assert error_of(e) == ("AccessControlListNotSupported", 400)
    denied(anon.get_object, Bucket=ann_bucket, Key="k")  # ACLs no longer count
    a.delete_bucket_ownership_controls(Bucket=ann_bucket)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        a.get_bucket_ownership_controls(Bucket=ann_bucket)
    assert error_of(e)[0] == "OwnershipControlsNotFoundError"


def wait_refused(client, what):
    deadline = time.monotonic() + REFRESH_BOUND
    while True:
        try:
            client.list_buckets()
        except botocore.exceptions.ClientError as e:
            assert error_of_exc(e) == ("InvalidAccessKeyId", 403), e
            return
        assert time.monotonic() < deadline, f"{what} still accepted after {REFRESH_BOUND} s"
        time.sleep(0.5)


def error_of_exc(e):
    return e.response["Error"].get("Code"), e.response["ResponseMetadata"]["HTTPStatusCode"]


def test_keys_rotate_and_users_go(gateway, users_key):
    name, ak, sk = add_user(users_key, "carl")
    old = client_of(gateway, (name, ak, sk))
    bucket = unique_bucket_name("carl")
    old.create_bucket(Bucket=bucket)
    rotated = json.loads(spindle("user", "rotate", name, *store_flags(), "--users-key", users_key, "--overlap-secs", "3600", "--json"))
    new = client_of(gateway, (name, rotated["access_key"], rotated["secret_key"]))
    assert bucket in [b["Name"] for b in new.list_buckets()["Buckets"]]
    assert bucket in [b["Name"] for b in old.list_buckets()["Buckets"]], "the old key works during the overlap"
    listed_text = spindle("user", "list", *store_flags(), "--json")
    listed = json.loads(listed_text)
    mine = [u for u in listed if u["name"] == name][0]
    assert {k["access_key"] for k in mine["keys"]} == {ak, rotated["access_key"]}
    assert sk not in listed_text and rotated["secret_key"] not in listed_text, "a secret listed"
    assert rotated["secret_key"] not in spindle("user", "list", *store_flags()), "a secret listed"
    again = json.loads(spindle("user", "rotate", name, *store_flags(), "--users-key", users_key, "--overlap-secs", "0", "--json"))
    wait_refused(old, "a key rotated with no overlap")
    newest = client_of(gateway, (name, again["access_key"], again["secret_key"]))
    # A user who owns a bucket is not removed; once the bucket is gone it is, and its keys stop.
    with pytest.raises(subprocess.CalledProcessError) as e:
        spindle("user", "remove", name, *store_flags())
    assert "owns buckets" in e.value.stderr
    newest.delete_bucket(Bucket=bucket)
    spindle("user", "remove", name, *store_flags())
    wait_refused(newest, "a removed user's key")
    with pytest.raises(subprocess.CalledProcessError) as e:
        spindle("user", "add", "bad name", *store_flags(), "--users-key", users_key)
    assert "not a user name" in e.value.stderr


def test_rotations_keep_a_bounded_number_of_keys(gateway, users_key):
    name, ak, sk = add_user(users_key, "dora")
    first = client_of(gateway, (name, ak, sk))
    first.list_buckets()
    newest = None
    for _ in range(5):
        newest = json.loads(spindle("user", "rotate", name, *store_flags(), "--users-key", users_key, "--overlap-secs", "3600", "--json"))
    mine = [u for u in json.loads(spindle("user", "list", *store_flags(), "--json")) if u["name"] == name][0]
    # users::MAX_KEYS_PER_USER: the oldest beyond it are retired at once.
    assert len(mine["keys"]) == 4, mine
    assert ak not in {k["access_key"] for k in mine["keys"]}
    wait_refused(first, "a key retired past the cap")
    assert client_of(gateway, (name, newest["access_key"], newest["secret_key"])).list_buckets()["Buckets"] == []
    spindle("user", "remove", name, *store_flags())


def test_a_refused_upload_ends_its_connection(gateway, ann, ann_bucket):
    """A request refused before its body was read ends its connection: a client that asked
    `Expect: 100-continue` may send the body after the answer, and the gateway would otherwise
    read that body as the start of the connection's next request. An upload whose body was read
    keeps its connection."""
    answer = client_of(gateway, ann).put_object(Bucket=ann_bucket, Key="k", Body=b"x")
    assert answer["ResponseMetadata"]["HTTPHeaders"].get("connection") != "close"
    url = urllib.parse.urlparse(gateway)
    with socket.create_connection((url.hostname, url.port), timeout=60) as s:
        s.sendall(f"PUT /{ann_bucket}/new HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n".encode())
        received = b""
        while b"</Error>" not in received:
            chunk = s.recv(4096)
            assert chunk, f"the connection closed before the answer: {received!r}"
            received += chunk
        head = received.split(b"\r\n\r\n")[0].decode().lower()
        assert head.startswith("http/1.1 403"), head
        assert "connection: close" in head.split("\r\n"), head
        # The body the client sends anyway goes nowhere, and nothing else is read.
        s.sendall(b"xGET / HTTP/1.1\r\nHost: " + url.netloc.encode() + b"\r\n\r\n")
        rest = b""
        while chunk := s.recv(4096):
            rest += chunk
        assert rest == b"", rest
